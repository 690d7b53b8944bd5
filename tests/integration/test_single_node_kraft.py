"""A single node is a KRaft cluster of one: its metadata log, its one process, and the import of an
earlier single-node release's data directory.

``tests/fixtures/legacy-single-node.tar.gz`` is a log directory written by kipling's last release
before this model (commit 563c412), after: topics ``orders`` (3 partitions, retention.ms=86400000,
cleanup.policy=delete) and ``events`` (1 partition) created with kafka-python's admin client; 30
records produced to ``orders`` (10 per partition, keys k0..k29, idempotent, acks=all) and 5 to
``events``; 20 of them consumed by group ``billing`` and committed (offsets.topic.num.partitions=2).
Its topic metadata lives in ``__kipling_metadata.json`` and its producer id blocks in
``__kipling_producer_id_block`` (next block starts at 1000).
"""

from __future__ import annotations

import json
import tarfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, NewTopic
from kafka.structs import TopicPartition

from metadata.legacy_import import IMPORTED_SUFFIX, LEGACY_PRODUCER_ID_FILE, LEGACY_TOPICS_FILE
from metadata.log_topic import METADATA_TOPIC
from protocol.api_keys import ApiKey
from tests.integration.broker_process import BrokerProcess
from tests.integration.wire_client import WireClient

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy-single-node.tar.gz"
METADATA_LOG_DIR = f"{METADATA_TOPIC}-0"
LEGACY_OVERRIDES = ["offsets.topic.num.partitions=2"]
READ_DEADLINE_S = 60.0


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (from /proc)."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        children.extend(int(child) for child in text)
    return children


def _metadata(port: int) -> Any:
    """Metadata v12 for every topic, from the broker listening on ``port``."""
    with WireClient(port) as client:
        body = {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        return client.request(ApiKey.METADATA, 12, body).body


def _topic_ids(port: int) -> dict[str, uuid.UUID]:
    return {t.name: t.topic_id for t in _metadata(port).topics}


def _legacy_dir(tmp_path: Path) -> Path:
    """The fixture unpacked where a BrokerProcess in ``tmp_path / 'broker'`` keeps its logs."""
    logs = tmp_path / "broker" / "logs"
    logs.parent.mkdir(parents=True)
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    (tmp_path / "unpacked" / "data").rename(logs)
    return logs


def test_a_fresh_node_keeps_its_topics_in_the_metadata_log_and_runs_as_one_process(
    fresh_broker: BrokerProcess,
) -> None:
    fresh_broker.start()
    logs = fresh_broker.data_dir / "logs"
    admin = KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap)
    try:
        admin.create_topics([NewTopic("fresh", 2, 1)])
    finally:
        admin.close()
    assert (logs / METADATA_LOG_DIR).is_dir()
    assert not (logs / LEGACY_TOPICS_FILE).exists()
    assert not (logs / LEGACY_PRODUCER_ID_FILE).exists()
    assert fresh_broker.pid is not None
    assert _children(fresh_broker.pid) == []  # no follower process until a partition is followed
    ids = _topic_ids(fresh_broker.port)
    fresh_broker.restart()
    assert _topic_ids(fresh_broker.port) == ids  # replayed from the metadata log


@pytest.mark.slow
def test_a_data_directory_of_the_earlier_release_is_imported_with_its_data(tmp_path: Path) -> None:
    logs = _legacy_dir(tmp_path)
    legacy = json.loads((logs / LEGACY_TOPICS_FILE).read_text())
    legacy_ids = {t["name"]: uuid.UUID(t["topic_id"]) for t in legacy["topics"]}
    legacy_partitions = {t["name"]: len(t["partitions"]) for t in legacy["topics"]}
    broker = BrokerProcess(tmp_path / "broker", overrides=LEGACY_OVERRIDES)
    try:
        broker.start()
        assert _topic_ids(broker.port) == legacy_ids
        assert not (logs / LEGACY_TOPICS_FILE).exists()
        assert (logs / (LEGACY_TOPICS_FILE + IMPORTED_SUFFIX)).exists()
        assert (logs / (LEGACY_PRODUCER_ID_FILE + IMPORTED_SUFFIX)).exists()
        _check_imported(broker, legacy_partitions)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all")
        try:
            producer.send("events", b"after-import").get(timeout=30)
            manager = producer._transaction_manager
            assert manager is not None
            assert manager.producer_id_and_epoch.producer_id >= 1000  # never an id the old release gave
        finally:
            producer.close()
        broker.restart()  # the second start replays the metadata log; nothing is imported twice
        assert _topic_ids(broker.port) == legacy_ids
        _check_imported(broker, legacy_partitions, events=6)
    finally:
        broker.stop()


def _check_imported(broker: BrokerProcess, partitions: dict[str, int], events: int = 5) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = {d["name"]: d for d in admin.describe_topics(["orders", "events"])}
        assert {name: len(d["partitions"]) for name, d in described.items()} == {
            "orders": partitions["orders"],
            "events": partitions["events"],
        }
        configs = admin.describe_configs([ConfigResource("TOPIC", "orders")])
        text = repr(configs)
        assert "86400000" in text
        offsets = admin.list_group_offsets("billing")["billing"]
        assert sum(meta.offset for meta in offsets.values()) == 20
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    values: list[bytes] = []
    try:
        tps = [TopicPartition("orders", p) for p in range(3)] + [TopicPartition("events", 0)]
        consumer.assign(tps)
        deadline = time.monotonic() + READ_DEADLINE_S  # generous: the records are all there
        while len(values) < 30 + events and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(record.value for record in records)
        assert all(consumer.position(tp) == consumer.end_offsets([tp])[tp] for tp in tps)
    finally:
        consumer.close()
    assert sorted(v for v in values if v.startswith(b"order-")) == sorted(
        f"order-{i}".encode() for i in range(30)
    )
    assert len([v for v in values if not v.startswith(b"order-")]) == events


@pytest.mark.parametrize("find", ["voters", "bootstrap"])
def test_a_controller_only_node_and_a_broker_only_node_make_a_cluster(tmp_path: Path, find: str) -> None:
    """process.roles picks the roles one composition root builds: the controller alone serves only
    its controller listener; the broker alone registers with it and serves clients. The broker finds
    the controller through controller.quorum.voters or Kafka 4's controller.quorum.bootstrap.servers."""
    controller = BrokerProcess(tmp_path / "controller")
    broker = BrokerProcess(tmp_path / "broker")
    voters = f"controller.quorum.voters=1@127.0.0.1:{controller.port}"
    cluster_id = "cluster.id=kipling-split-roles"  # as `kafka-storage format` gives every node
    controller.overrides = [
        cluster_id,
        "node.id=1",
        "process.roles=controller",
        "controller.listener.names=CONTROLLER",
        f"listeners=CONTROLLER://127.0.0.1:{controller.port}",
        voters,
    ]
    broker.overrides = [
        cluster_id,
        "node.id=2",
        "process.roles=broker",
        "controller.listener.names=CONTROLLER",
        voters if find == "voters" else f"controller.quorum.bootstrap.servers=127.0.0.1:{controller.port}",
    ]
    try:
        controller.start()
        broker.start()
        assert (controller.data_dir / "logs" / METADATA_LOG_DIR).is_dir()
        assert [b.node_id for b in _metadata(broker.port).brokers] == [2]  # a controller is not a broker
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics([NewTopic("split-roles", 2, 1)])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        try:
            producer.send("split-roles", b"v", partition=1).get(timeout=30)
        finally:
            producer.close()
        assert (broker.data_dir / "logs" / METADATA_LOG_DIR).is_dir()  # its local copy of the committed log
        assert (broker.data_dir / "logs" / "split-roles-1").is_dir()
    finally:
        broker.stop()
        controller.stop()
