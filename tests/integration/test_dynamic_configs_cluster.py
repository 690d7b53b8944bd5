"""Dynamic configs in a three-broker cluster: a change sent to any broker is forwarded to the
controller and takes effect without a restart on the leader and in the followers' processes
(segments roll at the new segment.bytes on every replica, retention removes old segments
everywhere, a produce over the new max.message.bytes is refused), a raised min.insync.replicas
refuses acks=all at once, and a restarted broker applies the dynamic values again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpResourceType
from kafka.admin import NewTopic

from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until

pytestmark = [pytest.mark.timeout(240)]

TOPIC = "dynamic"
TIMEOUT_S = 30
SEGMENT_BYTES = 2048


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    overrides = (*FAST_FAILOVER, "log.retention.check.interval.ms=300", "log.segment.delete.delay.ms=0")
    running = Cluster(tmp_path, overrides=overrides).start()
    try:
        yield running
    finally:
        running.stop()


def segments(cluster: Cluster, node: int) -> list[Path]:
    return sorted(cluster.partition_dir(node, TOPIC, 0).glob("*.log"))


def produce(bootstrap: str, count: int, size: int, acks: str = "all") -> list[KafkaError | None]:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 0,
            "message.max.bytes": 10_000_000,
            "message.timeout.ms": 10_000,
            "retries": 0,
        }
    )
    errors: list[KafkaError | None] = []
    for i in range(count):
        producer.produce(
            TOPIC,
            value=b"d" * size,
            key=str(i).encode(),
            partition=0,
            on_delivery=lambda e, m: errors.append(e),
        )
        producer.flush(TIMEOUT_S)
    assert producer.flush(TIMEOUT_S) == 0
    return errors


def alter_topic(bootstrap: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry(key.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
            for key, value in configs.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)


def isr(admin: KafkaAdminClient) -> list[int]:
    [topic] = admin.describe_topics([TOPIC])
    return sorted(topic["partitions"][0]["isr_nodes"])


def test_changes_apply_on_leader_and_followers_without_restart(cluster: Cluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [1, 2, 3]})])
        assert produce(cluster.bootstrap, 10, 300) == [None] * 10
        for node in (1, 2, 3):
            wait_until(lambda node=node: segments(cluster, node), 20, f"the log on broker {node}")
            assert len(segments(cluster, node)) == 1

        # segment.bytes, sent to broker 3 (a follower): the leader and both followers roll at it
        alter_topic(cluster.brokers[3].bootstrap, segment_bytes=str(SEGMENT_BYTES))
        assert produce(cluster.bootstrap, 40, 300) == [None] * 40
        for node in (1, 2, 3):
            wait_until(lambda node=node: len(segments(cluster, node)) >= 5, 20, f"rolled segments on {node}")
            closed = segments(cluster, node)[1:-1]  # the first was written under the old size
            assert closed and all(s.stat().st_size <= SEGMENT_BYTES for s in closed), node

        # max.message.bytes through kafka-python's IncrementalAlterConfigs, sent to any broker
        result = admin.alter_configs(
            [KpConfigResource(KpResourceType.TOPIC, TOPIC, {"max.message.bytes": "1500"})]
        )
        assert result == {"topic": {TOPIC: "OK"}}
        [error] = produce(cluster.bootstrap, 1, 4000)
        assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
        assert produce(cluster.bootstrap, 1, 500) == [None]

        # min.insync.replicas=3 refuses acks=all at once while broker 3 is down (ISR [1, 2])
        cluster.brokers[3].stop()
        wait_until(lambda: isr(admin) == [1, 2], 20, "broker 3 out of the ISR")
        assert produce(cluster.bootstrap, 1, 100) == [None]  # min.insync.replicas=2 (the broker's)
        alter_topic(cluster.bootstrap, min_insync_replicas="3")
        [refused] = produce(cluster.bootstrap, 1, 100)
        assert refused is not None and refused.code() == KafkaError.NOT_ENOUGH_REPLICAS, refused
        assert produce(cluster.bootstrap, 1, 100, acks="1") == [None]

        # a restarted broker applies the dynamic values again: its follower keeps rolling at 2 KiB
        cluster.brokers[3].start()
        wait_until(lambda: isr(admin) == [1, 2, 3], 30, "broker 3 back in the ISR")
        assert produce(cluster.bootstrap, 1, 100) == [None]
        before = len(segments(cluster, 3))
        assert produce(cluster.bootstrap, 20, 300) == [None] * 20
        wait_until(lambda: len(segments(cluster, 3)) >= before + 2, 20, "broker 3 rolling after restart")
        [error] = produce(cluster.brokers[3].bootstrap, 1, 4000)
        assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error

        # retention.ms through the cluster: every replica's retention drops the old segments
        time.sleep(0.2)
        alter_topic(cluster.bootstrap, retention_ms="100")
        for node in (1, 2, 3):
            wait_until(lambda node=node: len(segments(cluster, node)) <= 2, 20, f"retention on broker {node}")
    finally:
        admin.close()


def test_a_per_broker_config_applies_to_that_brokers_replicas_only(cluster: Cluster) -> None:
    """log.segment.bytes set for broker 2 alone (kafka-python sends it to broker 2): broker 2's
    follower process rolls at it, the leader and the other follower keep the default."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [1, 2, 3]})])
        result = admin.alter_configs(
            [KpConfigResource(KpResourceType.BROKER, "2", {"log.segment.bytes": str(SEGMENT_BYTES)})]
        )
        assert result == {"broker": {"2": "OK"}}
        described = admin.describe_configs(
            [KpConfigResource(KpResourceType.BROKER, "2", ["log.segment.bytes"])], config_filter="all"
        )["broker"]["2"]["log.segment.bytes"]
        assert (described["value"], described["config_source"]) == (
            str(SEGMENT_BYTES),
            "DYNAMIC_BROKER_CONFIG",
        )
        assert produce(cluster.bootstrap, 30, 300) == [None] * 30
        wait_until(lambda: len(segments(cluster, 2)) >= 4, 20, "broker 2 rolling at its own segment.bytes")
        for node in (1, 3):
            wait_until(lambda node=node: segments(cluster, node), 20, f"the log on broker {node}")
            assert len(segments(cluster, node)) == 1, node
    finally:
        admin.close()
