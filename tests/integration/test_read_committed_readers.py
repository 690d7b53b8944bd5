"""kipling's own readers under read_committed, against a real broker holding real transactions.

A confluent-kafka transactional producer commits one transaction, aborts one and leaves one open.
kipling's consumer (through ``kipling consume --isolation-level read_committed``) and the Spark
source's task reader (``pipeline.fetch.read_range``, what ``kafka.isolation.level=read_committed``
runs) must return exactly the committed records: never an aborted one, nothing at or past the open
transaction (the last stable offset), never a control record; read_uncommitted returns them all.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("pyarrow")

from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

from pipeline.fetch import ReadTask, read_range
from pipeline.offsets import OffsetRange
from pipeline.options import BrokerAddress, ConnectionSettings
from protocol.sentinels import IsolationLevel
from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import create_topic, unique_topic

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 2
PER_TXN = 20
TXN_TIMEOUT_S = 30


def _produce(producer: Producer, topic: str, tag: str) -> None:
    for i in range(PER_TXN):
        producer.produce(topic, value=f"{tag}-{i}".encode(), partition=i % PARTITIONS)
    producer.flush(TXN_TIMEOUT_S)  # abort_transaction would purge what is still queued


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> Iterator[str]:
    """committed (commit), aborted (abort), open (left open until the module ends)."""
    name = unique_topic("rc-readers")
    create_topic(broker.bootstrap, name, PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{name}"})
    producer.init_transactions(TXN_TIMEOUT_S)
    for tag, commit in (("committed", True), ("aborted", False)):
        producer.begin_transaction()
        _produce(producer, name, tag)
        (producer.commit_transaction if commit else producer.abort_transaction)(TXN_TIMEOUT_S)
    producer.begin_transaction()
    _produce(producer, name, "open")
    yield name
    producer.abort_transaction(TXN_TIMEOUT_S)


def _end_offsets(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        consumer.close()


def _tags(values: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        tag = value.split("-")[0]
        counts[tag] = counts.get(tag, 0) + 1
    return counts


def test_list_offsets_answers_the_lso_under_read_committed(broker: BrokerProcess, topic: str) -> None:
    committed = _end_offsets(broker.bootstrap, topic, "read_committed")
    uncommitted = _end_offsets(broker.bootstrap, topic, "read_uncommitted")
    per_partition = PER_TXN // PARTITIONS
    # committed data, its marker, aborted data, its marker: the open transaction starts there
    assert committed == dict.fromkeys(range(PARTITIONS), 2 * per_partition + 2)
    assert uncommitted == dict.fromkeys(range(PARTITIONS), 3 * per_partition + 2)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_kipling_consume(broker: BrokerProcess, topic: str, isolation: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.cli",
            "consume",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--timeout-ms",
            "3000",
            "--isolation-level",
            isolation,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    counts = _tags(done.stdout.split())
    if isolation == "read_committed":
        assert counts == {"committed": PER_TXN}
    else:
        assert counts == {"committed": PER_TXN, "aborted": PER_TXN, "open": PER_TXN}


@pytest.mark.parametrize("isolation", [IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED])
def test_spark_source_task_reader(broker: BrokerProcess, topic: str, isolation: IsolationLevel) -> None:
    name = "read_committed" if isolation is IsolationLevel.READ_COMMITTED else "read_uncommitted"
    ends = _end_offsets(broker.bootstrap, topic, name)
    settings = ConnectionSettings((BrokerAddress("127.0.0.1", broker.port),))
    values: list[str] = []
    for partition in range(PARTITIONS):
        task = ReadTask(
            OffsetRange(topic, partition, 0, ends[partition]),
            settings,
            None,
            poll_timeout_ms=20_000,
            isolation_level=isolation,
        )
        for batch in read_range(task):
            values += [bytes(v).decode() for v in batch.column("value").to_pylist()]
    expected = {"committed": PER_TXN}
    if isolation is IsolationLevel.READ_UNCOMMITTED:
        expected |= {"aborted": PER_TXN, "open": PER_TXN}
    assert _tags(values) == expected
    assert len(set(values)) == len(values)
