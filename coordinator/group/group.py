"""A classic group's metadata and state machine (Kafka's GroupMetadata).

Membership: the members by id (insertion order stands in for Kafka's hash order wherever Kafka
takes "any" member, e.g. a new leader), the static members by group instance id, the pending
members (ids handed out with MEMBER_ID_REQUIRED that have not joined yet), how many members await a
JoinGroup answer and which ones still owe a SyncGroup. Protocol selection: each protocol counts the
members that support it; the candidates are those all members support and each member votes for its
most preferred candidate. State: generation, protocol type and name, leader, the state and when it
was entered. Offsets: :class:`~coordinator.group.offsets.GroupOffsets`.

Callbacks stored on members are answered through :meth:`maybe_invoke_join_callback` and
:meth:`maybe_invoke_sync_callback`, which clear them first: an answer is given exactly once, and a
callback that raises is logged, never allowed to corrupt the group.

One deliberate difference: when a static member is given a new member id while it still owes its
SyncGroup, the debt moves to the new id. Kafka leaves the old id in its pending-sync set, so that
set can never empty and the group is rebalanced at the sync deadline even if the new id synced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import structlog

from coordinator.group.member import JoinCallback, MemberMetadata
from coordinator.group.offsets import GroupOffsets, OffsetAndMetadata, TopicPartition
from coordinator.group.requests import JoinProtocol
from coordinator.group.results import (
    DescribedGroup,
    GroupOverview,
    JoinGroupMember,
    JoinGroupResult,
    SyncGroupResult,
)
from coordinator.group.state import GroupState
from coordinator.group.subscriptions import CONSUMER_PROTOCOL_TYPE, union_of_subscriptions
from protocol.error_codes import ErrorCode
from storage.clock import Clock

_log = structlog.get_logger("kipling.groups")


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState, clock: Clock) -> None:
        self.group_id = group_id
        self._clock = clock
        self._state = state
        self.current_state_timestamp: int | None = clock.time_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self._members: dict[str, MemberMetadata] = {}
        self._static_members: dict[str, str] = {}
        self._pending_members: dict[str, None] = {}
        self._pending_sync_members: dict[str, None] = {}
        self._num_awaiting_join = 0
        self._protocol_support: Counter[str] = Counter()
        self.offsets = GroupOffsets()
        self.subscribed_topics: frozenset[str] | None = None
        self.new_member_added = False
        """Set when a member joins an initial rebalance (generation 0), so that the initial delay
        (group.initial.rebalance.delay.ms) is extended once more for further joiners."""

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self._state.value}, generation={self.generation_id}, "
            f"members={list(self._members)})"
        )

    # -- state --------------------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        return self._state

    def is_in(self, state: GroupState) -> bool:
        return self._state is state

    @property
    def can_rebalance(self) -> bool:
        """Only Empty, Stable and CompletingRebalance may start a rebalance."""
        return GroupState.PREPARING_REBALANCE.may_follow(self._state)

    def transition_to(self, state: GroupState) -> None:
        if not state.may_follow(self._state):
            raise RuntimeError(f"group {self.group_id} cannot move from {self._state.value} to {state.value}")
        self._state = state
        self.current_state_timestamp = self._clock.time_ms()

    # -- members ------------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self._members

    def get(self, member_id: str) -> MemberMetadata:
        return self._members[member_id]

    @property
    def size(self) -> int:
        return len(self._members)

    @property
    def members(self) -> list[MemberMetadata]:
        return list(self._members.values())

    @property
    def member_ids(self) -> list[str]:
        return list(self._members)

    @property
    def num_awaiting_join(self) -> int:
        return self._num_awaiting_join

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of any member: how long a rebalance may wait for rejoins."""
        return max((member.rebalance_timeout_ms for member in self._members.values()), default=0)

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        """Add a member; the first one fixes the group's protocol type and becomes leader."""
        if member.group_instance_id is not None:
            if member.group_instance_id in self._static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in {self.group_id}")
            self._static_members[member.group_instance_id] = member.member_id
        if not self._members:
            self.protocol_type = member.protocol_type
        if member.protocol_type != self.protocol_type:
            raise RuntimeError(f"member {member.member_id} has protocol type {member.protocol_type!r}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self._members[member.member_id] = member
        self._protocol_support.update(member.protocol_names)
        member.awaiting_join = callback
        if callback is not None:
            self._num_awaiting_join += 1
        self._pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        """Drop a member (or a pending member id); a leaving leader hands over to the first member."""
        member = self._members.pop(member_id, None)
        if member is not None:
            self._protocol_support.subtract(member.protocol_names)
            if member.is_awaiting_join:
                self._num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self._static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self._members), None)
        self._pending_members.pop(member_id, None)
        self._pending_sync_members.pop(member_id, None)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Sequence[JoinProtocol],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        """A rejoin: new protocols and timeouts; parks (or un-parks) the member's JoinGroup."""
        self._protocol_support.subtract(member.protocol_names)
        member.supported_protocols = tuple(protocols)
        self._protocol_support.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self._num_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self._num_awaiting_join -= 1
        member.awaiting_join = callback

    def maybe_elect_new_joined_leader(self) -> bool:
        """If the leader did not rejoin, make the first member that did the leader. False when the
        group has no leader or nobody rejoined: the rebalance cannot complete yet."""
        if self.leader_id is None:
            return False
        if self._members[self.leader_id].is_awaiting_join:
            return True
        joined = next((m for m in self._members.values() if m.is_awaiting_join), None)
        if joined is None:
            _log.info("group leader failed to rejoin and nobody rejoined", group=self.group_id)
            return False
        _log.info(
            "group leader failed to rejoin; electing a rejoined member",
            group=self.group_id,
            old_leader=self.leader_id,
            new_leader=joined.member_id,
        )
        self.leader_id = joined.member_id
        return True

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [member for member in self._members.values() if not member.is_awaiting_join]

    @property
    def has_all_members_joined(self) -> bool:
        return len(self._members) == self._num_awaiting_join and not self._pending_members

    # -- static members (KIP-345) -------------------------------------------------------------------

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self._static_members.get(group_instance_id)

    @property
    def static_members(self) -> dict[str, str]:
        return dict(self._static_members)

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id. Whoever still waits under the old id is fenced at
        once with FENCED_INSTANCE_ID: it is a duplicate of the instance that just rejoined."""
        member = self._members.pop(old_member_id, None)
        if member is None:
            raise RuntimeError(f"cannot replace unknown member {old_member_id} of {self.group_id}")
        self.maybe_invoke_join_callback(
            member, JoinGroupResult.failure(old_member_id, ErrorCode.FENCED_INSTANCE_ID)
        )
        self.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self._members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self._pending_sync_members:
            del self._pending_sync_members[old_member_id]
            self._pending_sync_members[new_member_id] = None
        self._static_members[group_instance_id] = new_member_id
        return member

    # -- pending members (KIP-394) and pending syncs ------------------------------------------------

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self._pending_members

    def add_pending_member(self, member_id: str) -> None:
        if self.has(member_id):
            raise RuntimeError(f"{member_id} is already a member of {self.group_id}")
        self._pending_members[member_id] = None

    @property
    def pending_member_ids(self) -> list[str]:
        return list(self._pending_members)

    def add_pending_sync_member(self, member_id: str) -> None:
        self._pending_sync_members[member_id] = None

    def remove_pending_sync_member(self, member_id: str) -> None:
        self._pending_sync_members.pop(member_id, None)

    @property
    def has_received_sync_from_all_members(self) -> bool:
        return not self._pending_sync_members

    @property
    def pending_sync_member_ids(self) -> list[str]:
        return list(self._pending_sync_members)

    def clear_pending_sync_members(self) -> None:
        self._pending_sync_members.clear()

    # -- protocols ----------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """An Empty group takes any non-empty protocol type and set; otherwise the type must be the
        group's and one of the protocols must be supported by every member."""
        names = set(protocols)
        if self.is_in(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        members = len(self._members)
        return self.protocol_type == protocol_type and any(
            self._protocol_support[n] == members for n in names
        )

    def select_protocol(self) -> str:
        """The candidate (supported by all) with the most first-preference votes. Kafka breaks a
        tie arbitrarily (hash order); here the protocol voted for first wins, deterministically."""
        if not self._members:
            raise RuntimeError(f"cannot select a protocol for empty group {self.group_id}")
        members = len(self._members)
        candidates = {name for name, count in self._protocol_support.items() if count == members}
        votes = Counter(member.vote(candidates) for member in self._members.values())
        return max(votes, key=lambda name: votes[name])

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        """What the leader receives to run the assignor: every member's metadata for the protocol."""
        if self.protocol_name is None or self._state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise RuntimeError(f"no member metadata for group {self.group_id} in {self._state.value}")
        protocol = self.protocol_name
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self._members.values()
        )

    def join_result(
        self,
        member_id: str,
        *,
        with_members: bool,
        leader_id: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinGroupResult:
        """A successful JoinGroup answer for the current generation (``leader_id`` overrides the
        leader the member is told about; only a leader is given the members)."""
        leader = leader_id if leader_id is not None else self.leader_id
        return JoinGroupResult(
            ErrorCode.NONE,
            member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            leader or "",
            skip_assignment=skip_assignment,
            members=self.current_member_metadata() if with_members else (),
        )

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics a consumer group consumes; None when unknown (not a consumer group, no
        protocol yet, or a subscription that does not parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self._members:
            return frozenset()
        if self.protocol_name is None:
            return None
        protocol = self.protocol_name
        return union_of_subscriptions(member.metadata(protocol) for member in self._members.values())

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed: nothing is deleted on a guess."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self) -> None:
        """A rebalance ends: next generation, protocol chosen by vote, then CompletingRebalance (or
        Empty with no protocol when nobody is left)."""
        self.generation_id += 1
        self.protocol_name = self.select_protocol() if self._members else None
        self.subscribed_topics = self.compute_subscribed_topics()
        self.transition_to(GroupState.COMPLETING_REBALANCE if self._members else GroupState.EMPTY)
        self.clear_pending_sync_members()

    # -- answering parked requests -------------------------------------------------------------------

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        callback = member.awaiting_join
        if callback is None:
            return
        member.awaiting_join = None
        self._num_awaiting_join -= 1
        _invoke(callback, result, self.group_id, member.member_id)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        """Answer a parked SyncGroup; True if there was one."""
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        _invoke(callback, result, self.group_id, member.member_id)
        return True

    # -- offsets ------------------------------------------------------------------------------------

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's expiration rules (KIP-211, KIP-496):

        * a group that had members and is Empty: everything expires ``retention`` after the group
          became Empty (or after the commit, if the log did not record when it became Empty);
        * a consumer group with members whose subscriptions are known: offsets of topics no member
          subscribes to expire ``retention`` after their commit;
        * a group that never had members (manual assignment, offsets only): ``retention`` after the
          commit;
        * any other group keeps its offsets.
        """
        if self.protocol_type is not None and self.is_in(GroupState.EMPTY):
            became_empty = self.current_state_timestamp
            expired = self.offsets.expired(
                now_ms,
                retention_ms,
                lambda offset: became_empty if became_empty is not None else offset.commit_timestamp,
                frozenset(),
            )
        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None:
            expired = self.offsets.expired(
                now_ms, retention_ms, lambda offset: offset.commit_timestamp, self.subscribed_topics
            )
        elif self.protocol_type is None:
            expired = self.offsets.expired(
                now_ms, retention_ms, lambda offset: offset.commit_timestamp, frozenset()
            )
        else:
            return {}
        return self.offsets.remove(expired)

    # -- views --------------------------------------------------------------------------------------

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", self._state.value)

    def describe(self) -> DescribedGroup:
        """Members' metadata and assignments are shown only when the group is Stable."""
        stable = self.is_in(GroupState.STABLE)
        protocol = self.protocol_name if stable else None
        return DescribedGroup(
            group_id=self.group_id,
            error=ErrorCode.NONE,
            state=self._state.value,
            protocol_type=self.protocol_type or "",
            protocol=protocol or "",
            members=tuple(member.summary(protocol) for member in self._members.values()),
        )


def _invoke(callback: Callable[[Any], None], result: object, group_id: str, member_id: str) -> None:
    try:
        callback(result)
    except Exception:
        _log.exception("group response callback failed", group=group_id, member=member_id)
