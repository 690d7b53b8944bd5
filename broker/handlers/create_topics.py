"""CreateTopics (19): create topics, each with its own result, as Kafka's controller answers.

Served on the controller listener: a created topic is in the metadata log before the answer; a
broker forwarding the request answers once its own metadata shows the topic. A name given more
than once is answered once with INVALID_REQUEST "Duplicate topic name." and none of its entries is
created (Kafka's ControllerApis). More than 10,000 partitions in one request is a POLICY_VIOLATION
for every topic of the request. From v5 a created (or validated) topic reports its partition count,
replication factor and every topic-level config with its source.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.admin import TopicAdmin
from metadata.controller.topic_rules import MAX_PARTITIONS_PER_REQUEST
from metadata.topics import TopicState
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import ZERO_UUID
from server_common.config import BrokerConfig, ConfigEntry, describe_topic_configs


class CreateTopicsHandler(Handler):
    api_key = ApiKey.CREATE_TOPICS
    min_version = 2
    max_version = 7

    def __init__(self, topics: TopicAdmin, config: BrokerConfig) -> None:
        self._topics = topics
        self._config = config

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if self._requested_partitions(request.topics) > MAX_PARTITIONS_PER_REQUEST:
            return self._error_body(
                request, ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request."
            )
        counts = Counter(topic.name for topic in request.topics)
        results = [
            self._create(topic, request.validate_only) for topic in request.topics if counts[topic.name] == 1
        ]
        duplicates = dict.fromkeys(topic.name for topic in request.topics if counts[topic.name] > 1)
        results += [
            _error_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for name in duplicates
        ]
        return {"throttle_time_ms": 0, "topics": results}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every topic of the request carries ``code`` (CreateTopics has no top-level error)."""
        return CreateTopicsHandler._error_body(request, code, None)

    @staticmethod
    def _error_body(request: MessageData | None, code: ErrorCode, message: str | None) -> dict[str, Any]:
        topics = request.topics if request is not None else []
        return {"throttle_time_ms": 0, "topics": [_error_result(t.name, code, message) for t in topics]}

    def _requested_partitions(self, topics: list[MessageData]) -> int:
        """Kafka's count for the per-request limit: defaults for -1, assignments when given."""
        total = 0
        for topic in topics:
            if topic.assignments:
                total += len(topic.assignments)
            elif topic.num_partitions == -1:
                total += self._topics.default_num_partitions
            elif topic.num_partitions > 0:
                total += topic.num_partitions
        return total

    def _create(self, topic: MessageData, validate_only: bool) -> dict[str, Any]:
        try:
            state = self._topics.create_topic(
                topic.name,
                topic.num_partitions,
                topic.replication_factor,
                {config.name: config.value for config in topic.configs},
                assignments=[(a.partition_index, a.broker_ids) for a in topic.assignments],
                validate_only=validate_only,
            )
        except KafkaError as exc:
            return _error_result(topic.name, exc.code, exc.message)
        return self._created_result(state)

    def _created_result(self, state: TopicState) -> dict[str, Any]:
        return {
            "name": state.name,
            "topic_id": state.topic_id,
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
            "num_partitions": len(state.partitions),
            "replication_factor": state.replication_factor,
            "configs": [_config(entry) for entry in describe_topic_configs(state.configs, self._config)],
        }


def _error_result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": ZERO_UUID,
        "error_code": int(code),
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


def _config(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": None if entry.is_sensitive else entry.value,
        "read_only": entry.read_only,
        "config_source": entry.source.code,
        "is_sensitive": entry.is_sensitive,
    }
