"""ReplicaManager: partitions follow the TopicStore (create, add partitions, delete), with a real
LogManager in a temporary directory; restart recovery; errors for partitions it cannot serve."""

from __future__ import annotations

import pathlib
import uuid
from dataclasses import dataclass, field

import pytest

from broker.partition import Partition
from broker.replica_manager import ReplicaManager
from broker.topics import TopicListener, TopicStore
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import Record, build_batch
from server_common.config import BrokerConfig, load_config, to_log_config
from storage.checkpoint import topic_id_to_str
from storage.clock import FakeClock
from storage.log_manager import LogManager
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
    topics: TopicStore
    replicas: ReplicaManager

    def shutdown(self) -> None:
        self.replicas.shutdown()
        self.log_manager.shutdown()


def start(root: pathlib.Path, *overrides: str) -> Broker:
    config = load_config(None, [f"log.dirs={root / 'logs'}", f"node.id={NODE}", *overrides])[0]
    clock = FakeClock(NOW)
    log_manager = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = TopicStore(config.log_dirs[0] / "meta.json", NODE)
    return Broker(
        root, config, clock, log_manager, topics, ReplicaManager(log_manager, topics, NODE, config, clock)
    )


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

    second = start(tmp_path)
    again = second.replicas.get_partition("orders", 0)
    assert again is not None
    assert (again.log_end_offset, again.high_watermark, again.log_start_offset) == (3, 3, 0)
    retried = again.append_records(idempotent, required_acks=-1, now_ms=NOW)
    assert (retried.duplicate, retried.base_offset) == (True, 1)
    second.shutdown()


def test_a_log_of_another_topic_incarnation_is_set_aside_as_stray(tmp_path: pathlib.Path) -> None:
    first = start(tmp_path)
    first.topics.create_topic("orders", 1, 1, {})
    first.shutdown()
    # the log on disk now belongs to another incarnation of the topic
    (tmp_path / "logs" / "orders-0" / "partition.metadata").write_text(
        f"version: 0\ntopic_id: {topic_id_to_str(uuid.uuid4())}\n"
    )
    second = start(tmp_path)
    # the foreign log is set aside with its data, and the current topic is served under its name
    strays = list((tmp_path / "logs").glob("orders-0.*-stray"))
    assert len(strays) == 1 and (strays[0] / "partition.metadata").exists()
    assert second.replicas.get_partition("orders", 0) is not None
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


@dataclass
class StubTopics:
    """A TopicStore stand-in whose partitions may be led by another node."""

    topics: dict[str, TopicState] = field(default_factory=dict)
    listeners: list[TopicListener] = field(default_factory=list)

    def get(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def all(self) -> list[TopicState]:
        return list(self.topics.values())

    def subscribe(self, listener: TopicListener) -> None:
        self.listeners.append(listener)


def test_partitions_led_elsewhere_are_not_hosted(tmp_path: pathlib.Path) -> None:
    config = load_config(None, [f"log.dirs={tmp_path}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    states = {
        0: PartitionState(0, NODE, 2, 0, [NODE, 2], [NODE, 2]),
        1: PartitionState(1, 2, 4, 0, [2, NODE], [2, NODE]),
    }
    stub = StubTopics({"orders": TopicState("orders", uuid.uuid4(), states)})
    replicas = ReplicaManager(logs, stub, NODE, config, clock)  # type: ignore[arg-type]
    assert [p.index for p in replicas.partitions()] == [0]
    led: Partition | None = replicas.get_partition("orders", 0)
    assert led is not None and led.leader_epoch == 2 and led.isr == [NODE, 2]
    assert replicas.get_partition("orders", 1) is None
    assert replicas.partition_error("orders", 1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert stub.listeners == [replicas]
    logs.shutdown()


def test_stray_logs_are_deleted_at_start_and_the_topic_can_be_recreated(tmp_path: pathlib.Path) -> None:
    """A crash after the metadata forgot a topic but before its files went: the next start cleans up."""
    config, _ = load_config(None, [f"log.dirs={tmp_path / 'logs'}"])
    clock = FakeClock(NOW)
    log_manager = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = TopicStore(config.log_dirs[0] / "meta.json", NODE)
    topics.create_topic("t", 1, 1, {})
    log_manager.get_or_create_log("t", 0, topics.get("t").topic_id)  # type: ignore[union-attr]
    log_manager.shutdown()
    topics.delete_topic("t")  # persisted, but nothing removed the directory: the broker "died"
    assert (tmp_path / "logs" / "t-0").exists()

    log_manager = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = TopicStore(config.log_dirs[0] / "meta.json", NODE)
    replicas = ReplicaManager(log_manager, topics, NODE, config, clock)
    assert log_manager.get_log("t", 0) is None
    assert not (tmp_path / "logs" / "t-0").exists()
    topics.create_topic("t", 1, 1, {})
    assert replicas.get_partition("t", 0) is not None


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
    replicas = ReplicaManager(logs, stub, NODE, config, clock, alter_partition=sender)  # type: ignore[arg-type]
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
