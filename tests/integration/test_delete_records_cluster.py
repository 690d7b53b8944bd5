"""DeleteRecords in a three-broker cluster: the leader answers the low watermark (the lowest log start
offset among the live replicas) only once the followers learned the new log start offset from their
fetches, or REQUEST_TIMED_OUT when a paused follower cannot within the request's timeout; the
followers' retention then drops their segments below it too."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic

from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until
from tools.cli import main

TOPIC = "trimmed"
RECORDS = 40


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    # a long session: the paused broker stays alive (unfenced), so its replica keeps counting (a fenced
    # broker's replica does not hold the low watermark down, as in Kafka)
    overrides = (*FAST_FAILOVER, "broker.session.timeout.ms=60000", "log.retention.check.interval.ms=300")
    running = Cluster(tmp_path, overrides=overrides).start()
    try:
        yield running
    finally:
        running.stop()


def segment_bases(cluster: Cluster, node: int) -> list[int]:
    return sorted(
        int(p.name.removesuffix(".log")) for p in cluster.partition_dir(node, TOPIC, 0).glob("*.log")
    )


def family(pid: int) -> list[int]:
    """``pid`` and its descendants (a broker and its follower processes), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, []))
    return out


def test_low_watermark_waits_for_the_followers(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    try:
        admin.create_topics(
            [
                NewTopic(
                    TOPIC, -1, -1, replica_assignments={0: [1, 2, 3]}, topic_configs={"segment.bytes": "1024"}
                )
            ]
        )
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"y" * 200, key=str(i).encode(), partition=0)
            producer.flush(10)
        assert producer.flush(10) == 0
        for node in (1, 2, 3):
            wait_until(
                lambda node=node: len(segment_bases(cluster, node)) > 5, 20, f"segments on broker {node}"
            )

        tp = TopicPartition(TOPIC, 0)
        assert admin.delete_records({tp: 12}, timeout_ms=15_000)[tp]["low_watermark"] == 12
        for node in (1, 2, 3):  # the leader at once, the followers by their retention check
            wait_until(
                lambda node=node: segment_bases(cluster, node)[0] >= 10,
                20,
                f"old segments gone on broker {node}",
            )
            assert segment_bases(cluster, node)[0] <= 12

        # a follower that cannot fetch (broker 3 and its follower processes paused) holds the low
        # watermark down: the answer is REQUEST_TIMED_OUT at the request's timeout
        broker = cluster.brokers[3].pid
        assert broker is not None
        paused = family(broker)
        assert len(paused) >= 2, paused  # the broker and its follower process
        offsets = tmp_path / "offsets.json"
        offsets.write_text(
            f'{{"partitions": [{{"topic": "{TOPIC}", "partition": 0, "offset": 25}}], "version": 1}}'
        )
        argv = [
            "delete-records",
            "--bootstrap-server",
            cluster.brokers[1].bootstrap,
            "--offset-json-file",
            str(offsets),
        ]
        for pid in paused:
            os.kill(pid, signal.SIGSTOP)
        try:
            code = main([*argv, "--timeout-ms", "1000"])
        finally:
            for pid in paused:
                os.kill(pid, signal.SIGCONT)
        out = capsys.readouterr().out
        assert code == 1 and f"partition: {TOPIC}-0\terror: REQUEST_TIMED_OUT" in out, (out, paused)
        assert segment_bases(cluster, 1)[0] >= 20  # the leader moved and trimmed anyway

        # resumed, the follower catches up with the log start offset and trims its log too
        wait_until(lambda: segment_bases(cluster, 3)[0] >= 20, 30, "old segments gone on broker 3")
        assert main([*argv, "--timeout-ms", "15000"]) == 0
        assert f"partition: {TOPIC}-0\tlow_watermark: 25" in capsys.readouterr().out
    finally:
        admin.close()
