"""KIP-848 consumer groups (``group.protocol=consumer``) on one real broker, through librdkafka.

The broker hands its members a 500 ms heartbeat interval and a 6 s session (bounds lowered so the
test does not wait for Kafka's 5 s and 45 s): every reconciliation step is a heartbeat, and a
killed member is fenced once its session is over.

- Three confluent-kafka consumers share a six-partition topic while a producer keeps writing; each
  ends up with two partitions. One closes (it leaves with epoch -1) and the other two take its
  partitions over; every record is consumed exactly once, as each member commits what it was
  handed before it asks for more and librdkafka revokes partitions only inside that next call.
  A commit can race the heartbeat that moves its member to a new epoch and answer
  STALE_MEMBER_EPOCH, as Kafka 4.0 does: the member retries it, as an application must (the member
  keeps its epoch while it revokes, so a retry never commits a partition it no longer owns).
- A member running in its own process is SIGKILLed: after its session the others take its
  partitions and resume from its last commits, so nothing is lost and only what it had not
  committed yet is consumed twice.
- The group is a consumer group in ListGroups and ConsumerGroupDescribe shows its members.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.group_members import (
    POLL_S,
    ConfluentMember,
    GroupMember,
    PacedProducer,
    create_topic,
    stop_all,
    wait_for,
)

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6
OVERRIDES = (
    f"num.partitions={PARTITIONS}",
    "offsets.topic.num.partitions=3",
    "group.consumer.min.heartbeat.interval.ms=100",
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.session.timeout.ms=2000",
    "group.consumer.session.timeout.ms=6000",
)
TIMEOUT_S = 60


def _options(bootstrap: str, group: str, name: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 2000,
        "retry.backoff.ms": 100,
    }


class ConsumerProtocolMember(GroupMember):
    """librdkafka with ``group.protocol=consumer``: no session or heartbeat settings (the broker
    decides them), manual synchronous commits after each batch."""

    client = "confluent-kafka (consumer protocol)"

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({**_options(self.bootstrap, self.group, self.name), **self.config})
        try:
            consumer.subscribe(
                [self.topic],
                on_assign=lambda _c, parts: self._event("assign", (p.partition for p in parts)),
                on_revoke=lambda _c, parts: self._event("revoke", (p.partition for p in parts)),
                on_lost=lambda _c, parts: self._event("lost", (p.partition for p in parts)),
            )
            while not self.stopping:
                taken: list[tuple[int, int, bytes]] = [
                    (m.partition(), m.offset(), m.value())  # type: ignore[misc]  # set on records
                    for m in consumer.consume(num_messages=500, timeout=POLL_S)
                    if m.error() is None
                ]
                self._took(taken)
                if taken:
                    ends: dict[int, int] = {}
                    for partition, offset, _ in taken:
                        ends[partition] = max(ends.get(partition, 0), offset + 1)
                    offsets = [TopicPartition(self.topic, p, o) for p, o in ends.items()]
                    _commit(consumer, offsets)
                    self.commits += 1
        finally:
            consumer.close()

    def _event(self, kind: str, partitions: Any) -> None:
        # librdkafka's incremental assignment under KIP-848: assign and revoke carry deltas.
        parts = frozenset(partitions)
        with self._lock:
            self.events.append((kind, parts))
            self.assigned = self.assigned | parts if kind == "assign" else self.assigned - parts


def _commit(consumer: Any, offsets: list[Any], attempts: int = 50) -> None:
    """Commit synchronously, again while the member's epoch is stale (it hears of its new epoch on
    librdkafka's own thread, from the heartbeat in flight)."""
    from confluent_kafka import KafkaError, KafkaException

    for attempt in range(attempts):
        try:
            results = consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or attempt == attempts - 1:
                raise
            time.sleep(0.1)
            continue
        failed = [r for r in results if r.error is not None]
        if failed:
            raise AssertionError(f"commit of {failed} failed")
        return


_CHILD = textwrap.dedent(
    """
    import sys
    import time
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    options = dict(arg.split("=", 1) for arg in sys.argv[3:])
    options["enable.auto.commit"] = False
    consumer = Consumer(options)
    topic = sys.argv[1]

    def announce(kind, parts):
        print(kind, ",".join(str(p.partition) for p in parts), flush=True)

    consumer.subscribe(
        [topic],
        on_assign=lambda c, p: announce("assign", p),
        on_revoke=lambda c, p: announce("revoke", p),
    )
    while True:
        messages = [m for m in consumer.consume(num_messages=500, timeout=0.1) if m.error() is None]
        for m in messages:
            print("record", m.partition(), m.offset(), m.value().decode(), flush=True)
        if messages:
            ends = {}
            for m in messages:
                ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
            offsets = [TopicPartition(topic, p, o) for p, o in ends.items()]
            while True:
                try:
                    consumer.commit(offsets=offsets, asynchronous=False)
                    break
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                        raise
                    time.sleep(0.1)
            print("committed", flush=True)
    """
)


class ChildMember:
    """A consumer-protocol member in a process of its own, printing what it consumes."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        options = [
            f"{k}={v}" for k, v in _options(bootstrap, group, name).items() if k != "enable.auto.commit"
        ]
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, topic, name, *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.values: list[bytes] = []
        self.committed_values: list[bytes] = []
        self.assigned: set[int] = set()
        self._pending: list[bytes] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            kind, _, rest = raw.decode().rstrip("\n").partition(" ")
            with self._lock:
                if kind == "record":
                    value = rest.split(" ", 2)[2].encode()
                    self.values.append(value)
                    self._pending.append(value)
                elif kind == "committed":
                    self.committed_values += self._pending
                    self._pending = []
                elif kind == "assign":
                    self.assigned |= {int(p) for p in rest.split(",") if p}
                elif kind == "revoke":
                    self.assigned -= {int(p) for p in rest.split(",") if p}

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._reader.join(5)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("kip848"), overrides=list(OVERRIDES)).start()
    try:
        yield process
    finally:
        process.stop()


def _members(broker: BrokerProcess, topic: str, group: str, count: int) -> list[ConsumerProtocolMember]:
    return [
        ConsumerProtocolMember(f"m{i}", broker.bootstrap, topic, group).start()  # type: ignore[misc]
        for i in range(count)
    ]


def _split_evenly(members: Sequence[GroupMember], total: int = PARTITIONS) -> bool:
    assigned = [m.assigned for m in members]
    union = frozenset().union(*assigned)
    share = total // len(members)
    return len(union) == total and sum(map(len, assigned)) == total and all(len(a) == share for a in assigned)


def test_members_share_a_topic_and_hand_over_exactly_once(broker: BrokerProcess) -> None:
    topic, group = "kip848-share", "kip848-share-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = PacedProducer(broker.bootstrap, topic, PARTITIONS, "v", rate=200).start()
    members = _members(broker, topic, group, 3)
    try:
        wait_for(lambda: _split_evenly(members), TIMEOUT_S, "three members with two partitions each", members)
        producer.wait_for_more(200, "while the group is stable")
        leaving, staying = members[2], members[:2]
        leaving.stop()
        wait_for(lambda: _split_evenly(staying), TIMEOUT_S, "two members with three partitions each", staying)
        producer.wait_for_more(200, "after the hand-over")
        acked = producer.stop()
        wait_for(
            lambda: set(acked) <= {v for m in members for v in m.values()},
            TIMEOUT_S,
            "every acknowledged value consumed",
            staying,
        )
    finally:
        producer.stop(check=False)
        stop_all(members)
    counts = Counter(v for m in members for v in m.values())
    twice = [v for v, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} values consumed twice, e.g. {twice[:5]}"
    assert set(counts) == set(acked)
    assert all(m.commits > 0 for m in members)


def test_a_killed_member_is_fenced_and_its_partitions_move_on(broker: BrokerProcess) -> None:
    topic, group = "kip848-kill", "kip848-kill-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = PacedProducer(broker.bootstrap, topic, PARTITIONS, "k", rate=200).start()
    child = ChildMember(broker.bootstrap, topic, group, "doomed")
    members = _members(broker, topic, group, 2)
    try:
        wait_for(
            lambda: len(child.assigned) == 2 and all(len(m.assigned) == 2 for m in members),
            TIMEOUT_S,
            "the child and two members with two partitions each",
            members,
        )
        wait_for(
            lambda: len(child.committed_values) > 50, TIMEOUT_S, "the child to consume and commit", members
        )
        child.kill()
        wait_for(
            lambda: _split_evenly(members), TIMEOUT_S, "the survivors to take the child's partitions", members
        )
        producer.wait_for_more(200, "after the child's partitions moved")
        acked = producer.stop()
        wait_for(
            lambda: set(acked) <= {v for m in members for v in m.values()} | set(child.values),
            TIMEOUT_S,
            "every acknowledged value consumed",
            members,
        )
    finally:
        producer.stop(check=False)
        if child.process.poll() is None:
            child.kill()
        stop_all(members)
    survivors = Counter(v for m in members for v in m.values())
    assert not [v for v, n in survivors.items() if n > 1], "the survivors consumed a value twice"
    twice = set(survivors) & set(child.values)
    assert not twice & set(child.committed_values), "a value the child committed was consumed again"
    assert set(survivors) | set(child.values) >= set(acked)


def test_listed_and_described_as_a_consumer_group(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    topic, group = "kip848-describe", "kip848-describe-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = _members(broker, topic, group, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        wait_for(lambda: _split_evenly(members), TIMEOUT_S, "two members with three partitions each", members)
        listed = admin.list_consumer_groups(request_timeout=15).result(timeout=30)
        kinds = {g.group_id: g.type for g in listed.valid}
        assert kinds[group] == ConsumerGroupType.CONSUMER
        described = admin.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert sorted(m.client_id for m in described.members) == ["m0", "m1"]
        partitions = sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions)
        assert partitions == list(range(PARTITIONS))
    finally:
        stop_all(members)


def test_a_regex_subscription_picks_up_new_topics(broker: BrokerProcess) -> None:
    """librdkafka sends a ``^``-prefixed subscription as SubscribedTopicRegex; the coordinator
    resolves it, and again (within its 10 s refresh) when a matching topic appears."""
    from confluent_kafka import Consumer

    create_topic(broker.bootstrap, "kip848-re-1", 2)
    create_topic(broker.bootstrap, "kip848-other", 2)
    consumer = Consumer(_options(broker.bootstrap, "kip848-regex-group", "regex"))
    assigned: set[tuple[str, int]] = set()
    lock = threading.Lock()

    def on_assign(_c: Any, parts: Any) -> None:
        with lock:
            assigned.update((p.topic, p.partition) for p in parts)

    def poll_until(wanted: set[tuple[str, int]], what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            consumer.consume(num_messages=10, timeout=0.2)
            with lock:
                if assigned == wanted:
                    return
                seen = set(assigned)
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {sorted(seen)}"

    try:
        consumer.subscribe(["^kip848-re-.*"], on_assign=on_assign)
        poll_until({("kip848-re-1", 0), ("kip848-re-1", 1)}, "the matching topic's partitions")
        create_topic(broker.bootstrap, "kip848-re-2", 1)
        poll_until(
            {("kip848-re-1", 0), ("kip848-re-1", 1), ("kip848-re-2", 0)}, "the new matching topic's partition"
        )
    finally:
        consumer.close()


@pytest.mark.parametrize("first", ["consumer", "classic"])
def test_a_classic_and_a_consumer_protocol_member_share_a_consumer_group(
    broker: BrokerProcess, first: str
) -> None:
    """A ``group.protocol=classic`` and a ``group.protocol=consumer`` librdkafka consumer share a
    group (Kafka 4.0's online migration, default ``bidirectional`` policy). When the KIP-848 member
    comes first, the classic one becomes a classic-protocol member of the consumer group (the
    server-side assignor decides, SyncGroup hands it its partitions); when the classic one comes
    first, the KIP-848 member's heartbeat upgrades the classic group into a consumer group keeping
    it. Both consume; when the KIP-848 member leaves, the group is downgraded to a classic group,
    the classic member rejoins it and takes every partition. Each acknowledged record is consumed
    exactly once."""
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def group_type() -> Any:
        listed = admin.list_consumer_groups(request_timeout=15).result(timeout=30)
        return {g.group_id: g.type for g in listed.valid}.get(group)

    topic, group = f"kip848-mixed-{first}", f"kip848-mixed-{first}-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = PacedProducer(broker.bootstrap, topic, PARTITIONS, "v", rate=200).start()
    modern = ConsumerProtocolMember("modern", broker.bootstrap, topic, group)
    classic = ConfluentMember("classic", broker.bootstrap, topic, group)
    members: list[GroupMember] = [modern, classic]
    leading, joining = (modern, classic) if first == "consumer" else (classic, modern)
    leading.start()
    try:
        wait_for(lambda: len(leading.assigned) == PARTITIONS, TIMEOUT_S, "the first member alone", [leading])
        if first == "classic":
            producer.wait_for_more(100, "while the classic group consumes")
            assert group_type() == ConsumerGroupType.CLASSIC
        joining.start()
        wait_for(lambda: _split_evenly(members), TIMEOUT_S, "three partitions each", members)
        producer.wait_for_more(200, "while both members consume")
        assert group_type() == ConsumerGroupType.CONSUMER
        modern.stop()
        wait_for(
            lambda: len(classic.assigned) == PARTITIONS, TIMEOUT_S, "the classic member alone", [classic]
        )
        wait_for(lambda: group_type() == ConsumerGroupType.CLASSIC, TIMEOUT_S, "a classic group", [classic])
        producer.wait_for_more(200, "after the KIP-848 member left")
        acked = producer.stop()
        wait_for(
            lambda: set(acked) <= {v for m in members for v in m.values()},
            TIMEOUT_S,
            "every acknowledged value consumed",
            [classic],
        )
    finally:
        producer.stop(check=False)
        stop_all(members)
    counts = Counter(v for m in members for v in m.values())
    twice = [v for v, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} values consumed twice, e.g. {twice[:5]}"
    assert set(counts) == set(acked)
    assert modern.values() and classic.values()
