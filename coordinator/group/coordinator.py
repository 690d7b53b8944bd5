"""The classic group coordinator (Kafka's GroupCoordinator and GroupMetadataManager), free of I/O.

:class:`GroupCoordinator` is the one object the broker talks to. It composes the pieces: the
:class:`~coordinator.group.catalog.GroupCatalog` (which groups and partitions are ours), the
:class:`~coordinator.group.store.GroupStore` (writes through the injected
:class:`~coordinator.group.log.GroupLog`), the :class:`~coordinator.group.rebalance.Rebalancer` (timers
in the two injected purgatories) and the request paths (:mod:`~coordinator.group.join`,
:mod:`~coordinator.group.membership`, :mod:`~coordinator.group.offset_service`,
:mod:`~coordinator.group.cleanup`).

How answers are delivered: JoinGroup, SyncGroup, OffsetCommit, DeleteGroups and OffsetDelete take a
callback, called exactly once, possibly before the call returns (an error, or a log that completes at
once) or later from a timer or a log completion. Heartbeat, LeaveGroup, OffsetFetch, ListGroups and
DescribeGroups answer by return value. Completing an asyncio future is the intended use of a
callback; it must not raise (check ``future.done()`` first: the request may have been cancelled)
and should not call back into the coordinator synchronously.

Consumer-protocol groups (KIP-848) live beside the classic ones, in the same catalog and namespace:
:meth:`GroupCoordinator.consumer_group_heartbeat` (answered through a callback once its records are
written) and :meth:`GroupCoordinator.consumer_group_describe` serve them
(:mod:`coordinator.group.consumer`), and the offset, listing, deletion and expiry paths serve
groups of either kind. ``topics`` gives the broker's topic metadata, from which their subscriptions
are resolved.

Conversions between the two kinds (KIP-848's online upgrade and downgrade, an empty group of one
kind giving way to the other: :mod:`~coordinator.group.migration`) are each one batch in the log,
holding the old group's tombstones and the new group's records with those of the request that
triggered it; the new group replaces the old one in the catalog at once. If the batch fails, the
old group is put back: a classic group in the state it had (its waiting members, already told
REBALANCE_IN_PROGRESS as Kafka tells them, rejoin it; a rebalance in progress resumes), or the
consumer group as it was before the request, its members' timers restarted (whoever joined the
classic group meanwhile is told to rejoin). A downgraded group's rebalance starts only once its
batch is written, so the classic members are not told to rejoin a group that may not stand.

Moving with leadership of ``__consumer_offsets``: :meth:`GroupCoordinator.begin_loading` (optional;
requests for the partition's groups then answer COORDINATOR_LOAD_IN_PROGRESS),
:meth:`GroupCoordinator.load_partition` with the partition's records, and
:meth:`GroupCoordinator.unload_partition` when leadership goes. The coordinator starts owning no
partition. :meth:`GroupCoordinator.expire_offsets` should be called every
offsets.retention.check.interval.ms.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence

import structlog

from coordinator.group.catalog import GroupApi, GroupCatalog
from coordinator.group.cleanup import GroupCleaner
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer.api import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
    DescribedConsumerGroup,
)
from coordinator.group.consumer.classic_members import ClassicMembers
from coordinator.group.consumer.group import CONSUMER_GROUP_TYPE, ConsumerGroup
from coordinator.group.consumer.records import ConsumerGroupRecord, group_tombstones, to_offsets_record
from coordinator.group.consumer.service import (
    ConsumerGroupService,
    GroupConfigProvider,
    MemberIdGenerator,
    no_group_configs,
    random_member_id,
)
from coordinator.group.consumer.timers import MemberTimers
from coordinator.group.consumer.writes import Conversion
from coordinator.group.group import GroupMetadata
from coordinator.group.join import JoinService, MemberIdSuffix, random_member_id_suffix
from coordinator.group.loader import rebuild_groups
from coordinator.group.log import GroupLog, LoggedEntry, TxnProducer, group_write_error
from coordinator.group.member import JoinCallback, SyncCallback
from coordinator.group.membership import MembershipService
from coordinator.group.migration import (
    can_downgrade,
    can_upgrade,
    classic_group_from,
    consumer_group_records_from,
)
from coordinator.group.offset_service import OffsetService
from coordinator.group.offsets import OffsetAndMetadata
from coordinator.group.rebalance import Rebalancer
from coordinator.group.records import group_metadata_record, group_tombstone
from coordinator.group.requests import (
    JoinGroupRequest,
    MemberIdentity,
    OffsetCommitRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from coordinator.group.results import (
    CLASSIC_GROUP_TYPE,
    DescribedGroup,
    GroupOverview,
    JoinGroupResult,
    LeaveGroupResult,
    ListGroupsResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    TopicPartition,
)
from coordinator.group.state import GroupState
from coordinator.group.static_members import StaticMemberRejoin
from coordinator.group.store import CommitCallback, GroupStore, OffsetsGroup
from coordinator.group.subscriptions import CONSUMER_PROTOCOL_TYPE
from metadata.topics import TopicLookup, TopicState
from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import DecodeError
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import Clock

_log = structlog.get_logger("kipling.groups.coordinator")

DeleteGroupsCallback = Callable[[dict[str, ErrorCode]], None]
DeleteOffsetsCallback = Callable[[OffsetDeleteResult], None]
HeartbeatCallback = Callable[[ConsumerGroupHeartbeatResult], None]


class _NoTopics:
    """The topic metadata of a coordinator given none: no topic exists."""

    def get(self, name: str) -> TopicState | None:
        return None

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return None

    def all(self) -> list[TopicState]:
        return []


class GroupCoordinator:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        log: GroupLog,
        clock: Clock,
        heartbeat_purgatory: DelayedOperationPurgatory,
        rebalance_purgatory: DelayedOperationPurgatory,
        *,
        member_id_suffix: MemberIdSuffix = random_member_id_suffix,
        topics: TopicLookup | None = None,
        consumer_member_id: MemberIdGenerator = random_member_id,
        group_configs: GroupConfigProvider = no_group_configs,
    ) -> None:
        self.config = config
        self._clock = clock
        self._catalog = GroupCatalog(config.offsets_topic_num_partitions)
        self._store = GroupStore(log, clock, config, self._catalog)
        self._rebalancer = Rebalancer(config, clock, self._store, heartbeat_purgatory, rebalance_purgatory)
        static = StaticMemberRejoin(self._store, self._rebalancer)
        self._join = JoinService(
            config,
            clock,
            self._catalog,
            self._rebalancer,
            static,
            member_id_suffix,
            self._yield_consumer_group,
        )
        host = _ConsumerGroupHost(self._catalog, self._store)
        host.downgrade = self._downgrade
        host.downgrade_replaced = self._downgrade_replaced
        host.upgrade = self._upgrade
        host.replace_empty = self._replace_empty_classic_group
        self._consumer = ConsumerGroupService(
            config,
            clock,
            host,
            topics if topics is not None else _NoTopics(),
            MemberTimers(heartbeat_purgatory, rebalance_purgatory),
            consumer_member_id,
            group_configs,
        )
        self._classic_members = ClassicMembers(self._consumer)
        self._membership = MembershipService(self._catalog, self._store, self._rebalancer)
        self._offsets = OffsetService(clock, self._catalog, self._store, self._rebalancer)
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}
        """Transaction markers that reached a partition while it loaded: (producer id, commit)."""
        self._cleaner = GroupCleaner(self._catalog, self._store)

    # -- group membership ---------------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest, callback: JoinCallback) -> None:
        self._join.join_group(request, callback)

    def sync_group(self, request: SyncGroupRequest, callback: SyncCallback) -> None:
        consumer_group = self._consumer_group_with_classic_api(request.group_id, GroupApi.SYNC_GROUP)
        if consumer_group is not None:
            self._classic_members.sync(consumer_group, request, callback)
            return
        self._membership.sync_group(request, callback)

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None = None
    ) -> ErrorCode:
        consumer_group = self._consumer_group_with_classic_api(group_id, GroupApi.HEARTBEAT)
        if consumer_group is not None:
            return self._classic_members.heartbeat(
                consumer_group, member_id, generation_id, group_instance_id
            )
        return self._membership.heartbeat(group_id, member_id, generation_id, group_instance_id)

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        consumer_group = self._consumer_group_with_classic_api(group_id, GroupApi.LEAVE_GROUP)
        if consumer_group is not None:
            return self._classic_members.leave(consumer_group, members)
        return self._membership.leave_group(group_id, members)

    # -- consumer-protocol groups (KIP-848) ----------------------------------------------------------

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, callback: HeartbeatCallback
    ) -> None:
        """ConsumerGroupHeartbeat: join, stay, reconcile or leave; answered through ``callback``
        once the heartbeat's records are written (at once on an error)."""
        self._consumer.heartbeat(request, callback)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return self._consumer.describe(group_ids)

    @property
    def default_consumer_group_assignor(self) -> str:
        return self._consumer.default_assignor

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The live consumer-protocol group (for inspection; not to be changed from outside)."""
        return self._catalog.consumer_group(group_id)

    def _yield_consumer_group(self, request: JoinGroupRequest, callback: JoinCallback) -> bool:
        """Before a JoinGroup: a consumer group with members takes it (a classic-protocol member
        of the consumer group); an empty one becomes an empty classic group with its offsets (its
        records are deleted, in one batch; a batch the log refuses puts the consumer group back and
        answers the JoinGroup with the write's error)."""
        group_id = request.group_id
        group = self._catalog.consumer_group(group_id)
        if group is None:
            return False
        if not group.is_empty:
            self._classic_members.join(group, request, callback)
            return True
        tombstones = [to_offsets_record(r) for r in group_tombstones(group)]
        self._catalog.remove_consumer_group(group)
        self._consumer.on_group_unloaded(group)
        classic = GroupMetadata(group_id, GroupState.EMPTY, self._clock)
        classic.offsets = group.offsets
        self._catalog.add(classic)
        appending = True
        refused: list[ErrorCode] = []

        def written(error: ErrorCode) -> None:
            if error is ErrorCode.NONE:
                return
            _log.warning("deleting the empty consumer group failed", group=group_id, error=error.name)
            if appending:
                refused.append(error)

        self._store.append_records(group_id, tombstones, written)
        appending = False
        if refused:
            self._catalog.remove(classic)
            classic.transition_to(GroupState.DEAD)
            if self._reinstall_consumer_group(group):
                self._consumer.on_group_loaded(group)
            callback(JoinGroupResult.failure(request.member_id, group_write_error(refused[0])))
            return True
        _log.info("empty consumer group converted to a classic group", group=group_id)
        return False

    def _replace_empty_classic_group(self, group_id: str) -> tuple[ConsumerGroup, Conversion] | None:
        """Before a joining ConsumerGroupHeartbeat: an empty classic group gives way to an empty
        consumer group with its offsets; the heartbeat's write carries the classic group's tombstone
        (Kafka's ``maybeDeleteEmptyClassicGroup``) and, if it fails, brings the classic group back."""
        classic = self._catalog.get(group_id)
        if classic is None:
            return None
        if classic.is_in(GroupState.DEAD):
            self._catalog.remove(classic)
            return None
        if not classic.is_in(GroupState.EMPTY):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return self._replace_classic_group(classic, "empty classic group converted to a consumer group")

    def _upgrade(self, group_id: str) -> tuple[ConsumerGroup, list[ConsumerGroupRecord], Conversion] | None:
        """KIP-848's online upgrade (:mod:`~coordinator.group.migration`): a classic group with
        members gives way to a consumer group holding them; whoever waits in JoinGroup or SyncGroup
        is told to rejoin (REBALANCE_IN_PROGRESS) and the classic group's timers stop. The
        heartbeat's write carries the classic group's tombstone before the consumer group's records,
        and brings the classic group back if it fails. A group that may not be converted is refused
        with GROUP_ID_NOT_FOUND."""
        classic = self._catalog.get(group_id)
        if classic is None or classic.is_in(GroupState.DEAD) or classic.is_in(GroupState.EMPTY):
            return None
        refused = KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not can_upgrade(self.config, classic):
            _log.info("cannot upgrade the classic group to a consumer group", group=group_id)
            raise refused
        try:
            records = consumer_group_records_from(classic, self._consumer.topics)
        except DecodeError as exc:
            _log.warning("cannot upgrade the classic group: malformed consumer protocol", group=group_id)
            raise KafkaError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {group_id} to consumer group because the embedded "
                "consumer protocol is malformed.",
            ) from exc
        self._rebalancer.on_group_converted(classic)
        group, conversion = self._replace_classic_group(
            classic,
            "classic group converted to a consumer group",
            members=classic.size,
            epoch=classic.generation_id,
        )
        return group, records, conversion

    def _replace_classic_group(
        self, classic: GroupMetadata, done: str, **logged: int
    ) -> tuple[ConsumerGroup, Conversion]:
        """``classic`` gives way to a consumer group with its offsets; the conversion's write
        carries the classic group's tombstone first, brings the classic group back if it fails, and
        logs ``done`` once it stands."""
        group_id = classic.group_id
        self._catalog.remove(classic)
        group = ConsumerGroup(group_id)
        group.offsets = classic.offsets
        self._catalog.add_consumer_group(group)

        def finish() -> None:
            if not classic.is_in(GroupState.DEAD):
                classic.transition_to(GroupState.DEAD)
            _log.info(done, group=group_id, **logged)

        conversion = Conversion(
            leading=(group_tombstone(group_id),),
            undo=lambda: self._reinstall_classic_group(classic, group),
            finish=finish,
        )
        return group, conversion

    def _reinstall_classic_group(self, classic: GroupMetadata, group: ConsumerGroup) -> None:
        """Undo a conversion to ``group`` whose write failed: the classic group is back (if the
        partition is still ours and nothing else took the id meanwhile)."""
        group_id = classic.group_id
        self._consumer.on_group_unloaded(group)
        self._catalog.remove_consumer_group(group)
        if (
            classic.is_in(GroupState.DEAD)
            or not self._catalog.owns(self._catalog.partition_for(group_id))
            or self._catalog.get(group_id) is not None
            or self._catalog.consumer_group(group_id) is not None
        ):
            _log.warning("not restoring the classic group: its place is taken", group=group_id)
            if not classic.is_in(GroupState.DEAD):
                classic.transition_to(GroupState.DEAD)
            return
        self._catalog.add(classic)
        self._rebalancer.on_group_restored(classic)
        _log.warning("converting the classic group was not written: restored it", group=group_id)

    def _reinstall_consumer_group(self, group: ConsumerGroup) -> bool:
        """Undo a conversion of ``group`` to a classic group whose write failed (once the classic
        group is gone from the catalog): the consumer group is back (its members' timers are the
        caller's, once the group is as it was). False if its place is taken."""
        group_id = group.group_id
        if (
            not self._catalog.owns(self._catalog.partition_for(group_id))
            or self._catalog.get(group_id) is not None
            or self._catalog.consumer_group(group_id) is not None
        ):
            _log.warning("not restoring the consumer group: its place is taken", group=group_id)
            return False
        group.dead = False
        self._catalog.add_consumer_group(group)
        _log.warning("converting the consumer group was not written: restored it", group=group_id)
        return True

    def _downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> Conversion | None:
        """KIP-848's online downgrade when ``leaving_member_id`` leaves or is fenced
        (:mod:`~coordinator.group.migration`): None if the group may not be downgraded, else the
        conversion to write, which starts a rebalance once it stands."""
        if not can_downgrade(self.config, group, leaving_member_id):
            return None
        return self._convert_to_classic_group(group, leaving_member_id, rebalance=True)

    def _downgrade_replaced(self, group: ConsumerGroup, generation: int, rebalance: bool) -> Conversion:
        """KIP-848's online downgrade once a classic static member replaced the last member using
        the consumer protocol (the caller checked ``can_downgrade_with_replaced_member``)."""
        return self._convert_to_classic_group(group, None, rebalance, generation)

    def _convert_to_classic_group(
        self,
        group: ConsumerGroup,
        leaving_member_id: str | None,
        rebalance: bool,
        generation: int | None = None,
    ) -> Conversion:
        """Kafka's ``convertToClassicGroup``: the classic group takes the consumer group's place at
        once (its members' sessions start); the conversion carries the consumer group's tombstones
        and the classic group's record, to be written in the batch of the request that triggered it.
        Once it stands, a rebalance starts if ``rebalance`` (the classic members rejoin and their
        leader assigns again); if it fails, the consumer group comes back (and whoever joined the
        classic group meanwhile is told to rejoin)."""
        group_id = group.group_id
        classic, assignments = classic_group_from(
            group, leaving_member_id, self._consumer.topics, self._clock, generation
        )
        trailing = [to_offsets_record(r) for r in group_tombstones(group)]
        trailing.append(group_metadata_record(classic, assignments))
        self._catalog.remove_consumer_group(group)
        self._consumer.on_group_unloaded(group)
        self._catalog.add(classic)
        for member in classic.members:
            self._rebalancer.complete_and_schedule_next_heartbeat_expiration(classic, member)

        def finish() -> None:
            if rebalance and self._catalog.get(group_id) is classic:
                self._rebalancer.maybe_prepare_rebalance(
                    classic, f"Downgrade group {group_id} from consumer to classic."
                )
            _log.info(
                "consumer group converted to a classic group",
                group=group_id,
                left=leaving_member_id,
                members=classic.size,
                generation=classic.generation_id,
            )

        def undo() -> None:
            self._rebalancer.on_group_converted(classic)
            if classic.is_in(GroupState.DEAD) or not self._catalog.remove(classic):
                _log.warning("not restoring the consumer group: the classic group is gone", group=group_id)
                return
            classic.transition_to(GroupState.DEAD)
            self._reinstall_consumer_group(group)

        def resume() -> None:
            if self._catalog.consumer_group(group_id) is group:
                self._consumer.on_group_loaded(group)

        return Conversion(trailing=tuple(trailing), undo=undo, resume=resume, finish=finish)

    def _consumer_group_with_classic_api(self, group_id: str, api: GroupApi) -> ConsumerGroup | None:
        """The consumer group that serves a classic SyncGroup/Heartbeat/LeaveGroup for ``group_id``
        (once the coordinator checks pass), or None: the classic path answers."""
        if self._catalog.validate(group_id, api) is not None:
            return None
        return self._catalog.consumer_group(group_id)

    # -- offsets ------------------------------------------------------------------------------------

    def commit_offsets(self, request: OffsetCommitRequest, callback: CommitCallback) -> None:
        self._offsets.commit_offsets(request, callback)

    def commit_txn_offsets(self, request: TxnOffsetCommitRequest, callback: CommitCallback) -> None:
        """TxnOffsetCommit: offsets written in the producer's transaction, pending until its marker."""
        producer = TxnProducer(request.producer_id, request.producer_epoch, request.verification)
        self._offsets.commit_txn_offsets(request.commit, producer, callback)

    def on_transaction_completed(self, producer_id: int, partitions: Iterable[int], commit: bool) -> None:
        """A transaction marker of ``producer_id`` reached these partitions of __consumer_offsets:
        the offsets its groups hold for the transaction become committed, or are dropped (Kafka's
        ``scheduleHandleTxnCompletion``).

        A partition still loading may have read its log before the marker arrived: the marker is
        kept and applied once the load installs the groups (no TxnOffsetCommit can reach a loading
        partition, so applying one the load already read changes nothing)."""
        wanted = set()
        for partition in partitions:
            if self._catalog.is_loading(partition):
                self._markers_while_loading.setdefault(partition, []).append((producer_id, commit))
            else:
                wanted.add(partition)
        if wanted:
            self._complete_txn(producer_id, wanted, commit)

    def _complete_txn(self, producer_id: int, partitions: set[int], commit: bool) -> None:
        for group in self._all_groups():
            if self._catalog.partition_for(group.group_id) in partitions:
                group.offsets.complete_txn(producer_id, commit)

    def _all_groups(self) -> list[OffsetsGroup]:
        return [*self._catalog.groups(), *self._catalog.consumer_groups()]

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResult:
        """``member_id`` and ``member_epoch`` (OffsetFetch v9+) are checked for consumer groups."""
        return self._offsets.fetch_offsets(group_id, partitions, require_stable, member_id, member_epoch)

    def fetch_offsets_of_groups(
        self,
        requests: Sequence[tuple[str, Sequence[TopicPartition] | None]],
        require_stable: bool = False,
        members: Sequence[tuple[str | None, int]] | None = None,
    ) -> list[OffsetFetchResult]:
        """OffsetFetch v8+: several groups, each with its partitions (None: all of them), and from
        v9 each with the member id and epoch of the requesting member (``members``, in order)."""
        who = members if members is not None else [(None, -1)] * len(requests)
        return [
            self._offsets.fetch_offsets(group_id, partitions, require_stable, member_id, epoch)
            for (group_id, partitions), (member_id, epoch) in zip(requests, who, strict=True)
        ]

    def expire_offsets(self) -> int:
        """Drop expired offsets and dead groups now; returns how many offsets went."""
        now = self._clock.time_ms()
        retention = self.config.offsets_retention_ms
        return self._cleaner.cleanup(self._all_groups(), lambda g: _remove_expired_offsets(g, now, retention))

    def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> int:
        """Topics were deleted: drop their offsets from every group (Kafka's handleDeletedPartitions)."""
        gone = list(partitions)
        return self._cleaner.cleanup(self._all_groups(), lambda g: g.offsets.remove(gone))

    # -- groups -------------------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> ListGroupsResult:
        """Every group held here. States match case-insensitively (ListGroups v4+), types too
        (v5+): "classic" or "consumer" (a consumer-protocol group, whose protocol type is
        "consumer"). While a partition loads, the groups known so far are listed with
        COORDINATOR_LOAD_IN_PROGRESS."""
        if not self._catalog.active:
            return ListGroupsResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        wanted_states = {state.lower() for state in states}
        wanted_types = {kind.lower() for kind in types}
        overviews: list[GroupOverview] = []
        if not wanted_types or CLASSIC_GROUP_TYPE in wanted_types:
            overviews += [group.overview() for group in self._catalog]
        if not wanted_types or CONSUMER_GROUP_TYPE in wanted_types:
            overviews += [
                GroupOverview(group.group_id, CONSUMER_PROTOCOL_TYPE, group.state.value, CONSUMER_GROUP_TYPE)
                for group in self._catalog.consumer_groups()
            ]
        if wanted_states:
            overviews = [o for o in overviews if o.state.lower() in wanted_states]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._catalog.any_loading else ErrorCode.NONE
        return ListGroupsResult(error, tuple(overviews))

    def describe_groups(self, group_ids: Iterable[str], api_version: int = 0) -> list[DescribedGroup]:
        return [self.describe_group(group_id, api_version) for group_id in group_ids]

    def describe_group(self, group_id: str, api_version: int = 0) -> DescribedGroup:
        """An unknown group is reported Dead with no error before DescribeGroups v6, and as
        GROUP_ID_NOT_FOUND from v6; a failed check reports the error with an empty state."""
        error = self._catalog.validate(group_id, GroupApi.DESCRIBE_GROUPS)
        if error is not None:
            return DescribedGroup(group_id, error, "", "", "")
        group = self._catalog.get(group_id)
        if group is not None:
            return group.describe()
        if api_version >= 6:
            message = f"Group {group_id} not found."
            if self._catalog.consumer_group(group_id) is not None:
                message = f"Group {group_id} is not a classic group."
            return DescribedGroup(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, GroupState.DEAD.value, "", "", (), message
            )
        return DescribedGroup(group_id, ErrorCode.NONE, GroupState.DEAD.value, "", "")

    def delete_groups(self, group_ids: Iterable[str], callback: DeleteGroupsCallback) -> None:
        """Only Empty groups can be deleted (NON_EMPTY_GROUP otherwise); their offsets go with them.
        Answered once the tombstones are written; like Kafka, a failed tombstone write is logged, not
        reported (the group is already gone from this coordinator)."""
        errors: dict[str, ErrorCode] = {}
        deletable: list[OffsetsGroup] = []
        for group_id in dict.fromkeys(group_ids):
            group, errors[group_id] = self._deletable(group_id)
            if isinstance(group, GroupMetadata):
                group.transition_to(GroupState.DEAD)
            if group is not None:
                deletable.append(group)
        self._cleaner.cleanup(deletable, lambda g: g.offsets.remove_all(), lambda: callback(errors))

    def _deletable(self, group_id: str) -> tuple[OffsetsGroup | None, ErrorCode]:
        """The group if it may be deleted (with NONE), else None and why not."""
        group, error = self._live_group(group_id, GroupApi.DELETE_GROUPS)
        if group is not None and not _is_empty(group):
            return None, ErrorCode.NON_EMPTY_GROUP
        return group, error

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], callback: DeleteOffsetsCallback
    ) -> None:
        """OffsetDelete (KIP-496, Kafka's ``handleDeleteOffsets``): an Empty group loses the offsets
        of every partition named; a consumer group with members keeps those of the topics its
        members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC each) and loses the others; any other group
        with members is refused (NON_EMPTY_GROUP). Deleting goes through the same cleanup as
        DeleteGroups and expiry (tombstones, and a group left Empty without offsets is Dead), and
        is answered once the tombstones are written. A partition without an offset is answered
        NONE like the others: there was nothing to delete."""
        group, error = self._live_group(group_id, GroupApi.OFFSET_DELETE)
        if group is None:
            callback(OffsetDeleteResult(error))
            return
        wanted = list(dict.fromkeys(partitions))
        if _is_empty(group):
            subscribed: set[TopicPartition] = set()
        elif isinstance(group, ConsumerGroup) or group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = {tp for tp in wanted if group.is_subscribed_to_topic(tp[0])}
        else:
            callback(OffsetDeleteResult(ErrorCode.NON_EMPTY_GROUP))
            return
        errors = {
            tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp in subscribed else ErrorCode.NONE for tp in wanted
        }
        deletable = [tp for tp in wanted if tp not in subscribed]
        self._cleaner.cleanup(
            [group] if deletable else [],
            lambda g: g.offsets.remove(deletable),
            lambda: callback(OffsetDeleteResult(ErrorCode.NONE, errors)),
        )

    def _live_group(self, group_id: str, api: GroupApi) -> tuple[OffsetsGroup | None, ErrorCode]:
        """The group, if this coordinator holds it and it is not Dead (with NONE); else None and why
        not: the request check's error, GROUP_ID_NOT_FOUND, or NOT_COORDINATOR when the group's
        partition moved away meanwhile (Kafka's ``groupNotExists``)."""
        error = self._catalog.validate(group_id, api)
        if error is not None:
            return None, error
        consumer_group = self._catalog.consumer_group(group_id)
        if consumer_group is not None:
            return consumer_group, ErrorCode.NONE
        group = self._catalog.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            missing = self._catalog.group_not_exists(group_id)
            return None, ErrorCode.GROUP_ID_NOT_FOUND if missing else ErrorCode.NOT_COORDINATOR
        return group, ErrorCode.NONE

    # -- partitions of __consumer_offsets ------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self._catalog.partition_for(group_id)

    @property
    def num_partitions(self) -> int:
        """How many partitions of __consumer_offsets groups are spread over."""
        return self._catalog.num_partitions

    def adopt_partition_count(self, num_partitions: int) -> bool:
        """Spread groups over the partitions ``__consumer_offsets`` really has.

        ``offsets.topic.num.partitions`` only sizes the topic when it is created; once it exists,
        Kafka maps groups onto its actual partition count, so that changing the setting later does
        not hide every group committed before. Possible only before any partition is loaded
        (ValueError after); True if the count changed.
        """
        return self._catalog.resize(num_partitions)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return self._catalog.owned_partitions

    def begin_loading(self, partition: int) -> None:
        """This broker leads ``partition`` now and is reading it back."""
        self._catalog.begin_loading(partition)
        self._markers_while_loading.pop(partition, None)

    def load_partition(self, partition: int, records: Iterable[LoggedEntry]) -> None:
        """Take over the groups of ``partition`` from its records (in log order). A corrupt record
        leaves the partition owned with nothing loaded, as Kafka does after a failed load."""
        if self._catalog.owns(partition):
            _log.info("partition already loaded", partition=partition)
            return
        self._catalog.begin_loading(partition)
        try:
            groups, consumer_groups = rebuild_groups(records, self._clock)
        except (DecodeError, RuntimeError):
            _log.exception("loading groups failed", partition=partition)
            groups, consumer_groups = [], []
        for group in groups:
            self._install(partition, group)
        for consumer_group in consumer_groups:
            self._install_consumer_group(partition, consumer_group)
        self._catalog.finish_loading(partition)
        for producer_id, commit in self._markers_while_loading.pop(partition, ()):
            self._complete_txn(producer_id, {partition}, commit)
        if groups or consumer_groups:
            _log.info(
                "loaded group partition",
                partition=partition,
                groups=len(groups),
                consumer_groups=len(consumer_groups),
            )

    def _install_consumer_group(self, partition: int, group: ConsumerGroup) -> None:
        if self._catalog.partition_for(group.group_id) != partition:
            _log.warning("skipping a group of another partition", group=group.group_id, partition=partition)
            return
        if self._catalog.get(group.group_id) is not None or self._catalog.consumer_group(group.group_id):
            _log.warning("skipping a consumer group whose id is taken", group=group.group_id)
            return
        self._catalog.add_consumer_group(group)
        self._consumer.on_group_loaded(group)

    def _install(self, partition: int, group: GroupMetadata) -> None:
        if self._catalog.partition_for(group.group_id) != partition:
            _log.warning("skipping a group of another partition", group=group.group_id, partition=partition)
            return
        if self._catalog.add(group) is group:
            self._rebalancer.on_group_loaded(group)

    def unload_partition(self, partition: int) -> None:
        """Leadership of ``partition`` moved away: its groups are forgotten and whoever waits in
        JoinGroup or SyncGroup is answered NOT_COORDINATOR."""
        self._markers_while_loading.pop(partition, None)
        for consumer_group in self._catalog.release_consumer_groups(partition):
            self._consumer.on_group_unloaded(consumer_group)
        groups = self._catalog.release(partition)
        for group in groups:
            self._rebalancer.on_group_unloaded(group)
        if groups:  # 50 partitions move at start-up and shutdown: only those with groups are news
            _log.info("unloaded group partition", partition=partition, groups=len(groups))

    def group(self, group_id: str) -> GroupMetadata | None:
        """The live group (for inspection and metrics; not to be changed from outside)."""
        return self._catalog.get(group_id)

    def groups(self) -> list[GroupMetadata]:
        return self._catalog.groups()

    def shutdown(self) -> None:
        """Stop serving: every partition is unloaded and later requests get COORDINATOR_NOT_AVAILABLE."""
        self._catalog.active = False
        for partition in sorted(self._catalog.owned_partitions):
            self.unload_partition(partition)


def _is_empty(group: OffsetsGroup) -> bool:
    return group.is_empty if isinstance(group, ConsumerGroup) else group.is_in(GroupState.EMPTY)


def _remove_expired_offsets(
    group: OffsetsGroup, now_ms: int, retention_ms: int
) -> dict[TopicPartition, OffsetAndMetadata]:
    """A classic group's rules (GroupMetadata.remove_expired_offsets); a consumer group's offsets
    expire ``retention`` after their commit unless a member subscribes to their topic (Kafka's
    ``ConsumerGroup.offsetExpirationCondition``)."""
    if isinstance(group, GroupMetadata):
        return group.remove_expired_offsets(now_ms, retention_ms)
    subscribed = frozenset(group.subscribed_topic_names)
    expired = group.offsets.expired(now_ms, retention_ms, lambda offset: offset.commit_timestamp, subscribed)
    return group.offsets.remove(expired)


class _ConsumerGroupHost:
    """The catalog and the store as the consumer-group service sees them."""

    def __init__(self, catalog: GroupCatalog, store: GroupStore) -> None:
        self._catalog = catalog
        self._store = store
        self.downgrade: Callable[[ConsumerGroup, str], Conversion | None] = lambda _group, _member_id: None
        self.downgrade_replaced: Callable[[ConsumerGroup, int, bool], Conversion] = _unset
        self.upgrade: Callable[[str], tuple[ConsumerGroup, list[ConsumerGroupRecord], Conversion] | None] = (
            lambda _group_id: None
        )
        self.replace_empty: Callable[[str], tuple[ConsumerGroup, Conversion] | None] = lambda _group_id: None
        """Set by the coordinator, which holds what a classic group needs."""

    def convert_to_classic_group(self, group: ConsumerGroup, leaving_member_id: str) -> Conversion | None:
        return self.downgrade(group, leaving_member_id)

    def convert_replaced_to_classic_group(
        self, group: ConsumerGroup, generation: int, rebalance: bool
    ) -> Conversion:
        return self.downgrade_replaced(group, generation, rebalance)

    def upgrade_classic_group(
        self, group_id: str
    ) -> tuple[ConsumerGroup, list[ConsumerGroupRecord], Conversion] | None:
        return self.upgrade(group_id)

    @property
    def active(self) -> bool:
        return self._catalog.active

    def validate(self, group_id: str) -> ErrorCode | None:
        return self._catalog.validate(group_id, GroupApi.CONSUMER_GROUP)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self._catalog.consumer_group(group_id)

    def install_consumer_group(self, group: ConsumerGroup) -> None:
        self._catalog.add_consumer_group(group)

    def remove_consumer_group(self, group: ConsumerGroup) -> None:
        self._catalog.remove_consumer_group(group)

    def replace_empty_classic_group(self, group_id: str) -> tuple[ConsumerGroup, Conversion] | None:
        return self.replace_empty(group_id)

    def append(
        self,
        group_id: str,
        records: Sequence[ConsumerGroupRecord],
        done: Callable[[ErrorCode], None],
        conversion: Conversion | None = None,
    ) -> None:
        batch = [to_offsets_record(r) for r in records]
        if conversion is not None:
            batch = [*conversion.leading, *batch, *conversion.trailing]
        self._store.append_records(group_id, batch, done)


def _unset(_group: ConsumerGroup, _generation: int, _rebalance: bool) -> Conversion:
    raise RuntimeError("the coordinator sets the downgrade")
