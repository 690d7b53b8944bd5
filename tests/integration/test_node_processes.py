"""A node of three broker processes (``kipling.node.processes=3``) as real clients see it.

One ``python -m broker`` starts three brokers (node ids 1, 2, 3 on ports P, P+1, P+2); librdkafka
sees three brokers, the partitions of a topic and their leaders spread over all of them, an acks=all
topic of replication factor 3 keeps each replica in another process, every record comes back, and
the node stops as one (SIGTERM) and starts again on the same data. A broker process that dies
stops the whole node, with a non-zero status.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker_process import BrokerProcess, free_port_run
from tests.integration.cluster import wait_until

PROCESSES = 3
PARTITIONS = 6
RECORDS = 600

pytestmark = pytest.mark.timeout(240)


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start(node: BrokerProcess) -> None:
    node.launch()
    wait_until(
        lambda: all(listening(node.port + i) for i in range(PROCESSES)),
        90,
        "every broker of the node listens",
    )


@pytest.fixture
def node(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path,
        overrides=[f"kipling.node.processes={PROCESSES}", "broker.rack=host-a"],
        port=free_port_run(PROCESSES + 1),  # the clients' ports, then the controller's
        metrics_port=free_port_run(PROCESSES),
    )
    start(broker)
    yield broker
    broker.stop(timeout_s=60)


def leaders(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int]]]:
    metadata = admin.list_topics(topic, timeout=10)
    return {p.id: (p.leader, list(p.replicas)) for p in metadata.topics[topic].partitions.values()}


def wait_for_leaders(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int]]]:
    def all_led() -> bool:
        found = leaders(admin, topic)
        return len(found) == PARTITIONS and all(leader >= 0 for leader, _ in found.values())

    wait_until(all_led, 60, f"a leader for every partition of {topic}")
    return leaders(admin, topic)


def produce(bootstrap: str, topic: str, acks: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    failed: list[object] = []
    for i in range(RECORDS):
        producer.produce(
            topic, str(i).encode(), partition=i % PARTITIONS, on_delivery=lambda e, _m: e and failed.append(e)
        )
    assert producer.flush(60) == 0
    assert failed == []


def consume(bootstrap: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.monotonic()}"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[int] = []
    deadline = time.monotonic() + 60
    while len(values) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            values.append(int(message.value()))
    consumer.close()
    return sorted(values)


def test_clients_use_every_broker_of_the_node(node: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    assert sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3]
    for future in admin.create_topics(
        [
            NewTopic("spread", PARTITIONS, 1),
            NewTopic("replicated", PARTITIONS, 3, config={"min.insync.replicas": "2"}),
        ]
    ).values():
        future.result(30)

    spread = wait_for_leaders(admin, "spread")
    assert sorted(leader for leader, _ in spread.values()) == [1, 1, 2, 2, 3, 3]
    replicated = wait_for_leaders(admin, "replicated")
    assert all(sorted(replicas) == [1, 2, 3] for _, replicas in replicated.values())

    produce(node.bootstrap, "spread", acks="1")
    produce(node.bootstrap, "replicated", acks="all")
    assert consume(node.bootstrap, "spread") == list(range(RECORDS))
    assert consume(node.bootstrap, "replicated") == list(range(RECORDS))

    brokers = children_of(node.pid or 0)
    assert len(brokers) == PROCESSES
    assert node.stop(timeout_s=120) == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in brokers)
    assert "unclean" not in node.output().split("kipling-tests: sending SIGTERM")[-1]

    start(node)  # the same data, the same cluster
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    wait_for_leaders(admin, "replicated")
    assert consume(node.bootstrap, "replicated") == list(range(RECORDS))


def test_a_broker_that_dies_stops_the_node(node: BrokerProcess) -> None:
    assert node.process is not None
    brokers = children_of(node.pid or 0)
    assert len(brokers) == PROCESSES
    os.kill(brokers[1], signal.SIGKILL)
    assert node.process.wait(timeout=120) == 1
    assert "exited on its own (killed by SIGKILL)" in node.output()
    assert not any(Path(f"/proc/{pid}").exists() for pid in brokers)  # the others were stopped too
