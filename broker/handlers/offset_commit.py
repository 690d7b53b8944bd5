"""OffsetCommit (key 8, v2-9): a consumer stores its committed offsets with the group coordinator.

Version rules (Kafka's KafkaApis.handleOffsetCommitRequest and OffsetCommitRequest):

* ``retention_time_ms`` exists in v2-4 only (-1: the broker's offsets.retention.minutes applies);
  from v5 the broker's retention always applies.
* ``committed_leader_epoch`` from v6 (-1 before), ``group_instance_id`` from v7.
* ``generation_id_or_member_epoch`` is the classic generation (-1 with an empty member id: a
  consumer that does not use group management, e.g. the admin client), or a consumer-protocol
  member's epoch (KIP-848, v9+); the version goes to the coordinator, whose checks depend on it.
* A null committed metadata is passed on as None (stored as "").

Before the coordinator sees the commit, Kafka answers UNKNOWN_TOPIC_OR_PARTITION for partitions of
topics it does not know, or that the topic does not have, and commits the rest. That needs the
broker's topic metadata: given ``partition_exists``, this handler does the same; without it, every
partition goes to the coordinator.

The response lists every requested partition under its topic (a topic named twice is answered once,
as Kafka's OffsetCommitResponse.Builder does); errors are per partition only, so a whole-request
error is repeated on every partition (OffsetCommitRequest.getErrorResponse).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, NOTHING_DENIED, allowed, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.handlers.join_group import await_callback
from coordinator.group import GroupCoordinator, OffsetCommitRequest, PartitionCommit
from coordinator.group.requests import NO_RETENTION_TIME
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

LAST_RETENTION_VERSION = 4

PartitionExists = Callable[[str, int], bool]
"""Whether the cluster has partition ``partition`` of topic ``topic``."""


class OffsetCommitHandler(Handler):
    api_key = ApiKey.OFFSET_COMMIT
    min_version = 2
    max_version = 9

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
        errors: dict[tuple[str, int], ErrorCode] = {}
        commits: list[PartitionCommit] = []
        denied = NOTHING_DENIED
        if self._authorizer.enabled:
            # Kafka's order: READ on the group, then READ on each topic, then existence
            if not allowed(self._authorizer, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
                raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            names = (t.name for t in request.topics)
            denied = denied_names(self._authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, names)
        for topic in request.topics:
            for p in topic.partitions:
                if topic.name in denied:
                    errors[(topic.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self._partition_exists is None or self._partition_exists(topic.name, p.partition_index):
                    commits.append(_commit(topic.name, p))
                else:
                    errors[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if commits:  # Kafka answers at once when nothing is left to commit
            commit = OffsetCommitRequest(
                group_id=request.group_id,
                partitions=tuple(commits),
                member_id=request.member_id,
                generation_id=request.generation_id_or_member_epoch,
                group_instance_id=request.group_instance_id,
                retention_time_ms=request.retention_time_ms
                if ctx.api_version <= LAST_RETENTION_VERSION
                else NO_RETENTION_TIME,
                api_version=ctx.api_version,
            )
            errors.update(await await_callback(self._coordinator.commit_offsets, commit))
        return commit_response_body(request.topics, lambda topic, partition: errors[(topic, partition)])

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return commit_response_body(
            request.topics if request is not None else [], lambda _topic, _partition: code
        )


def _commit(topic: str, p: MessageData) -> PartitionCommit:
    """One partition's commit; the leader epoch is -1 before v6 (the codec's default)."""
    return PartitionCommit(
        topic, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata
    )


def commit_response_body(
    topics: Iterable[MessageData], error_of: Callable[[str, int], ErrorCode]
) -> dict[str, Any]:
    """Every requested partition under its topic with its error (OffsetCommit and TxnOffsetCommit)."""
    by_topic: dict[str, list[dict[str, int]]] = {}
    for topic in topics:
        partitions = by_topic.setdefault(topic.name, [])
        for p in topic.partitions:
            code = error_of(topic.name, p.partition_index)
            partitions.append({"partition_index": p.partition_index, "error_code": int(code)})
    topics_out = [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]
    return {"throttle_time_ms": 0, "topics": topics_out}
