"""Consumer groups on a cluster of three real broker processes (broker 1 also the controller).

``__consumer_offsets`` has 6 partitions, replication factor 3 and min.insync.replicas=2, so every
group write the coordinator acknowledges is on at least two brokers; the coordinator of a group is
the leader of the group's partition. The data topics have 6 partitions and replication factor 3.

- Members of three clients share a topic while a producer writes: a confluent-kafka and a
  kafka-python member, then an aiokafka member joins, then the kafka-python member leaves; once with
  manual and once with auto commits. Every message is consumed exactly once across the members (see
  :mod:`tests.integration.group_members` for why that holds: everything a member was handed is
  committed before its client gives up a partition, the condition under which Kafka promises it).
- A static member (confluent-kafka, ``group.instance.id``) closes and comes back within its session:
  the group is not rebalanced (same generation, the other member keeps its partitions and is never
  called back) and the static member gets its partitions back.
- The coordinator's broker is restarted (SIGTERM, then started): the committed offsets are served
  again and a new member resumes from them.
- The coordinator's broker is killed (SIGKILL) while a member consumes and commits: another broker
  becomes the coordinator, the member carries on without losing or repeating a message, the new
  coordinator serves every commit, and a new member resumes from them. The same with a
  ``kipling consume --group`` console consumer in place of the member.

The groups whose coordinator is restarted or killed are chosen so that it is not broker 1: the
single controller must survive for leadership to move.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient

from broker.group_runtime import OFFSETS_TOPIC
from coordinator.group import partition_for
from protocol.api_keys import ApiKey
from tests.integration.cluster import FAST_FAILOVER, Cluster
from tests.integration.group_members import (
    AiokafkaMember,
    ConfluentMember,
    ConsoleMember,
    GroupMember,
    KafkaPythonMember,
    PacedProducer,
    committed_offsets,
    consumed_values,
    create_topic,
    produce,
    stop_all,
    wait_for,
)
from tests.integration.wire_client import WireClient

PARTITIONS = 6
OFFSETS_PARTITIONS = 6
OVERRIDES = (
    *FAST_FAILOVER,
    "group.initial.rebalance.delay.ms=0",
    f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
    "offsets.topic.replication.factor=3",
)
CONTROLLER = 1
TIMEOUT_S = 40


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("groups-cluster"), overrides=OVERRIDES).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(autouse=True)
def _broker_logs_on_failure(cluster: Cluster, request: pytest.FixtureRequest) -> None:
    """A failed test's report gets each broker's log tail (see tests/integration/conftest.py)."""
    request.node._kipling_brokers = list(cluster.brokers.values())


# ------------------------------------------------------------------------------------------- helpers


def _live_ports(cluster: Cluster) -> list[int]:
    return [b.port for b in cluster.brokers.values() if b.process is not None and b.process.poll() is None]


def _ask(cluster: Cluster, api_key: ApiKey, version: int, body: dict) -> object | None:  # type: ignore[type-arg]
    """Send a request to the first live broker that answers; None if none does."""
    for port in _live_ports(cluster):
        try:
            with WireClient(port, timeout_s=5) as client:
                return client.request(api_key, version, body).body
        except OSError:
            continue
    return None


def find_coordinator(cluster: Cluster, group: str) -> int | None:
    """The node id FindCoordinator names for ``group`` now (None while there is none)."""
    body = _ask(cluster, ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
    if body is None or body.error_code != 0:  # type: ignore[attr-defined]
        return None
    return int(body.node_id)  # type: ignore[attr-defined]


def wait_for_coordinator(cluster: Cluster, group: str, avoid: int | None = None) -> int:
    found: list[int] = []

    def located() -> bool:
        node = find_coordinator(cluster, group)
        if node is None or node == avoid:
            return False
        found.append(node)
        return True

    wait_for(located, TIMEOUT_S, f"a coordinator for {group} (other than {avoid})", interval_s=0.2)
    return found[-1]


def group_not_on_controller(cluster: Cluster, prefix: str) -> tuple[str, int]:
    """A group id whose coordinator is not broker 1, and that coordinator."""
    for i in range(100):
        group = f"{prefix}-{i}"
        node = wait_for_coordinator(cluster, group)
        if node != CONTROLLER:
            return group, node
    raise AssertionError("every group tried is coordinated by the controller's broker")


def offsets_partition_leader(cluster: Cluster, group: str) -> int | None:
    """The leader, per Metadata, of the partition of ``__consumer_offsets`` that holds ``group``."""
    body = _ask(cluster, ApiKey.METADATA, 1, {"topics": [{"name": OFFSETS_TOPIC}]})
    if body is None:
        return None
    [topic] = body.topics  # type: ignore[attr-defined]
    index = partition_for(group, OFFSETS_PARTITIONS)
    return next((p.leader_id for p in topic.partitions if p.partition_index == index), None)


def wait_for_full_isr(cluster: Cluster) -> None:
    """Every partition of every topic has all three replicas in sync (after a broker came back)."""

    def full() -> bool:
        body = _ask(cluster, ApiKey.METADATA, 1, {"topics": None})
        if body is None:
            return False
        return all(
            topic.error_code == 0 and len(p.isr_nodes) == cluster.size and p.leader_id >= 0
            for topic in body.topics  # type: ignore[attr-defined]
            for p in topic.partitions
        )

    wait_for(full, TIMEOUT_S, "every partition to have a full ISR", interval_s=0.25)


def describe(cluster: Cluster, group: str) -> dict:  # type: ignore[type-arg]
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        return admin.describe_groups([group])[group]  # type: ignore[no-any-return]
    finally:
        admin.close()


def wait_stable(cluster: Cluster, group: str, members: list[GroupMember], what: str) -> None:
    """Every member holds a non-empty share, the shares partition the topic, and the coordinator
    says the group is Stable with exactly these members."""

    def shared() -> bool:
        shares = [m.assigned for m in members]
        if not all(shares) or sum(map(len, shares)) != PARTITIONS:
            return False
        if frozenset().union(*shares) != frozenset(range(PARTITIONS)):
            return False
        described = describe(cluster, group)
        return described["group_state"] == "Stable" and len(described["members"]) == len(members)

    wait_for(shared, TIMEOUT_S, what, members, interval_s=0.2)


def wait_consumed(members: list[GroupMember], values: set[bytes], what: str) -> None:
    wait_for(lambda: values <= set(consumed_values(members)), TIMEOUT_S, what, members)


def assert_exactly_once(consumed: list[bytes], expected: set[bytes]) -> None:
    counts = Counter(consumed)
    repeated = sorted((v, n) for v, n in counts.items() if n > 1)
    missing = expected - set(counts)
    unexpected = set(counts) - expected
    assert not repeated, f"{len(repeated)} values consumed more than once, e.g. {repeated[:5]}"
    assert not missing, f"{len(missing)} values never consumed, e.g. {sorted(missing)[:5]}"
    assert not unexpected, f"{len(unexpected)} values consumed that were not sent: {sorted(unexpected)[:5]}"


# --------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("commit", ["manual", "auto"])
def test_members_of_three_clients_join_and_leave_and_consume_every_message_once(
    cluster: Cluster, commit: str
) -> None:
    """Every message is consumed, exactly once across the members, and the group commits them all.

    Manual: each member commits synchronously what it was handed before it asks for more, so
    before its client can give up a partition. Auto: each client commits the positions it handed
    out when its partitions are revoked (kafka-python and aiokafka before calling the revocation
    listener, librdkafka when it unassigns) and when it closes, besides every 200 ms. Either way a
    partition moves only after everything handed out from it is committed, which is the condition
    under which Kafka promises that live members never consume a record twice; no member dies here.
    """
    topic = group = f"shared-{commit}"
    auto = commit == "auto"
    create_topic(cluster.bootstrap, topic, PARTITIONS, 3)
    producer = PacedProducer(cluster.bootstrap, topic, PARTITIONS, "m")
    a = ConfluentMember("a-confluent", cluster.bootstrap, topic, group, auto_commit=auto)
    b = KafkaPythonMember("b-kafka-python", cluster.bootstrap, topic, group, auto_commit=auto)
    c = AiokafkaMember("c-aiokafka", cluster.bootstrap, topic, group, auto_commit=auto)
    everyone = [a, b, c]
    try:
        # a joins alone first and so leads the group throughout: a kafka-python leader may redo a
        # join when its metadata of the new topic arrives late (see KafkaPythonMember)
        a.start()
        wait_for(lambda: len(a.assigned) == PARTITIONS, TIMEOUT_S, "a's assignment", [a])
        b.start()
        wait_stable(cluster, group, [a, b], "a and b to share the topic")
        producer.start()
        producer.wait_for_more(150, "with two members")
        wait_consumed([a, b], producer.acked_values(), "a and b to consume what was written")

        c.start()
        wait_stable(cluster, group, [a, b, c], "c to join a and b")
        producer.wait_for_more(150, "with three members")
        wait_consumed(everyone, producer.acked_values(), "three members to consume what was written")
        assert c.values(), "c got partitions but consumed nothing"

        b.stop()  # a dynamic member's close leaves the group
        wait_stable(cluster, group, [a, c], "a and c to take over b's partitions")
        producer.wait_for_more(150, "after b left")
        acked = producer.stop()
        ends = producer.end_offsets()
        wait_consumed(everyone, set(acked), "every acknowledged message to be consumed")
        wait_for(
            lambda: committed_offsets(cluster.bootstrap, group, topic) == ends,
            TIMEOUT_S,
            "the group to commit everything",
            [a, c],
            interval_s=0.25,
        )
    finally:
        stop_all(everyone)
        producer.stop(check=False)
    assert_exactly_once(consumed_values(everyone), set(acked))
    assert all(m.values() for m in everyone), "a member consumed nothing"
    assert not any(kind == "lost" for m in everyone for kind, _ in m.events), "a member lost partitions"


def test_a_static_member_that_comes_back_within_its_session_does_not_rebalance_the_group(
    cluster: Cluster,
) -> None:
    """librdkafka does not send LeaveGroup when a static member closes: the coordinator keeps the
    member until its session (30 s) expires. The same ``group.instance.id`` rejoining takes over
    that membership (a new member id) with the generation and assignment it had."""
    topic, group = "static", "static-group"
    create_topic(cluster.bootstrap, topic, PARTITIONS, 3)
    static_config = {"group.instance.id": "static-1", "session.timeout.ms": 30_000}
    other = KafkaPythonMember("dynamic", cluster.bootstrap, topic, group)
    static = ConfluentMember("static", cluster.bootstrap, topic, group, config=static_config)
    again = ConfluentMember("static-again", cluster.bootstrap, topic, group, config=static_config)
    everyone = [other, static, again]
    try:
        other.start()
        wait_for(
            lambda: len(other.assigned) == PARTITIONS, TIMEOUT_S, "the first member's assignment", [other]
        )
        static.start()
        wait_stable(cluster, group, [other, static], "the static member to join")
        generation, events = other.generation, other.event_count()
        kept, handed_back = other.assigned, static.assigned
        before = {m["client_id"]: m for m in describe(cluster, group)["members"]}
        assert before["static"]["group_instance_id"] == "static-1"

        static.stop()  # no LeaveGroup: the member stays in the group
        after_close = describe(cluster, group)
        assert after_close["group_state"] == "Stable"
        assert {m["member_id"] for m in after_close["members"]} == {m["member_id"] for m in before.values()}

        again.start()
        wait_for(lambda: again.assigned == handed_back, TIMEOUT_S, "the static member's partitions", [again])
        values = [f"static-{i}".encode() for i in range(60)]
        produce(cluster.bootstrap, topic, values, PARTITIONS)
        wait_consumed([other, again], set(values), "both members to consume")
        # three heartbeat intervals of the other member: a rebalance would have reached it
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert describe(cluster, group)["group_state"] == "Stable"
            time.sleep(0.2)
        assert other.generation == generation
        assert other.event_count() == events, other.events
        assert other.assigned == kept
        now = {m["group_instance_id"]: m for m in describe(cluster, group)["members"]}
        assert set(now) == {None, "static-1"}
        assert now[None]["member_id"] == before["dynamic"]["member_id"]
        # a new member id for the instance; like Kafka, the member keeps the client id it joined with
        assert now["static-1"]["member_id"] != before["static"]["member_id"]
    finally:
        stop_all(everyone)
    assert_exactly_once(consumed_values([other, again]), set(values))


def test_committed_offsets_survive_a_restart_of_the_coordinators_broker(cluster: Cluster) -> None:
    topic = "coordinator-restart"
    create_topic(cluster.bootstrap, topic, PARTITIONS, 3)
    group, coordinator = group_not_on_controller(cluster, "restarted")
    first = [f"first-{i}".encode() for i in range(120)]
    ends = produce(cluster.bootstrap, topic, first, PARTITIONS)
    member = KafkaPythonMember("before", cluster.bootstrap, topic, group)
    try:
        member.start()
        wait_consumed([member], set(first), "the member to consume")
        wait_for(
            lambda: committed_offsets(cluster.bootstrap, group, topic) == ends,
            TIMEOUT_S,
            "the commits",
            [member],
            interval_s=0.25,
        )
    finally:
        member.stop()

    cluster.brokers[coordinator].restart(signal.SIGTERM)
    wait_for(
        lambda: committed_offsets(cluster.bootstrap, group, topic) == ends,
        TIMEOUT_S,
        "the committed offsets after the restart",
        interval_s=0.25,
    )
    second = [f"second-{i}".encode() for i in range(120)]
    produce(cluster.bootstrap, topic, second, PARTITIONS)
    resumed = ConfluentMember("after", cluster.bootstrap, topic, group)
    try:
        resumed.start()
        wait_consumed([resumed], set(second), "the new member to consume")
    finally:
        resumed.stop()
    assert_exactly_once(resumed.values(), set(second))
    wait_for_full_isr(cluster)


def test_a_new_coordinator_serves_the_commits_after_the_old_one_is_killed(cluster: Cluster) -> None:
    topic = "coordinator-kill"
    create_topic(cluster.bootstrap, topic, PARTITIONS, 3)
    group, coordinator = group_not_on_controller(cluster, "killed")
    victim = cluster.brokers[coordinator]
    producer = PacedProducer(cluster.bootstrap, topic, PARTITIONS, "k")
    member = KafkaPythonMember("survivor", cluster.bootstrap, topic, group)
    resumed = AiokafkaMember("resumed", cluster.bootstrap, topic, group)
    try:
        member.start()
        wait_for(lambda: len(member.assigned) == PARTITIONS, TIMEOUT_S, "the assignment", [member])
        producer.start()
        producer.wait_for_more(150, "before the coordinator is killed")
        wait_consumed([member], producer.acked_values(), "the member to consume before the kill")

        assert offsets_partition_leader(cluster, group) == coordinator
        victim.stop(signal.SIGKILL)
        new_coordinator = wait_for_coordinator(cluster, group, avoid=coordinator)
        assert offsets_partition_leader(cluster, group) == new_coordinator
        producer.wait_for_more(150, "after the coordinator was killed")
        acked = producer.stop()
        ends = producer.end_offsets()
        wait_consumed([member], set(acked), "the member to consume everything")
        wait_for(
            lambda: committed_offsets(cluster.bootstrap, group, topic) == ends,
            TIMEOUT_S,
            f"broker {new_coordinator} to serve every commit",
            [member],
            interval_s=0.25,
        )
        member.stop()
        assert_exactly_once(member.values(), set(acked))

        later = [f"later-{i}".encode() for i in range(60)]
        produce(cluster.bootstrap, topic, later, PARTITIONS)
        resumed.start()
        wait_consumed([resumed], set(later), "a new member to resume from the commits")
        resumed.stop()
        assert_exactly_once(resumed.values(), set(later))
    finally:
        stop_all([member, resumed])
        producer.stop(check=False)
        if victim.process is None:
            victim.start()
    wait_for_full_isr(cluster)


def test_a_console_consumer_group_carries_on_through_a_coordinator_kill(cluster: Cluster) -> None:
    """``kipling consume --group``: its heartbeats and commits find the new coordinator, its fetches
    follow the partitions' new leaders, and it prints each record once; a kafka-python member of the
    same group resumes after what it committed."""
    topic = "console-coordinator-kill"
    create_topic(cluster.bootstrap, topic, PARTITIONS, 3)
    group, coordinator = group_not_on_controller(cluster, "console-killed")
    victim = cluster.brokers[coordinator]
    producer = PacedProducer(cluster.bootstrap, topic, PARTITIONS, "console")
    console = ConsoleMember(
        cluster.bootstrap, topic, group,
        "--consumer-property", "heartbeat.interval.ms=500", "--consumer-property", "session.timeout.ms=10000",
        "--consumer-property", "auto.commit.interval.ms=200",
    )  # fmt: skip
    resumed = KafkaPythonMember("after-console", cluster.bootstrap, topic, group)
    try:
        producer.start()
        producer.wait_for_more(150, "before the coordinator is killed")
        wait_for(lambda: producer.acked_values() <= set(console.values()), TIMEOUT_S, "the console to print")
        assert offsets_partition_leader(cluster, group) == coordinator
        victim.stop(signal.SIGKILL)
        wait_for_coordinator(cluster, group, avoid=coordinator)
        producer.wait_for_more(150, "after the coordinator was killed")
        acked = producer.stop()
        ends = producer.end_offsets()
        wait_for(lambda: set(acked) <= set(console.values()), TIMEOUT_S, "the console to print everything")
        wait_for(
            lambda: committed_offsets(cluster.bootstrap, group, topic) == ends,
            TIMEOUT_S,
            "the console's commits to reach the new coordinator",
            interval_s=0.25,
        )
        assert console.interrupt() == 130, console.stderr
        assert_exactly_once(console.values(), set(acked))

        later = [f"after-console-{i}".encode() for i in range(60)]
        produce(cluster.bootstrap, topic, later, PARTITIONS)
        resumed.start()
        wait_consumed([resumed], set(later), "kafka-python to resume after the console's commits")
        resumed.stop()
        assert_exactly_once(resumed.values(), set(later))
    finally:
        console.interrupt()
        stop_all([resumed])
        producer.stop(check=False)
        if victim.process is None:
            victim.start()
    wait_for_full_isr(cluster)
