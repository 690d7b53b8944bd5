"""A consumer-protocol group's timers: each member's session and, while it must revoke partitions,
its rebalance timeout (Kafka schedules both on its coordinator timer, keyed by group and member).

Each timer is a :class:`~server_common.purgatory.DelayedOperation` that nothing but its deadline
completes, parked in one of the coordinator's purgatories under a :class:`MemberTimerKey`.
Scheduling a timer cancels the one it replaces; the callback runs only at the deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from server_common.purgatory import DelayedOperation, DelayedOperationPurgatory


class MemberTimerKey(NamedTuple):
    kind: str
    group_id: str
    member_id: str


SESSION = "consumer-session"
REBALANCE = "consumer-rebalance"
JOIN = "consumer-classic-join"
"""A classic-protocol member told to rejoin must do so within its rebalance timeout."""
SYNC = "consumer-classic-sync"
"""A classic-protocol member that joined must send SyncGroup within its rebalance timeout."""


class DelayedMemberTimeout(DelayedOperation):
    def __init__(self, delay_ms: int, expire: Callable[[], None], what: MemberTimerKey) -> None:
        super().__init__(delay_ms)
        self._expire_callback = expire
        self._what = what

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        return

    def on_expiration(self) -> None:
        self._expire_callback()

    def __repr__(self) -> str:
        return f"DelayedMemberTimeout({self._what}, {self.delay_ms} ms)"


class MemberTimers:
    def __init__(self, sessions: DelayedOperationPurgatory, rebalances: DelayedOperationPurgatory) -> None:
        self._purgatories = {SESSION: sessions, REBALANCE: rebalances, JOIN: rebalances, SYNC: rebalances}

    def schedule(
        self, kind: str, group_id: str, member_id: str, delay_ms: int, expire: Callable[[], None]
    ) -> None:
        key = MemberTimerKey(kind, group_id, member_id)
        purgatory = self._purgatories[kind]
        purgatory.cancel_for_key(key)
        purgatory.try_complete_else_watch(DelayedMemberTimeout(delay_ms, expire, key), [key])

    def is_scheduled(self, kind: str, group_id: str, member_id: str) -> bool:
        return self._purgatories[kind].watchers_of(MemberTimerKey(kind, group_id, member_id)) > 0

    def cancel(self, kind: str, group_id: str, member_id: str) -> None:
        self._purgatories[kind].cancel_for_key(MemberTimerKey(kind, group_id, member_id))

    def cancel_all(self, group_id: str, member_id: str) -> None:
        for kind in self._purgatories:
            self.cancel(kind, group_id, member_id)
