"""SyncGroup, Heartbeat and LeaveGroup: the other membership paths of Kafka's GroupCoordinator.

Every path first passes the coordinator checks (invalid group id, not active, loading, not the
coordinator), then finds the group and checks the member
(:func:`~coordinator.group.validation.validate_current_member`), then acts according to the group's
state. SyncGroup answers through its callback, possibly later (once the leader's assignment is
durable); Heartbeat and LeaveGroup answer at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from coordinator.group.catalog import GroupApi, GroupCatalog
from coordinator.group.group import GroupMetadata
from coordinator.group.member import MemberMetadata, SyncCallback
from coordinator.group.rebalance import Rebalancer
from coordinator.group.requests import UNKNOWN_MEMBER_ID, MemberIdentity, SyncGroupRequest
from coordinator.group.results import LeaveGroupResult, MemberLeaveResult, SyncGroupResult
from coordinator.group.state import GroupState
from coordinator.group.store import GroupStore
from coordinator.group.validation import validate_current_member
from protocol.error_codes import ErrorCode

_log = structlog.get_logger("kipling.groups.membership")


class MembershipService:
    def __init__(self, catalog: GroupCatalog, store: GroupStore, rebalancer: Rebalancer) -> None:
        self._catalog = catalog
        self._store = store
        self._rebalancer = rebalancer

    # -- SyncGroup ----------------------------------------------------------------------------------

    def sync_group(self, request: SyncGroupRequest, callback: SyncCallback) -> None:
        error = self._catalog.validate(request.group_id, GroupApi.SYNC_GROUP)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the move: rejoin (older clients do not expect the
            # loading error from SyncGroup).
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            callback(SyncGroupResult(error))
            return
        group = self._catalog.get(request.group_id)
        if group is None:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync(group, request)
        if error is not None:
            callback(SyncGroupResult(error))
            return
        self._sync_in_state(group, request, callback)

    def _validate_sync(self, group: GroupMetadata, request: SyncGroupRequest) -> ErrorCode | None:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = validate_current_member(group, request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if request.protocol_type is not None and request.protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if request.protocol_name is not None and request.protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _sync_in_state(self, group: GroupMetadata, request: SyncGroupRequest, callback: SyncCallback) -> None:
        """Empty: UNKNOWN_MEMBER_ID. PreparingRebalance: REBALANCE_IN_PROGRESS. CompletingRebalance:
        park until the leader's assignment is durable. Stable: the member's current assignment."""
        state = group.state
        if state is GroupState.EMPTY:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif state is GroupState.PREPARING_REBALANCE:
            callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif state is GroupState.COMPLETING_REBALANCE:
            self._park_sync(group, group.get(request.member_id), request, callback)
        else:
            member = group.get(request.member_id)
            self._rebalancer.remove_pending_sync_member(group, member.member_id)
            self._rebalancer.complete_and_schedule_next_heartbeat_expiration(group, member)
            callback(
                SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
            )

    def _park_sync(
        self, group: GroupMetadata, member: MemberMetadata, request: SyncGroupRequest, callback: SyncCallback
    ) -> None:
        """A second SyncGroup from the same member replaces the first, which Kafka would leave
        unanswered; here the first is told to rejoin so that no request waits forever."""
        if member.awaiting_sync is not None:
            group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = callback
        self._rebalancer.remove_pending_sync_member(group, member.member_id)
        if group.is_leader(member.member_id):
            self._store_assignment(group, request)

    def _store_assignment(self, group: GroupMetadata, request: SyncGroupRequest) -> None:
        """The leader's assignment (members it left out get an empty one) is written; once durable,
        every parked SyncGroup gets its part and the group is Stable. A failed write answers them
        all with the mapped error and rebalances. Anything that moved the group on meanwhile
        (another rebalance) makes the late answer moot."""
        missing = [member_id for member_id in group.member_ids if member_id not in request.assignments]
        if missing:
            _log.warning("leader left members without assignment", group=group.group_id, members=missing)
        assignment = {**request.assignments, **dict.fromkeys(missing, b"")}
        generation = group.generation_id

        def stored(error: ErrorCode) -> None:
            if not group.is_in(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation:
                return
            if error is not ErrorCode.NONE:
                self._rebalancer.reset_and_propagate_assignment_error(group, error)
                self._rebalancer.maybe_prepare_rebalance(group, f"error {error.name} writing the assignment")
            else:
                self._rebalancer.set_and_propagate_assignment(group, assignment)
                group.transition_to(GroupState.STABLE)

        self._store.store_group(group, assignment, stored)

    # -- Heartbeat ----------------------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None = None
    ) -> ErrorCode:
        """A heartbeat proves the member alive; its answer tells the member to rejoin when a
        rebalance is preparing. While the coordinator loads, heartbeats are answered blindly."""
        error = self._catalog.validate(group_id, GroupApi.HEARTBEAT)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE
        if error is not None:
            return error
        group = self._catalog.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is not None:
            return error
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._rebalancer.complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup ---------------------------------------------------------------------------------

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        error = self._catalog.validate(group_id, GroupApi.LEAVE_GROUP)
        if error is not None:
            return LeaveGroupResult(error)
        group = self._catalog.get(group_id)
        if group is None:
            return LeaveGroupResult(
                ErrorCode.NONE, tuple(_left(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in members)
            )
        if group.is_in(GroupState.DEAD):
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return LeaveGroupResult(ErrorCode.NONE, tuple(_left(m, self._leave(group, m)) for m in members))

    def _leave(self, group: GroupMetadata, leaving: MemberIdentity) -> ErrorCode:
        """An unknown member id with an instance id removes that static member (an administrator's
        removal, KIP-345); a pending member just goes away; any other member is checked first."""
        if leaving.member_id == UNKNOWN_MEMBER_ID:
            instance = leaving.group_instance_id
            current = group.current_static_member_id(instance) if instance is not None else None
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_leaving_member(group, current, leaving.reason)
            return ErrorCode.NONE
        if group.is_pending_member(leaving.member_id):
            self._rebalancer.remove_pending_member_and_update_group(group, leaving.member_id)
            self._rebalancer.remove_heartbeat_for_leaving_member(group, leaving.member_id)
            return ErrorCode.NONE
        error = validate_current_member(group, leaving.member_id, leaving.group_instance_id)
        if error is not None:
            return error
        self._remove_leaving_member(group, leaving.member_id, leaving.reason)
        return ErrorCode.NONE

    def _remove_leaving_member(self, group: GroupMetadata, member_id: str, reason: str | None) -> None:
        member = group.get(member_id)
        why = f"member {member_id} left the group ({reason or 'no reason'})"
        self._rebalancer.remove_member_and_update_group(group, member, why)
        self._rebalancer.remove_heartbeat_for_leaving_member(group, member_id)
        _log.info("member left group", group=group.group_id, member=member_id, reason=reason)


def _left(member: MemberIdentity, error: ErrorCode) -> MemberLeaveResult:
    return MemberLeaveResult(member.member_id, member.group_instance_id, error)
