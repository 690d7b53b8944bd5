"""CreatePartitions (37): raise the partition count of existing topics, as Kafka's controller answers.

Only increases are allowed (INVALID_PARTITIONS with Kafka's messages otherwise); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION; a name given more than once is answered once, first, with INVALID_REQUEST
"Duplicate topic name." and not grown. A replica assignment for the new partitions is accepted when
it names only registered brokers with the topic's replication factor (on one node: ``[[node_id], ...]``),
else INVALID_REPLICA_ASSIGNMENT. Served on the controller listener: the change is in the metadata log
before the answer; a broker forwarding the request answers once its own metadata shows the new
partitions (broker/handlers/forwarding.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.admin import TopicAdmin
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class CreatePartitionsHandler(Handler):
    api_key = ApiKey.CREATE_PARTITIONS
    min_version = 0
    max_version = 3

    def __init__(self, topics: TopicAdmin) -> None:
        self._topics = topics

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        counts = Counter(topic.name for topic in request.topics)
        duplicates = dict.fromkeys(topic.name for topic in request.topics if counts[topic.name] > 1)
        results = [_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for name in duplicates]
        results += [
            self._grow(topic, request.validate_only) for topic in request.topics if counts[topic.name] == 1
        ]
        return {"throttle_time_ms": 0, "results": results}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every topic of the request carries ``code`` (CreatePartitions has no top-level error)."""
        topics = request.topics if request is not None else []
        return {"throttle_time_ms": 0, "results": [_result(t.name, code, None) for t in topics]}

    def _grow(self, topic: MessageData, validate_only: bool) -> dict[str, Any]:
        assignments = None if topic.assignments is None else [a.broker_ids for a in topic.assignments]
        try:
            self._topics.create_partitions(
                topic.name, topic.count, assignments=assignments, validate_only=validate_only
            )
        except KafkaError as exc:
            return _result(topic.name, exc.code, exc.message)
        return _result(topic.name, ErrorCode.NONE, None)


def _result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "error_code": int(code), "error_message": message}
