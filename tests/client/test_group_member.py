"""client.group_member.GroupMember against a real kipling broker process.

What is covered, and why a real broker: a group member is a conversation with the group coordinator
(JoinGroup, SyncGroup, Heartbeat, OffsetCommit/OffsetFetch, LeaveGroup), and its correctness is in
the sequencing — who rejoins when, which generation a commit carries, what the coordinator decides
when a member goes silent — so each test drives real members through one scenario and checks the
outcome (assignments, generations, committed offsets, group state) rather than any log line:

* config validation (the only test without a broker);
* a lone member: every partition, leadership, commit / committed, offsets kept across members and
  stored exactly as kafka-python's admin client reads them back;
* a second member joining: the first one is told to rejoin (once), both land in one generation and
  the ``range`` and ``roundrobin`` assignments are exactly Kafka's;
* a commit while the group is preparing a rebalance, with the generation still current, is accepted;
* a member leaving (LeaveGroup) hands its partitions to the other at once;
* a member that stops heartbeating is dropped after the rebalance timeout, is fenced on commit
  (CommitFailedError) and can join again;
* static membership: a restarted static member gets its generation and partitions back without a
  rebalance, while a dynamic member's close leaves the group;
* fatal errors (INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, FENCED_INSTANCE_ID for a static
  member replaced by another process) raise GroupError;
* interop with kafka-python's consumer, each side as the group leader;
* a member slower than its session timeout (but within its rebalance timeout) to rejoin keeps its
  membership, because heartbeats go on after REBALANCE_IN_PROGRESS until it rejoins; and close()
  after a cancelled join leaves at once instead of waiting behind the parked JoinGroup.

Blocking calls (kafka-python's admin client, stopping a kafka-python thread) run in a thread so
the members' heartbeat tasks keep running; every wait has a timeout so a bug fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from kafka import KafkaAdminClient

from client.admin import AdminClient
from client.errors import KafkaResponseError
from client.fetch_session import TopicPartition
from client.group_member import CommitFailedError, GroupError, GroupMember, GroupMemberConfig
from client.tasks import cancel_and_wait
from protocol.error_codes import ErrorCode
from tests.client import waiting
from tests.integration.broker_process import BrokerProcess
from tests.integration.group_members import KafkaPythonMember, committed_offsets
from tools.commands.consume_group import ToolClusterAccess
from tools.commands.topics import ClusterConnections, bootstrap_servers

PARTITIONS = 6
TIMINGS: dict[str, Any] = {
    "heartbeat_interval_ms": 200,
    "session_timeout_ms": 6000,
    "retry_backoff_ms": 50,
    "rebalance_timeout_ms": 10_000,
}
"""Small timings for every member (the broker's group.min.session.timeout.ms is 6000)."""
WAIT_S = 30.0
"""The longest any single step of a test may take (a bound for a bug, not a budget: steps take well
under a second on a quiet machine)."""

T = TypeVar("T")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("group-member"),
        overrides=["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=3"],
    ).start()
    yield process
    process.stop()


# ------------------------------------------------------------------------------------------- helpers


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def within(awaitable: Awaitable[T], what: str, timeout_s: float = WAIT_S) -> T:
    return await waiting.within(awaitable, what, timeout_s)


async def eventually(predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    await waiting.eventually(predicate, what, timeout_s, 0.05)


class Member:
    """A GroupMember plus what its ``on_rejoin_needed`` callback reported."""

    def __init__(self, access: ToolClusterAccess, config: GroupMemberConfig) -> None:
        self.rejoins_needed = 0
        self.rejoin_needed = asyncio.Event()
        self.group = GroupMember(access, config, on_rejoin_needed=self._on_rejoin_needed)

    def _on_rejoin_needed(self) -> None:
        self.rejoins_needed += 1
        self.rejoin_needed.set()

    async def join(self, topics: list[str]) -> dict[str, list[int]]:
        self.rejoin_needed.clear()
        return await within(self.group.join(topics), f"{self.group.config.group_id} join")

    async def wait_rejoin_needed(self, timeout_s: float = WAIT_S) -> None:
        await within(self.rejoin_needed.wait(), "on_rejoin_needed", timeout_s)

    def partitions(self, topic: str) -> set[int]:
        return set(self.group.generation.assignment.get(topic, []))

    async def keep_joined(self, topics: list[str]) -> None:
        """Rejoin whenever the generation ends (what a consumer's poll loop does), until cancelled."""
        while True:
            await self.rejoin_needed.wait()
            await self.join(topics)


class GroupEnv:
    """One test's cluster connections, members and background tasks, all closed by :meth:`close`."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.cluster = ClusterConnections(bootstrap_servers(broker.bootstrap), client_id="test")
        self.access = ToolClusterAccess(self.cluster)
        self.members: list[Member] = []
        self.tasks: list[asyncio.Task[Any]] = []

    async def create_topic(self, name: str, partitions: int = PARTITIONS) -> str:
        """Create ``name`` and wait until metadata shows all its partitions (the leader assigns from it)."""
        await AdminClient(await self.cluster.any_connection()).create_topic(name, partitions, 1)

        async def ready() -> None:
            while (await self.access.partition_counts([name])).get(name) != partitions:
                await asyncio.sleep(0.05)

        await within(ready(), f"topic {name} in metadata")
        return name

    def member(self, group: str, **settings: Any) -> Member:
        member = Member(self.access, GroupMemberConfig(group_id=group, **{**TIMINGS, **settings}))
        self.members.append(member)
        return member

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.create_task(coro)
        self.tasks.append(task)
        return task

    async def close(self) -> None:
        for task in self.tasks:
            await within(cancel_and_wait(task), f"task {task.get_name()} to end")
        try:
            for member in self.members:  # closing twice is harmless: the second has nothing to leave
                with contextlib.suppress(Exception):
                    await within(member.group.close(), "close")
        finally:
            await self.cluster.close()


@contextlib.asynccontextmanager
async def group_env(broker: BrokerProcess) -> AsyncIterator[GroupEnv]:
    env = GroupEnv(broker)
    try:
        yield env
    finally:
        await env.close()


def describe_group(broker: BrokerProcess, group: str) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
    try:
        return admin.describe_groups([group])[group]  # type: ignore[no-any-return]
    finally:
        admin.close()


async def two_members_joined(env: GroupEnv, group: str, topic: str, **settings: Any) -> tuple[Member, Member]:
    """a joins alone, then b joins; a is told to rejoin and does; both hold a share of ``topic``."""
    a, b = env.member(group, **settings), env.member(group, **settings)
    await a.join([topic])
    joining = env.spawn(b.join([topic]))
    await a.wait_rejoin_needed()
    await a.join([topic])
    await within(joining, "b's join")
    assert a.group.generation.generation_id == b.group.generation.generation_id
    return a, b


# --------------------------------------------------------------------------------------------- tests


def test_config_validation() -> None:
    with pytest.raises(ValueError, match=r"group\.id"):
        GroupMemberConfig(group_id="")
    with pytest.raises(ValueError, match="sticky"):
        GroupMemberConfig(group_id="g", assignors=("range", "sticky"))
    with pytest.raises(ValueError, match=r"partition\.assignment\.strategy"):
        GroupMemberConfig(group_id="g", assignors=())
    with pytest.raises(ValueError, match=r"heartbeat\.interval\.ms"):
        GroupMemberConfig(group_id="g", heartbeat_interval_ms=6000, session_timeout_ms=6000)
    with pytest.raises(ValueError, match=r"heartbeat\.interval\.ms"):
        GroupMemberConfig(group_id="g", heartbeat_interval_ms=7000, session_timeout_ms=6000)
    GroupMemberConfig(group_id="g", heartbeat_interval_ms=5999, session_timeout_ms=6000)


async def test_lone_member_owns_everything_and_commits(broker: BrokerProcess) -> None:
    group = unique("gm-lone")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-lone"))
        a = env.member(group)
        assert await a.join([topic]) == {topic: list(range(PARTITIONS))}
        assert a.group.generation.generation_id >= 1
        assert a.group.generation.is_leader
        assert a.group.generation.protocol_name == "range"
        assert a.group.rejoin_reason is None

        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        assert await within(a.group.committed(tps), "committed") == dict.fromkeys(tps)

        offsets = {TopicPartition(topic, 0): 5, TopicPartition(topic, 3): 42}
        await within(a.group.commit(offsets), "commit")
        expected = {tp: offsets.get(tp) for tp in tps}
        assert await within(a.group.committed(tps), "committed") == expected
        await a.group.close()

        # A fresh member of the group reads them back, before and after it joins.
        b = env.member(group)
        assert await within(b.group.committed(tps), "committed") == expected
        assert await b.join([topic]) == {topic: list(range(PARTITIONS))}
        assert await within(b.group.committed(tps), "committed") == expected
        stored = await asyncio.to_thread(committed_offsets, broker.bootstrap, group)
        assert stored == {0: 5, 3: 42}
        assert a.rejoins_needed == 0 and b.rejoins_needed == 0


@pytest.mark.parametrize(
    ("assignors", "protocol", "first", "second"),
    [
        (("range", "roundrobin"), "range", {0, 1, 2}, {3, 4, 5}),
        (("roundrobin",), "roundrobin", {0, 2, 4}, {1, 3, 5}),
    ],
    ids=["range", "roundrobin"],
)
async def test_second_member_triggers_rebalance(
    broker: BrokerProcess, assignors: tuple[str, ...], protocol: str, first: set[int], second: set[int]
) -> None:
    group = unique(f"gm-two-{protocol}")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-two"))
        a, b = env.member(group, assignors=assignors), env.member(group, assignors=assignors)
        await a.join([topic])
        first_generation = a.group.generation.generation_id

        joining = env.spawn(b.join([topic]))
        await a.wait_rejoin_needed()
        assert a.group.rejoin_reason is not None and "REBALANCE_IN_PROGRESS" in a.group.rejoin_reason
        assert not joining.done(), "b's join completed before a rejoined"
        await a.join([topic])
        await within(joining, "b's join")

        generation = a.group.generation.generation_id
        assert generation == b.group.generation.generation_id > first_generation
        assert a.group.generation.protocol_name == b.group.generation.protocol_name == protocol
        assert a.group.generation.leader_id == b.group.generation.leader_id
        assert a.group.generation.is_leader != b.group.generation.is_leader
        # Kafka's member order for dynamic members: by member id.
        low, high = sorted((a, b), key=lambda m: m.group.generation.member_id)
        assert low.partitions(topic) == first
        assert high.partitions(topic) == second
        assert a.rejoins_needed == 1 and b.rejoins_needed == 0
        assert a.group.rejoin_reason is None and b.group.rejoin_reason is None


async def test_commit_while_preparing_rebalance_is_accepted(broker: BrokerProcess) -> None:
    group = unique("gm-commit-prep")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-commit-prep"))
        a, b = env.member(group), env.member(group)
        await a.join([topic])
        generation = a.group.generation.generation_id

        joining = env.spawn(b.join([topic]))
        await a.wait_rejoin_needed()
        assert a.group.generation.generation_id == generation  # not reset by REBALANCE_IN_PROGRESS
        tp = TopicPartition(topic, 1)
        await within(a.group.commit({tp: 7}), "commit during the rebalance")
        assert await within(a.group.committed([tp]), "committed") == {tp: 7}
        assert not joining.done()

        await a.join([topic])
        await within(joining, "b's join")
        assert a.partitions(topic) | b.partitions(topic) == set(range(PARTITIONS))
        assert await within(b.group.committed([tp]), "committed") == {tp: 7}


async def test_leaving_member_hands_partitions_over(broker: BrokerProcess) -> None:
    group = unique("gm-leave")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-leave"))
        a, b = await two_members_joined(env, group, topic)
        generation = a.group.generation.generation_id
        assert len(a.partitions(topic)) == 3

        await within(b.group.close(), "b's close")
        await a.wait_rejoin_needed(timeout_s=3.0)  # well before b's 6 s session timeout
        assert a.group.rejoin_reason is not None and "REBALANCE_IN_PROGRESS" in a.group.rejoin_reason
        assert await a.join([topic]) == {topic: list(range(PARTITIONS))}
        assert a.group.generation.generation_id > generation
        assert a.group.generation.is_leader


async def test_silent_member_is_fenced_and_can_rejoin(broker: BrokerProcess) -> None:
    group = unique("gm-fence")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-fence"))
        a = env.member(group, rebalance_timeout_ms=1000)
        b = env.member(group, rebalance_timeout_ms=1000)
        await a.join([topic])
        old_generation = a.group.generation.generation_id
        await a.group._stop_heartbeats()  # a hangs: no heartbeats, no rejoin, no LeaveGroup

        started = time.monotonic()
        assert await b.join([topic]) == {topic: list(range(PARTITIONS))}
        elapsed = time.monotonic() - started
        assert 0.8 <= elapsed < 4.5, f"b joined after {elapsed:.1f}s, not after a's 1 s rebalance timeout"
        assert b.group.generation.generation_id > old_generation

        with pytest.raises(CommitFailedError) as failed:
            await within(a.group.commit({TopicPartition(topic, 0): 3}), "a's fenced commit")
        assert failed.value.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION)
        assert a.group.rejoin_reason is not None
        assert a.rejoins_needed == 1
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        assert await within(b.group.committed(tps), "committed") == dict.fromkeys(tps)

        joining = env.spawn(a.join([topic]))
        await b.wait_rejoin_needed()
        await b.join([topic])
        await within(joining, "a's rejoin")
        assert a.group.generation.generation_id == b.group.generation.generation_id
        assert a.partitions(topic) | b.partitions(topic) == set(range(PARTITIONS))
        assert len(a.partitions(topic)) == len(b.partitions(topic)) == 3
        await within(a.group.commit({TopicPartition(topic, p): 3 for p in a.partitions(topic)}), "commit")


async def test_static_member_restart_keeps_generation(broker: BrokerProcess) -> None:
    group = unique("gm-static")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-static"))
        first = env.member(group, group_instance_id="i-1")
        assert await first.join([topic]) == {topic: list(range(PARTITIONS))}
        generation = first.group.generation.generation_id
        old_member_id = first.group.generation.member_id
        await within(first.group.close(), "static close")

        described = await asyncio.to_thread(describe_group, broker, group)
        assert described["group_state"] == "Stable"
        assert [m["group_instance_id"] for m in described["members"]] == ["i-1"]

        restarted = env.member(group, group_instance_id="i-1")
        assert await restarted.join([topic]) == {topic: list(range(PARTITIONS))}
        assert restarted.group.generation.generation_id == generation
        assert restarted.group.generation.member_id != old_member_id
        await asyncio.sleep(1.0)  # a few heartbeats: the generation holds
        assert restarted.group.rejoin_reason is None and restarted.rejoins_needed == 0
        described = await asyncio.to_thread(describe_group, broker, group)
        assert [m["member_id"] for m in described["members"]] == [restarted.group.generation.member_id]


async def test_dynamic_member_close_leaves_group(broker: BrokerProcess) -> None:
    group = unique("gm-dynamic")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-dynamic"))
        a = env.member(group)
        await a.join([topic])
        described = await asyncio.to_thread(describe_group, broker, group)
        assert described["group_state"] == "Stable" and len(described["members"]) == 1
        await within(a.group.close(), "close")
        described = await asyncio.to_thread(describe_group, broker, group)
        assert described["group_state"] == "Empty"
        assert described["members"] == []


async def test_inconsistent_group_protocol_is_fatal(broker: BrokerProcess) -> None:
    group = unique("gm-inconsistent")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-inconsistent"))
        a = env.member(group, assignors=("range",))
        await a.join([topic])
        newcomer = env.member(group, assignors=("roundrobin",))
        with pytest.raises(GroupError) as refused:
            await newcomer.join([topic])
        assert refused.value.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        await asyncio.sleep(0.6)  # a few heartbeats: the refused join did not disturb the group
        assert a.rejoins_needed == 0 and a.group.rejoin_reason is None
        assert a.partitions(topic) == set(range(PARTITIONS))


async def test_invalid_session_timeout_is_fatal(broker: BrokerProcess) -> None:
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-session"))
        member = env.member(unique("gm-session"), session_timeout_ms=1000, heartbeat_interval_ms=100)
        with pytest.raises(GroupError) as refused:
            await member.join([topic])
        assert refused.value.code is ErrorCode.INVALID_SESSION_TIMEOUT


async def test_fenced_static_member_is_fatal(broker: BrokerProcess) -> None:
    group = unique("gm-fenced")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-fenced"))
        a = env.member(group, group_instance_id="i-1")
        await a.join([topic])
        generation = a.group.generation.generation_id

        # A second process with the same group.instance.id takes the place over (no rebalance)...
        b = env.member(group, group_instance_id="i-1")
        assert await b.join([topic]) == {topic: list(range(PARTITIONS))}
        assert b.group.generation.generation_id == generation

        # ...and the first one's next heartbeat finds it fenced: it is told, and may not rejoin.
        await a.wait_rejoin_needed()
        assert a.group.rejoin_reason is not None and "FENCED_INSTANCE_ID" in a.group.rejoin_reason
        with pytest.raises(GroupError) as fenced:
            await a.join([topic])
        assert fenced.value.code is ErrorCode.FENCED_INSTANCE_ID
        with pytest.raises(KafkaResponseError) as refused:
            await within(a.group.commit({TopicPartition(topic, 0): 1}), "fenced commit")
        assert refused.value.code is ErrorCode.FENCED_INSTANCE_ID
        assert not isinstance(refused.value, CommitFailedError)

        await asyncio.sleep(0.6)  # a few of b's heartbeats: b was not disturbed
        assert b.rejoins_needed == 0 and b.group.rejoin_reason is None
        tp = TopicPartition(topic, 2)
        await within(b.group.commit({tp: 9}), "b's commit")
        assert await within(b.group.committed([tp]), "committed") == {tp: 9}


async def test_slow_rejoin_within_rebalance_timeout_keeps_membership(broker: BrokerProcess) -> None:
    group = unique("gm-slow")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-slow"))
        a, b = env.member(group), env.member(group)  # session 6 s, rebalance timeout 10 s
        await a.join([topic])
        member_id = a.group.generation.member_id
        joining = env.spawn(b.join([topic]))
        await a.wait_rejoin_needed()
        await asyncio.sleep(7.5)  # a revokes and commits slowly: longer than its session timeout
        # The rebalance is still waiting for a (up to the rebalance timeout); a is still a member.
        assert not joining.done(), f"b's join completed without a: {b.group.generation}"
        await a.join([topic])
        await within(joining, "b's join")
        assert a.group.generation.member_id == member_id
        assert a.group.generation.generation_id == b.group.generation.generation_id
        assert a.partitions(topic) | b.partitions(topic) == set(range(PARTITIONS))


async def test_close_after_cancelled_join_leaves_promptly(broker: BrokerProcess) -> None:
    group = unique("gm-cancel")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-cancel"))
        a, b = env.member(group), env.member(group)
        await a.join([topic])
        joining = env.spawn(b.join([topic]))
        await a.wait_rejoin_needed()  # a does not rejoin yet: b's JoinGroup stays parked
        await eventually(lambda: bool(b.group.generation.member_id), "b's member id")
        await asyncio.sleep(0.3)
        joining.cancel()  # e.g. Ctrl-C in the console consumer during a rebalance
        await asyncio.gather(joining, return_exceptions=True)

        started = time.monotonic()
        await within(b.group.close(), "b's close")
        elapsed = time.monotonic() - started
        assert elapsed < 2.0, f"close() took {elapsed:.1f}s"
        assert await a.join([topic]) == {topic: list(range(PARTITIONS))}


def _shares_cover(member: Member, other: KafkaPythonMember, topic: str) -> bool:
    other.check()
    mine, theirs = member.partitions(topic), set(other.assigned)
    return (
        member.group.rejoin_reason is None
        and bool(mine)
        and bool(theirs)
        and not mine & theirs
        and mine | theirs == set(range(PARTITIONS))
    )


@pytest.mark.parametrize(
    "group_member_first", [True, False], ids=["group-member-leads", "kafka-python-leads"]
)
async def test_interop_with_kafka_python(broker: BrokerProcess, group_member_first: bool) -> None:
    group = unique("gm-interop")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-interop"))
        member = env.member(group)
        other = KafkaPythonMember(
            "kafka-python",
            broker.bootstrap,
            topic,
            group,
            config={"heartbeat_interval_ms": 200, "session_timeout_ms": 6000},
        )
        try:
            if group_member_first:
                assert await member.join([topic]) == {topic: list(range(PARTITIONS))}
                env.spawn(member.keep_joined([topic]))
                other.start()
            else:
                other.start()
                await eventually(
                    lambda: other.check() or other.assigned == frozenset(range(PARTITIONS)),
                    "kafka-python to own the topic",
                    timeout_s=15,
                )
                await member.join([topic])
                env.spawn(member.keep_joined([topic]))
            await eventually(lambda: _shares_cover(member, other, topic), "disjoint shares", timeout_s=15)
            assert member.group.generation.is_leader is group_member_first
            assert member.group.generation.protocol_name == "range"
            assert len(member.partitions(topic)) == len(other.assigned) == 3
            if other.generation is not None:
                assert other.generation == member.group.generation.generation_id
        finally:
            await asyncio.to_thread(other.stop)


async def test_a_member_outside_a_generation_never_sends_a_commit(broker: BrokerProcess) -> None:
    """Before its first join and after it closed, a commit fails locally: an Empty group would take
    it (generation -1) and roll back what the partitions' owners committed."""
    group = unique("gm-outside")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-outside"))
        tp = TopicPartition(topic, 0)
        a = env.member(group)
        with pytest.raises(CommitFailedError):
            await a.group.commit({tp: 3})
        await a.join([topic])
        await within(a.group.commit({tp: 4}), "a's commit")
        await a.group.close()
        with pytest.raises(CommitFailedError):
            await a.group.commit({tp: 99})
        assert await within(env.member(group).group.committed([tp]), "committed") == {tp: 4}


async def test_the_leader_rejoins_when_its_topic_gets_more_partitions(broker: BrokerProcess) -> None:
    group = unique("gm-grow")
    async with group_env(broker) as env:
        topic = await env.create_topic(unique("gm-grow"), 2)
        a, b = await two_members_joined(env, group, topic)
        leader, other = (a, b) if a.group.generation.is_leader else (b, a)
        assert not await within(leader.group.partition_counts_changed(), "check")
        assert not await within(other.group.partition_counts_changed(), "check")  # only the leader looks
        before = leader.rejoins_needed
        await asyncio.to_thread(_add_partitions, broker, topic, 4)
        assert await within(leader.group.partition_counts_changed(), "check")
        assert leader.rejoins_needed == before + 1
        joining = env.spawn(other.keep_joined([topic]))
        await leader.join([topic])
        generation = leader.group.generation.generation_id
        await eventually(
            lambda: other.group.generation.generation_id == generation and bool(other.partitions(topic)),
            "the other member to hold its share of the new generation",
        )
        assert leader.partitions(topic) | other.partitions(topic) == {0, 1, 2, 3}
        joining.cancel()


def _add_partitions(broker: BrokerProcess, topic: str, total: int) -> None:
    from kafka.admin import NewPartitions

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
    try:
        admin.create_partitions({topic: NewPartitions(total)})
    finally:
        admin.close()
