"""Three real broker processes replicating a topic: acks=all writes survive the loss of a broker.

Broker 1 runs the controller. The topic has replication factor 3 and min.insync.replicas=2, and a
confluent-kafka producer (acks=all, idempotent) writes while brokers are killed and restarted.
Afterwards every acknowledged value is in the log exactly once and at the offset it was
acknowledged at, and the replicas' logs are byte-identical.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from tests.integration.cluster import Cluster, log_bytes, read_values, wait_until

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


def _produce(cluster: Cluster, values: list[bytes]) -> dict[bytes, int]:
    """Send ``values`` with acks=all; returns value → acknowledged offset (only acknowledged ones)."""
    acked: dict[bytes, int] = {}
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 30_000,
            "retry.backoff.ms": 100,
            "request.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked[msg.value()] = msg.offset()

    for value in values:
        producer.produce(TOPIC, value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(40) == 0
    return acked


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


def _consume_all(cluster: Cluster, count: int) -> dict[bytes, int]:
    """Read the partition from the beginning with kafka-python through whoever leads it now."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=15_000
    )
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    seen: dict[bytes, int] = {}
    try:
        for message in consumer:
            seen[message.value] = message.offset
            if len(seen) >= count:
                break
    finally:
        consumer.close()
    return seen


def test_acks_all_writes_reach_every_replica(cluster: Cluster) -> None:
    _create_topic(cluster)
    acked = _produce(cluster, [f"v{i}".encode() for i in range(500)])
    assert len(acked) == 500
    _wait_replicas_identical(cluster, [1, 2, 3], 500)
    _check_acked(cluster, 1, acked)


def test_a_killed_follower_catches_up_after_restart(cluster: Cluster) -> None:
    _create_topic(cluster, [1, 2, 3])
    acked = _produce(cluster, [f"a{i}".encode() for i in range(200)])
    follower = 3
    cluster.brokers[follower].stop(signal.SIGKILL)
    acked |= _produce(cluster, [f"b{i}".encode() for i in range(200)])
    assert len(acked) == 400
    cluster.brokers[follower].start()
    _wait_replicas_identical(cluster, [1, 2, 3], 400)
    for node in (1, 2, 3):
        _check_acked(cluster, node, acked)


def test_acknowledged_writes_survive_the_loss_of_the_leader(cluster: Cluster) -> None:
    # broker 1 hosts the (single) controller: the partition is led by broker 2
    _create_topic(cluster, [2, 3, 1])
    acked = _produce(cluster, [f"a{i}".encode() for i in range(200)])
    _wait_replicas_identical(cluster, [1, 2, 3], 200)
    leader = 2
    cluster.brokers[leader].stop(signal.SIGKILL)
    acked |= _produce(cluster, [f"b{i}".encode() for i in range(200)])
    assert len(acked) == 400
    consumed = _consume_all(cluster, 400)  # kafka-python reads through the new leader
    assert {v: consumed.get(v) for v in acked} == acked
    cluster.brokers[leader].start()
    _wait_replicas_identical(cluster, [1, 2, 3], 400)
    for node in (1, 2, 3):
        _check_acked(cluster, node, acked)


def test_a_leader_paused_past_its_session_is_replaced_and_rejoins_as_follower(cluster: Cluster) -> None:
    _create_topic(cluster, [2, 3, 1])
    acked = _produce(cluster, [f"a{i}".encode() for i in range(200)])
    paused = cluster.brokers[2].process
    assert paused is not None
    paused.send_signal(signal.SIGSTOP)
    try:
        time.sleep(4)  # longer than broker.session.timeout.ms: the controller fences broker 2
        acked |= _produce(cluster, [f"b{i}".encode() for i in range(200)])
    finally:
        paused.send_signal(signal.SIGCONT)
    assert len(acked) == 400
    acked |= _produce(cluster, [f"c{i}".encode() for i in range(100)])
    _wait_replicas_identical(cluster, [1, 2, 3], 500)
    for node in (1, 2, 3):
        _check_acked(cluster, node, acked)
