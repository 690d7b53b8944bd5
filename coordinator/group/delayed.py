"""The group coordinator's timers, as delayed operations (Kafka's DelayedJoin, InitialDelayedJoin,
DelayedSync and DelayedHeartbeat).

Each operation only asks its :class:`RebalanceTimers` owner whether it may complete and tells it
when it completed or expired; the decisions live in the owner. Keys: a group's join and sync waits
are watched under :class:`GroupJoinKey` and :class:`GroupSyncKey` in the rebalance purgatory, each
member's liveness under :class:`MemberKey` in the heartbeat purgatory.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from coordinator.group.group import GroupMetadata
from server_common.purgatory import DelayedOperation, DelayedOperationPurgatory


class GroupJoinKey(NamedTuple):
    group_id: str


class GroupSyncKey(NamedTuple):
    group_id: str


class MemberKey(NamedTuple):
    group_id: str
    member_id: str


class RebalanceTimers(Protocol):
    """What the delayed operations call back into (the coordinator's rebalance logic)."""

    def can_complete_join(self, group: GroupMetadata) -> bool: ...

    def on_complete_join(self, group: GroupMetadata) -> None: ...

    def can_complete_pending_sync(self, group: GroupMetadata, generation_id: int) -> bool: ...

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None: ...

    def can_complete_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> bool: ...

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None: ...


class DelayedJoin(DelayedOperation):
    """Completes once every known member rejoined, or at the rebalance timeout; either way the
    rebalance then moves on without the members that did not rejoin."""

    def __init__(self, timers: RebalanceTimers, group: GroupMetadata, rebalance_timeout_ms: int) -> None:
        super().__init__(rebalance_timeout_ms)
        self.timers = timers
        self.group = group

    def try_complete(self) -> bool:
        return self.timers.can_complete_join(self.group) and self.force_complete()

    def on_complete(self) -> None:
        self.timers.on_complete_join(self.group)

    def __repr__(self) -> str:
        return f"DelayedJoin({self.group.group_id!r}, {self.delay_ms} ms)"


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an Empty group waits group.initial.rebalance.delay.ms whatever happens,
    so that consumers starting together join one generation instead of one each (KIP-134). Each time a new
    member joined during a wait, it waits once more (at most the configured delay, never beyond the
    group's rebalance timeout in total); then it completes like a DelayedJoin.

    Kafka's arithmetic is kept as is: the next wait is ``min(configured, remaining)`` and what
    remains after it is ``max(remaining - this_wait, 0)``.
    """

    def __init__(
        self,
        timers: RebalanceTimers,
        purgatory: DelayedOperationPurgatory,
        group: GroupMetadata,
        configured_delay_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(timers, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        if self.group.new_member_added and self.remaining_ms != 0:
            self.group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            again = InitialDelayedJoin(
                self.timers, self.purgatory, self.group, self.configured_delay_ms, delay, remaining
            )
            self.purgatory.try_complete_else_watch(again, [GroupJoinKey(self.group.group_id)])
        else:
            super().on_complete()

    def __repr__(self) -> str:
        return f"InitialDelayedJoin({self.group.group_id!r}, {self.delay_ms} ms, {self.remaining_ms} ms left)"


class DelayedSync(DelayedOperation):
    """After a rebalance, every member must send SyncGroup within the rebalance timeout; at the
    deadline those that did not are removed and the group rebalances again (KAFKA-12890)."""

    def __init__(
        self, timers: RebalanceTimers, group: GroupMetadata, generation_id: int, timeout_ms: int
    ) -> None:
        super().__init__(timeout_ms)
        self.timers = timers
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.timers.can_complete_pending_sync(self.group, self.generation_id) and self.force_complete()

    def on_complete(self) -> None:
        return  # nothing to answer: expiry does the work

    def on_expiration(self) -> None:
        self.timers.on_expire_pending_sync(self.group, self.generation_id)

    def __repr__(self) -> str:
        return f"DelayedSync({self.group.group_id!r}, generation {self.generation_id})"


class DelayedHeartbeat(DelayedOperation):
    """A member's session: satisfied by a heartbeat (or anything proving it alive) before the
    deadline, otherwise the member is removed. For a pending member (MEMBER_ID_REQUIRED) it is
    satisfied by the member actually joining."""

    def __init__(
        self, timers: RebalanceTimers, group: GroupMetadata, member_id: str, is_pending: bool, timeout_ms: int
    ) -> None:
        super().__init__(timeout_ms)
        self.timers = timers
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return (
            self.timers.can_complete_heartbeat(self.group, self.member_id, self.is_pending)
            and self.force_complete()
        )

    def on_complete(self) -> None:
        return  # nothing to answer: expiry does the work

    def on_expiration(self) -> None:
        self.timers.on_expire_heartbeat(self.group, self.member_id, self.is_pending)

    def __repr__(self) -> str:
        return f"DelayedHeartbeat({self.group.group_id!r}, {self.member_id!r}, pending={self.is_pending})"
