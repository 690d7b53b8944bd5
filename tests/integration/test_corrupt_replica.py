"""A replica whose segment was damaged while its broker was stopped (issue 15, fault 2), on three
real brokers: the damage is not looked for at a clean start (as in Kafka), the replica rejoins the
ISR and is made leader again; the first Fetch that meets the corrupt batch takes the replica
offline (KAFKA_STORAGE_ERROR, never UNKNOWN_SERVER_ERROR), leadership moves to a healthy ISR member,
a consumer reading from offset 0 gets every acknowledged record, and the damaged replica repairs
itself (truncated to its last valid batch, re-fetched from the new leader) and returns to the ISR
with a log byte-identical to the others'.
"""

from __future__ import annotations

import os
import signal
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from storage.segment import BatchPosition, segment_file_name, walk_batches
from tests.integration.cluster import FAST_FAILOVER, Cluster, consume_values, log_bytes, wait_until

pytestmark = pytest.mark.slow

TOPIC = "damaged"
RECORDS = 3000
FETCH_BYTES = 1024
"""The consumer's max.partition.fetch.bytes: below every victim batch's size, so some Fetch of the
sequential read is bound to look at the victim's header (a batch larger than the fetch window is
never passed over unread)."""
LAST_OFFSET_DELTA_AT = 23


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, overrides=FAST_FAILOVER).start()
    try:
        yield running
    finally:
        running.stop()


def _admin(cluster: Cluster, node: int) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.brokers[node].bootstrap, request_timeout_ms=10_000)


def _state(cluster: Cluster, node: int = 1) -> tuple[int, list[int]]:
    """(leader, sorted ISR) of partition 0 as broker ``node`` sees it."""
    admin = _admin(cluster, node)
    try:
        [described] = admin.describe_topics([TOPIC])
    finally:
        admin.close()
    [partition] = described["partitions"]
    return partition["leader_id"], sorted(partition["isr_nodes"])


def _produce(cluster: Cluster) -> dict[bytes, int]:
    acked: dict[bytes, int] = {}
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.num.messages": 40,  # ~75 batches of ~6 KB: some lie before the last index entry
            "message.timeout.ms": 60_000,
        }
    )

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked[msg.value()] = msg.offset()

    for i in range(RECORDS):
        producer.produce(TOPIC, b"%06d-" % i + b"x" * 120, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def _last_index_position(directory: Path) -> int:
    """Position of the last offset index entry: a clean start scans the .log only from there."""
    data = (directory / segment_file_name(0, ".index")).read_bytes()
    positions = [struct.unpack_from(">ii", data, at)[1] for at in range(0, len(data) - 7, 8)]
    return max(positions, default=0)


def _damage_a_batch(directory: Path) -> BatchPosition:
    """Flip 16 bytes from the LastOffsetDelta of a large batch in the middle of the segment."""
    path = directory / segment_file_name(0, ".log")
    fd = os.open(path, os.O_RDWR)
    try:
        batches = list(walk_batches(fd, 0, os.fstat(fd).st_size))
        limit = _last_index_position(directory)
        candidates = [b for b in batches if 0 < b.position < limit and b.size > FETCH_BYTES]
        assert candidates, f"no batch to damage among {len(batches)} (index ends at {limit})"
        victim = candidates[len(candidates) // 2]
        at = victim.position + LAST_OFFSET_DELTA_AT
        os.pwrite(fd, bytes(b ^ 0xFF for b in os.pread(fd, 16, at)), at)
        os.fsync(fd)
    finally:
        os.close(fd)
    return victim


def _read_back(cluster: Cluster, count: int) -> dict[bytes, int]:
    """Read the partition from offset 0 in small fetches (so a read reaches each batch on its own)
    through whoever leads it now, refreshing metadata fast as leadership moves."""
    return consume_values(
        cluster.bootstrap,
        TOPIC,
        count,
        timeout_ms=30_000,
        max_partition_fetch_bytes=FETCH_BYTES,
        metadata_max_age_ms=1000,
        retry_backoff_ms=100,
    )


def test_a_replica_damaged_while_stopped_gives_up_leadership_and_repairs_itself(cluster: Cluster) -> None:
    admin = _admin(cluster, 1)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [2, 3, 1]})])
    finally:
        admin.close()
    wait_until(lambda: _state(cluster) == (2, [1, 2, 3]), 30, "broker 2 to lead a full ISR")
    acked = _produce(cluster)
    assert len(acked) == RECORDS
    dirs = {node: cluster.partition_dir(node, TOPIC, 0) for node in (1, 2, 3)}
    wait_until(lambda: len({log_bytes(d) for d in dirs.values()}) == 1, 30, "identical replicas")

    damaged = cluster.brokers[2]
    damaged.stop(signal.SIGTERM)  # clean: its logs are trusted at the next start
    victim = _damage_a_batch(dirs[2])
    damaged.start()
    wait_until(lambda: _state(cluster)[1] == [1, 2, 3], 60, "broker 2 back in the ISR")
    cluster.brokers[3].stop(signal.SIGTERM)  # controlled shutdown: broker 2 is first in the assignment
    wait_until(lambda: _state(cluster)[0] == 2, 30, "broker 2 to lead again")

    assert _read_back(cluster, len(acked)) == acked
    leader, _ = _state(cluster)
    assert leader == 1, "leadership moved to the healthy in-sync replica"
    output = damaged.output()
    assert output.count("log failed, partition offline") == 1, output[-5000:]
    assert "partition read failed" not in output  # the UNKNOWN_SERVER_ERROR path
    assert "negative offset delta" in output
    assert "resigning leadership" in output

    cluster.brokers[3].start()
    wait_until(lambda: _state(cluster)[1] == [1, 2, 3], 60, "the repaired replica back in the ISR")
    wait_until(lambda: len({log_bytes(d) for d in dirs.values()}) == 1, 30, "byte-identical replicas")
    assert os.path.getsize(dirs[2] / segment_file_name(0, ".log")) > victim.position


def test_a_segment_cut_inside_its_last_batch_while_stopped_is_cut_back_and_refetched(
    cluster: Cluster,
) -> None:
    """The active segment's file loses the end of its last batch after a clean stop: the start
    notices (the scan from the last index entry does not end on a whole batch), cuts it at its last
    valid batch, and the replica fetches the rest again instead of appending after garbage."""
    admin = _admin(cluster, 1)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [2, 3, 1]})])
    finally:
        admin.close()
    wait_until(lambda: _state(cluster) == (2, [1, 2, 3]), 30, "broker 2 to lead a full ISR")
    acked = _produce(cluster)
    dirs = {node: cluster.partition_dir(node, TOPIC, 0) for node in (1, 2, 3)}
    wait_until(lambda: len({log_bytes(d) for d in dirs.values()}) == 1, 30, "identical replicas")

    cut = cluster.brokers[3]
    cut.stop(signal.SIGTERM)
    path = dirs[3] / segment_file_name(0, ".log")
    fd = os.open(path, os.O_RDONLY)
    try:
        last = list(walk_batches(fd, 0, os.fstat(fd).st_size))[-1]
    finally:
        os.close(fd)
    os.truncate(path, last.position + last.size - 100)
    cut.start()
    wait_until(lambda: _state(cluster)[1] == [1, 2, 3], 60, "the cut replica back in the ISR")
    wait_until(lambda: len({log_bytes(d) for d in dirs.values()}) == 1, 30, "byte-identical replicas")
    assert "truncated invalid bytes at the end of a trusted segment" in cut.output()
    assert _read_back(cluster, len(acked)) == acked
