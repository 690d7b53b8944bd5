"""Issue 17 literally: every replica of a topic moved from brokers [1, 2, 3] to three other
brokers [4, 5, 6] under a continuous acks=all load, with a replication throttle, no acked record lost.

Six brokers (one of them the metadata quorum's voter, as :class:`Cluster` sets up by default), each
kept light for the two cores the tests share: one follower process per broker, small segments, no
fsync per message (nothing here crashes), Kafka's default session and ISR timeouts (nothing here
fails over, and a broker briefly starved of CPU must not be fenced or dropped from the ISR).

Three partitions of replication factor 3 are all on [1, 2, 3], each led by another of them; each
is moved to [4, 5, 6] rotated the same way, so every old broker leads one moving partition (its
leader quota serves three new followers) and every new broker's follower process copies all three
(its follower quota bounds the sum). About 1.2 MB per partition, 3.6 MB into each new broker, is
written before the move: more than the ten seconds' burst the quota's rate lets through (Kafka's
``Rate`` counts at least ten whole windows). Meanwhile one idempotent producer keeps writing at a
steady pace well below the throttle, so the new replicas can catch up.
``kipling reassign-partitions --execute --throttle`` starts the move, ``--verify`` is polled until
it completes (and then clears the throttles). Then: leaders on 4-6, the old replicas' logs
deleted, the throttle configs gone (DescribeConfigs), and each partition read from offset 0 to its
end holds every acked record exactly once, in the order produced.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

from tests.integration.cluster import Cluster, wait_until
from tools.cli import main

pytestmark = pytest.mark.timeout(240)

TOPIC = "moving"
OLD = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
NEW = [[4, 5, 6], [5, 6, 4], [6, 4, 5]]
PARTITIONS = len(OLD)
THROTTLE = 300_000
"""Bytes/s per broker, leader and follower side. Each new broker copies ~3.6 MB of preload (plus
the load): the quota lets ~3 MB through at once, then nothing until that burst leaves its window.
Measured on the 2-core machine: the move takes ~14 s at this rate (the byte-rate gauges at about
the bound), ~3.5 s with a throttle too high to bite."""
VALUE_BYTES = 1000
PRELOAD_RECORDS = 1200
"""Per partition: ~1.2 MB, so each new broker copies ~3.6 MB: more than one burst."""
PACE_RECORDS_PER_S = 25
"""Per partition, during the move: ~25 kB/s each, ~75 kB/s into each new broker (a quarter of the
throttle: the new replicas catch up)."""
THROTTLE_CONFIGS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
)
THROTTLED_REPLICAS_CONFIGS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)
LIGHT = (
    "broker.session.timeout.ms=9000",
    "broker.heartbeat.interval.ms=1000",
    "replica.lag.time.max.ms=30000",
    "replica.fetch.wait.max.ms=200",
    "replica.fetch.backoff.ms=200",
    "min.insync.replicas=2",
    "num.partitions=1",
    "num.replica.fetchers=1",
    "log.segment.bytes=262144",
)

_log = structlog.get_logger("tests.reassignment_six_brokers")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, size=6, overrides=LIGHT).start(timeout_s=60)
    try:
        yield running
    finally:
        running.stop()


def value(partition: int, seq: int) -> bytes:
    head = f"{partition}-{seq:07d}-".encode()
    return head + b"." * (VALUE_BYTES - len(head))


class PacedProducer:
    """One idempotent acks=all producer over every partition: a preload as fast as it goes, then a
    steady pace from a thread until stopped. Remembers, per partition, the sequence numbers
    acknowledged (delivered without error) and counts the failures."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.size": 65536,  # librdkafka's 1 MB batch would not fit the small segments
                "message.timeout.ms": 120_000,
            }
        )
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[str] = []
        self._next = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        raw, partition = msg.value(), msg.partition()
        if err is None and raw is not None and partition is not None:
            self.acked[partition].append(int(raw[2:9]))
        else:
            self.failed.append(str(err))

    def _produce_round(self) -> None:
        for p in range(PARTITIONS):
            self._producer.produce(
                TOPIC, value=value(p, self._next), partition=p, on_delivery=self._delivered
            )
        self._next += 1

    def preload(self, records: int) -> None:
        for _ in range(records):
            self._produce_round()
            self._producer.poll(0)
        assert self._producer.flush(60) == 0, "preload not acknowledged"

    def _run(self) -> None:
        started = time.monotonic()
        sent = 0
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * PACE_RECORDS_PER_S)
            while sent < due:
                self._produce_round()
                sent += 1
            self._producer.poll(0.02)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(60) == 0, "records still unacknowledged"

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())


def run_tool(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["reassign-partitions", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def dynamic_configs(
    admin: AdminClient, kind: ResourceType, name: str, keys: tuple[str, ...]
) -> dict[str, str]:
    """Those of ``keys`` set on the resource itself (a dynamic topic or per-broker config)."""
    [future] = admin.describe_configs([ConfigResource(kind, name)]).values()
    entries = future.result(timeout=30)
    own = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value}
    return {
        key: entry.value
        for key, entry in entries.items()
        if key in keys and entry.source in own and entry.value not in (None, "")
    }


def consume_partition(bootstrap: str, partition: int, timeout_s: float = 60) -> list[int]:
    """The sequence numbers of ``partition`` from offset 0 to its high watermark, in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30)
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        seqs: list[int] = []
        offset = -1
        deadline = time.monotonic() + timeout_s
        while offset + 1 < high:
            assert time.monotonic() < deadline, f"partition {partition} read up to {offset} of {high}"
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            raw, at = msg.value(), msg.offset()
            assert raw is not None and raw.startswith(f"{partition}-".encode()) and at is not None
            offset = at
            seqs.append(int(raw[2:9]))
        return seqs
    finally:
        consumer.close()


def test_three_replicas_move_to_three_other_brokers_under_load_with_a_throttle(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    [created] = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, replica_assignment=OLD)], operation_timeout=30
    ).values()
    created.result(timeout=60)

    producer = PacedProducer(cluster.bootstrap)
    producer.preload(PRELOAD_RECORDS)
    producer.start()
    assert (producer.count(), producer.failed[:3]) == (PARTITIONS * PRELOAD_RECORDS, [])
    wait_until(lambda: producer.count() > PARTITIONS * (PRELOAD_RECORDS + 50), 60, "paced records acked")

    bootstrap = cluster.brokers[4].bootstrap
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": TOPIC, "partition": p, "replicas": replicas} for p, replicas in enumerate(NEW)
                ],
            }
        )
    )
    started = time.monotonic()
    code, out, err = run_tool(
        capsys,
        "--bootstrap-server",
        bootstrap,
        "--execute",
        "--reassignment-json-file",
        str(plan),
        "--throttle",
        str(THROTTLE),
    )
    assert code == 0, err
    assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in out
    assert "Successfully started partition reassignments for moving-0,moving-1,moving-2" in out

    # the throttles are in place, as DescribeConfigs shows them
    throttled = dynamic_configs(admin, ResourceType.TOPIC, TOPIC, THROTTLED_REPLICAS_CONFIGS)
    assert {key: set(listed.split(",")) for key, listed in throttled.items()} == {
        "leader.replication.throttled.replicas": {f"{p}:{b}" for p, old in enumerate(OLD) for b in old},
        "follower.replication.throttled.replicas": {f"{p}:{b}" for p, new in enumerate(NEW) for b in new},
    }
    for node in cluster.brokers:
        assert dynamic_configs(admin, ResourceType.BROKER, str(node), THROTTLE_CONFIGS) == dict.fromkeys(
            THROTTLE_CONFIGS, str(THROTTLE)
        ), f"broker {node}"

    leader_rate = dict.fromkeys((1, 2, 3), 0.0)
    follower_rate = dict.fromkeys((4, 5, 6), 0.0)

    def completed() -> bool:
        for node in leader_rate:
            rate = cluster.brokers[node].metric("kafka_server_leaderreplication_byte_rate")
            leader_rate[node] = max(leader_rate[node], rate)
        for node in follower_rate:
            rate = cluster.brokers[node].metric("kafka_server_followerreplication_byte_rate")
            follower_rate[node] = max(follower_rate[node], rate)
        code, out, err = run_tool(
            capsys, "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(plan)
        )
        assert code == 0, err
        return out.count("is completed.") == PARTITIONS

    wait_until(completed, 120, "the throttled reassignment completes", interval_s=1.0)
    took = time.monotonic() - started
    _log.info("reassignment completed", seconds=round(took, 1), leader=leader_rate, follower=follower_rate)
    # the quota recorded throttled bytes on each side (the gauges are the rates over its window)
    assert all(rate > 0 for rate in leader_rate.values()), leader_rate
    assert all(rate > 0 for rate in follower_rate.values()), follower_rate

    # the producer keeps writing to the new replicas for a while, then stops
    moved_at = producer.count()
    wait_until(
        lambda: producer.count() > moved_at + 3 * PARTITIONS * PACE_RECORDS_PER_S, 60, "acks after the move"
    )
    producer.stop()
    assert producer.failed == []

    described = admin.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
    for p, replicas in enumerate(NEW):
        assert described[p].replicas == replicas, described[p]
        assert described[p].leader == replicas[0], described[p]

    def old_logs() -> list[Path]:
        dirs = (cluster.partition_dir(node, TOPIC, p) for p in range(PARTITIONS) for node in (1, 2, 3))
        return [d for d in dirs if d.exists()]

    wait_until(lambda: not old_logs(), 30, "the old replicas' logs deleted from brokers 1-3")

    # --verify, once complete, cleared every throttle
    assert dynamic_configs(admin, ResourceType.TOPIC, TOPIC, THROTTLED_REPLICAS_CONFIGS) == {}
    for node in cluster.brokers:
        assert dynamic_configs(admin, ResourceType.BROKER, str(node), THROTTLE_CONFIGS) == {}, (
            f"broker {node}"
        )

    for p in range(PARTITIONS):
        acked = producer.acked[p]
        assert acked == sorted(acked), f"partition {p} acked out of order"
        consumed = consume_partition(cluster.bootstrap, p)
        assert consumed == list(range(len(consumed))), f"partition {p}: gaps, duplicates or reordering"
        missing = set(acked) - set(consumed)
        assert not missing, f"{len(missing)} acked records of partition {p} lost, e.g. {sorted(missing)[:3]}"
        assert len(consumed) == len(acked), f"partition {p}: {len(consumed)} records, {len(acked)} acked"
