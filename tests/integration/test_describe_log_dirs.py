"""DescribeLogDirs against real brokers: kafka-python's ``describe_log_dirs`` (at the version it
negotiates, v5) and ``kipling log-dirs``, on a single node with two log dirs and on a 3-node cluster,
where every broker lists the partitions it follows too, sized like their files on disk.

confluent-kafka 2.16.1 has no ``describe_log_dirs`` (librdkafka has no DescribeLogDirs admin API),
so it is not driven here.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.integration.broker_process import BrokerProcess
from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until
from tools.cli import build_parser
from tools.commands.log_dirs import log_dirs_command
from tools.commands.topics import run_async

pytestmark = [pytest.mark.timeout(180)]

TIMEOUT_S = 30


def disk_sizes(log_dir: Path, topic: str) -> dict[int, int]:
    """Each partition of ``topic`` in ``log_dir``: the bytes of its .log segment files."""
    return {
        int(d.name.rpartition("-")[2]): sum(f.stat().st_size for f in d.glob("*.log"))
        for d in log_dir.glob(f"{topic}-*")
        if d.is_dir()
    }


def reported_sizes(log_dir: dict[str, Any], topic: str) -> dict[int, int]:
    return {
        p["partition_index"]: p["partition_size"]
        for t in log_dir["topics"]
        if t["name"] == topic
        for p in t["partitions"]
    }


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for i in range(count):
            producer.send(topic, b"v" * (50 + i), partition=i % partitions).get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=10)


def run_tool(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["log-dirs", *argv])
    out, err = io.StringIO(), io.StringIO()
    status = run_async(log_dirs_command(args, out, err))
    return status, out.getvalue(), err.getvalue()


# -- a single node with two log dirs --------------------------------------------------------------


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("log-dirs-node")
    process = BrokerProcess(root, overrides=[f"log.dirs={root / 'logs'},{root / 'logs2'}"]).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def admin(node: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="log-dirs-test")
    yield client
    client.close()


def test_kafka_python_describes_both_log_dirs_of_a_single_node(node: BrokerProcess, admin: Any) -> None:
    admin.create_topics([NewTopic("sized", 4, 1)])
    produce(node.bootstrap, "sized", 4, 40)
    [answer] = admin.describe_log_dirs()
    assert answer["broker"] == 1
    dirs = {d["log_dir"]: d for d in answer["log_dirs"]}
    logs, logs2 = node.data_dir / "logs", node.data_dir / "logs2"
    assert set(dirs) == {str(logs), str(logs2)}
    placed: dict[int, int] = {}
    for path, log_dir in dirs.items():
        assert log_dir["error_code"] == 0
        # v5, the version kafka-python 3.0.12 negotiates: v4's volume sizes and v5's cordon flag
        assert log_dir["total_bytes"] > 0 and 0 <= log_dir["usable_bytes"] <= log_dir["total_bytes"]
        assert log_dir["is_cordoned"] is False
        sizes = reported_sizes(log_dir, "sized")
        assert sizes == disk_sizes(Path(path), "sized")
        for t in log_dir["topics"]:
            assert all(p["offset_lag"] == 0 and p["is_future_key"] is False for p in t["partitions"])
        placed.update(sizes)
    assert sorted(placed) == [0, 1, 2, 3] and all(size > 0 for size in placed.values())
    assert disk_sizes(logs, "sized") and disk_sizes(logs2, "sized")  # spread over both dirs


def test_kafka_python_asks_about_some_partitions(node: BrokerProcess, admin: Any) -> None:
    admin.create_topics([NewTopic("picked", 2, 1)])
    produce(node.bootstrap, "picked", 2, 4)
    [answer] = admin.describe_log_dirs({"picked": [1]})
    listed = [
        (t["name"], p["partition_index"])
        for d in answer["log_dirs"]
        for t in d["topics"]
        for p in t["partitions"]
    ]
    assert listed == [("picked", 1)]


def test_the_tool_prints_kafkas_json(node: BrokerProcess, admin: Any) -> None:
    admin.create_topics([NewTopic("tool", 2, 1)])
    produce(node.bootstrap, "tool", 2, 6)
    status, out, err = run_tool("--bootstrap-server", node.bootstrap, "--describe", "--topic-list", "tool")
    assert (status, err) == (0, "")
    first, second, body = out.splitlines()
    assert first == "Querying brokers for log directories information"
    assert second == "Received log directory information from brokers 1"
    document = json.loads(body)
    assert document["version"] == 1
    [broker] = document["brokers"]
    assert broker["broker"] == 1
    seen = {}
    for log_dir in broker["logDirs"]:
        assert log_dir["error"] is None
        assert list(log_dir) == ["logDir", "error", "partitions"]
        on_disk = disk_sizes(Path(log_dir["logDir"]), "tool")
        for p in log_dir["partitions"]:
            assert list(p) == ["partition", "size", "offsetLag", "isFuture"]
            assert p["partition"].startswith("tool-")  # --topic-list keeps only its topics
            index = int(p["partition"].rpartition("-")[2])
            assert (p["size"], p["offsetLag"], p["isFuture"]) == (on_disk[index], 0, False)
            seen[index] = p["size"]
    assert sorted(seen) == [0, 1]


def test_the_tool_refuses_a_broker_the_cluster_does_not_have(node: BrokerProcess) -> None:
    status, out, err = run_tool("--bootstrap-server", node.bootstrap, "--describe", "--broker-list", "1,7")
    assert status == 1 and out == ""
    assert err == (
        "ERROR: The given brokers do not exist from --broker-list: 7. Current existent brokers: 1\n"
    )


# -- a 3-node cluster: followers' partitions too --------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("log-dirs-cluster"), overrides=FAST_FAILOVER).start()
    try:
        yield running
    finally:
        running.stop()


def test_every_broker_lists_the_partitions_it_leads_and_follows(cluster: Cluster) -> None:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="log-dirs-cluster-test")
    try:
        client.create_topics([NewTopic("replicated", 3, 3)])
        produce(cluster.bootstrap, "replicated", 3, 30)

        def sizes_everywhere() -> dict[int, dict[int, int]]:
            answers = client.describe_log_dirs({"replicated": [0, 1, 2]})
            out: dict[int, dict[int, int]] = {}
            for answer in answers:
                [log_dir] = answer["log_dirs"]
                assert log_dir["error_code"] == 0
                assert log_dir["log_dir"] == str(cluster.brokers[answer["broker"]].data_dir / "logs")
                out[answer["broker"]] = reported_sizes(log_dir, "replicated")
            return out

        # acks=all: every replica in the ISR has the records; wait (bounded) for the followers' fetches
        # of the last high watermark to settle, so that every replica reports the same sizes
        wait_until(
            lambda: (
                (s := sizes_everywhere()).keys() == {1, 2, 3}
                and all(sizes == s[1] and len(sizes) == 3 for sizes in s.values())
            ),
            TIMEOUT_S,
            "every broker to report the three replicas with the same sizes",
        )
        final = sizes_everywhere()
        for broker, sizes in final.items():
            assert sizes == disk_sizes(cluster.brokers[broker].data_dir / "logs", "replicated")
            assert all(size > 0 for size in sizes.values())
    finally:
        client.close()
    status, out, err = run_tool(
        "--bootstrap-server",
        cluster.bootstrap,
        "--describe",
        "--topic-list",
        "replicated",
        "--broker-list",
        "2,3",
    )
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[1] == "Received log directory information from brokers 2,3"
    document = json.loads(lines[2])
    assert [b["broker"] for b in document["brokers"]] == [2, 3]
    for b in document["brokers"]:
        [log_dir] = b["logDirs"]
        assert sorted(p["partition"] for p in log_dir["partitions"]) == [
            "replicated-0",
            "replicated-1",
            "replicated-2",
        ]
        assert {int(p["partition"][-1]): p["size"] for p in log_dir["partitions"]} == final[b["broker"]]
