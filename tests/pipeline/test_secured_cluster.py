"""The pipeline's layer below Spark (cluster, fetch, produce) against secured listeners of a real broker.

The options are Spark's, parsed as ``format("kipling")`` parses them, so what is tested is the whole path
of Kafka's client security keys: ``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.*`` →
:class:`~client.security.ClientSecurityConfig` in the options → the SSLContext and SASL login of the
connection pool. The broker is :mod:`tests.integration.secured_broker`'s (the one the client tests use):
a SASL_SSL listener with SCRAM-SHA-512 and a listener requiring mutual TLS. Topics are created over its
PLAINTEXT listener, which only the setup uses.

A refused login must fail at once with the broker's reason, on the driver (planning) and in a task
(fetch, produce) alike, rather than be retried until ``kafkaConsumer.pollTimeoutMs``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from client.errors import AuthenticationFailedError, TlsHandshakeError
from client.fetch_session import TopicPartition
from pipeline.cluster import BrokerSession, ClusterClient
from pipeline.errors import KiplingOptionError
from pipeline.fetch import ReadTask, read_range
from pipeline.offsets import OffsetRange
from pipeline.options import ConnectionSettings, Subscribe, parse_read_options, parse_write_options
from pipeline.produce import write_batches
from tests.integration.secured_broker import SCRAM_PASSWORD, SecuredBroker
from tests.pipeline.helpers import new_topic

RECORDS = 120
SUCCESSFUL = "kafka_server_socketservermetrics_successful_authentication_total"


@pytest.fixture
def secured(secured_broker: SecuredBroker) -> SecuredBroker:
    return secured_broker


def scram_options(broker: SecuredBroker, password: str = SCRAM_PASSWORD) -> dict[str, str]:
    """Spark options reaching the SASL_SSL listener as a Kafka job would write them: Kafka's client
    security properties with the ``kafka.`` prefix."""
    security = {f"kafka.{key}": value for key, value in broker.scram_properties(password).items()}
    return {"kafka.bootstrap.servers": broker.address("SASL_SSL"), **security}


def rows(count: int) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "key": pa.array([f"k{i}".encode() for i in range(count)], pa.binary()),
            "value": pa.array([f"v{i}".encode() for i in range(count)], pa.binary()),
        }
    )


def read_all(settings: ConnectionSettings, tp: TopicPartition, start: int, end: int) -> list[bytes]:
    task = ReadTask(range=OffsetRange(tp.topic, tp.partition, start, end), connection=settings, leader=None)
    return [v for batch in read_range(task) for v in batch.column("value").to_pylist()]


def test_write_and_read_over_sasl_ssl_with_scram(secured: SecuredBroker) -> None:
    topic = new_topic(secured.process.bootstrap, "secured-pipeline", partitions=2)
    options = scram_options(secured)
    before = secured.process.metric(SUCCESSFUL, listener="SASL_SSL")

    summary = write_batches(parse_write_options({**options, "topic": topic}), [rows(RECORDS)])
    assert summary.records == RECORDS

    read = parse_read_options({**options, "subscribe": topic}, "batch")
    assert read.subscription == Subscribe((topic,))
    with BrokerSession(read.connection) as session:
        partitions = session.partitions(read.subscription, missing_topics="error")
        latest = session.latest(partitions)
        earliest = session.earliest(partitions)
    assert sum(latest.values()) == RECORDS
    values = [v for tp in partitions for v in read_all(read.connection, tp, earliest[tp], latest[tp])]
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(RECORDS))
    # every connection above logged in on the SASL_SSL listener (metadata, ListOffsets, produce, fetch)
    assert secured.process.metric(SUCCESSFUL, listener="SASL_SSL") > before


def test_mutual_tls_with_a_pem_keystore(secured: SecuredBroker) -> None:
    topic = new_topic(secured.process.bootstrap, "mtls-pipeline")
    tls = {
        "kafka.bootstrap.servers": secured.address("MTLS"),
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": secured.ca,
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.location": secured.pem("alice"),
    }
    write_batches(parse_write_options({**tls, "topic": topic}), [rows(10)])
    read = parse_read_options({**tls, "assign": f'{{"{topic}":[0]}}'}, "batch")
    tp = TopicPartition(topic, 0)
    with BrokerSession(read.connection) as session:
        assert session.latest([tp]) == {tp: 10}
    assert read_all(read.connection, tp, 0, 10) == [f"v{i}".encode() for i in range(10)]


@pytest.mark.timeout(60)  # far below kafkaConsumer.pollTimeoutMs (120 s): a retried login would time out
def test_a_wrong_password_fails_at_once_with_the_brokers_reason(secured: SecuredBroker) -> None:
    wrong = "not-" + SCRAM_PASSWORD
    options = scram_options(secured, wrong)
    topic = new_topic(secured.process.bootstrap, "wrong-password")
    read = parse_read_options({**options, "subscribe": topic}, "batch")

    # planning on the driver
    with BrokerSession(read.connection) as session, pytest.raises(AuthenticationFailedError) as planning:
        session.partitions(read.subscription, missing_topics="error")
    # a read task on an executor
    with pytest.raises(AuthenticationFailedError) as fetching:
        read_all(read.connection, TopicPartition(topic, 0), 0, 1)
    # a write task
    with pytest.raises(AuthenticationFailedError) as producing:
        write_batches(parse_write_options({**options, "topic": topic}), [rows(1)])

    for caught in (planning, fetching, producing):
        message = str(caught.value)
        assert "SCRAM-SHA-512" in message and "authentication" in message.lower(), message
        assert wrong not in message and SCRAM_PASSWORD not in message
    assert wrong not in secured.process.output()


@pytest.mark.timeout(60)  # a retried handshake would run into kafkaConsumer.pollTimeoutMs (120 s)
def test_an_untrusted_broker_certificate_fails_at_once(secured: SecuredBroker) -> None:
    """A truststore that does not hold the broker's CA: the handshake fails, and retrying cannot help."""
    options = {**scram_options(secured), "kafka.ssl.truststore.location": secured.pem("stranger-ca")}
    topic = new_topic(secured.process.bootstrap, "untrusted")
    read = parse_read_options({**options, "subscribe": topic}, "batch")
    with BrokerSession(read.connection) as session, pytest.raises(TlsHandshakeError, match="certificate"):
        session.partitions(read.subscription, missing_topics="error")
    with pytest.raises(TlsHandshakeError):
        read_all(read.connection, TopicPartition(topic, 0), 0, 1)
    with pytest.raises(TlsHandshakeError):
        write_batches(parse_write_options({**options, "topic": topic}), [rows(1)])


def test_tls_material_missing_on_the_executor_names_the_option(
    secured: SecuredBroker, tmp_path: Path
) -> None:
    """The options were checked on the driver; an executor without the truststore file fails naming it.
    Where it is there, the pool gets the SSLContext built from the options."""
    truststore = tmp_path / "ca.pem"
    truststore.write_bytes(Path(secured.ca).read_bytes())
    options = {**scram_options(secured), "kafka.ssl.truststore.location": str(truststore)}
    settings = parse_write_options(options).connection
    client = ClusterClient(settings)
    assert client._pool.security is not None and client._pool.security.ssl_context is not None
    truststore.unlink()
    with pytest.raises(KiplingOptionError, match=r"option 'kafka\.ssl\.truststore\.location'") as caught:
        ClusterClient(settings)
    assert SCRAM_PASSWORD not in str(caught.value)
