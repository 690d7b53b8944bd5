"""`kipling transactions` and the transaction metrics against a real single-node broker.

A confluent-kafka producer leaves a transaction open: ``list``, ``describe`` and
``describe-producers`` show it, and ``find-hanging`` does not report it (its coordinator has the
partition in the transaction). A *hanging* transaction is made the way KIP-664 describes them: a
transactional batch that no coordinator knows of, written with the broker's
``transaction.partition.verification.enable=false`` by a raw Produce (an unallocated producer id,
timestamps 30 minutes old). ``find-hanging`` reports it, the metrics count it, ``abort`` writes its
ABORT marker, and a read_committed consumer then reads past it. Every wait is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch
from tests.integration.broker_process import BrokerProcess, sample_value
from tests.integration.wire_client import WireClient
from tools.cli import main

TOPIC = "txn-admin"
OPEN_ID = "txn-admin-open"
GHOST_PRODUCER_ID = 987_654_321
"""A producer id no InitProducerId handed out: its transaction is one no coordinator knows."""
GHOST_AGE_MS = 30 * 60_000
"""Older than find-hanging's default 15 minutes and than transaction.max.timeout.ms + 5 minutes."""
NODE_ID = 1
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("txn-admin-broker"),
        overrides=[
            f"node.id={NODE_ID}",
            "transaction.partition.verification.enable=false",
            "transaction.state.log.num.partitions=3",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "offsets.topic.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
        ],
    ).start()
    yield process
    process.stop()


def transactions(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess, *args: str
) -> tuple[int, str, str]:
    code = main(["transactions", "--bootstrap-server", broker.bootstrap, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def rows(out: str) -> list[list[str]]:
    """The table's rows as cells (the header first); Kafka's tables end every cell with a tab."""
    return [line.split("\t")[:-1] for line in out.splitlines() if line.strip()]


def cells(table: list[list[str]]) -> list[dict[str, str]]:
    header = [h.strip() for h in table[0]]
    return [dict(zip(header, (c.strip() for c in row), strict=True)) for row in table[1:]]


def produce_ghost(broker: BrokerProcess) -> int:
    """A transactional batch of an unknown producer, straight to the leader; its base offset."""
    now = int(time.time() * 1000)
    batch = build_batch(
        [Record(value=b"ghost", timestamp=now - GHOST_AGE_MS)],
        producer_id=GHOST_PRODUCER_ID,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    body = {
        "transactional_id": "ghost",
        "acks": -1,
        "timeout_ms": 10_000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
    }
    with WireClient(broker.port) as client:
        response = client.request(ApiKey.PRODUCE, 9, body).body
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == ErrorCode.NONE, partition
    return int(partition.base_offset)


def wait_for_metric(broker: BrokerProcess, name: str, expected: float, **labels: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    value = None
    while time.monotonic() < deadline:
        value = sample_value(broker.metrics(), name, **labels)
        if value == expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"{name}{labels} is {value}, expected {expected}")


def read_committed(broker: BrokerProcess, until: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of what a read_committed consumer reads from the start until ``until``."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "txn-admin-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            offset, value = message.offset(), message.value()
            assert offset is not None and value is not None
            seen.append((offset, value))
            if value == until:
                return seen
    finally:
        consumer.close()
    raise AssertionError(f"read_committed consumer did not reach {until!r} in {DEADLINE_S}s: {seen}")


def test_transactions_tool_finds_and_aborts_a_hanging_transaction(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess
) -> None:
    assert main(["topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", TOPIC,
                 "--partitions", "1"]) == 0  # fmt: skip
    capsys.readouterr()

    # An open transaction of a real transactional producer.
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": OPEN_ID,
            "transaction.timeout.ms": 300_000,
        }
    )
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(TOPIC, value=b"open-%d" % i, partition=0)
    assert producer.flush(DEADLINE_S) == 0

    code, out, err = transactions(capsys, broker, "list")
    assert code == 0, err
    listed = cells(rows(out))
    assert [h.strip() for h in rows(out)[0]] == [
        "TransactionalId",
        "Coordinator",
        "ProducerId",
        "TransactionState",
    ]
    open_row = next(r for r in listed if r["TransactionalId"] == OPEN_ID)
    assert (open_row["Coordinator"], open_row["TransactionState"]) == (str(NODE_ID), "Ongoing")
    producer_id = open_row["ProducerId"]

    code, out, err = transactions(capsys, broker, "describe", "--transactional-id", OPEN_ID)
    assert code == 0, err
    [described] = cells(rows(out))
    assert described["CoordinatorId"] == str(NODE_ID)
    assert (described["ProducerId"], described["TransactionState"]) == (producer_id, "Ongoing")
    assert described["TransactionTimeoutMs"] == "300000"
    assert described["TopicPartitions"] == f"{TOPIC}-0"
    assert int(described["TransactionDurationMs"]) >= 0

    code, out, err = transactions(capsys, broker, "describe", "--transactional-id", "no-such-id")
    assert code == 1 and out == ""
    assert err.startswith("Failed to describe transaction state of transactional-id `no-such-id`: ")
    assert "TRANSACTIONAL_ID_NOT_FOUND" in err and len(err.splitlines()) == 1

    code, out, err = transactions(capsys, broker, "describe-producers", "--topic", TOPIC, "--partition", "0")
    assert code == 0, err
    [state] = cells(rows(out))
    assert (state["ProducerId"], state["CurrentTransactionStartOffset"]) == (producer_id, "0")
    assert state["LastSequence"] == "2"

    # A hanging transaction: a batch no coordinator knows of, from 30 minutes ago.
    ghost_offset = produce_ghost(broker)
    assert ghost_offset == 3
    labels = {"topic": TOPIC, "partition": "0"}
    wait_for_metric(broker, "kipling_log_ongoingtransactions", 2, **labels)
    wait_for_metric(broker, "kipling_log_laststableoffsetlag", 4, **labels)
    # Kafka judges a partition by its oldest open transaction: the recent one, so not late yet.
    wait_for_metric(broker, "kafka_server_replicamanager_partitionswithlatetransactionscount", 0)

    code, out, err = transactions(capsys, broker, "find-hanging", "--broker-id", str(NODE_ID))
    assert code == 0, err
    [hanging] = cells(rows(out))
    assert (hanging["Topic"], hanging["Partition"], hanging["ProducerId"]) == (
        TOPIC,
        "0",
        str(GHOST_PRODUCER_ID),
    )
    assert (hanging["StartOffset"], hanging["CoordinatorEpoch"]) == (str(ghost_offset), "-1")
    assert int(hanging["Duration(min)"]) >= 29
    # With no age limit the open transaction is a candidate too, but its coordinator will end it.
    code, out, err = transactions(
        capsys, broker, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0"
    )
    assert code == 0, err
    assert [r["ProducerId"] for r in cells(rows(out))] == [str(GHOST_PRODUCER_ID)]

    # The producer commits: read_committed readers still stop at the hanging transaction.
    producer.commit_transaction(DEADLINE_S)
    wait_for_metric(broker, "kipling_log_ongoingtransactions", 1, **labels)
    wait_for_metric(broker, "kipling_log_laststableoffsetlag", 2, **labels)  # the ghost and the marker
    wait_for_metric(broker, "kafka_server_replicamanager_partitionswithlatetransactionscount", 1)

    code, out, err = transactions(
        capsys, broker, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "99"
    )
    assert (code, out) == (1, "")
    assert err == f"Could not find any open transactions starting at offset 99 on partition {TOPIC}-0\n"

    code, out, err = transactions(
        capsys, broker, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", str(ghost_offset)
    )
    assert (code, out, err) == (0, "", "")
    wait_for_metric(broker, "kipling_log_ongoingtransactions", 0, **labels)
    wait_for_metric(broker, "kipling_log_laststableoffsetlag", 0, **labels)
    wait_for_metric(broker, "kafka_server_replicamanager_partitionswithlatetransactionscount", 0)

    code, out, err = transactions(capsys, broker, "describe-producers", "--topic", TOPIC, "--partition", "0")
    assert code == 0, err
    by_id = {r["ProducerId"]: r for r in cells(rows(out))}
    assert by_id[str(GHOST_PRODUCER_ID)]["CurrentTransactionStartOffset"] == "None"
    assert by_id[str(GHOST_PRODUCER_ID)]["LatestCoordinatorEpoch"] == "0"
    code, out, err = transactions(capsys, broker, "find-hanging", "--broker-id", str(NODE_ID))
    assert (code, rows(out)[1:]) == (0, [])

    tail = Producer({"bootstrap.servers": broker.bootstrap})
    tail.produce(TOPIC, value=b"after", partition=0)
    assert tail.flush(DEADLINE_S) == 0
    assert [value for _, value in read_committed(broker, b"after")] == [
        b"open-0",
        b"open-1",
        b"open-2",
        b"after",
    ]
    producer.flush(1)
