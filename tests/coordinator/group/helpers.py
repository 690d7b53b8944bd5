"""A group coordinator on simulated time, and small clients that talk to it.

Time: a :class:`FakeScheduler` runs the purgatories' timers and :class:`SchedulerClock` reads the
same simulated time, so a timer firing at t sees ``time_ms() == t`` (a separate FakeClock would be
at the end of the advanced interval instead). Writes go to an :class:`InMemoryGroupLog`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from coordinator.group import (
    GroupCoordinator,
    GroupCoordinatorConfig,
    InMemoryGroupLog,
    JoinGroupRequest,
    JoinGroupResult,
    JoinProtocol,
    OffsetCommitRequest,
    PartitionCommit,
    SyncGroupRequest,
    SyncGroupResult,
)
from coordinator.group.subscriptions import encode_subscription
from protocol.error_codes import ErrorCode
from server_common.purgatory import DelayedOperationPurgatory, FakeScheduler

T = TypeVar("T")

START_MS = 1_000_000
SESSION_MS = 10_000
REBALANCE_MS = 30_000


class SchedulerClock:
    """The Clock protocol over a FakeScheduler's time."""

    def __init__(self, scheduler: FakeScheduler) -> None:
        self._scheduler = scheduler

    def time_ms(self) -> int:
        return round(self._scheduler.time() * 1000)


@dataclass
class Reply(Generic[T]):
    """Collects the answers given to one callback; a callback must be answered at most once."""

    answers: list[T] = field(default_factory=list)

    def __call__(self, answer: T) -> None:
        self.answers.append(answer)

    @property
    def done(self) -> bool:
        return bool(self.answers)

    @property
    def value(self) -> T:
        assert len(self.answers) == 1, f"expected exactly one answer, got {self.answers}"
        return self.answers[0]


def consumer_protocols(*topics: str, names: Sequence[str] = ("range",)) -> tuple[JoinProtocol, ...]:
    metadata = encode_subscription(topics or ("topic",))
    return tuple(JoinProtocol(name, metadata) for name in names)


def config(**overrides: Any) -> GroupCoordinatorConfig:
    values: dict[str, Any] = {"offsets_topic_num_partitions": 1, "group_initial_rebalance_delay_ms": 0}
    values.update(overrides)
    return GroupCoordinatorConfig(**values)


class Harness:
    def __init__(
        self, cfg: GroupCoordinatorConfig | None = None, *, defer_log: bool = False, load: bool = True
    ):
        self.config = cfg or config()
        self.scheduler = FakeScheduler(START_MS / 1000)
        self.clock = SchedulerClock(self.scheduler)
        self.log = InMemoryGroupLog(defer=defer_log)
        self.heartbeats = DelayedOperationPurgatory("Heartbeat", self.scheduler)
        self.rebalances = DelayedOperationPurgatory("Rebalance", self.scheduler)
        self._ids = itertools.count(1)
        self.coordinator = self.new_coordinator()
        if load:
            for partition in range(self.config.offsets_topic_num_partitions):
                self.coordinator.load_partition(partition, [])

    def new_coordinator(self) -> GroupCoordinator:
        """Another coordinator over the same log, purgatories and time (a new leader)."""
        return GroupCoordinator(
            self.config,
            self.log,
            self.clock,
            self.heartbeats,
            self.rebalances,
            member_id_suffix=lambda: f"id{next(self._ids)}",
        )

    @property
    def now(self) -> int:
        return self.clock.time_ms()

    def advance(self, ms: int) -> None:
        self.scheduler.advance_ms(ms)

    def settle(self) -> None:
        """Run timers that are due now (a zero initial delay still goes through the scheduler)."""
        self.scheduler.advance(0)

    # -- requests -----------------------------------------------------------------------------------

    def join(
        self,
        group_id: str = "group",
        member_id: str = "",
        *,
        protocols: tuple[JoinProtocol, ...] | None = None,
        protocol_type: str = "consumer",
        instance_id: str | None = None,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client_id: str = "client",
        require_known_member_id: bool = True,
        skip_assignment: bool = False,
    ) -> Reply[JoinGroupResult]:
        reply: Reply[JoinGroupResult] = Reply()
        request = JoinGroupRequest(
            group_id=group_id,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=protocols if protocols is not None else consumer_protocols(),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            group_instance_id=instance_id,
            client_id=client_id,
            client_host="/127.0.0.1",
            require_known_member_id=require_known_member_id,
            support_skipping_assignment=skip_assignment,
        )
        self.coordinator.join_group(request, reply)
        return reply

    def join_new(self, group_id: str = "group", **kwargs: Any) -> Reply[JoinGroupResult]:
        """The two-step join of JoinGroup v4+: get a member id, then join with it."""
        first = self.join(group_id, **kwargs)
        if kwargs.get("instance_id") is not None or not kwargs.get("require_known_member_id", True):
            return first
        assert first.value.error is ErrorCode.MEMBER_ID_REQUIRED, first.value
        return self.join(group_id, first.value.member_id, **kwargs)

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Reply[SyncGroupResult]:
        reply: Reply[SyncGroupResult] = Reply()
        request = SyncGroupRequest(
            group_id, generation, member_id, assignments or {}, instance_id, protocol_type, protocol_name
        )
        self.coordinator.sync_group(request, reply)
        return reply

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> ErrorCode:
        return self.coordinator.heartbeat(group_id, member_id, generation, instance_id)

    def commit(
        self,
        group_id: str = "group",
        offsets: dict[tuple[str, int], int] | None = None,
        *,
        member_id: str = "",
        generation: int = -1,
        instance_id: str | None = None,
        metadata: str | None = None,
        retention_ms: int = -1,
    ) -> Reply[dict[tuple[str, int], ErrorCode]]:
        reply: Reply[dict[tuple[str, int], ErrorCode]] = Reply()
        partitions = tuple(
            PartitionCommit(topic, partition, offset, leader_epoch=7, metadata=metadata)
            for (topic, partition), offset in (offsets or {("topic", 0): 42}).items()
        )
        request = OffsetCommitRequest(group_id, partitions, member_id, generation, instance_id, retention_ms)
        self.coordinator.commit_offsets(request, reply)
        return reply

    # -- whole flows --------------------------------------------------------------------------------

    def stable_group(self, size: int, group_id: str = "group", **join_kwargs: Any) -> list[JoinGroupResult]:
        """``size`` members join (two-step), the join phase completes, the leader assigns and every
        member syncs; returns the JoinGroup answers in join order."""
        replies = [self.join_new(group_id, **join_kwargs) for _ in range(size)]
        self.settle()
        results = [reply.value for reply in replies]
        self.sync_all(group_id, results)
        return results

    def sync_all(self, group_id: str, results: Sequence[JoinGroupResult]) -> dict[str, SyncGroupResult]:
        """The leader sends ``assignment-<member id>`` for everyone, then the followers sync."""
        leader = next(r for r in results if r.member_id == r.leader_id)
        assignment = {m.member_id: f"assignment-{m.member_id}".encode() for m in leader.members}
        answers = {leader.member_id: self.sync(group_id, leader.member_id, leader.generation_id, assignment)}
        for result in results:
            if result.member_id != leader.member_id:
                answers[result.member_id] = self.sync(group_id, result.member_id, result.generation_id)
        return {member_id: reply.value for member_id, reply in answers.items()}
