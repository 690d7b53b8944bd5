"""Three real broker processes replicating a topic: acks=all writes survive the loss of a broker.

Broker 1 runs the controller. The topic has replication factor 3 and min.insync.replicas=2, and a
confluent-kafka producer (acks=all, idempotent) writes continuously, in a thread, while a follower
is killed and restarted, the leader is killed and restarted, or the leader is paused past its
session; a kafka-python consumer reads through the leader's loss. The stream must keep flowing at
every stage, every value sent must be acknowledged, and afterwards every acknowledged value is in
the log exactly once and at the offset it was acknowledged at on every replica, whose logs are
byte-identical.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from tests.integration.cluster import (
    FAST_FAILOVER,
    Cluster,
    consume_values,
    log_bytes,
    read_values,
    wait_until,
)

TOPIC = "replicated"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path).start()
    try:
        yield running
    finally:
        running.stop()


def _create_topic(cluster: Cluster, replicas: list[int] | None = None) -> None:
    """RF 3; ``replicas`` pins the assignment (its first broker leads)."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    topic = NewTopic(TOPIC, -1, -1, replica_assignments={0: replicas}) if replicas else NewTopic(TOPIC, 1, 3)
    try:
        admin.create_topics([topic])
    finally:
        admin.close()


def _producer_config(cluster: Cluster) -> dict[str, object]:
    """Retries that outlast a failover: a request in flight to a paused leader is abandoned after
    ``socket.timeout.ms`` (librdkafka's client-side request timeout; its ``request.timeout.ms`` is
    only the ack timeout the broker enforces) and retried on the new leader well within
    ``message.timeout.ms``. With the defaults the request would wait out the message timeout."""
    return {
        "bootstrap.servers": cluster.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "message.timeout.ms": 60_000,
        "socket.timeout.ms": 5000,
        "retry.backoff.ms": 100,
        "request.timeout.ms": 5000,
        "topic.metadata.refresh.interval.ms": 1000,
        "linger.ms": 5,
    }


def _produce(cluster: Cluster, values: list[bytes]) -> dict[bytes, int]:
    """Send ``values`` with acks=all; returns value → acknowledged offset (only acknowledged ones)."""
    acked: dict[bytes, int] = {}
    producer = Producer(_producer_config(cluster))

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked[msg.value()] = msg.offset()

    for value in values:
        producer.produce(TOPIC, value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(40) == 0
    return acked


class ContinuousProducer:
    """confluent-kafka (acks=all, idempotent) writing without pause in a thread while a test breaks things.

    Each value is sent once; the producer's own retries carry it through a failover. ``acked`` maps
    every acknowledged value to its offset and ``failed`` lists the values whose delivery failed.
    """

    def __init__(self, cluster: Cluster, prefix: str) -> None:
        self._config = _producer_config(cluster)
        self._prefix = prefix
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.acked: dict[bytes, int] = {}
        self.failed: list[tuple[bytes, str]] = []
        self.sent = 0
        self.unflushed = -1
        self._thread = threading.Thread(target=self._run, name=f"producer-{prefix}", daemon=True)

    def __enter__(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _delivered(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            if err is None:
                self.acked[msg.value()] = msg.offset()
            else:
                self.failed.append((msg.value(), str(err)))

    def _run(self) -> None:
        producer = Producer(self._config)
        while not self._stop.is_set():
            producer.produce(TOPIC, f"{self._prefix}{self.sent}".encode(), on_delivery=self._delivered)
            self.sent += 1
            producer.poll(0.005)  # serves delivery callbacks and paces the stream (~150 values/s)
        self.unflushed = producer.flush(40)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_for_more(self, count: int, what: str, timeout_s: float = 30) -> None:
        """Block until ``count`` more values than now are acknowledged: the stream is flowing."""
        target = self.acked_count() + count
        wait_until(lambda: self.acked_count() >= target, timeout_s, f"{count} more acks {what}")

    def stop(self) -> dict[bytes, int]:
        """Stop sending, wait for every sent value's outcome; every one must have been acknowledged."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the producer did not finish flushing"
        assert self.unflushed == 0, f"{self.unflushed} values never got an outcome"
        assert not self.failed, f"deliveries failed: {self.failed[:5]}"
        assert len(self.acked) == self.sent
        return dict(self.acked)


class ContinuousReader:
    """kafka-python reading the partition from the beginning in a thread, through whoever leads it."""

    def __init__(self, cluster: Cluster) -> None:
        self._bootstrap = cluster.bootstrap
        self._stop = threading.Event()
        self.seen: dict[bytes, int] = {}
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="reader", daemon=True)

    def __enter__(self) -> ContinuousReader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        try:
            consumer = KafkaConsumer(
                bootstrap_servers=self._bootstrap,
                enable_auto_commit=False,
                request_timeout_ms=10_000,
                metadata_max_age_ms=1000,
            )
            tp = TopicPartition(TOPIC, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            try:
                while not self._stop.is_set():
                    for records in consumer.poll(timeout_ms=200).values():
                        for record in records:
                            self.seen[record.value] = record.offset
            finally:
                consumer.close()
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc

    def wait_for(self, acked: dict[bytes, int], timeout_s: float = 30) -> None:
        wait_until(
            lambda: self.error is not None or all(v in self.seen for v in acked),
            timeout_s,
            f"kafka-python to read all {len(acked)} acknowledged values",
        )
        assert self.error is None, f"the reader failed: {self.error!r}"


def _leader_dir_values(cluster: Cluster, node: int) -> list[bytes]:
    return read_values(cluster.partition_dir(node, TOPIC, 0))


def _wait_replicas_identical(cluster: Cluster, nodes: list[int], count: int) -> None:
    def same() -> bool:
        dirs = [cluster.partition_dir(n, TOPIC, 0) for n in nodes]
        if not all(d.exists() for d in dirs):
            return False
        contents = [log_bytes(d) for d in dirs]
        return len(set(contents)) == 1 and len(read_values(dirs[0])) >= count

    wait_until(same, 30, f"replicas {nodes} to hold identical logs of {count} records")


def _check_acked(cluster: Cluster, node: int, acked: dict[bytes, int]) -> None:
    values = _leader_dir_values(cluster, node)
    for value, offset in acked.items():
        assert values[offset] == value, f"acknowledged {value!r} is not at offset {offset}"
    assert len(values) == len(set(values)), "a value is in the log twice"


def test_acks_all_writes_reach_every_replica(cluster: Cluster) -> None:
    _create_topic(cluster)
    acked = _produce(cluster, [f"v{i}".encode() for i in range(500)])
    assert len(acked) == 500
    _wait_replicas_identical(cluster, [1, 2, 3], 500)
    _check_acked(cluster, 1, acked)


def test_a_killed_follower_catches_up_after_restart(cluster: Cluster) -> None:
    _create_topic(cluster, [1, 2, 3])
    follower = cluster.brokers[3]
    with ContinuousProducer(cluster, "a") as producer:
        producer.wait_for_more(100, "before the follower is killed")
        follower.stop(signal.SIGKILL)
        producer.wait_for_more(200, "while the follower is down")
        follower.start()
        producer.wait_for_more(100, "after the follower restarted")
        acked = producer.stop()
    _wait_replicas_identical(cluster, [1, 2, 3], len(acked))
    for node in (1, 2, 3):
        _check_acked(cluster, node, acked)


def test_acknowledged_writes_survive_the_loss_of_the_leader(cluster: Cluster) -> None:
    # broker 1 hosts the (single) controller: the partition is led by broker 2
    _create_topic(cluster, [2, 3, 1])
    leader = cluster.brokers[2]
    with ContinuousReader(cluster) as reader, ContinuousProducer(cluster, "a") as producer:
        producer.wait_for_more(100, "before the leader is killed")
        leader.stop(signal.SIGKILL)
        producer.wait_for_more(200, "after failing over to a new leader")
        leader.start()
        producer.wait_for_more(100, "after the old leader restarted")
        acked = producer.stop()
        reader.wait_for(acked)  # kafka-python kept reading through the failover
        assert {v: reader.seen[v] for v in acked} == acked
    _wait_replicas_identical(cluster, [1, 2, 3], len(acked))
    for node in (1, 2, 3):
        _check_acked(cluster, node, acked)
    # a fresh kafka-python consumer reads the same
    assert consume_values(cluster.bootstrap, TOPIC, len(acked)) == acked


def test_a_leader_paused_past_its_session_is_replaced_and_rejoins_as_follower(cluster: Cluster) -> None:
    _create_topic(cluster, [2, 3, 1])
    paused = cluster.brokers[2].process
    assert paused is not None
    with ContinuousProducer(cluster, "a") as producer:
        producer.wait_for_more(100, "before the leader is paused")
        paused.send_signal(signal.SIGSTOP)
        try:
            time.sleep(4)  # longer than broker.session.timeout.ms: the controller fences broker 2
            producer.wait_for_more(200, "while the old leader is paused")
        finally:
            paused.send_signal(signal.SIGCONT)
        producer.wait_for_more(100, "after the old leader resumed")
        acked = producer.stop()
    _wait_replicas_identical(cluster, [1, 2, 3], len(acked))
    for node in (1, 2, 3):
        _check_acked(cluster, node, acked)


def _isr(cluster: Cluster, topic: str) -> list[list[int]]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[2].bootstrap)
    try:
        [described] = admin.describe_topics([topic])
    finally:
        admin.close()
    partitions = sorted(described["partitions"], key=lambda p: p["partition_index"])
    return [sorted(p["isr_nodes"]) for p in partitions]


def test_a_controller_paused_past_the_session_timeout_fences_nobody_when_it_resumes(
    cluster: Cluster,
) -> None:
    """SIGSTOP of the controller (broker 1) for longer than broker.session.timeout.ms: when it
    resumes, the heartbeats queued during the pause are read after its next session check, which
    must not fence the brokers for the controller's own silence. Every ISR stays whole."""
    _create_topic(cluster)
    wait_until(lambda: _isr(cluster, TOPIC) == [[1, 2, 3]], 30, "the ISR to hold every replica")
    controller = cluster.brokers[1].process
    assert controller is not None
    controller.send_signal(signal.SIGSTOP)
    try:
        time.sleep(5)  # broker.session.timeout.ms is 3 s in FAST_FAILOVER
    finally:
        controller.send_signal(signal.SIGCONT)
    wait_until(lambda: "controller stalled" in cluster.brokers[1].output(), 30, "the stall to be noticed")
    time.sleep(2)  # several session checks and heartbeats after the resume
    output = cluster.brokers[1].output()
    assert "session expired" not in output, output[-3000:]
    assert _isr(cluster, TOPIC) == [[1, 2, 3]]


SESSION_KEYS = ("broker.session.timeout.ms", "broker.heartbeat.interval.ms")
KAFKA_SESSION_DEFAULTS = (
    *(o for o in FAST_FAILOVER if not o.startswith(SESSION_KEYS)),
    "broker.session.timeout.ms=9000",
    "broker.heartbeat.interval.ms=2000",
)
"""Kafka's default broker session (9 s) and heartbeat interval (2 s), as the dev cluster runs."""


@pytest.mark.slow
def test_writes_resume_within_seconds_after_a_leader_is_killed(tmp_path: Path) -> None:
    """SIGKILL of a partition leader closes its connection to the controller, which then ends its
    session after one heartbeat interval instead of the 9 s session timeout: acks=all writes go
    on through a new leader from the ISR in seconds, and nothing acknowledged is lost."""
    cluster = Cluster(tmp_path, overrides=KAFKA_SESSION_DEFAULTS).start()
    try:
        _create_topic(cluster, [2, 3, 1])
        leader = cluster.brokers[2].process
        assert leader is not None
        with ContinuousProducer(cluster, "k") as producer:
            producer.wait_for_more(100, "before the leader is killed")
            killed_at, acked_then = time.monotonic(), producer.acked_count()
            leader.kill()
            producer.wait_for_more(20, "after the leader was killed", timeout_s=60)
            resumed_s = time.monotonic() - killed_at
            print(
                f"acks=all writes resumed {resumed_s:.1f} s after SIGKILL of the leader ({acked_then} acked)"
            )
            acked = producer.stop()
        # the fence came from the closed connection, not from the 9 s session (typically 3.5 s
        # here against 7-9 s without it; the bound stays generous for a busy machine)
        assert "broker connection lost" in cluster.brokers[1].output()
        assert resumed_s < 9.0, f"writes resumed only after {resumed_s:.1f} s: no faster than the session"
        _wait_replicas_identical(cluster, [1, 3], len(acked))
        for node in (1, 3):
            _check_acked(cluster, node, acked)
    finally:
        cluster.stop()
