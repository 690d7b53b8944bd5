"""Debian's Prometheus scraping ``kipling dev-cluster`` with the shipped ``config/prometheus.yml``.

What an operator of the docker-compose cluster sees, checked through Prometheus's own query API
rather than by reading /metrics directly: every broker is an ``up`` target, exports the fetch
session cache gauges and eviction counter, and counts the sessions of the other brokers' follower
fetchers as privileged; the follower processes' per-partition lag and request counters reach
Prometheus through their broker's /metrics.

The topic's assignment is pinned so that each broker leads one partition and follows two; with
``num.replica.fetchers=2`` (config/cluster) a follower broker still opens one session per leader it
fetches from (one partition, one fetcher), so every leader holds exactly two privileged sessions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.integration.broker_process import free_port
from tests.integration.dev_cluster_process import ROOT, DevCluster

PROMETHEUS = shutil.which("prometheus")
TOPIC = "scraped"
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
RECORDS_PER_PARTITION = 50

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="Debian's prometheus is not installed (make system-deps installs it)"
)


class Prometheus:
    """A Prometheus server on a free loopback port, its TSDB and log in the test's directory."""

    def __init__(self, work: Path, targets: list[str]) -> None:
        self.port = free_port()
        work.mkdir(parents=True, exist_ok=True)
        config = yaml.safe_load((ROOT / "config" / "prometheus.yml").read_text())
        config["global"]["scrape_interval"] = "1s"
        [job] = config["scrape_configs"]
        job["scrape_interval"] = "1s"
        job["static_configs"] = [{"targets": targets}]
        self.config_path = work / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.log_path = work / "prometheus.log"
        assert PROMETHEUS is not None
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={work / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def query(self, expr: str) -> dict[str, float]:
        """Instant query: ``instance`` label → value (one series per target)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as response:
            body: dict[str, Any] = json.load(response)
        assert body["status"] == "success", body
        return {r["metric"].get("instance", ""): float(r["value"][1]) for r in body["data"]["result"]}

    def wait_for(self, expr: str, expected: dict[str, float], timeout_s: float = 45) -> None:
        deadline = time.monotonic() + timeout_s
        seen: dict[str, float] | str = "nothing yet"
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()
            try:
                seen = self.query(expr)
            except OSError as exc:
                seen = repr(exc)
            if seen == expected:
                return
            time.sleep(0.5)
        raise AssertionError(f"{expr}: expected {expected}, Prometheus says {seen}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    running = DevCluster(tmp_path / "cluster-run", 3)
    try:
        running.wait_until_serving(timeout_s=30)
        yield running
    finally:
        running.stop()


def _bootstrap(cluster: DevCluster) -> str:
    return ",".join(f"127.0.0.1:{port}" for port in cluster.ports)


def _create_and_fill_topic(cluster: DevCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=_bootstrap(cluster), request_timeout_ms=15_000)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments=ASSIGNMENT)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=_bootstrap(cluster), acks="all", request_timeout_ms=15_000)
    try:
        for partition in ASSIGNMENT:
            for i in range(RECORDS_PER_PARTITION):
                producer.send(TOPIC, f"p{partition}-{i}".encode(), partition=partition)
        producer.flush(30)
    finally:
        producer.close()


def test_prometheus_sees_every_brokers_fetch_sessions_and_follower_metrics(
    cluster: DevCluster, tmp_path: Path
) -> None:
    instances = [f"127.0.0.1:{cluster.metrics + i}" for i in range(3)]
    _create_and_fill_topic(cluster)
    prometheus = Prometheus(tmp_path / "prometheus", instances)
    try:
        every = dict.fromkeys(instances, 1.0)
        prometheus.wait_for('up{job="kipling"}', every)

        # Each broker leads one partition, fetched by one follower session of each other broker.
        two_each = dict.fromkeys(instances, 2.0)
        prometheus.wait_for("kipling_fetchsessioncache_privilegedsessions", two_each)
        prometheus.wait_for(
            "kipling_fetchsessioncache_privilegedpartitionscached", dict.fromkeys(instances, 2.0)
        )
        # Kafka's totals include them; no client has a session here, so they are exactly the followers'.
        prometheus.wait_for("kafka_server_fetchsessioncache_numincrementalfetchsessions", two_each)
        prometheus.wait_for("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", two_each)
        prometheus.wait_for(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total",
            {instance: 0.0 for instance in instances},
        )

        # Follower processes: one lag series per followed partition, caught up after the acks=all writes.
        lag = f'kafka_server_fetcherlagmetrics_consumerlag{{topic="{TOPIC}"}}'
        prometheus.wait_for(f"count by (instance) ({lag})", two_each)
        prometheus.wait_for(f"max by (instance) ({lag})", dict.fromkeys(instances, 0.0))
        requests = prometheus.query("sum by (instance) (kafka_server_fetcherstats_requestspersec_total)")
        assert set(requests) == set(instances) and min(requests.values()) > 0, requests
        fetched = prometheus.query("sum by (instance) (kafka_server_fetcherstats_bytespersec_total)")
        produced_per_broker = 2 * RECORDS_PER_PARTITION * len(b"p0-00")
        assert set(fetched) == set(instances) and min(fetched.values()) >= produced_per_broker, fetched
    finally:
        prometheus.stop()
