"""Random lives of a consumer-protocol group (KIP-848): whatever its members do, no partition is
ever consumed by two of them, and once they behave every subscribed partition is consumed once.

A hypothesis state machine drives dynamic and static consumers with different subscriptions (by
names and by regular expressions, with a topic they match appearing) and server assignors through
joins, heartbeats (full ones and steady ones), lost answers (the member never hears of its new
epoch or of a revocation), leaves, temporary leaves of a static member, crashes (fenced when their
session expires), pauses long enough to fence everyone, new partitions and coordinator moves.
Checked after every step:

* the partitions the consumers consume are pairwise disjoint, and each consumes only what the
  coordinator records as its own (assigned or pending revocation), at any epoch;
* the coordinator itself never records a partition as owned by two members;
* a brand-new coordinator loading the log holds the same group as the live one.

A ``stabilize`` step (and the end of every run) lets sessions of crashed members expire while the
others heartbeat every 5 s, then lets the others heartbeat until nothing changes: the group must be
Stable, every partition of every subscribed topic consumed by exactly one member subscribed to it.
"""

from __future__ import annotations

import itertools
import re
import uuid
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from coordinator.group import GroupCoordinator
from coordinator.group.consumer.group import ConsumerGroup, ConsumerGroupState
from protocol.error_codes import ErrorCode
from server_common.purgatory import DelayedOperationPurgatory, FakeScheduler
from tests.coordinator.group.consumer_helpers import Consumer, ConsumerHarness
from tests.coordinator.group.helpers import SchedulerClock

SESSION_MS = 45_000
HEARTBEAT_MS = 5_000
GROUP = "group"
NAMES = ("c0", "c1", "c2", "c3", "s0")
SUBSCRIPTIONS: tuple[tuple[str, ...] | str, ...] = (("a",), ("a", "b"), ("b",), "[a-c]", "b|c")
"""Topic names, or a regular expression (a string)."""


@dataclass
class Life:
    consumer: Consumer
    joined: bool = False


class ConsumerGroupLives(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = ConsumerHarness()
        self.h.topics.create("a", 4)
        self.h.topics.create("b", 3)
        self.generation = itertools.count()
        self.lives = {name: Life(self._consumer(name, ("a",), None)) for name in NAMES}

    def _consumer(self, name: str, topics: tuple[str, ...] | str, assignor: str | None) -> Consumer:
        instance = "instance-s0" if name.startswith("s") else None
        member_id = f"{name}-{next(self.generation)}" if instance else name
        if isinstance(topics, str):
            return Consumer(self.h, member_id, (), GROUP, instance, assignor, regex=topics)
        return Consumer(self.h, member_id, topics, GROUP, instance, assignor)

    def _subscribed(self, c: Consumer) -> set[str]:
        names = set(c.topics)
        if c.regex is not None:
            names |= {t for t in self.h.topics.by_name if re.fullmatch(c.regex, t)}
        return names

    @property
    def group(self) -> ConsumerGroup | None:
        return self.h.coordinator.consumer_group(GROUP)

    # -- rules ----------------------------------------------------------------------------------------

    @rule(
        name=st.sampled_from(NAMES),
        topics=st.sampled_from(SUBSCRIPTIONS),
        assignor=st.sampled_from([None, "uniform", "range"]),
    )
    def join(self, name: str, topics: tuple[str, ...] | str, assignor: str | None) -> None:
        life = self.lives[name]
        if life.joined:
            return
        life.consumer = self._consumer(name, topics, assignor)
        result = life.consumer.heartbeat()
        if result.error is ErrorCode.NONE:
            life.joined = True
        else:
            assert result.error is ErrorCode.UNRELEASED_INSTANCE_ID, result

    @rule(name=st.sampled_from(NAMES), full=st.booleans())
    def heartbeat(self, name: str, full: bool) -> None:
        life = self.lives[name]
        if not life.joined:
            return
        result = life.consumer.heartbeat(full=full)
        self._after(life, result.error)

    @rule(name=st.sampled_from(NAMES))
    def lost_answer(self, name: str) -> None:
        """The heartbeat reaches the coordinator; its answer never reaches the member."""
        life = self.lives[name]
        if life.joined and life.consumer.epoch > 0:
            self.h.cg_heartbeat(life.consumer.request(full=True))

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        life = self.lives[name]
        if not life.joined:
            return
        epoch = -2 if life.consumer.instance_id is not None else -1
        life.consumer.leave(epoch)
        life.joined = False

    @rule(name=st.sampled_from(NAMES))
    def crash(self, name: str) -> None:
        """Killed: it consumes nothing more, its member stays until its session expires."""
        life = self.lives[name]
        life.consumer.owned = {}
        life.joined = False

    @rule()
    def tick(self) -> None:
        self.h.advance(HEARTBEAT_MS)
        for life in self.lives.values():
            if life.joined:
                self._after(life, life.consumer.heartbeat(full=False).error)

    @rule()
    def long_pause(self) -> None:
        """Nobody heartbeats for a session: every member notices and stops consuming."""
        for life in self.lives.values():
            life.consumer.owned = {}
            life.consumer.epoch = 0
        self.h.advance(SESSION_MS + 1)
        for life in self.lives.values():
            if life.joined and life.consumer.heartbeat().error is not ErrorCode.NONE:
                life.joined = False

    @rule(topic=st.sampled_from(["a", "b"]))
    def add_partition(self, topic: str) -> None:
        state = self.h.topics.by_name[topic]
        if len(state.partitions) < 8:
            self.h.topics.add_partitions(topic, len(state.partitions) + 1)

    @rule()
    def create_topic_c(self) -> None:
        if "c" not in self.h.topics.by_name:
            self.h.topics.create("c", 2)

    @rule()
    def move_coordinator(self) -> None:
        self.h.reload()

    @precondition(lambda self: any(life.joined for life in self.lives.values()))
    @rule()
    def stabilize(self) -> None:
        self._stabilize()

    def teardown(self) -> None:
        if any(life.joined for life in self.lives.values()):
            self._stabilize()

    def _after(self, life: Life, error: ErrorCode) -> None:
        if error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            error = life.consumer.heartbeat().error  # rejoin at once, as a consumer does
            if error not in (ErrorCode.NONE, ErrorCode.UNRELEASED_INSTANCE_ID):
                life.joined = False
                return
        if error is ErrorCode.UNRELEASED_INSTANCE_ID and life.consumer.instance_id is not None:
            # A fenced static member rejoins (epoch 0) under its own member id, but Kafka's
            # throwIfInstanceIdIsUnreleased refuses it until the member holding the instance id
            # leaves or its session expires: the consumer, owning nothing, keeps asking.
            assert life.consumer.epoch == 0 and not life.consumer.owned, life.consumer
            return
        if error is not ErrorCode.NONE:
            raise AssertionError(f"unexpected {error.name} for {life.consumer.member_id}")

    def _stabilize(self) -> None:
        for _ in range(SESSION_MS // HEARTBEAT_MS + 1):
            self.tick()
        for _ in range(12):
            for life in self.lives.values():
                if life.joined:
                    self._after(life, life.consumer.heartbeat().error)
        joined = [life.consumer for life in self.lives.values() if life.joined]
        group = self.group
        assert group is not None
        assert group.state is ConsumerGroupState.STABLE, group
        assert {c.member_id for c in joined} == set(group.members)
        consumed: dict[tuple[uuid.UUID, int], str] = {}
        for c in joined:
            for tp in c.partitions:
                assert tp not in consumed, (tp, c.member_id, consumed[tp])
                consumed[tp] = c.member_id
        by_id = {t.topic_id: t for t in self.h.topics.all()}
        subscribed = {name for c in joined for name in self._subscribed(c)}
        expected = {
            (by_id[self.h.topics.by_name[name].topic_id].topic_id, p)
            for name in subscribed
            for p in self.h.topics.by_name[name].partitions
        }
        assert set(consumed) == expected
        for (topic_id, _), member_id in consumed.items():
            member = next(c for c in joined if c.member_id == member_id)
            assert by_id[topic_id].name in self._subscribed(member)

    # -- invariants -----------------------------------------------------------------------------------

    @invariant()
    def nothing_is_consumed_twice(self) -> None:
        seen: dict[tuple[uuid.UUID, int], str] = {}
        group = self.group
        for life in self.lives.values():
            c = life.consumer
            for tp in c.partitions:
                assert tp not in seen, f"{tp} consumed by {seen[tp]} and {c.member_id}"
                seen[tp] = c.member_id
            if c.partitions:
                member = None if group is None else group.member(c.member_id)
                assert member is not None, c.member_id
                owned = {
                    (t, p)
                    for assignment in (member.assigned_partitions, member.partitions_pending_revocation)
                    for t, parts in assignment.items()
                    for p in parts
                }
                assert c.partitions <= owned, (c.member_id, c.partitions, owned)

    @invariant()
    def the_coordinator_never_gives_a_partition_twice(self) -> None:
        group = self.group
        if group is None:
            return
        owner: dict[tuple[uuid.UUID, int], str] = {}
        for member in group.members.values():
            for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
                for t, parts in assignment.items():
                    for p in parts:
                        assert (t, p) not in owner, ((t, p), owner[(t, p)], member.member_id)
                        owner[(t, p)] = member.member_id
                        assert group.current_partition_epoch(t, p) == member.member_epoch

    @invariant()
    def the_log_rebuilds_the_group(self) -> None:
        scheduler = FakeScheduler(self.h.scheduler.time())
        fresh = GroupCoordinator(
            self.h.config,
            self.h.log,
            SchedulerClock(scheduler),
            DelayedOperationPurgatory("Heartbeat", scheduler),
            DelayedOperationPurgatory("Rebalance", scheduler),
            topics=self.h.topics,
        )
        fresh.load_partition(0, self.h.log.records(0))
        live, loaded = self.group, fresh.consumer_group(GROUP)
        if live is None or live.group_epoch == 0:
            assert loaded is None or loaded.is_empty
            return
        assert loaded is not None
        assert _view(loaded) == _view(live)


def _view(group: ConsumerGroup) -> tuple[object, ...]:
    return (
        group.group_epoch,
        group.assignment_epoch,
        dict(group.members),
        dict(group.static_members),
        dict(group.target_assignment),
        dict(group.subscription_metadata),
    )


TestConsumerGroupLives = ConsumerGroupLives.TestCase
TestConsumerGroupLives.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
