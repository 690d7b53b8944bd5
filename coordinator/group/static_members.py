"""A static member restarting (KIP-345): the instance keeps its place under a new member id.

A JoinGroup without a member id but with a known group instance id replaces that instance's member:
the member keeps its assignment and, in a Stable group whose protocol choice does not change, no
rebalance happens. Whoever still waits under the old id is fenced (FENCED_INSTANCE_ID) at once, and
any later request with the old id is fenced too.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from coordinator.group.group import GroupMetadata
from coordinator.group.member import JoinCallback, MemberMetadata
from coordinator.group.rebalance import Rebalancer
from coordinator.group.requests import UNKNOWN_MEMBER_ID, JoinGroupRequest, JoinProtocol
from coordinator.group.results import JoinGroupResult
from coordinator.group.state import GroupState
from coordinator.group.store import GroupStore
from protocol.error_codes import ErrorCode

_log = structlog.get_logger("kipling.groups.static")


@dataclass(slots=True)
class _Replacement:
    """A static member taking a new member id, and what undoing it needs."""

    instance_id: str
    old_member_id: str
    new_member_id: str
    request: JoinGroupRequest
    callback: JoinCallback
    previous_leader: str | None = None
    previous: tuple[tuple[JoinProtocol, ...], int, int] = ((), 0, 0)


class StaticMemberRejoin:
    def __init__(self, store: GroupStore, rebalancer: Rebalancer) -> None:
        self._store = store
        self._rebalancer = rebalancer

    def rejoin(
        self,
        group: GroupMetadata,
        instance_id: str,
        old_member_id: str,
        new_member_id: str,
        request: JoinGroupRequest,
        callback: JoinCallback,
    ) -> None:
        """The instance restarted: its member takes the new id (the old id is fenced at once).

        * Stable, and the group would pick the same protocol: no rebalance. The new id is written;
          once durable the member gets the current generation. Before JoinGroup v9 it is told the
          old leader id, so a restarted leader does not think it leads and run a pointless
          assignment the Stable group would ignore; from v9 a leader is told it leads but to skip
          the assignment (KIP-814). If the write fails, the replacement is undone.
        * Stable with a protocol change, or CompletingRebalance (the leader may be assigning to the
          old id): rebalance.
        * PreparingRebalance: it simply takes part in the rebalance under its new id.
        """
        replacement = _Replacement(instance_id, old_member_id, new_member_id, request, callback)
        replacement.previous_leader = group.leader_id
        member = group.replace_static_member(
            replacement.instance_id, replacement.old_member_id, replacement.new_member_id
        )
        self._rebalancer.complete_and_schedule_next_heartbeat_expiration(group, member)
        replacement.previous = (
            member.supported_protocols,
            member.rebalance_timeout_ms,
            member.session_timeout_ms,
        )
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            replacement.callback,
        )
        reason = f"static member {replacement.instance_id} rejoined as {replacement.new_member_id}"
        if group.is_in(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                self._persist(group, member, replacement)
            else:
                self._rebalancer.maybe_prepare_rebalance(group, reason + " with a protocol change")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            self._rebalancer.prepare_rebalance(group, reason)

    def _persist(self, group: GroupMetadata, member: MemberMetadata, replacement: _Replacement) -> None:
        assignment = {m.member_id: m.assignment for m in group.members}
        new_member_id = replacement.new_member_id

        def stored(error: ErrorCode) -> None:
            if error is not ErrorCode.NONE:
                self._undo(group, member, replacement, error)
                return
            if replacement.request.support_skipping_assignment:
                leads = group.is_leader(new_member_id)
                answer = group.join_result(new_member_id, with_members=leads, skip_assignment=leads)
            else:
                answer = group.join_result(
                    new_member_id, with_members=False, leader_id=replacement.previous_leader
                )
            group.maybe_invoke_join_callback(member, answer)

        self._store.store_group(group, assignment, stored)

    def _undo(
        self, group: GroupMetadata, member: MemberMetadata, replacement: _Replacement, error: ErrorCode
    ) -> None:
        """The new id could not be written: restore the old id (with the previous protocols and
        timeouts; Kafka restores the new protocols, a slip) and answer the error. If the member was
        answered meanwhile (a rebalance started, the group moved away), there is nothing to undo."""
        if member.awaiting_join is not replacement.callback or group.is_in(GroupState.DEAD):
            return
        _log.warning("static member replacement could not be written", group=group.group_id, error=error.name)
        protocols, rebalance_timeout_ms, session_timeout_ms = replacement.previous
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, None)
        restored = group.replace_static_member(
            replacement.instance_id, replacement.new_member_id, replacement.old_member_id
        )
        self._rebalancer.complete_and_schedule_next_heartbeat_expiration(group, restored)
        replacement.callback(
            JoinGroupResult(
                error,
                UNKNOWN_MEMBER_ID,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                replacement.previous_leader or "",
            )
        )
