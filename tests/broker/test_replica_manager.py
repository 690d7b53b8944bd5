"""ReplicaManager: partitions follow the metadata (create, add partitions, delete: the controller's
changes handed over as the replica transitions hand them), with a real LogManager in a temporary
directory; restart recovery; errors for partitions it cannot serve.

Stray logs at start-up (of a deleted topic, or of another incarnation of a topic) are the replica
transitions' (``apply_initial``, tests/broker/test_replica_transitions.py)."""

from __future__ import annotations

import pathlib
import uuid
from dataclasses import dataclass

import pytest

from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import Record, build_batch
from server_common.config import BrokerConfig, load_config, to_log_config
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics
from tests.broker.test_handlers_produce import StubTopics
from tests.broker.test_leader_replication import FakeController

NODE = 1
NOW = 1_700_000_000_000


def batch(n: int = 1, **producer: int) -> bytes:
    records = [Record(value=b"v%d" % i, timestamp=NOW + i) for i in range(n)]
    return build_batch(records, **producer)


@dataclass
class Broker:
    """One node's pieces, built the way broker/__main__.py builds them."""

    root: pathlib.Path
    config: BrokerConfig
    clock: FakeClock
    log_manager: LogManager
    topics: LocalTopics
    replicas: ReplicaManager

    def shutdown(self) -> None:
        self.replicas.shutdown()
        self.log_manager.shutdown()


def start(root: pathlib.Path, *overrides: str, topics: LocalTopics | None = None) -> Broker:
    """A node over the logs under ``root``; ``topics`` is the cluster's metadata, kept across a
    restart as the metadata log keeps it (a new cluster by default)."""
    config = load_config(None, [f"log.dirs={root / 'logs'}", f"node.id={NODE}", *overrides])[0]
    clock = FakeClock(NOW)
    log_manager = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = LocalTopics(NODE) if topics is None else topics
    replicas = ReplicaManager(log_manager, topics, NODE, config, clock)
    topics.subscribe(replicas)
    return Broker(root, config, clock, log_manager, topics, replicas)


@pytest.fixture
def broker(tmp_path: pathlib.Path) -> Broker:
    return start(tmp_path)


def test_created_topic_gets_a_partition_and_log_per_partition(broker: Broker) -> None:
    topic = broker.topics.create_topic("orders", 3, 1, {})
    assert sorted(p.index for p in broker.replicas.partitions()) == [0, 1, 2]
    partition = broker.replicas.get_partition("orders", 1)
    assert partition is not None and partition.topic_id == topic.topic_id
    assert broker.replicas.get_partition_by_id(topic.topic_id, 1) is partition
    assert broker.replicas.get_partition_by_key(("orders", 1)) is partition
    assert broker.log_manager.get_log("orders", 2) is not None
    assert (broker.config.log_dirs[0] / "orders-0").is_dir()


def test_topic_overrides_reach_the_log_and_the_min_isr(broker: Broker) -> None:
    broker.topics.create_topic("big", 1, 1, {"max.message.bytes": "100", "min.insync.replicas": "2"})
    partition = broker.replicas.get_partition("big", 0)
    assert partition is not None
    assert partition.log.config.max_message_bytes == 100
    assert partition.configured_min_insync_replicas == 2
    assert partition.min_insync_replicas == 1  # clamped to the replication factor
    with pytest.raises(KafkaError) as caught:
        partition.append_records(build_batch([Record(value=b"x" * 200)]), required_acks=1, now_ms=NOW)
    assert caught.value.code is ErrorCode.MESSAGE_TOO_LARGE


def test_added_partitions_and_listeners(broker: Broker) -> None:
    seen: list[tuple[str, int, int]] = []
    broker.replicas.add_partition_listener(lambda p: seen.append((p.topic, p.index, p.log_end_offset)))
    broker.topics.create_topic("orders", 1, 1, {})
    broker.topics.create_partitions("orders", 3)
    assert sorted(p.index for p in broker.replicas.partitions()) == [0, 1, 2]
    new = broker.replicas.get_partition("orders", 2)
    assert new is not None
    new.append_records(batch(2), required_acks=1, now_ms=NOW)
    assert seen == [("orders", 2, 2)]  # a listener added before the partition existed hears it


def test_deleted_topic_loses_partitions_and_files(broker: Broker) -> None:
    topic = broker.topics.create_topic("orders", 2, 1, {})
    partition = broker.replicas.get_partition("orders", 0)
    assert partition is not None
    partition.append_records(batch(), required_acks=1, now_ms=NOW)
    notified: list[bool] = []
    partition.add_listener(lambda p: notified.append(p.is_leader))
    broker.topics.delete_topic("orders")
    assert broker.replicas.partitions() == []
    assert broker.replicas.get_partition_by_id(topic.topic_id, 0) is None
    assert notified == [False]
    assert not (broker.config.log_dirs[0] / "orders-0").exists()
    assert broker.replicas.partition_error("orders", 0) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    recreated = broker.topics.create_topic("orders", 1, 1, {})
    again = broker.replicas.get_partition("orders", 0)
    assert again is not None and again.topic_id == recreated.topic_id and again.log_end_offset == 0


def test_partition_errors(broker: Broker) -> None:
    broker.topics.create_topic("orders", 1, 1, {})
    assert broker.replicas.partition_error("nope", 0) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.replicas.partition_error("orders", 5) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_restart_recovers_data_hw_and_producer_state(tmp_path: pathlib.Path) -> None:
    first = start(tmp_path)
    first.topics.create_topic("orders", 1, 1, {})
    partition = first.replicas.get_partition("orders", 0)
    assert partition is not None
    idempotent = batch(2, producer_id=3, producer_epoch=0, base_sequence=0)
    partition.append_records(batch(1), required_acks=1, now_ms=NOW)
    partition.append_records(idempotent, required_acks=-1, now_ms=NOW)
    first.shutdown()

    second = start(tmp_path, topics=first.topics)
    again = second.replicas.get_partition("orders", 0)
    assert again is not None
    assert (again.log_end_offset, again.high_watermark, again.log_start_offset) == (3, 3, 0)
    retried = again.append_records(idempotent, required_acks=-1, now_ms=NOW)
    assert (retried.duplicate, retried.base_offset) == (True, 1)
    second.shutdown()


def test_retention_notifies_partition_listeners(tmp_path: pathlib.Path) -> None:
    broker = start(tmp_path, "log.segment.delete.delay.ms=0")
    record = build_batch([Record(value=b"x" * 100)])
    broker.topics.create_topic("logs", 1, 1, {"segment.bytes": str(len(record)), "retention.bytes": "1"})
    partition = broker.replicas.get_partition("logs", 0)
    assert partition is not None
    for _ in range(3):
        partition.append_records(record, required_acks=1, now_ms=NOW)
    starts: list[int] = []
    broker.replicas.add_partition_listener(lambda p: starts.append(p.log_start_offset))
    assert broker.replicas.run_retention() > 0
    assert starts and starts[-1] == partition.log_start_offset > 0


def test_expired_producers_are_forgotten(tmp_path: pathlib.Path) -> None:
    broker = start(tmp_path, "producer.id.expiration.ms=1000")
    broker.topics.create_topic("orders", 1, 1, {})
    partition = broker.replicas.get_partition("orders", 0)
    assert partition is not None
    partition.append_records(
        batch(1, producer_id=3, producer_epoch=0, base_sequence=0), required_acks=1, now_ms=NOW
    )
    assert broker.replicas.remove_expired_producers() == 0
    broker.clock.advance(5_000)
    assert broker.replicas.remove_expired_producers() == 1


# -- partitions led elsewhere ------------------------------------------------------------------------


def test_partitions_led_elsewhere_are_not_hosted(tmp_path: pathlib.Path) -> None:
    config = load_config(None, [f"log.dirs={tmp_path}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    states = {
        0: PartitionState(0, NODE, 2, 0, [NODE, 2], [NODE, 2]),
        1: PartitionState(1, 2, 4, 0, [2, NODE], [2, NODE]),
    }
    stub = StubTopics({"orders": TopicState("orders", uuid.uuid4(), states)})
    replicas = ReplicaManager(logs, stub, NODE, config, clock)
    stub.subscribe(replicas)
    assert [p.index for p in replicas.partitions()] == [0]
    led: Partition | None = replicas.get_partition("orders", 0)
    assert led is not None and led.leader_epoch == 2 and led.isr == [NODE, 2]
    assert replicas.get_partition("orders", 1) is None
    assert replicas.partition_error("orders", 1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    logs.shutdown()


def test_partitions_get_the_lag_max_and_the_alter_partition_sender(tmp_path: pathlib.Path) -> None:
    """The periodic isr-expiration task calls ``maybe_shrink_isr``: it proposes through the sender
    given to the ReplicaManager, with the broker's replica.lag.time.max.ms."""
    config = load_config(None, [f"log.dirs={tmp_path}", f"node.id={NODE}", "replica.lag.time.max.ms=10000"])[
        0
    ]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    states = {
        0: PartitionState(0, NODE, 0, 0, [NODE, 2], [NODE, 2]),
        1: PartitionState(1, NODE, 0, 0, [NODE], [NODE]),
    }
    stub = StubTopics({"orders": TopicState("orders", uuid.uuid4(), states)})
    sender = FakeController()
    replicas = ReplicaManager(logs, stub, NODE, config, clock, alter_partition=sender)
    stub.subscribe(replicas)
    led = replicas.get_partition("orders", 0)
    assert led is not None and led.replica_set.replica_lag_time_max_ms == 10_000
    led.append_records(batch(), required_acks=1, now_ms=NOW)
    clock.advance(10_000)
    assert replicas.maybe_shrink_isr() == 0  # follower 2 never fetched, but lag max is not over yet
    clock.advance(1)
    assert replicas.maybe_shrink_isr() == 1
    assert sender.proposals == [(NODE,)] and sender.submitted[0][0] is led
    assert replicas.maybe_shrink_isr() == 0  # in flight: nothing more
    assert sender.answer() and led.isr == [NODE] and led.high_watermark == 1
    logs.shutdown()


def test_reconfigure_topic_applies_log_config_and_min_isr_to_led_partitions(tmp_path: pathlib.Path) -> None:
    """A dynamic config change: the partitions led here take the topic's new settings in place."""
    from dataclasses import replace

    from server_common.config import BrokerConfigLayers

    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}"])[0]
    defaults = {"log.segment.bytes": "8192"}
    clock = FakeClock(NOW)
    log_manager = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = LocalTopics(NODE)
    replicas = ReplicaManager(
        log_manager, topics, NODE, config, clock, broker_layers=lambda: BrokerConfigLayers(config, defaults)
    )
    topics.subscribe(replicas)
    try:
        topic = topics.create_topic("orders", 2, 1, {})
        partition = replicas.get_partition("orders", 0)
        assert partition is not None and partition.log.config.segment_bytes == 8192  # the dynamic default
        changed = replace(topic, configs={"segment.bytes": "4096", "min.insync.replicas": "2"})
        assert replicas.reconfigure_topic(changed) == 2
        assert partition.log.config.segment_bytes == 4096
        assert partition.configured_min_insync_replicas == 2
        assert replicas.reconfigure_topic(changed) == 0  # nothing left to change
        defaults["log.segment.bytes"] = "1024"  # the layers are read at each call
        assert replicas.reconfigure_topic(topic) == 2
        assert partition.log.config.segment_bytes == 1024
    finally:
        replicas.shutdown()
        log_manager.shutdown()
