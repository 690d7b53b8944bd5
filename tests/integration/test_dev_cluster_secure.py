"""`kipling dev-cluster --secure`: three brokers with SASL_SSL on every listener (client,
inter-broker and controller), certificates from a dev CA, PLAIN users; clients and kipling's tools
use what it writes (the CA, client.properties)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.dev_cluster_process import DevCluster, kipling_command


def _client(cluster: DevCluster) -> dict[str, Any]:
    return {
        "bootstrap.servers": ",".join(f"127.0.0.1:{port}" for port in cluster.ports),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(cluster.data_dir / "pki" / "ca.pem"),
    }


def _brokers_listed(admin: AdminClient) -> dict[int, object]:
    """The brokers a Metadata answer lists; none while no broker answers yet."""
    try:
        return admin.list_topics(timeout=10).brokers
    except KafkaException:
        return {}


@pytest.mark.slow
def test_a_secured_dev_cluster_replicates_and_serves_its_tools(tmp_path: Path) -> None:
    cluster = DevCluster(tmp_path, 3, secure=True)
    try:
        deadline = time.monotonic() + 60
        while not (cluster.data_dir / "client.properties").exists():  # written before any broker starts
            assert cluster.process.poll() is None, cluster.err()
            assert time.monotonic() < deadline, cluster.err()
            time.sleep(0.1)
        admin = AdminClient(_client(cluster))
        while len(_brokers_listed(admin)) < 3:  # the brokers start after client.properties is written
            assert cluster.process.poll() is None, cluster.err()
            assert time.monotonic() < deadline, cluster.out()[-3000:]
            time.sleep(0.5)
        admin.create_topics([NewTopic("secured", 3, 3)])["secured"].result(timeout=60)
        producer = Producer({**_client(cluster), "acks": "all"})
        for i in range(100):
            producer.produce("secured", b"s-%d" % i)
        assert producer.flush(60) == 0
        consumer = Consumer({**_client(cluster), "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["secured"])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        consumer.close()
        assert sorted(values) == sorted(b"s-%d" % i for i in range(100))
        listed = subprocess.run(
            [
                *kipling_command(),
                "topics",
                "--bootstrap-server",
                f"127.0.0.1:{cluster.base}",
                "--command-config",
                str(cluster.data_dir / "client.properties"),
                "--list",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        assert "secured" in listed.stdout.split()
        assert "secured: SASL_SSL everywhere" in cluster.err() + cluster.out()
    finally:
        cluster.stop()
