"""Three nodes whose every listener is SASL_SSL: kipling's own connections authenticate too.

Each node is broker and controller (three voters), with two listeners and no plaintext port at all:
SASL_SSL for clients and other brokers (inter.broker.listener.name) and CONTROLLER, also SASL_SSL,
for the quorum and the brokers' controller channels. Brokers and controllers log in with SASL/PLAIN
from the JAAS of each listener (``username``/``password``, as Kafka's inter-broker login reads
them); PLAIN rather than SCRAM because SCRAM credentials live in the metadata, which brokers can
only read once they are logged in (Kafka bootstraps them with ``kafka-storage format --add-scram``).

So every connection a node makes to another is TLS plus SASL: the Raft quorum's Vote and Fetch, the
brokers' registration, heartbeats and metadata fetch, and the follower processes' replica fetches,
whose credentials reach them over their IPC channel. A confluent-kafka producer (acks=all,
idempotent, min.insync.replicas=2) writes a replication-factor-3 topic over SASL_SSL, its leader is
killed with SIGKILL mid-stream, and every acknowledged record must be read back. ``kipling topics``
then lists the topic through ``--command-config``.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from security.dev_certs import write_dev_pki
from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until
from tools.cli import main

pytestmark = pytest.mark.timeout(300)
"""About 20 s on an idle machine (under the ~30 s that makes a test slow); the bound leaves room
for a loaded one, as the three nodes start together and each runs a follower process."""

TOPIC = "secured"
CLIENT_PASSWORD = "alice-Secret-7"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"
BROKER_JAAS = (
    f'{PLAIN_MODULE} username="broker" password="broker-Secret-1" '
    f'user_broker="broker-Secret-1" user_alice="{CLIENT_PASSWORD}";'
)
CONTROLLER_JAAS = (
    f'{PLAIN_MODULE} username="controller" password="controller-Secret-2" '
    'user_controller="controller-Secret-2";'
)


@dataclass
class SecuredCluster:
    cluster: Cluster
    ca: Path

    def client_config(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.cluster.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": CLIENT_PASSWORD,
            "ssl.ca.location": str(self.ca),
            **extra,
        }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    root = tmp_path_factory.mktemp("secured-cluster")
    pki = write_dev_pki(root / "pki", ("broker",))
    security = [
        "listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name=SASL_SSL",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={pki.keystores['broker']}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={pki.ca}",
        "sasl.enabled.mechanisms=PLAIN",
        "sasl.mechanism.inter.broker.protocol=PLAIN",
        "sasl.mechanism.controller.protocol=PLAIN",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={BROKER_JAAS}",
        f"listener.name.controller.plain.sasl.jaas.config={CONTROLLER_JAAS}",
    ]
    cluster = Cluster(root, voters=3, overrides=[*FAST_FAILOVER, *security])
    for node, process in cluster.brokers.items():
        # no plaintext listener: the client port is SASL_SSL (the helper's listeners= is replaced)
        controller = cluster.controller_ports[node]
        process.overrides.append(
            f"listeners=SASL_SSL://127.0.0.1:{process.port},CONTROLLER://127.0.0.1:{controller}"
        )
    cluster.start(timeout_s=90)
    try:
        yield SecuredCluster(cluster, pki.ca)
    finally:
        cluster.stop()


class StreamingProducer:
    """confluent-kafka writing ``TOPIC`` over SASL_SSL in a thread until stopped."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.acked: dict[bytes, int] = {}
        self.failed: list[str] = []
        self.unflushed = -1
        self._thread = threading.Thread(target=self._run, name="secured-producer", daemon=True)

    def _delivered(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            if err is None:
                self.acked[msg.value()] = msg.offset()
            else:
                self.failed.append(str(err))

    def _run(self) -> None:
        producer = Producer(self._config)
        sent = 0
        while not self._stop.is_set():
            producer.produce(TOPIC, f"v{sent}".encode(), on_delivery=self._delivered)
            sent += 1
            producer.poll(0.005)
        self.unflushed = producer.flush(60)

    def start(self) -> StreamingProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_for_more(self, count: int, what: str, timeout_s: float = 60) -> None:
        target = self.acked_count() + count
        wait_until(lambda: self.acked_count() >= target, timeout_s, f"{count} more acks {what}")

    def stop(self) -> dict[bytes, int]:
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "the producer did not finish flushing"
        with self._lock:
            return dict(self.acked)


def _read_all(config: dict[str, Any], wanted: set[bytes], timeout_s: float = 60) -> set[bytes]:
    """Values of partition 0 from the beginning, until ``wanted`` are all seen or ``timeout_s``."""
    consumer = Consumer({**config, "group.id": "secured-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while not wanted <= seen and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value() or b"")
    finally:
        consumer.close()
    return seen


def test_acknowledged_records_survive_the_leader_killed_on_a_sasl_ssl_cluster(
    secured: SecuredCluster,
) -> None:
    admin = AdminClient(secured.client_config())
    created = admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[2, 3, 1]])], operation_timeout=30)
    created[TOPIC].result(timeout=60)
    producer = StreamingProducer(
        secured.client_config(
            **{
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 60_000,
                "socket.timeout.ms": 5000,
                "request.timeout.ms": 5000,
                "retry.backoff.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
                "linger.ms": 5,
            }
        )
    ).start()
    try:
        # min.insync.replicas=2 with acks=all: these acks need a follower process fetching over SASL_SSL
        producer.wait_for_more(100, "before the leader is killed")
        assert secured.cluster.brokers[2].stop(signal.SIGKILL) == -signal.SIGKILL
        producer.wait_for_more(200, "after failing over to a new leader")
    finally:
        acked = producer.stop()
    assert producer.unflushed == 0, f"{producer.unflushed} records never got an outcome"
    seen = _read_all(secured.client_config(), set(acked))
    lost = sorted(set(acked) - seen)
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost, e.g. {lost[:5]}"
    assert len(acked) >= 300
    for node in (1, 3):
        survivor = secured.cluster.brokers[node]
        logins = survivor.metric(
            "kafka_server_socketservermetrics_successful_authentication_total", listener="SASL_SSL"
        )
        assert logins > 0, f"no SASL login on node {node}'s SASL_SSL listener"
    secured.cluster.brokers[2].start(timeout_s=60)  # rejoins over SASL_SSL for the next test


def _properties(path: Path, secured: SecuredCluster, password: str) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.ca}\n"
        "sasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={PLAIN_MODULE} \\\n"
        f'    username="alice" password="{password}";\n'
        "client.id=ignored-by-kipling\n"
    )
    return path


def test_kipling_topics_lists_over_sasl_ssl_with_command_config(
    secured: SecuredCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = secured.cluster.brokers[1].bootstrap
    good = _properties(tmp_path / "client.properties", secured, CLIENT_PASSWORD)
    code = main(["topics", "--bootstrap-server", bootstrap, "--command-config", str(good), "--list"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert TOPIC in captured.out.split()
    assert "client.id" in captured.err  # the unknown key is warned about, not fatal

    wrong = "not-" + CLIENT_PASSWORD
    bad = _properties(tmp_path / "bad.properties", secured, wrong)
    code = main(["topics", "--bootstrap-server", bootstrap, "--command-config", str(bad), "--list"])
    captured = capsys.readouterr()
    assert code == 1
    assert "SASL_AUTHENTICATION_FAILED" in captured.err, captured.err
    assert wrong not in captured.err and wrong not in captured.out
