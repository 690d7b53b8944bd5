"""A cluster of real broker processes on loopback for the replication tests.

The first ``voters`` brokers also run a controller (each its CONTROLLER listener on a port of its
own) and form the metadata quorum; every broker names them in ``controller.quorum.voters``.
Timeouts are short so that failover happens within a few seconds: sessions expire after
``broker.session.timeout.ms`` and followers leave the ISR after ``replica.lag.time.max.ms``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from protocol.records import iter_all_records
from tests.integration.broker_process import BrokerProcess, free_port

FAST_FAILOVER = (
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=3000",
    "replica.fetch.wait.max.ms=200",
    "replica.fetch.backoff.ms=200",
    "default.replication.factor=3",
    "min.insync.replicas=2",
    "num.partitions=1",
    "num.replica.fetchers=1",
    "log.flush.interval.messages=1",
)


@dataclass
class Cluster:
    root: Path
    size: int = 3
    overrides: Sequence[str] = FAST_FAILOVER
    voters: int = 1
    controller_ports: dict[int, int] = field(default_factory=dict)
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in range(1, self.voters + 1):
            self.controller_ports.setdefault(node, free_port())
        voters = "controller.quorum.voters=" + ",".join(
            f"{node}@127.0.0.1:{port}" for node, port in sorted(self.controller_ports.items())
        )
        for node in range(1, self.size + 1):
            process = BrokerProcess(self.root / f"broker-{node}")
            listeners = f"PLAINTEXT://127.0.0.1:{process.port}"
            roles = "broker"
            if node in self.controller_ports:
                listeners += f",CONTROLLER://127.0.0.1:{self.controller_ports[node]}"
                roles = "broker,controller"
            process.overrides = [
                f"node.id={node}",
                f"process.roles={roles}",
                voters,
                "controller.listener.names=CONTROLLER",
                f"listeners={listeners}",
                "cluster.id=kipling-test-cluster",
                *self.overrides,
            ]
            self.brokers[node] = process

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    @property
    def controller_port(self) -> int:
        """The first voter's controller port."""
        return self.controller_ports[1]

    def start(self, timeout_s: float = 30.0) -> Cluster:
        """Launch every broker, then wait for each (no voter is ready before a majority runs)."""
        for process in self.brokers.values():
            process.launch()
        for process in self.brokers.values():
            process.wait_listening(timeout_s)
        return self

    def stop(self) -> None:
        for process in reversed(list(self.brokers.values())):
            process.stop()

    def partition_dir(self, node: int, topic: str, partition: int) -> Path:
        return self.brokers[node].data_dir / "logs" / f"{topic}-{partition}"


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def log_bytes(directory: Path) -> bytes:
    """The concatenated .log segments of a partition directory (what the replicas must agree on)."""
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def read_values(directory: Path) -> list[bytes]:
    """Every record value of a partition directory, read with storage's own reader."""
    return [r.value or b"" for r in iter_all_records(log_bytes(directory))]


def consume_values(
    bootstrap: str, topic: str, count: int, *, partition: int = 0, timeout_ms: int = 15_000, **config: Any
) -> dict[bytes, int]:
    """Read ``partition`` from offset 0 with kafka-python through whoever leads it now, until
    ``count`` distinct values or ``timeout_ms`` without a record; returns value -> offset."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=timeout_ms, **config
    )
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    seen: dict[bytes, int] = {}
    try:
        for message in consumer:
            seen[message.value] = message.offset
            if len(seen) >= count:
                break
    finally:
        consumer.close()
    return seen


__all__ = ["FAST_FAILOVER", "Cluster", "consume_values", "log_bytes", "read_values", "wait_until"]
