"""OffsetFetch (key 9, v1-9): the committed offsets of a group (v1-7) or of several groups (v8+).

Shapes, as in Kafka's OffsetFetchRequest/OffsetFetchResponse:

* v1-7 name one group. Its coordinator-level error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS...)
  is the top-level ``error_code`` from v2. v1 has no top-level error: the error is put on every
  requested partition instead (offset -1), which is where a v1 client looks for it.
* v8+ name a batch of groups; each group in the response has its own error and topics.
* A null topic list asks for every partition the group has an offset for (v2+; v1's list is not
  nullable). A partition without a committed offset answers offset -1, metadata "".
* ``require_stable`` (v7+, KIP-447): a partition whose commit is still being written answers
  UNSTABLE_OFFSET_COMMIT instead of the previous offset; before v7 it is always false.
* v9's member id and epoch belong to KIP-848 consumer groups, which check them (UNKNOWN_MEMBER_ID,
  STALE_MEMBER_EPOCH as the group's error); a classic group does not check them
  (Kafka's ClassicGroup.validateOffsetFetch), and every group here is classic.
* The committed leader epoch is in the response from v5 (-1 when unknown).

Partitions of one topic are listed together under that topic, topics in the order first met.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, denied_names
from broker.handlers.base import Handler, RequestContext
from coordinator.group import GroupCoordinator, OffsetFetchResult, PartitionOffset
from coordinator.group.results import TopicPartition
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.sentinels import UNKNOWN_OFFSET

FIRST_TOP_LEVEL_ERROR_VERSION = 2
FIRST_REQUIRE_STABLE_VERSION = 7
FIRST_MULTI_GROUP_VERSION = 8


class OffsetFetchHandler(Handler):
    api_key = ApiKey.OFFSET_FETCH
    min_version = 1
    max_version = 9

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        version = ctx.api_version
        require_stable = version >= FIRST_REQUIRE_STABLE_VERSION and request.require_stable
        if self._authorizer.enabled:
            return self._handle_authorized(ctx, request, require_stable)
        if version >= FIRST_MULTI_GROUP_VERSION:
            wanted = [(g.group_id, _partitions(g.topics)) for g in request.groups]
            members = [(g.member_id, g.member_epoch) for g in request.groups]
            results = self._coordinator.fetch_offsets_of_groups(wanted, require_stable, members)
            return {"throttle_time_ms": 0, "groups": [_group(result) for result in results]}
        partitions = _partitions(request.topics)
        result = self._coordinator.fetch_offsets(request.group_id, partitions, require_stable)
        return _single_group(version, result, partitions)

    def _handle_authorized(self, ctx: RequestContext, request: MessageData, require_stable: bool) -> Any:
        """Kafka's checks: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED for it) and
        DESCRIBE on each topic: a requested topic without it answers TOPIC_AUTHORIZATION_FAILED
        on its partitions, and an all-partitions fetch leaves such topics out."""
        version = ctx.api_version
        if version >= FIRST_MULTI_GROUP_VERSION:
            results = [
                self._fetch_authorized(
                    ctx, g.group_id, _partitions(g.topics), require_stable, (g.member_id, g.member_epoch)
                )
                for g in request.groups
            ]
            return {"throttle_time_ms": 0, "groups": [_group(result) for result in results]}
        partitions = _partitions(request.topics)
        result = self._fetch_authorized(ctx, request.group_id, partitions, require_stable)
        return _single_group(version, result, partitions)

    def _fetch_authorized(
        self,
        ctx: RequestContext,
        group_id: str,
        partitions: list[TopicPartition] | None,
        require_stable: bool,
        member: tuple[str | None, int] = (None, -1),
    ) -> OffsetFetchResult:
        if not allowed(self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return OffsetFetchResult(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, {})
        if partitions is None:
            result = self._coordinator.fetch_offsets(group_id, None, require_stable, *member)
            topics = {topic for topic, _ in result.partitions}
            denied = denied_names(self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)
            if not denied:
                return result
            kept = {tp: offset for tp, offset in result.partitions.items() if tp[0] not in denied}
            return OffsetFetchResult(result.group_id, result.error, kept)
        denied = denied_names(
            self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in partitions)
        )
        result = self._coordinator.fetch_offsets(
            group_id, [tp for tp in partitions if tp[0] not in denied], require_stable, *member
        )
        if not denied or result.error is not ErrorCode.NONE:
            return result
        refused = PartitionOffset(UNKNOWN_OFFSET, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        merged = dict(result.partitions)
        merged.update((tp, refused) for tp in partitions if tp[0] in denied)
        return OffsetFetchResult(result.group_id, result.error, merged)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """OffsetFetchRequest.getErrorResponse: each group's error (v8+), the top-level error
        (v2-7), or the error on every requested partition (v1)."""
        if ctx.api_version >= FIRST_MULTI_GROUP_VERSION:
            groups = request.groups if request is not None else []
            return {
                "throttle_time_ms": 0,
                "groups": [_group(OffsetFetchResult(g.group_id, code, {})) for g in groups],
            }
        group_id = request.group_id if request is not None else ""
        partitions = _partitions(request.topics) if request is not None else None
        return _single_group(ctx.api_version, OffsetFetchResult(group_id, code, {}), partitions)


def _partitions(topics: list[MessageData] | None) -> list[TopicPartition] | None:
    """The requested partitions in request order; None (a null topic list) means all of them."""
    if topics is None:
        return None
    return [(t.name, index) for t in topics for index in t.partition_indexes]


def _single_group(
    version: int, result: OffsetFetchResult, requested: Sequence[TopicPartition] | None
) -> dict[str, Any]:
    offsets = result.partitions
    error = result.error
    if error is not ErrorCode.NONE and version < FIRST_TOP_LEVEL_ERROR_VERSION:
        failed = PartitionOffset(UNKNOWN_OFFSET, error=error)
        offsets = dict.fromkeys(requested or (), failed)
    return {"throttle_time_ms": 0, "error_code": int(error), "topics": _topics(offsets)}


def _group(result: OffsetFetchResult) -> dict[str, Any]:
    return {
        "group_id": result.group_id,
        "error_code": int(result.error),
        "topics": _topics(result.partitions),
    }


def _topics(offsets: dict[TopicPartition, PartitionOffset]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset.offset,
                "committed_leader_epoch": offset.leader_epoch,
                "metadata": offset.metadata,
                "error_code": int(offset.error),
            }
        )
    return [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]
