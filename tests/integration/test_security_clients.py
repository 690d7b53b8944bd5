"""TLS and SASL with real clients: confluent-kafka, kafka-python, aiokafka and kcat against one broker
process serving PLAINTEXT, SSL (mutual TLS requested), SSL with mutual TLS required, SASL_SSL and
SASL_PLAINTEXT listeners, with PLAIN users from the JAAS configuration and SCRAM users created
through AlterUserScramCredentials.

Every refusal (wrong password, unknown user, wrong mechanism, untrusted or expired certificate, a
plaintext client on a TLS port, a client without a certificate where one is required) must fail the
client cleanly while the broker keeps serving the others.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.api import encode_request
from protocol.framing import encode_frame
from security.plain import plain_token
from tests.integration.client_helpers import KCAT, wait_until
from tests.integration.secured_broker import (
    AUTHENTICATION_TIMEOUT_MS,
    REAUTH_MS,
    SecuredBroker,
    start_secured_broker,
)

MESSAGES = 200


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    broker = start_secured_broker(tmp_path_factory)
    yield broker
    broker.process.stop()


def _client_config(broker: SecuredBroker, kind: str) -> dict[str, Any]:
    """librdkafka settings for each way in."""
    tls = {"ssl.ca.location": broker.ca}
    return {
        "ssl": {"bootstrap.servers": broker.address("SSL"), "security.protocol": "SSL", **tls},
        "mtls": {
            "bootstrap.servers": broker.address("MTLS"),
            "security.protocol": "SSL",
            "ssl.certificate.location": broker.pem("alice"),
            "ssl.key.location": broker.pem("alice"),
            **tls,
        },
        "sasl_ssl_plain": {
            "bootstrap.servers": broker.address("SASL_SSL"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            **tls,
        },
        "sasl_ssl_scram512": {
            "bootstrap.servers": broker.address("SASL_SSL"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol",
            "sasl.password": "carol-secret",
            **tls,
        },
        "sasl_ssl_scram256": {
            "bootstrap.servers": broker.address("SASL_SSL"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "carol",
            "sasl.password": "carol-secret",
            **tls,
        },
        "sasl_plaintext_plain": {
            "bootstrap.servers": broker.address("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        },
    }[kind]


def _topic(broker: SecuredBroker, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.process.bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(timeout=30)
    return name


def _confluent_round_trip(config: dict[str, Any], topic: str) -> list[bytes]:
    producer = Producer({**config, "linger.ms": 5, "message.timeout.ms": 30000})
    errors: list[Any] = []
    for i in range(MESSAGES):
        producer.produce(
            topic, b"value-%d" % i, key=b"%d" % i, on_delivery=lambda e, m: e and errors.append(e)
        )
    assert producer.flush(60) == 0 and not errors, errors[:1]
    consumer = Consumer(
        {**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.partition.eof": False}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(600):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) >= MESSAGES:
                break
    finally:
        consumer.close()
    return values


KINDS = ["ssl", "mtls", "sasl_ssl_plain", "sasl_ssl_scram512", "sasl_plaintext_plain"]
"""Every way in: TLS, mutual TLS, SASL_SSL with PLAIN and with SCRAM-SHA-512, SASL_PLAINTEXT."""


@pytest.mark.parametrize("kind", KINDS)
def test_confluent_produces_and_consumes_over_each_listener(secured: SecuredBroker, kind: str) -> None:
    topic = _topic(secured, f"sec-{kind.replace('_', '-')}")
    values = _confluent_round_trip(_client_config(secured, kind), topic)
    assert sorted(values) == sorted(b"value-%d" % i for i in range(MESSAGES))


def _python_client_config(broker: SecuredBroker, kind: str) -> dict[str, Any]:
    """kafka-python's (and aiokafka's) names for the librdkafka settings of ``kind``."""
    rd = _client_config(broker, kind)
    config: dict[str, Any] = {
        "bootstrap_servers": rd["bootstrap.servers"],
        "security_protocol": rd["security.protocol"],
    }
    if "sasl.mechanism" in rd:
        config |= {
            "sasl_mechanism": rd["sasl.mechanism"],
            "sasl_plain_username": rd["sasl.username"],
            "sasl_plain_password": rd["sasl.password"],
        }
    if "ssl.ca.location" in rd:
        config |= {"ssl_cafile": rd["ssl.ca.location"], "ssl_check_hostname": True}
    if "ssl.certificate.location" in rd:
        config |= {"ssl_certfile": rd["ssl.certificate.location"], "ssl_keyfile": rd["ssl.key.location"]}
    return config


@pytest.mark.parametrize("kind", KINDS)
def test_kafka_python_round_trip(secured: SecuredBroker, kind: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    config = _python_client_config(secured, kind)
    topic = _topic(secured, f"kp-{kind.replace('_', '-')}")
    producer = KafkaProducer(**config)
    for i in range(MESSAGES):
        producer.send(topic, b"kp-%d" % i)
    producer.flush(timeout=60)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=20000, **config)
    values = [message.value for _, message in zip(range(MESSAGES), consumer, strict=False)]
    consumer.close()
    assert sorted(values) == sorted(b"kp-%d" % i for i in range(MESSAGES))


@pytest.mark.parametrize("kind", [*KINDS, "sasl_ssl_scram256"])
def test_aiokafka_round_trip(secured: SecuredBroker, kind: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = _topic(secured, f"aio-{kind.replace('_', '-')}")
    config = _python_client_config(secured, kind)
    if "ssl_cafile" in config:  # aiokafka takes an SSL context
        config["ssl_context"] = create_ssl_context(
            cafile=config.pop("ssl_cafile"),
            certfile=config.pop("ssl_certfile", None),
            keyfile=config.pop("ssl_keyfile", None),
        )
        config.pop("ssl_check_hostname")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for i in range(MESSAGES):
                await producer.send(topic, b"aio-%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **config)
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for message in consumer:
                    values.append(message.value)
                    if len(values) >= MESSAGES:
                        break
        finally:
            await consumer.stop()
        return values

    assert sorted(asyncio.run(run())) == sorted(b"aio-%d" % i for i in range(MESSAGES))


@pytest.mark.parametrize("kind", KINDS)
def test_kcat_round_trip(secured: SecuredBroker, kind: str) -> None:
    topic = _topic(secured, f"kcat-{kind.replace('_', '-')}")
    rd = _client_config(secured, kind)
    common = [KCAT, "-b", rd.pop("bootstrap.servers")]
    if "sasl.mechanism" in rd:  # kcat 1.7 (librdkafka 2.0) spells it sasl.mechanisms
        rd["sasl.mechanisms"] = rd.pop("sasl.mechanism")
    for key, value in rd.items():
        common += ["-X", f"{key}={value}"]
    lines = "".join(f"kcat-{i}\n" for i in range(MESSAGES))
    subprocess.run([*common, "-P", "-t", topic], input=lines.encode(), check=True, timeout=60)
    out = subprocess.run(
        [*common, "-C", "-t", topic, "-o", "beginning", "-c", str(MESSAGES), "-e"],
        check=True,
        timeout=60,
        capture_output=True,
    )
    assert sorted(out.stdout.decode().split()) == sorted(f"kcat-{i}" for i in range(MESSAGES))


# -- refusals ------------------------------------------------------------------------------------


def _refused_by_confluent(config: dict[str, Any]) -> str:
    """The error a librdkafka admin request gets through ``config``: it must not succeed."""
    admin = AdminClient({**config, "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException) as failure:
        admin.list_topics(timeout=5)
    return str(failure.value)


def _failed_authentications(broker: SecuredBroker, listener: str) -> float:
    return broker.process.metric(
        "kafka_server_socketservermetrics_failed_authentication_total", listener=listener
    )


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("sasl_ssl_plain", {"sasl.password": "wrong-password-1"}),
        ("sasl_ssl_plain", {"sasl.username": "nobody"}),
        ("sasl_ssl_scram512", {"sasl.password": "wrong-password-2"}),
        ("sasl_plaintext_plain", {"sasl.mechanism": "SCRAM-SHA-256"}),
    ],
)
def test_bad_credentials_and_mechanisms_are_refused_and_counted(
    secured: SecuredBroker, kind: str, change: dict[str, str]
) -> None:
    config = {**_client_config(secured, kind), **change}
    listener = "SASL_SSL" if kind.startswith("sasl_ssl") else "SASL_PLAINTEXT"
    before = _failed_authentications(secured, listener)
    _refused_by_confluent(config)
    if "sasl.mechanism" not in change:  # a refused mechanism fails the handshake, not an exchange
        assert wait_until(lambda: _failed_authentications(secured, listener) > before, 10)
    if "sasl.password" in change:  # logged and counted, never with the password tried
        assert change["sasl.password"] not in secured.process.output()
    _still_serving(secured)


@pytest.mark.parametrize(
    ("listener", "settings"),
    [
        ("MTLS", {}),  # no client certificate where one is required
        ("MTLS", {"ssl.certificate.location": "expired", "ssl.key.location": "expired"}),
        ("MTLS", {"ssl.certificate.location": "stranger", "ssl.key.location": "stranger"}),
        ("SSL", {"ssl.ca.location": "stranger-ca"}),  # the client does not trust the broker
    ],
)
def test_certificates_that_do_not_verify_are_refused(
    secured: SecuredBroker, listener: str, settings: dict[str, str]
) -> None:
    config = {
        "bootstrap.servers": secured.address(listener),
        "security.protocol": "SSL",
        "ssl.ca.location": secured.ca,
        **{key: secured.pem(value) if value else value for key, value in settings.items()},
    }
    _refused_by_confluent(config)
    _still_serving(secured)


def test_plaintext_client_on_a_tls_port_and_tls_client_on_a_plaintext_port(secured: SecuredBroker) -> None:
    _refused_by_confluent({"bootstrap.servers": secured.address("SSL")})
    _refused_by_confluent(
        {
            "bootstrap.servers": secured.process.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": secured.ca,
        }
    )
    _still_serving(secured)


def test_a_client_sending_requests_before_authenticating_is_disconnected(secured: SecuredBroker) -> None:
    """A Metadata request before the SASL handshake closes the connection, unanswered (Kafka's
    IllegalSaslStateException)."""
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(encode_frame(encode_request(3, 1, 7, "probe", {"topics": []})))
        assert sock.recv(4) == b""
    _still_serving(secured)


def _still_serving(broker: SecuredBroker) -> None:
    admin = AdminClient(_client_config(broker, "sasl_ssl_plain"))
    assert admin.list_topics(timeout=20).brokers


def test_a_connection_that_does_not_authenticate_is_closed_in_time(secured: SecuredBroker) -> None:
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=30) as idle:
        idle.settimeout(AUTHENTICATION_TIMEOUT_MS / 1000 * 5)
        assert idle.recv(1) == b""  # closed by the broker, not by this timeout
    with socket.create_connection(("127.0.0.1", secured.ports["SSL"]), timeout=30) as no_handshake:
        no_handshake.settimeout(AUTHENTICATION_TIMEOUT_MS / 1000 * 5)
        assert no_handshake.recv(1) == b""
    _still_serving(secured)


def test_raw_tokens_after_a_v0_handshake(secured: SecuredBroker) -> None:
    """SaslHandshake v0, then the PLAIN token as a bare size-prefixed frame (pre-KIP-152 clients)."""
    from protocol.api import decode_response

    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=30) as sock:
        reader = sock.makefile("rb")

        def frame() -> bytes:
            size = int.from_bytes(reader.read(4), "big")
            return reader.read(size)

        sock.sendall(encode_frame(encode_request(17, 0, 1, "raw", {"mechanism": "PLAIN"})))
        handshake = decode_response(frame(), 17, 0)
        assert handshake.body.error_code == 0
        sock.sendall(encode_frame(plain_token("alice", "alice-secret")))
        assert frame() == b""  # PLAIN's (empty) server token, raw
        sock.sendall(encode_frame(encode_request(3, 1, 2, "raw", {"topics": []})))
        metadata = decode_response(frame(), 3, 1)
        assert metadata.header.correlation_id == 2 and metadata.body.brokers


def test_librdkafka_reauthenticates_before_its_session_expires(secured: SecuredBroker) -> None:
    """KIP-368: with connections.max.reauth.ms the broker hands out a session lifetime; librdkafka
    re-authenticates on the same connection in time, and producing never stops."""
    topic = _topic(secured, "reauth")
    name = "kafka_server_socketservermetrics_successful_authentication_total"
    closes = "kafka_server_socketservermetrics_connection_close_total"
    before = secured.process.metric(name, listener="SASL_PLAINTEXT")
    bad_before = secured.process.metric(closes, reason="bad_request")
    producer = Producer({**_client_config(secured, "sasl_plaintext_plain"), "linger.ms": 1})
    errors: list[Any] = []
    for sent in range(REAUTH_MS * 3 // 100):  # about three session lifetimes
        producer.produce(topic, b"r-%d" % sent, on_delivery=lambda e, m: e and errors.append(e))
        producer.flush(10)
        producer.poll(0.1)
    assert producer.flush(30) == 0 and not errors, errors[:1]
    after = secured.process.metric(name, listener="SASL_PLAINTEXT")
    assert after - before >= 3, (before, after)  # the first login and re-authentications
    assert secured.process.metric(closes, reason="bad_request") == bad_before  # no session expired


def test_the_secure_compose_health_check_passes_against_a_sasl_ssl_listener(secured: SecuredBroker) -> None:
    """docker-compose.secure.yml's health check (TLS, then ApiVersions before authentication),
    pointed at this broker's SASL_SSL port and CA."""
    import sys

    import yaml

    compose = yaml.safe_load((Path(__file__).resolve().parents[2] / "docker-compose.secure.yml").read_text())
    test = compose["x-secure-broker"]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"]
    probe = [
        arg.replace("/pki/ca.pem", secured.ca).replace("9092", str(secured.ports["SASL_SSL"]))
        for arg in test[2:]
    ]
    assert subprocess.run([sys.executable, *probe], timeout=30).returncode == 0


def test_a_refused_login_is_answered_only_after_the_failure_delay(secured: SecuredBroker) -> None:
    """connection.failed.authentication.delay.ms (100 ms by default) holds the answer itself, as
    Kafka does, so a password guesser cannot learn the result sooner."""
    from protocol.api import decode_response

    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=30) as sock:
        reader = sock.makefile("rb")

        def frame() -> bytes:
            size = int.from_bytes(reader.read(4), "big")
            return reader.read(size)

        sock.sendall(encode_frame(encode_request(17, 1, 1, "guess", {"mechanism": "PLAIN"})))
        assert decode_response(frame(), 17, 1).body.error_code == 0
        started = time.monotonic()
        token = plain_token("alice", "guess-1")
        sock.sendall(encode_frame(encode_request(36, 2, 2, "guess", {"auth_bytes": token})))
        answer = decode_response(frame(), 36, 2)
        assert time.monotonic() - started >= 0.09
        assert answer.body.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert reader.read(1) == b""  # then closed
