"""KIP-392 on a 3-node cluster with racks: consumers fetch from the replica in their rack.

Brokers 1, 2, 3 are in racks rack-1, rack-2, rack-3 and run
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``. Clients use a
listener of their own (CLIENT; replication stays on PLAINTEXT), so the brokers' per-listener request
counters count client fetches only.

* confluent-kafka with ``client.rack=rack-2`` reads a partition led by broker 1: the leader names
  broker 2 as preferred read replica, and broker 2 serves the records (its CLIENT fetch counter
  grows, broker 3's does not move, broker 1 answers only a few).
* With broker 2's follower process stopped (SIGSTOP), records produced with acks=1 become committed
  at the leader once broker 2 leaves the ISR, but not on broker 2: the consumer, still fetching from
  broker 2, gets none of them. Once the follower process resumes and catches up, it gets them all.
* kcat with ``-X client.rack=rack-3`` reads everything from broker 3.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from server_common.config.definitions import RACK_AWARE_REPLICA_SELECTOR
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.client_helpers import consume_kcat
from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until

pytestmark = [pytest.mark.timeout(240)]

TIMEOUT_S = 30
TOPIC = "closest-replica"
CLIENT_FETCHES = {"request": "Fetch", "listener": "CLIENT"}


def _with_client_listener(process: BrokerProcess, node: int) -> None:
    """Add a CLIENT listener and the broker's rack to one broker's overrides."""
    client_port = free_port()
    overrides = []
    for override in process.overrides:
        if override.startswith("listeners="):
            override += f",CLIENT://127.0.0.1:{client_port}"
        overrides.append(override)
    overrides += [
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"broker.rack=rack-{node}",
        f"replica.selector.class={RACK_AWARE_REPLICA_SELECTOR}",
        "offsets.topic.num.partitions=1",
    ]
    process.overrides = overrides
    process.client_port = client_port  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    built = Cluster(tmp_path_factory.mktemp("closest-replica"), overrides=FAST_FAILOVER)
    for node, process in built.brokers.items():
        _with_client_listener(process, node)
    built.start()
    try:
        yield built
    finally:
        built.stop()


def client_bootstrap(cluster: Cluster) -> str:
    return ",".join(f"127.0.0.1:{p.client_port}" for p in cluster.brokers.values())  # type: ignore[attr-defined]


def client_fetches(cluster: Cluster, node: int) -> float:
    return cluster.brokers[node].metric("kafka_network_requestmetrics_requests_total", **CLIENT_FETCHES)


def follower_process_pid(broker_pid: int) -> int:
    """The follower process (``python -m follower``) a broker started (num.replica.fetchers=1)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == broker_pid and b"follower" in cmdline:
            return int(entry.name)
    raise AssertionError(f"no follower process of broker pid {broker_pid}")


def isr(admin: AdminClient) -> list[int]:
    metadata = admin.list_topics(TOPIC, timeout=10)
    return sorted(metadata.topics[TOPIC].partitions[0].isrs)


def produce(bootstrap: str, values: list[bytes], acks: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    errors: list[object] = []
    for value in values:
        producer.produce(
            TOPIC, value, partition=0, on_delivery=lambda err, _: errors.append(err) if err else None
        )
    assert producer.flush(TIMEOUT_S) == 0 and not errors, errors


def poll_values(consumer: Consumer, count: int, timeout_s: float) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        values.append(message.value())
    return values


def test_consumers_read_from_the_replica_in_their_rack_up_to_its_high_watermark(cluster: Cluster) -> None:
    bootstrap = client_bootstrap(cluster)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]])])
    futures[TOPIC].result(TIMEOUT_S)
    wait_until(lambda: isr(admin) == [1, 2, 3], TIMEOUT_S, "all replicas in the ISR")
    first = [b"committed-%d" % i for i in range(200)]
    produce(bootstrap, first, acks="all")

    before = {node: client_fetches(cluster, node) for node in (1, 2, 3)}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "closest-replica",
            "enable.auto.commit": False,
            "client.rack": "rack-2",
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        assert poll_values(consumer, len(first), TIMEOUT_S) == first
        served = {node: client_fetches(cluster, node) - before[node] for node in (1, 2, 3)}
        assert served[2] >= 1, served  # broker 2 served the consumer ...
        assert served[3] == 0, served  # ... broker 3, in another rack, did not
        assert served[1] <= 3, served  # the leader only named the preferred replica

        # broker 2's follower process stops replicating: what the leader commits without it (after
        # broker 2 leaves the ISR) is past broker 2's high watermark, and never reaches the consumer
        follower = follower_process_pid(cluster.brokers[2].pid)  # type: ignore[arg-type]
        os.kill(follower, signal.SIGSTOP)
        try:
            second = [b"past-follower-hw-%d" % i for i in range(50)]
            produce(bootstrap, second, acks="1")
            wait_until(lambda: isr(admin) == [1, 3], TIMEOUT_S, "broker 2 out of the ISR")
            fetches_while_stopped = client_fetches(cluster, 2)
            assert poll_values(consumer, 1, 4.0) == []
            assert client_fetches(cluster, 2) > fetches_while_stopped  # it kept asking broker 2
        finally:
            os.kill(follower, signal.SIGCONT)
        assert poll_values(consumer, len(second), TIMEOUT_S) == second
    finally:
        consumer.close()

    before_kcat = {node: client_fetches(cluster, node) for node in (1, 2, 3)}
    records = consume_kcat(
        bootstrap, TOPIC, len(first) + len(second), partition=0, extra=["-X", "client.rack=rack-3"]
    )
    assert [r.value for r in records] == first + second
    assert client_fetches(cluster, 3) > before_kcat[3]
