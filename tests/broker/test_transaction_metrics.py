"""The transaction gauges: open transactions and LSO lag per led partition, Kafka's late-transaction
and producer id counts, read from the partitions at scrape time."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from broker.metrics.transactions import (
    LATE_TRANSACTION_BUFFER_MS,
    LATE_TRANSACTIONS,
    LSO_LAG,
    ONGOING_TRANSACTIONS,
    PRODUCER_ID_COUNT,
    register_transaction_metrics,
)
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from protocol.records import Record, build_batch
from server_common.config import load_config, to_log_config
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics
from tests.integration.broker_process import sample_value

NOW = 1_700_000_000_000
MAX_TIMEOUT_MS = 60_000


def append(partition: Partition, producer_id: int, n: int, *, txn: bool, first_seq: int = 0) -> None:
    batch = build_batch(
        [Record(value=b"v", timestamp=NOW) for _ in range(n)],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=first_seq,
        is_transactional=txn,
    )
    guard = partition.start_txn_verification(producer_id) if txn else None
    partition.append_records(memoryview(batch), required_acks=1, now_ms=NOW, verification=guard)


def test_gauges_follow_transactions(tmp_path: Path) -> None:
    config, _ = load_config(None, [f"log.dirs={tmp_path}"])
    clock = FakeClock(NOW)
    log_manager = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = LocalTopics(config.node_id)
    replicas = ReplicaManager(log_manager, topics, config.node_id, config, clock)
    topics.subscribe(replicas)
    registry = CollectorRegistry()
    register_transaction_metrics(registry, replicas.partitions, clock.time_ms, MAX_TIMEOUT_MS)
    topics.create_topic("orders", 2, 1, {})
    partition = replicas.get_partition("orders", 1)
    assert partition is not None

    def value(name: str, **labels: str) -> float:
        return sample_value(generate_latest(registry).decode(), name, **labels)

    p1 = {"topic": "orders", "partition": "1"}
    assert (value(ONGOING_TRANSACTIONS, **p1), value(LSO_LAG, **p1), value(LATE_TRANSACTIONS)) == (0, 0, 0)
    assert (
        'kipling_log_ongoingtransactions{partition="0",topic="orders"} 0.0'
        in generate_latest(registry).decode()
    )

    append(partition, 5, 2, txn=False)  # offsets 0-1: idempotent, stable
    append(partition, 6, 3, txn=True)  # offsets 2-4: open
    append(partition, 7, 1, txn=True)  # offset 5: open
    assert value(ONGOING_TRANSACTIONS, **p1) == 2
    assert value(LSO_LAG, **p1) == 6 - 2  # HW 6, LSO 2
    assert value(PRODUCER_ID_COUNT) == 3

    clock.advance(MAX_TIMEOUT_MS + LATE_TRANSACTION_BUFFER_MS)
    assert value(LATE_TRANSACTIONS) == 0  # exactly at the bound: not late yet
    clock.advance(1)
    assert value(LATE_TRANSACTIONS) == 1

    partition.append_txn_marker(producer_id=6, producer_epoch=0, coordinator_epoch=0, commit=True, now_ms=NOW)
    # LSO moves to producer 7's transaction at offset 5; the HW is 7 (after the marker).
    assert (value(ONGOING_TRANSACTIONS, **p1), value(LSO_LAG, **p1)) == (1, 2)
    assert value(LATE_TRANSACTIONS) == 1  # producer 7's last write is as old
    partition.append_txn_marker(
        producer_id=7, producer_epoch=0, coordinator_epoch=0, commit=False, now_ms=NOW
    )
    assert (value(ONGOING_TRANSACTIONS, **p1), value(LSO_LAG, **p1), value(LATE_TRANSACTIONS)) == (0, 0, 0)

    topics.delete_topic("orders")
    assert "orders" not in generate_latest(registry).decode()
    replicas.shutdown()
    log_manager.shutdown()
