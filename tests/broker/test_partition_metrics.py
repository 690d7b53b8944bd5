"""Per-partition gauges come from the live partitions at scrape time."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from broker.replication.partition_metrics import register_partition_metrics
from broker.replication.replica_manager import ReplicaManager
from protocol.records import Record, build_batch
from server_common.config import load_config, to_log_config
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics


def test_gauges_follow_appends_and_deletions(tmp_path: Path) -> None:
    config, _ = load_config(None, [f"log.dirs={tmp_path}"])
    clock = FakeClock(1_000)
    log_manager = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = LocalTopics(config.node_id)
    replicas = ReplicaManager(log_manager, topics, config.node_id, config, clock)
    topics.subscribe(replicas)
    registry = CollectorRegistry()
    register_partition_metrics(registry, replicas.partitions)
    topics.create_topic("orders", 2, 1, {})
    partition = replicas.get_partition("orders", 1)
    assert partition is not None
    batch = build_batch([Record(b"a"), Record(b"b"), Record(b"c")])
    partition.append_records(memoryview(batch), required_acks=1, now_ms=1_000)
    text = generate_latest(registry).decode()
    assert 'kafka_log_log_logendoffset{partition="1",topic="orders"} 3.0' in text
    assert 'kafka_log_log_highwatermark{partition="1",topic="orders"} 3.0' in text
    assert 'kafka_log_log_logendoffset{partition="0",topic="orders"} 0.0' in text
    topics.delete_topic("orders")
    assert "orders" not in generate_latest(registry).decode()
    replicas.shutdown()
    log_manager.shutdown()
