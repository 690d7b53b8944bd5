"""Partition reassignment on a four-broker cluster, end to end.

The move of every replica to three other brokers is test_reassignment_six_brokers.py; here, on
four brokers, the moves are a partition of replication factor 3 from brokers
[1, 2, 3] to [2, 3, 4] (its leader, broker 1, is removed: leadership moves to 2) and a full move
of a replication-factor-2 partition from [1, 2] to [3, 4] (no replica stays), both under a
continuous acks=all producer, started with ``kipling reassign-partitions --execute --throttle`` and
followed with ``--verify`` (which then clears the throttles) and ``--list``; a second move is held
to a low throttle. Every acknowledged record must be readable afterwards, the removed
replicas' logs gone. Then kafka-python's admin calls (the only client library here that has them):
a reassignment to a broker that is down stays in progress, is listed, and is cancelled.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from tests.integration.cluster import Cluster, consume_values, wait_until
from tools.cli import main

pytestmark = pytest.mark.timeout(240)

MOVED = "moved"
SMALL = "small"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, size=4).start()
    try:
        yield running
    finally:
        running.stop()


class AckedProducer:
    """Produces numbered records to the given topics with acks=all until stopped; remembers which
    values were acknowledged (delivered without error)."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60_000}
        )
        self._topics = topics
        self.acked: dict[str, set[bytes]] = {t: set() for t in topics}
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.acked[msg.topic()].add(msg.value())
        else:
            self.failed += 1

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            for topic in self._topics:
                self._producer.produce(
                    topic,
                    value=f"{topic}-{i:07d}".encode() + b"." * 200,
                    partition=0,
                    on_delivery=self._delivered,
                )
            i += 1
            self._producer.poll(0.002 if i % 20 else 0.05)

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(60) == 0

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())


def run_tool(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["reassign-partitions", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_moves_under_load_lose_no_acked_record(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics(
            [
                NewTopic(MOVED, -1, -1, replica_assignments={0: [1, 2, 3]}),
                NewTopic(SMALL, -1, -1, replica_assignments={0: [1, 2]}),
            ]
        )
        producer = AckedProducer(cluster.bootstrap, [MOVED, SMALL]).start()
        wait_until(lambda: producer.count() > 3000, 60, "records acknowledged before the move")

        bootstrap = cluster.brokers[2].bootstrap
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": MOVED, "partition": 0, "replicas": [2, 3, 4]},
                        {"topic": SMALL, "partition": 0, "replicas": [3, 4]},
                    ],
                }
            )
        )
        code, out, err = run_tool(
            capsys,
            "--bootstrap-server",
            bootstrap,
            "--execute",
            "--reassignment-json-file",
            str(plan),
            "--throttle",
            "5000000",  # the quota path is on (throttled replicas, recorded bytes) without slowing the move
        )
        assert code == 0, err
        assert out.startswith("Current partition replica assignment\n\n")
        assert "The inter-broker throttle limit was set to 5000000 B/s" in out
        assert (
            '{"version":1,"partitions":[{"topic":"moved","partition":0,"replicas":[1,2,3],"log_dirs":'
            '["any","any","any"]},{"topic":"small","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}'
        ) in out
        assert "Successfully started partition reassignments for moved-0,small-0" in out

        def verified() -> bool:
            code, out, _ = run_tool(
                capsys, "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(plan)
            )
            return code == 0 and out.count("is completed.") == 2

        wait_until(verified, 90, "both reassignments complete", interval_s=1.0)
        code, out, _ = run_tool(capsys, "--bootstrap-server", bootstrap, "--list")
        assert (code, out) == (0, "No partition reassignments found.\n")

        # the producer keeps writing to the new replicas for a while, then stops
        moved_at = producer.count()
        wait_until(lambda: producer.count() > moved_at + 1000, 60, "records acknowledged after the move")
        producer.stop()
        assert producer.failed == 0

        described = {t["name"]: t for t in admin.describe_topics([MOVED, SMALL])}
        [moved_p] = described[MOVED]["partitions"]
        [small_p] = described[SMALL]["partitions"]
        assert moved_p["replica_nodes"] == [2, 3, 4] and moved_p["leader_id"] == 2
        assert small_p["replica_nodes"] == [3, 4] and small_p["leader_id"] in (3, 4)
        for topic, gone in ((MOVED, [1]), (SMALL, [1, 2])):
            for node in gone:
                wait_until(
                    lambda node=node, topic=topic: not cluster.partition_dir(node, topic, 0).exists(),
                    30,
                    f"{topic} gone from {node}",
                )
        for topic in (MOVED, SMALL):
            acked = producer.acked[topic]
            consumed = consume_values(cluster.bootstrap, topic, len(acked))
            missing = acked - set(consumed)
            assert not missing, f"{len(missing)} acked records of {topic} lost, e.g. {sorted(missing)[:3]}"
    finally:
        admin.close()


def test_kafka_python_list_and_cancel(cluster: Cluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(MOVED, -1, -1, replica_assignments={0: [1, 2]})])
        producer = AckedProducer(cluster.bootstrap, [MOVED]).start()
        wait_until(lambda: producer.count() > 200, 60, "records acknowledged")
        cluster.brokers[4].stop()  # the new replica cannot catch up: the reassignment stays pending
        tp = TopicPartition(MOVED, 0)
        assert admin.alter_partition_reassignments({tp: [1, 2, 4]}) == {tp: None}
        listed = admin.list_partition_reassignments()
        assert listed == {tp: {"replicas": [1, 2, 4], "adding_replicas": [4], "removing_replicas": []}}
        assert admin.list_partition_reassignments([TopicPartition(MOVED, 7)]) == {}
        errors = admin.alter_partition_reassignments({tp: None, TopicPartition("nope", 0): None})
        assert (
            errors[tp] is None and errors[TopicPartition("nope", 0)].errno == 3
        )  # UNKNOWN_TOPIC_OR_PARTITION
        assert admin.list_partition_reassignments() == {}
        again = admin.alter_partition_reassignments({tp: None})
        assert again[tp].errno == 85  # NO_REASSIGNMENT_IN_PROGRESS
        [described] = admin.describe_topics([MOVED])
        assert described["partitions"][0]["replica_nodes"] == [1, 2]
        producer.stop()
        consumed = consume_values(cluster.bootstrap, MOVED, len(producer.acked[MOVED]))
        assert producer.acked[MOVED] <= set(consumed)
    finally:
        admin.close()


def topic_overrides(admin: KafkaAdminClient, topic: str) -> dict[str, str]:
    """The topic's config overrides (kafka-python's describe_configs, non-default keys only)."""
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    for by_name in described.values():
        for name, configs in by_name.items():
            if name == topic:
                return {
                    key: data["value"] if isinstance(data, dict) else data for key, data in configs.items()
                }
    return {}


def test_a_throttled_move_is_held_to_the_rate_and_verify_removes_the_throttles(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(MOVED, -1, -1, replica_assignments={0: [1, 2]})])
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
        for i in range(4000):
            producer.produce(MOVED, value=f"{i:06d}".encode() + b"x" * 1000, partition=0)
            if i % 500 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0
        rate = (
            150_000  # ~4 MB to copy: ~1.5 MB pass at once (Kafka's 10 s minimum window), the rest at the rate
        )
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {"version": 1, "partitions": [{"topic": MOVED, "partition": 0, "replicas": [1, 2, 3]}]}
            )
        )
        bootstrap = cluster.brokers[1].bootstrap
        code, out, err = run_tool(
            capsys,
            "--bootstrap-server",
            bootstrap,
            "--execute",
            "--reassignment-json-file",
            str(plan),
            "--throttle",
            str(rate),
        )
        assert code == 0, err
        assert "The inter-broker throttle limit was set to 150000 B/s" in out
        listed = topic_overrides(admin, MOVED)
        assert listed["leader.replication.throttled.replicas"] == "0:1,0:2"
        assert listed["follower.replication.throttled.replicas"] == "0:3"

        def verify() -> str:
            code, out, err = run_tool(
                capsys, "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(plan)
            )
            assert code == 0, err
            return out

        time.sleep(6)
        assert "is still in progress." in verify(), "a 4 MB copy at 150 kB/s cannot be done in 6 s"
        assert cluster.brokers[1].metric("kafka_server_leaderreplication_byte_rate") > 0
        wait_until(
            lambda: cluster.brokers[3].metric("kafka_server_followerreplication_byte_rate") > 0,
            10,
            "the follower's throttled byte rate",
        )
        wait_until(lambda: "is completed." in verify(), 90, "the throttled move completes", interval_s=2.0)
        out = verify()
        assert "Clearing broker-level throttles on brokers 1,2,3,4" in out
        assert "Clearing topic-level throttles on topic moved" in out
        listed = topic_overrides(admin, MOVED)
        assert "leader.replication.throttled.replicas" not in listed
        assert "follower.replication.throttled.replicas" not in listed
        consumed = consume_values(cluster.bootstrap, MOVED, 4000)
        assert len(consumed) == 4000
    finally:
        admin.close()
