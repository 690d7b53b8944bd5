"""OffsetDelete (key 47, v0, KIP-496): delete a group's committed offsets of some partitions.

Kafka's KafkaApis.handleOffsetDeleteRequest, in its order:

* DELETE on the group, else GROUP_AUTHORIZATION_FAILED for the whole request;
* READ on each topic, else TOPIC_AUTHORIZATION_FAILED on each of its partitions;
* a topic or partition the cluster does not have answers UNKNOWN_TOPIC_OR_PARTITION (given
  ``partition_exists``; without it every partition goes to the coordinator);
* the rest goes to the coordinator, even when nothing is left, so that the group is still checked
  (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP... are answered whatever the partitions).

A group-level error is the top-level ``error_code`` of a response without topics, as Kafka's
OffsetDeleteRequest.getErrorResponse builds it: the per-partition refusals are dropped with it.
Otherwise every requested partition is answered once under its topic, in request order.
"""

from __future__ import annotations

import functools
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.handlers.join_group import await_callback
from broker.handlers.offset_commit import PartitionExists
from coordinator.group import GroupCoordinator, OffsetDeleteResult
from coordinator.group.results import TopicPartition
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class OffsetDeleteHandler(Handler):
    api_key = ApiKey.OFFSET_DELETE
    min_version = 0
    max_version = 0

    def __init__(
        self,
        coordinator: GroupCoordinator,
        *,
        partition_exists: PartitionExists | None = None,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        self._coordinator = coordinator
        self._partition_exists = partition_exists
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        group_id = request.group_id
        if not allowed(self._authorizer, ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = (t.name for t in request.topics)
        denied = denied_names(self._authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, names)
        requested: dict[TopicPartition, None] = {}
        refused: dict[TopicPartition, ErrorCode] = {}
        for topic in request.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                requested[tp] = None
                if topic.name in denied:
                    refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self._partition_exists is not None and not self._partition_exists(*tp):
                    refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        wanted = [tp for tp in requested if tp not in refused]
        delete = functools.partial(self._coordinator.delete_offsets, group_id)
        result: OffsetDeleteResult = await await_callback(delete, wanted)
        if result.error is not ErrorCode.NONE:
            return _body(result.error, {})
        errors = {**result.partitions, **refused}
        return _body(ErrorCode.NONE, {tp: errors[tp] for tp in requested})

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """OffsetDeleteRequest.getErrorResponse: the top-level error alone."""
        return _body(code, {})


def _body(code: ErrorCode, errors: dict[TopicPartition, ErrorCode]) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": int(error)})
    return {
        "error_code": int(code),
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()],
    }
