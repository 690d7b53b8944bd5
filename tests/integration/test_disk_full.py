"""A broker whose log dir fills up refuses writes with KAFKA_STORAGE_ERROR and keeps serving reads.

Issue 15: on a 20 MiB tmpfs a produce to another topic once killed the broker with SIGBUS (a store
into a sparse, memory-mapped index) and a restart died the same way. Here a real broker runs with
two log dirs: its own (which holds the metadata log, like Kafka's separate ``metadata.log.dir``)
and a 20 MiB tmpfs for data. The test fills the tmpfs through topic A, checks that topic B on the
same tmpfs is refused but the broker lives and serves A's records, restarts the broker on the full
disk, deletes topic A to free the space, and produces to B again without a restart. Every record
acknowledged before must read back.

Mounting a tmpfs needs root (as in CI); elsewhere the test is skipped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch
from tests.integration.broker_process import BrokerProcess
from tests.integration.tmpfs import mount_tmpfs, unmount
from tests.integration.wire_client import WireClient

pytestmark = pytest.mark.timeout(240)

TOPIC_A = "disk-filler"
TOPIC_B = "disk-other"


@contextlib.contextmanager
def small_tmpfs(directory: Path, size: str = "20m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``directory``; skips the test when mounting is not permitted."""
    problem = mount_tmpfs(directory, size)
    if problem is not None:
        pytest.skip(f"cannot mount a tmpfs (needs root): {problem}")
    try:
        yield directory
    finally:
        unmount(directory)


def create_topic(client: WireClient, name: str, partitions: int) -> None:
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": "segment.bytes", "value": str(2 * 1024 * 1024)}],
    }
    body = client.request(ApiKey.CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 10000}).body
    assert body.topics[0].error_code == ErrorCode.NONE, body


def produce(client: WireClient, topic: str, partition: int, values: list[bytes]) -> tuple[int, int]:
    """(error code, base offset) of one acks=-1 produce of ``values`` as one batch."""
    records = build_batch([Record(value, None) for value in values])
    body = {
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }
    answer = client.request(ApiKey.PRODUCE, 9, body).body.responses[0].partition_responses[0]
    return int(answer.error_code), int(answer.base_offset)


def end_offset(client: WireClient, topic: str, partition: int) -> int | None:
    """ListOffsets latest for one partition; None while it answers an error (no leader yet)."""
    query = {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [query]}]}
    answer = client.request(ApiKey.LIST_OFFSETS, 7, body).body.topics[0].partitions[0]
    return None if answer.error_code != ErrorCode.NONE else int(answer.offset)


def read_values(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    """Every record value of the partition, from its start to its end offset (kafka-python)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                values.extend(record.value for record in records)
        return values
    finally:
        consumer.close()


def fill_until_refused(client: WireClient, partition: int) -> list[bytes]:
    """Produce to A with ever smaller batches until even a tiny one is refused; the values acknowledged.

    A refused large batch may leave a few free pages; going down to a batch of a few bytes leaves
    no page a new file could take, so B's first append has nowhere to go.
    """
    acknowledged: list[bytes] = []
    for size in (64 * 1024, 8 * 1024, 1024, 64):
        while True:
            values = [f"a-{len(acknowledged) + i:08d}-".encode().ljust(size, b"x") for i in range(2)]
            error, _ = produce(client, TOPIC_A, partition, values)
            if error == ErrorCode.KAFKA_STORAGE_ERROR:
                break
            assert error == ErrorCode.NONE
            acknowledged += values
            assert len(acknowledged) < 10_000, "the disk never filled up"
    return acknowledged


def partition_in(directory: Path, topic: str) -> int:
    """The partition of ``topic`` whose directory lies in ``directory`` (the tmpfs)."""
    found = [int(path.name.rsplit("-", 1)[1]) for path in directory.glob(f"{topic}-*") if path.is_dir()]
    assert found, f"no partition of {topic} in {directory}: {sorted(p.name for p in directory.iterdir())}"
    return found[0]


def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_full_log_dir_refuses_writes_serves_reads_and_recovers_when_space_returns(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "tmpfs") as full_dir:
        broker = BrokerProcess(
            tmp_path / "node", overrides=[f"log.dirs={tmp_path / 'node' / 'logs'},{full_dir}"]
        )
        try:
            _scenario(broker, full_dir)
        finally:
            broker.stop()
    output = broker.output()
    for fatal in ("SIGBUS", "Fatal Python error", "Bus error", "Traceback"):
        assert fatal not in output, f"broker output holds {fatal!r}"


def _scenario(broker: BrokerProcess, full_dir: Path) -> None:
    broker.start()
    with WireClient(broker.port, timeout_s=30) as client:
        # The metadata log takes the broker's own dir; A's one partition then goes to the tmpfs,
        # and of B's two partitions one lands there too.
        create_topic(client, TOPIC_A, 1)
        create_topic(client, TOPIC_B, 2)
        a_partition = partition_in(full_dir, TOPIC_A)
        b_partition = partition_in(full_dir, TOPIC_B)
        wait_for(lambda: end_offset(client, TOPIC_B, b_partition) == 0, 30, "B to have a leader")
        acknowledged_b: list[bytes] = []

        acknowledged_a = fill_until_refused(client, a_partition)
        # B's log is empty: its first batch needs a page of the tmpfs (the SIGBUS of the report).
        assert produce(client, TOPIC_B, b_partition, [b"b-refused"])[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert end_offset(client, TOPIC_A, a_partition) == len(acknowledged_a)
        assert broker.process is not None and broker.process.poll() is None, "the broker died"
    assert read_values(broker.bootstrap, TOPIC_A, a_partition) == acknowledged_a
    assert read_values(broker.bootstrap, TOPIC_B, b_partition) == acknowledged_b

    assert broker.stop() == 0, "a clean shutdown on a full disk must exit cleanly"
    broker.start()
    with WireClient(broker.port, timeout_s=30) as client:
        assert produce(client, TOPIC_A, a_partition, [b"a-refused"])[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert read_values(broker.bootstrap, TOPIC_A, a_partition) == acknowledged_a
    assert "no space left" in broker.output()

    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="disk-full-admin")
    try:
        admin.delete_topics([TOPIC_A])
    finally:
        admin.close()
    with WireClient(broker.port, timeout_s=30) as client:
        wait_for(lambda: not any(full_dir.glob(f"{TOPIC_A}-*")), 60, "topic A's files to go")
        wait_for(lambda: produce(client, TOPIC_B, b_partition, [b"b-after"])[0] == 0, 60, "B to accept again")
        acknowledged_b.append(b"b-after")
        values = [f"b-{i:06d}".encode().ljust(4096, b"y") for i in range(64)]
        assert produce(client, TOPIC_B, b_partition, values)[0] == 0
        acknowledged_b += values
    assert read_values(broker.bootstrap, TOPIC_B, b_partition) == acknowledged_b
