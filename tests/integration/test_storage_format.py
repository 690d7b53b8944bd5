"""`kipling storage format --add-scram` on a real node: the SCRAM users it bootstraps can log in.

A node is formatted with two SCRAM credentials (Kafka's ``kafka-storage.sh format --add-scram``
syntax), then started with a SASL_PLAINTEXT listener offering SCRAM-SHA-512 and SCRAM-SHA-256; with
no credential ever created through the admin API, confluent-kafka logs in as those users and
produces and consumes. The bootstrap file is kept, and a restart neither writes it again nor loses
the users. A damaged bootstrap file stops the node with one line.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from metadata.bootstrap import BOOTSTRAP_FILE
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.dev_cluster_process import ROOT, kipling_command

pytestmark = [pytest.mark.timeout(180)]

MESSAGES = 50
BOOTSTRAPPED = "wrote the bootstrap metadata into the new metadata log"
ADMIN = "SCRAM-SHA-512=[name=admin,password=admin-secret]"
ALICE = "SCRAM-SHA-256=[name=alice,iterations=8192,password=alice-secret]"


def storage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*kipling_command(), "storage", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def formatted_node(tmp_path: Path, *format_args: str) -> tuple[BrokerProcess, int, str]:
    """A node formatted with ``format_args`` and configured with a SCRAM SASL_PLAINTEXT listener
    (not started); its SASL port and the cluster id the format printed."""
    process = BrokerProcess(tmp_path / "node")
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={process.data_dir / 'logs'}\n")
    result = storage("format", "--config", str(config), *format_args)
    assert result.returncode == 0, result.stdout + result.stderr
    cluster_id = result.stdout.rsplit("with cluster.id ", 1)[1].split(".\n", 1)[0]
    sasl_port = free_port()
    process.overrides = [
        f"listeners=PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
    ]
    return process, sasl_port, cluster_id


def scram(port: int, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def round_trip(config: dict[str, Any], topic: str) -> list[bytes]:
    """Produce MESSAGES records to ``topic`` (auto-created) and consume them back, as the SASL user."""
    producer = Producer({**config, "linger.ms": 5, "message.timeout.ms": 30000})
    errors: list[Any] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    for i in range(MESSAGES):
        producer.produce(topic, b"value-%d" % i, on_delivery=on_delivery)
    assert producer.flush(60) == 0 and not errors, errors[:1]
    consumer = Consumer(
        {**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.partition.eof": False}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(600):
            message = consumer.poll(0.5)
            value = None if message is None or message.error() is not None else message.value()
            if value is not None:
                values.append(value)
            if len(values) >= MESSAGES:
                break
    finally:
        consumer.close()
    return values


def test_users_added_at_format_time_log_in_produce_and_consume(tmp_path: Path) -> None:
    process, sasl_port, cluster_id = formatted_node(
        tmp_path, "--standalone", "-S", ADMIN, "--add-scram", ALICE
    )
    bootstrap = process.data_dir / "logs" / BOOTSTRAP_FILE
    assert b"admin-secret" not in bootstrap.read_bytes() and b"alice-secret" not in bootstrap.read_bytes()
    try:
        process.start(timeout_s=60)
        admin = scram(sasl_port, "SCRAM-SHA-512", "admin", "admin-secret")
        topic = f"bootstrapped-{uuid.uuid4().hex[:8]}"
        values = round_trip(admin, topic)
        assert sorted(values) == sorted(b"value-%d" % i for i in range(MESSAGES))
        assert AdminClient(admin).describe_cluster().result(timeout=30).cluster_id == cluster_id
        alice = AdminClient(scram(sasl_port, "SCRAM-SHA-256", "alice", "alice-secret"))
        assert topic in alice.list_topics(timeout=30).topics
        wrong = AdminClient(
            {**scram(sasl_port, "SCRAM-SHA-512", "admin", "wrong"), "socket.timeout.ms": 5000}
        )
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=5)
        assert process.output().count(BOOTSTRAPPED) == 1

        process.restart()  # the log is no longer empty: the kept file is not read again
        assert bootstrap.exists() and process.output().count(BOOTSTRAPPED) == 1
        assert topic in AdminClient(admin).list_topics(timeout=30).topics
        assert "admin-secret" not in process.output()
    finally:
        process.stop()


def test_formatting_twice_is_refused_unless_ignore_formatted(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}\nnode.id=3\n")
    first = storage("format", "-c", str(config), "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-S", ADMIN)
    assert first.returncode == 0, first.stderr
    again = storage("format", "-c", str(config), "-t", "MkU3OEVBNTcwNTJENDM2Qg")
    assert again.returncode == 1
    assert again.stderr == (
        f"Log directory {tmp_path / 'a'} is already formatted. "
        "Use --ignore-formatted to ignore this directory and format the others.\n"
    )
    ignored = storage("format", "-c", str(config), "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-g")
    assert (ignored.returncode, ignored.stdout) == (0, "All of the log directories are already formatted.\n")


def test_a_damaged_bootstrap_file_stops_the_node_with_one_line(tmp_path: Path) -> None:
    process, _sasl_port, _cluster_id = formatted_node(tmp_path, "--standalone", "-S", ADMIN)
    bootstrap = process.data_dir / "logs" / BOOTSTRAP_FILE
    data = bytearray(bootstrap.read_bytes())
    data[-1] ^= 0xFF  # the batch's CRC no longer holds
    bootstrap.write_bytes(bytes(data))
    process.launch()
    assert process.process is not None
    code = process.process.wait(timeout=60)
    process.process = None
    errors = [line for line in process.output().splitlines() if line.startswith("error: ")]
    assert code != 0 and "Traceback" not in process.output()
    assert len(errors) == 1 and errors[0].startswith(f"error: log.dirs: {bootstrap}: not bootstrap metadata:")
