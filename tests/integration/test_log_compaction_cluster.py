"""Log compaction in a three-broker cluster: the leader's broker compacts the log it leads, and the
follower processes compact the copies they follow (each owner installs its own cleaned segments),
their rounds shown by their brokers' cleaner gauges; after the leader stops, the broker that takes
the lead goes on compacting the copy handed to it; and a replica that lost its files replicates the
compacted log (offsets with gaps) from scratch. Every consumer sees each key's latest value at the
offset it was written at."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from broker.metrics.log_cleaner import CLEANER_RECOPY, DEAD_THREAD_COUNT, MAX_CLEAN_TIME
from protocol.records import iter_all_records
from tests.integration.cluster import FAST_FAILOVER, Cluster, log_bytes, wait_until
from tests.integration.test_log_compaction import KEYS, Latest, latest_of, read_all, value

pytestmark = pytest.mark.timeout(300)

TOPIC = "compacted-replicated"
UPDATES = 400
TIMEOUT_S = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, overrides=(*FAST_FAILOVER, "log.cleaner.backoff.ms=100")).start()
    try:
        yield running
    finally:
        running.stop()


def leader(cluster: Cluster) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return int(metadata.partitions[0].leader)


def stored(cluster: Cluster, node: int) -> Latest:
    """key -> (offset, value) of the latest record per key in a replica's files (read again when a
    cleaner replaced a segment while they were read)."""
    for _ in range(20):
        try:
            data = log_bytes(cluster.partition_dir(node, TOPIC, 0))
        except FileNotFoundError:
            continue
        return latest_of([(r.offset, r.key, r.value) for r in iter_all_records(data)])
    raise AssertionError(f"the files of broker {node} kept changing while read")


def size(cluster: Cluster, node: int) -> int:
    total = 0
    for path in cluster.partition_dir(node, TOPIC, 0).glob("*.log"):
        with contextlib.suppress(FileNotFoundError):  # replaced by the cleaner meanwhile
            total += path.stat().st_size
    return total


def test_leaders_compact_and_replicas_follow_a_compacted_log(cluster: Cluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    try:
        configs = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
        admin.create_topics(
            [NewTopic(TOPIC, -1, -1, replica_assignments={0: [1, 2, 3]}, topic_configs=configs)]
        )
    finally:
        admin.close()
    wait_until(lambda: leader(cluster) == 1, TIMEOUT_S, "broker 1 to lead")
    written: Latest = {}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        written[msg.key()] = (msg.offset(), msg.value())  # type: ignore[attr-defined]

    for i in range(UPDATES):
        producer.produce(
            TOPIC, key=b"k%d" % (i % KEYS), value=value(i % KEYS, i), partition=0, on_delivery=delivered
        )
        producer.flush(10)
    assert producer.flush(10) == 0 and len(written) == KEYS
    produced = UPDATES * len(value(0, 0))

    # the leader's broker compacts; what consumers read is each key's latest value at its offset
    wait_until(lambda: size(cluster, 1) < produced / 4, TIMEOUT_S, "the leader's log to shrink")
    assert latest_of(read_all(cluster.bootstrap, TOPIC)) == written
    for node in (2, 3):  # the follower processes compact their own copies
        wait_until(lambda node=node: size(cluster, node) < produced / 4, TIMEOUT_S, f"follower {node}'s log")
        assert stored(cluster, node) == written
    for node in (2, 3):  # no log they lead is compacted: every round in their gauges is a follower's
        broker = cluster.brokers[node]
        wait_until(lambda b=broker: b.metric(MAX_CLEAN_TIME) > 0, TIMEOUT_S, f"broker {node}'s clean time")
        assert 0 < broker.metric(CLEANER_RECOPY) < 100
        assert broker.metric(DEAD_THREAD_COUNT) == 0

    # the leader stops: the broker taking the lead compacts the copy it now leads
    cluster.brokers[1].stop()
    wait_until(lambda: leader(cluster) in (2, 3), TIMEOUT_S, "a new leader")
    new_leader = leader(cluster)
    wait_until(lambda: size(cluster, new_leader) < produced / 4, TIMEOUT_S, "the new leader's log to shrink")
    assert latest_of(read_all(cluster.bootstrap, TOPIC)) == written

    # a replica that lost its files (a replaced disk) replicates the compacted log from offset 0
    shutil.rmtree(cluster.partition_dir(1, TOPIC, 0))
    cluster.brokers[1].start()
    wait_until(
        lambda: cluster.partition_dir(1, TOPIC, 0).exists() and stored(cluster, 1) == written,
        TIMEOUT_S,
        "broker 1 to replicate the compacted log",
    )
    assert size(cluster, 1) < produced / 2
    for i in range(KEYS):  # and it goes on following new writes
        producer.produce(TOPIC, key=b"k%d" % i, value=b"after", partition=0, on_delivery=delivered)
    assert producer.flush(10) == 0
    wait_until(lambda: stored(cluster, 1) == written, TIMEOUT_S, "broker 1 to follow new writes")
    assert latest_of(read_all(cluster.bootstrap, TOPIC)) == written
