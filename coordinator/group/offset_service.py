"""OffsetCommit and OffsetFetch (Kafka's handleCommitOffsets / handleFetchOffsets / getOffsets).

Who may commit (``validateOffsetCommit``):

* a consumer that does not use group management (generation -1, no member id, no instance id)
  commits to an Empty group, creating the group if needed (manual assignment, the admin client);
* otherwise the member must be current (static members by instance id) and of the current
  generation (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION);
* a generation ≥ 0 for a group that does not exist is a stale generation: ILLEGAL_GENERATION;
* while the leader's assignment is awaited (CompletingRebalance) commits answer REBALANCE_IN_PROGRESS;
  during PreparingRebalance the previous generation may still commit (the heartbeat tells it to
  rejoin), and a commit counts as a sign of life.

TxnOffsetCommit (KIP-98, KIP-447) makes the same checks with two differences, as Kafka's
``validateOffsetCommit(isTransactional=true)``: a commit without member id and generation is accepted
whatever the group's state (TxnOffsetCommit v0-2 carry neither), and CompletingRebalance does not
refuse it. Its offsets wait in the group until the transaction's marker (:mod:`coordinator.group.offsets`).

A consumer-protocol group (KIP-848) checks commits as Kafka's ``ConsumerGroup.validateOffsetCommit``:
a commit with a negative epoch is accepted while the group has no members; otherwise the member must
exist (UNKNOWN_MEMBER_ID), use OffsetCommit v9+ unless the commit is transactional
(UNSUPPORTED_VERSION), and bring its current member epoch (STALE_MEMBER_EPOCH). A commit with an epoch
for a group that does not exist answers GROUP_ID_NOT_FOUND from OffsetCommit v9 (ILLEGAL_GENERATION
before), as Kafka 4's coordinator does. A fetch that names a member (OffsetFetch v9+) of a consumer
group is checked the same way (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).

Fetches return the durable offsets whatever the group's state (a group may use Kafka only to store
offsets), UNKNOWN_OFFSET (-1, Kafka's ``OffsetFetchResponse.INVALID_OFFSET``) for partitions without
one; with ``require_stable`` a partition whose commit is still being written answers
UNSTABLE_OFFSET_COMMIT.
"""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.group.catalog import GroupApi, GroupCatalog
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.group import GroupMetadata
from coordinator.group.log import TxnProducer
from coordinator.group.offsets import OffsetAndMetadata, TopicPartition
from coordinator.group.rebalance import Rebalancer
from coordinator.group.requests import NO_RETENTION_TIME, UNKNOWN_MEMBER_ID, OffsetCommitRequest
from coordinator.group.results import OffsetFetchResult, PartitionOffset
from coordinator.group.state import GroupState
from coordinator.group.store import CommitCallback, GroupStore, OffsetsGroup
from coordinator.group.validation import validate_current_member
from protocol.error_codes import ErrorCode
from storage.clock import Clock


class OffsetService:
    def __init__(
        self, clock: Clock, catalog: GroupCatalog, store: GroupStore, rebalancer: Rebalancer
    ) -> None:
        self._clock = clock
        self._catalog = catalog
        self._store = store
        self._rebalancer = rebalancer

    # -- OffsetCommit -------------------------------------------------------------------------------

    def commit_offsets(self, request: OffsetCommitRequest, callback: CommitCallback) -> None:
        offsets = self._offsets_of(request)
        group = self._group_to_commit(request, offsets, callback, transactional=False)
        if isinstance(group, ConsumerGroup):
            self._store.store_offsets(group, offsets, callback)
        elif group is not None:
            self._commit_in_state(group, request, offsets, callback)

    def commit_txn_offsets(
        self, request: OffsetCommitRequest, producer: TxnProducer, callback: CommitCallback
    ) -> None:
        """TxnOffsetCommit: the offsets are written in ``producer``'s transaction."""
        offsets = self._offsets_of(request)
        group = self._group_to_commit(request, offsets, callback, transactional=True)
        if group is not None:
            self._store.store_txn_offsets(group, producer, offsets, callback)

    def _group_to_commit(
        self,
        request: OffsetCommitRequest,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback,
        *,
        transactional: bool,
    ) -> OffsetsGroup | None:
        """The group the commit goes to (a simple group is created for a commit without
        generation), or None once ``callback`` has been given the error."""
        error = self._catalog.validate(request.group_id, GroupApi.OFFSET_COMMIT)
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return None
        consumer_group = self._catalog.consumer_group(request.group_id)
        if consumer_group is not None:
            error = _validate_consumer_commit(consumer_group, request, transactional)
            if error is not None:
                callback(dict.fromkeys(offsets, error))
                return None
            return consumer_group
        group = self._catalog.get(request.group_id)
        if group is None:
            if request.generation_id >= 0:
                missing = request.api_version is not None and request.api_version >= 9
                callback(
                    dict.fromkeys(
                        offsets, ErrorCode.GROUP_ID_NOT_FOUND if missing else ErrorCode.ILLEGAL_GENERATION
                    )
                )
                return None
            group = self._catalog.add(GroupMetadata(request.group_id, GroupState.EMPTY, self._clock))
        error = self._validate_commit(group, request, transactional)
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return None
        return group

    def _offsets_of(self, request: OffsetCommitRequest) -> dict[TopicPartition, OffsetAndMetadata]:
        """Commit timestamp now; an expire timestamp only if the commit carried a retention time."""
        now = self._clock.time_ms()
        expire = None if request.retention_time_ms == NO_RETENTION_TIME else now + request.retention_time_ms
        return {
            (p.topic, p.partition): OffsetAndMetadata(p.offset, p.leader_epoch, p.metadata or "", now, expire)
            for p in request.partitions
        }

    @staticmethod
    def _validate_commit(
        group: GroupMetadata, request: OffsetCommitRequest, transactional: bool
    ) -> ErrorCode | None:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if request.generation_id < 0 and group.is_in(GroupState.EMPTY):
            return None
        is_member_commit = (
            request.generation_id >= 0
            or request.member_id != UNKNOWN_MEMBER_ID
            or request.group_instance_id is not None
        )
        if is_member_commit:
            error = validate_current_member(group, request.member_id, request.group_instance_id)
            if error is None and request.generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            return error
        # No member id and no generation, but the group has members: only members may commit
        # (TxnOffsetCommit v0-2 carry neither, so Kafka lets a transactional commit through).
        if transactional or group.is_in(GroupState.EMPTY):
            return None
        return ErrorCode.UNKNOWN_MEMBER_ID

    def _commit_in_state(
        self,
        group: GroupMetadata,
        request: OffsetCommitRequest,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback,
    ) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            callback(dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS))
            return
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._rebalancer.complete_and_schedule_next_heartbeat_expiration(
                group, group.get(request.member_id)
            )
        self._store.store_offsets(group, offsets, callback)

    # -- OffsetFetch --------------------------------------------------------------------------------

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResult:
        """The offsets of ``partitions``, or of every partition with an offset when None."""
        error = self._catalog.validate(group_id, GroupApi.OFFSET_FETCH)
        if error is not None:
            return OffsetFetchResult(group_id, error, {})
        group: OffsetsGroup | None = self._catalog.consumer_group(group_id)
        if isinstance(group, ConsumerGroup):
            error = _validate_consumer_fetch(group, member_id, member_epoch)
            if error is not None:
                return OffsetFetchResult(group_id, error, {})
        else:
            group = self._catalog.get(group_id)
        if group is None or (isinstance(group, GroupMetadata) and group.is_in(GroupState.DEAD)):
            return OffsetFetchResult(
                group_id, ErrorCode.NONE, {tp: PartitionOffset() for tp in partitions or ()}
            )
        wanted = list(partitions) if partitions is not None else list(group.offsets.committed)
        return OffsetFetchResult(
            group_id, ErrorCode.NONE, {tp: self._offset_of(group, tp, require_stable) for tp in wanted}
        )

    @staticmethod
    def _offset_of(group: OffsetsGroup, partition: TopicPartition, require_stable: bool) -> PartitionOffset:
        if require_stable and group.offsets.has_pending(partition):
            return PartitionOffset(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
        offset = group.offsets.get(partition)
        if offset is None:
            return PartitionOffset()
        return PartitionOffset(offset.offset, offset.leader_epoch, offset.metadata)


def _validate_consumer_commit(
    group: ConsumerGroup, request: OffsetCommitRequest, transactional: bool
) -> ErrorCode | None:
    """Kafka's ``ConsumerGroup.validateOffsetCommit`` (the generation field carries the member epoch)."""
    if group.dead:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if request.generation_id < 0 and group.is_empty:
        return None
    member = group.member(request.member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if (
        not transactional
        and not member.uses_classic_protocol
        and request.api_version is not None
        and request.api_version < 9
    ):
        return ErrorCode.UNSUPPORTED_VERSION
    if request.generation_id != member.member_epoch:
        # A classic-protocol member (KIP-848's online migration) knows only generations.
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
    return None


def _validate_consumer_fetch(
    group: ConsumerGroup, member_id: str | None, member_epoch: int
) -> ErrorCode | None:
    """Kafka's ``ConsumerGroup.validateOffsetFetch``: an admin or a consumer without group management
    (no member id, negative epoch) may always fetch."""
    if member_id is None and member_epoch < 0:
        return None
    member = group.member(member_id or "")
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
    return None
