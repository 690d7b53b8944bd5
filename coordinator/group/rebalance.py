"""The rebalance engine: starting and completing rebalances, member liveness, assignment delivery.

This is the part of Kafka's GroupCoordinator that the request paths share and the timers call back
into (it implements :class:`~coordinator.group.delayed.RebalanceTimers`):

* :meth:`Rebalancer.prepare_rebalance` moves a group to PreparingRebalance and parks a DelayedJoin
  (an InitialDelayedJoin when the group was Empty). Members parked in SyncGroup are told
  REBALANCE_IN_PROGRESS; a pending sync deadline is dropped.
* :meth:`Rebalancer.on_complete_join` ends the join phase: dynamic members that did not rejoin are
  removed (static ones stay until their session expires), a rejoined member becomes leader if the
  leader did not rejoin, the next generation starts and every waiting JoinGroup is answered (the
  leader with all members' metadata). If members remain but none rejoined, it waits another
  rebalance timeout. With nobody left the group becomes Empty and is written.
* After a join phase every member owes a SyncGroup within the rebalance timeout (DelayedSync); those
  that do not send one are removed and the group rebalances.
* Every member has a DelayedHeartbeat: its session timeout after its last sign of life (heartbeat,
  commit, JoinGroup/SyncGroup answer), NewMemberJoinTimeoutMs (5 minutes) while a new member waits
  for its first JoinGroup answer. A member parked in JoinGroup or SyncGroup counts as alive.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.delayed import (
    DelayedHeartbeat,
    DelayedJoin,
    DelayedSync,
    GroupJoinKey,
    GroupSyncKey,
    InitialDelayedJoin,
    MemberKey,
)
from coordinator.group.group import GroupMetadata
from coordinator.group.member import JoinCallback, MemberMetadata
from coordinator.group.requests import UNKNOWN_MEMBER_ID, JoinGroupRequest
from coordinator.group.results import JoinGroupResult, SyncGroupResult
from coordinator.group.state import GroupState
from coordinator.group.store import GroupStore
from protocol.error_codes import ErrorCode
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import Clock

_log = structlog.get_logger("kipling.groups.rebalance")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""Kafka's NewMemberJoinTimeoutMs: a new member whose first JoinGroup waits longer is dropped (its
client has likely given up and will retry with a fresh request)."""


class Rebalancer:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        clock: Clock,
        store: GroupStore,
        heartbeat_purgatory: DelayedOperationPurgatory,
        rebalance_purgatory: DelayedOperationPurgatory,
    ) -> None:
        self._config = config
        self._clock = clock
        self._store = store
        self._heartbeats = heartbeat_purgatory
        self._rebalances = rebalance_purgatory

    # -- starting a rebalance -----------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        join = self._delayed_join_for(group)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        _log.info(
            "preparing to rebalance group",
            group=group.group_id,
            generation=group.generation_id,
            reason=reason,
        )
        self._rebalances.try_complete_else_watch(join, [GroupJoinKey(group.group_id)])

    def _delayed_join_for(self, group: GroupMetadata) -> DelayedJoin:
        """An Empty group's first rebalance waits group.initial.rebalance.delay.ms (KIP-134)."""
        if not group.is_in(GroupState.EMPTY):
            return DelayedJoin(self, group, group.rebalance_timeout_ms)
        delay = self._config.group_initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms - delay, 0)
        return InitialDelayedJoin(self, self._rebalances, group, delay, delay, remaining)

    def check_join(self, group: GroupMetadata) -> None:
        """Something changed that may let the join phase complete (a rejoin, a member leaving)."""
        self._rebalances.check_and_complete(GroupJoinKey(group.group_id))

    # -- members ------------------------------------------------------------------------------------

    def add_member_and_rebalance(
        self, group: GroupMetadata, request: JoinGroupRequest, member_id: str, callback: JoinCallback
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            supported_protocols=tuple(request.protocols),
            is_new=True,
        )
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # A new member cannot heartbeat before its JoinGroup is answered, and a client that gave up
        # would leave a defunct member behind: bound its wait instead (NewMemberJoinTimeoutMs).
        self._schedule_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.maybe_prepare_rebalance(
            group, f"adding new member {member_id} ({request.reason or 'no reason'})"
        )

    def update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        request: JoinGroupRequest,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, callback
        )
        self.maybe_prepare_rebalance(group, reason)

    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        """A member that waits in JoinGroup is answered UNKNOWN_MEMBER_ID first (so it retries if it
        is still alive); then the group rebalances, or its join phase may now complete.

        A member removed while its SyncGroup waits (it left from another connection) is answered
        UNKNOWN_MEMBER_ID too; Kafka leaves that request unanswered until the client gives up."""
        gone = JoinGroupResult.failure(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID)
        group.maybe_invoke_join_callback(member, gone)
        group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self.check_join(group)

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self.check_join(group)

    # -- heartbeats ---------------------------------------------------------------------------------

    def complete_and_schedule_next_heartbeat_expiration(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        self._schedule_expiration(group, member, member.session_timeout_ms)

    def _schedule_expiration(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        """Satisfy the member's current session deadline, then start the next one."""
        key = MemberKey(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        member.last_heartbeat_ms = self._clock.time_ms()
        self._heartbeats.check_and_complete(key)
        member.heartbeat_satisfied = False
        self._heartbeats.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key]
        )

    def add_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        """A pending member (MEMBER_ID_REQUIRED) must come back within its session timeout."""
        key = MemberKey(group.group_id, member_id)
        self._heartbeats.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, True, timeout_ms), [key]
        )

    def remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        self._heartbeats.check_and_complete(MemberKey(group.group_id, member_id))

    def can_complete_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> bool:
        if group.is_in(GroupState.DEAD):
            return True
        if is_pending:
            # Joined, or gone (left): either way nothing is left to expire. Kafka waits for the
            # deadline in the second case; completing at once only frees the timer sooner.
            return group.has(member_id) or not group.is_pending_member(member_id)
        if not group.has(member_id):
            return True
        return group.get(member_id).has_satisfied_heartbeat()

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if group.is_in(GroupState.DEAD):
            return
        if is_pending:
            if group.is_pending_member(member_id):
                _log.info("pending member did not rejoin in time", group=group.group_id, member=member_id)
                self.remove_pending_member_and_update_group(group, member_id)
            return
        if not group.has(member_id):
            return
        member = group.get(member_id)
        if not member.has_satisfied_heartbeat():
            _log.info("member session expired", group=group.group_id, member=member_id)
            self.remove_member_and_update_group(group, member, f"member {member_id} session expired")

    # -- completing the join phase ------------------------------------------------------------------

    def can_complete_join(self, group: GroupMetadata) -> bool:
        return group.has_all_members_joined

    def on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                _log.info(
                    "removing member that did not rejoin", group=group.group_id, member=member.member_id
                )
                group.remove(member.member_id)
                self.remove_heartbeat_for_leaving_member(group, member.member_id)
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.size > 0:
            # Members remain but none rejoined: wait until their sessions remove them.
            _log.warning("rebalance cannot complete: no member rejoined", group=group.group_id)
            wait = DelayedJoin(self, group, group.rebalance_timeout_ms)
            self._rebalances.try_complete_else_watch(wait, [GroupJoinKey(group.group_id)])
            return
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            self._store.store_group(group, {}, lambda error: _warn_empty_write(group, error))
        else:
            self._announce_generation(group)

    def _announce_generation(self, group: GroupMetadata) -> None:
        """Answer every parked JoinGroup and start the sync deadline."""
        _log.info(
            "group stabilized", group=group.group_id, generation=group.generation_id, members=group.size
        )
        for member in group.members:
            result = group.join_result(member.member_id, with_members=group.is_leader(member.member_id))
            group.maybe_invoke_join_callback(member, result)
            self.complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    # -- the sync deadline --------------------------------------------------------------------------

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        self._rebalances.check_and_complete(GroupSyncKey(group.group_id))

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.clear_pending_sync_members()
        self._rebalances.check_and_complete(GroupSyncKey(group.group_id))

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        sync = DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms)
        self._rebalances.try_complete_else_watch(sync, [GroupSyncKey(group.group_id)])

    def can_complete_pending_sync(self, group: GroupMetadata, generation_id: int) -> bool:
        if generation_id != group.generation_id:
            return True
        if group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE):
            return True
        return group.has_received_sync_from_all_members

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if generation_id != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            return
        if group.has_received_sync_from_all_members:
            return
        missing = group.pending_sync_member_ids
        for member_id in missing:
            group.remove(member_id)
            self.remove_heartbeat_for_leaving_member(group, member_id)
        _log.info("removed members that did not sync in time", group=group.group_id, members=missing)
        self.prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    # -- assignments --------------------------------------------------------------------------------

    def set_and_propagate_assignment(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> None:
        for member in group.members:
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members:
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        """Answer parked SyncGroups; each answered member's session restarts now, since its expiry
        may have been ignored while it waited for the leader or the write."""
        ok = error is ErrorCode.NONE
        protocol_type = group.protocol_type if ok else None
        protocol_name = group.protocol_name if ok else None
        for member in group.members:
            result = SyncGroupResult(error, protocol_type, protocol_name, member.assignment)
            if group.maybe_invoke_sync_callback(member, result):
                self.complete_and_schedule_next_heartbeat_expiration(group, member)

    # -- moving with partition leadership -----------------------------------------------------------

    def on_group_loaded(self, group: GroupMetadata) -> None:
        """A group read from the log: its members get a full session to show up; a group over
        group.max.size (lowered meanwhile) rebalances so members can commit before some are cut."""
        if group.size > self._config.group_max_size:
            self.prepare_rebalance(group, f"loaded group is over capacity ({self._config.group_max_size})")
        for member in group.members:
            self.complete_and_schedule_next_heartbeat_expiration(group, member)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        """Another broker coordinates the group now: everyone waiting hears NOT_COORDINATOR (and
        finds the new coordinator); the group's timers stop."""
        group.transition_to(GroupState.DEAD)
        for member in group.members:
            group.maybe_invoke_join_callback(
                member, JoinGroupResult.failure(member.member_id, ErrorCode.NOT_COORDINATOR)
            )
            group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
        self.stop_timers(group)

    def on_group_converted(self, group: GroupMetadata) -> None:
        """The group becomes a consumer group (KIP-848's online upgrade): whoever waits in JoinGroup
        or SyncGroup is told to rejoin (REBALANCE_IN_PROGRESS), as Kafka's ``convertToConsumerGroup``
        does, and the group's timers stop; its state stays until the conversion is written."""
        for member in group.members:
            group.maybe_invoke_join_callback(
                member, JoinGroupResult.failure(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS)
            )
            group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self.stop_timers(group)

    def on_group_restored(self, group: GroupMetadata) -> None:
        """The group is back after its conversion to a consumer group failed to be written. Its
        waiting members were told to rejoin: a rebalance in progress goes on (its join deadline
        starts again) and one that was completing starts anew; pending member ids are forgotten
        (they join again as new); every member gets a full session."""
        for member_id in group.pending_member_ids:
            group.remove(member_id)
        for member in group.members:
            self.complete_and_schedule_next_heartbeat_expiration(group, member)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            join = self._delayed_join_for(group)
            self._rebalances.try_complete_else_watch(join, [GroupJoinKey(group.group_id)])
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, "its conversion to a consumer group failed")

    def stop_timers(self, group: GroupMetadata) -> None:
        """Cancel the group's join and sync deadlines and its members' sessions."""
        self._rebalances.cancel_for_key(GroupJoinKey(group.group_id))
        self._rebalances.cancel_for_key(GroupSyncKey(group.group_id))
        for member_id in [*group.member_ids, *group.pending_member_ids]:
            self._heartbeats.cancel_for_key(MemberKey(group.group_id, member_id))


def _warn_empty_write(group: GroupMetadata, error: ErrorCode) -> None:
    """An Empty generation that could not be written is harmless: if the coordinator moves before
    the next write, the previous generation comes back and its members simply time out."""
    if error is not ErrorCode.NONE:
        _log.warning("writing empty group failed", group=group.group_id, error=error.name)
