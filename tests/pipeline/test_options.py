"""Option parsing and validation of the ``kipling`` format (pure: no Spark, no broker)."""

from __future__ import annotations

import pickle

import pytest
import structlog

from client.fetch_session import TopicPartition
from client.security import ClientSecurityConfig
from pipeline.errors import KiplingOptionError
from pipeline.options import (
    Assign,
    BrokerAddress,
    Earliest,
    GlobalTimestamp,
    Latest,
    NoMatchStrategy,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    parse_read_options,
    parse_write_options,
)
from protocol.records import CompressionType
from protocol.sentinels import IsolationLevel
from security.dev_certs import DevPki, write_dev_pki

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(mode: str = "batch", **options: str) -> object:
    return parse_read_options({**BOOT, **options}, mode)  # type: ignore[arg-type]


def test_defaults_follow_sparks_kafka_source() -> None:
    batch = parse_read_options({**BOOT, "subscribe": "a"}, "batch")
    assert batch.starting == Earliest() and batch.ending == Latest()
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.connection.bootstrap == (BrokerAddress("127.0.0.1", 9092),)
    stream = parse_read_options({**BOOT, "subscribe": "a"}, "stream")
    assert stream.starting == Latest()
    assert stream.max_offsets_per_trigger is None and stream.poll_timeout_ms == 120_000


def test_keys_are_case_insensitive() -> None:
    options = parse_read_options(
        {"KAFKA.Bootstrap.Servers": "h:1,h2:2", "SubScribe": " a , b ,", "STARTINGOFFSETS": "EARLIEST"},
        "stream",
    )
    assert options.subscription == Subscribe(("a", "b"))
    assert options.starting == Earliest()
    assert [str(b) for b in options.connection.bootstrap] == ["h:1", "h2:2"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "One of the following options must be specified for the kipling source: assign, subscribe"),
        ({"subscribe": "a", "subscribePattern": "a.*"}, "Only one of the following options can be specified"),
        (
            {"subscribe": " , "},
            "No topics to subscribe to as specified value for option 'subscribe' is ' , '",
        ),
        ({"subscribePattern": "  "}, "Pattern to subscribe is empty"),
        ({"subscribePattern": "a("}, "not a valid regular expression"),
        ({"assign": "a"}, "No topicpartitions to assign as specified value for option 'assign' is 'a'"),
        ({"assign": '{"a": [0, "x"]}'}, "Expected e.g."),
        ({"assign": '{"a": []}'}, "No topicpartitions to assign"),
    ],
)
def test_exactly_one_valid_subscription(options: dict[str, str], message: str) -> None:
    with pytest.raises(KiplingOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(**options)


def test_subscriptions() -> None:
    assign = parse(assign='{"a":[1,0,1],"b":[2]}').subscription  # type: ignore[attr-defined]
    assert assign == Assign((TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("b", 2)))
    pattern = parse(subscribePattern="topic-[0-9]+").subscription  # type: ignore[attr-defined]
    assert isinstance(pattern, SubscribePattern)
    assert (
        pattern.matches("topic-12") and not pattern.matches("topic-12x") and not pattern.matches("xtopic-1")
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported"),
        ({"kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported"),
        ({"kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported"),
        ({"kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
        ({"kafka.interceptor.classes": "x"}, "Kafka option 'interceptor.classes' is not supported"),
        (
            {"kafka.sasl.kerberos.service.name": "kafka"},
            "Kafka option 'sasl.kerberos.service.name' is not supported by the kipling",
        ),
        ({"kafka.security.protocol": "TLS"}, "Invalid value TLS for option 'kafka.security.protocol'"),
        ({"kafka.isolation.level": "serializable"}, "must be read_uncommitted or read_committed"),
        ({"minOffsetsPerTrigger": "10"}, "composite read limit"),
        ({"startingOffst": "earliest"}, "Unknown option 'startingoffst'"),
        ({"path": "/x"}, "takes no path"),
        ({"minPartitions": "0"}, "minPartitions must be positive"),
        ({"minPartitions": "two"}, "must be an integer"),
        ({"maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger must be positive"),
        ({"failOnDataLoss": "yes"}, "must be 'true' or 'false'"),
        ({"startingOffsetsByTimestampStrategy": "maybe"}, "must be 'error' or 'latest'"),
        ({"startingTimestamp": "noon"}, "Expected a single long value, got noon"),
        ({"startingOffsets": '{"a":{"0":-3}}'}, "offsets are -2 \\(earliest\\), -1 \\(latest\\) or >= 0"),
        ({"startingOffsets": '{"a":[0]}'}, "Expected e.g."),
    ],
)
def test_bad_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(KiplingOptionError, match=message):
        parse(subscribe="a", **options)


def test_isolation_level_read_committed_is_taken() -> None:
    default = parse_read_options({**BOOT, "subscribe": "a"}, "batch")
    assert default.isolation_level is IsolationLevel.READ_UNCOMMITTED
    committed = parse_read_options(
        {**BOOT, "subscribe": "a", "kafka.isolation.level": "Read_Committed"}, "batch"
    )
    assert committed.isolation_level is IsolationLevel.READ_COMMITTED


def test_bootstrap_servers_is_required_and_well_formed() -> None:
    with pytest.raises(KiplingOptionError, match=r"'kafka\.bootstrap\.servers' must be specified"):
        parse_read_options({"subscribe": "a"}, "batch")
    for bad in ("host", "host:port", ":9092", "h:0", " , "):
        with pytest.raises(KiplingOptionError):
            parse_read_options({"subscribe": "a", "kafka.bootstrap.servers": bad}, "batch")
    ipv6 = parse_read_options({"subscribe": "a", "kafka.bootstrap.servers": "[::1]:9092"}, "batch")
    assert ipv6.connection.bootstrap == (BrokerAddress("::1", 9092),)


def test_offset_options_precedence() -> None:
    """Spark's order: startingTimestamp, then startingOffsetsByTimestamp, then startingOffsets."""
    both = parse(
        "stream",
        subscribe="a",
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"a":{"0":1000}}',
        startingTimestamp="5",
        startingOffsetsByTimestampStrategy="LATEST",
    )
    assert both.starting == GlobalTimestamp(5, NoMatchStrategy.LATEST)  # type: ignore[attr-defined]
    by_ts = parse(
        "stream", subscribe="a", startingOffsets="earliest", startingOffsetsByTimestamp='{"a":{"0":1000}}'
    )
    assert by_ts.starting == SpecificTimestamps({TopicPartition("a", 0): 1000})  # type: ignore[attr-defined]
    specific = parse(
        subscribe="a", startingOffsets='{"a":{"0":23,"1":-2}}', endingOffsets='{"a":{"0":50,"1":-1}}'
    )
    assert specific.starting == SpecificOffsets({TopicPartition("a", 0): 23, TopicPartition("a", 1): -2})  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries"),
        ({"startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest for batch queries"),
        ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
        ({"endingOffsets": '{"a":{"0":-2}}'}, "ending offset for a-0 can't be earliest for batch queries"),
        (
            {"startingOffsets": '{"a":{"0":1}}', "endingOffsets": '{"a":{"1":5}}'},
            "topic partitions of the starting and ending options must be the same",
        ),
        (
            {"startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":5}}'},
            "starting offset \\(9\\) of a-0 is greater than the ending offset \\(5\\)",
        ),
        (
            {"startingOffsetsByTimestamp": '{"a":{"0":9}}', "endingOffsetsByTimestamp": '{"a":{"0":5}}'},
            "starting timestamp \\(9\\) of a-0 is greater",
        ),
    ],
)
def test_batch_only_offset_rules(options: dict[str, str], message: str) -> None:
    with pytest.raises(KiplingOptionError, match=message):
        parse("batch", subscribe="a", **options)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("endingOffsets", "ending offset not valid in streaming queries"),
        ("endingOffsetsByTimestamp", "ending timestamp not valid in streaming queries"),
        ("endingTimestamp", "ending timestamp not valid in streaming queries"),
    ],
)
def test_streaming_refuses_ending_options(key: str, message: str) -> None:
    with pytest.raises(KiplingOptionError, match=message):
        parse("stream", subscribe="a", **{key: '{"a":{"0":1}}'})


def test_streaming_refuses_push_filters_rather_than_ignoring_it() -> None:
    with pytest.raises(KiplingOptionError, match="pushFilters applies to batch reads only"):
        parse("stream", subscribe="a", pushFilters="true")
    assert parse("batch", subscribe="a", pushFilters="true").push_filters


def test_spark_engine_options_and_group_id_are_tolerated() -> None:
    options = parse(
        "stream", subscribe="a", checkpointLocation="/tmp/x", **{"kafka.group.id": "g", "groupIdPrefix": "p"}
    )
    assert options.subscription == Subscribe(("a",))  # type: ignore[attr-defined]


def test_write_options() -> None:
    options = parse_write_options(
        {
            **BOOT,
            "topic": " t ",
            "kafka.acks": "1",
            "kafka.compression.type": "ZSTD",
            "kafka.batch.size": "100",
        }
    )
    assert (options.topic, options.acks, options.compression, options.batch_size) == (
        "t",
        1,
        CompressionType.ZSTD,
        100,
    )
    assert parse_write_options(BOOT).acks == -1  # Kafka's producer default: all
    assert parse_write_options({**BOOT, "subscribe": "a", "checkpointLocation": "/c"}).topic is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "'kafka.bootstrap.servers' must be specified for configuring the kipling producer"),
        ({**BOOT, "kafka.key.serializer": "x"}, "Kafka option 'key.serializer' is not supported"),
        ({**BOOT, "kafka.value.serializer": "x"}, "Kafka option 'value.serializer' is not supported"),
        (
            {**BOOT, "kafka.transactional.id": "x"},
            "'transactional.id' is not supported by the kipling client",
        ),
        ({**BOOT, "kafka.acks": "2"}, "must be all, -1, 0 or 1"),
        ({**BOOT, "kafka.compression.type": "brotli"}, "must be one of none, gzip"),
        ({**BOOT, "topic": "  "}, "Option 'topic' is empty"),
        ({**BOOT, "tpoic": "x"}, "Unknown option 'tpoic'"),
    ],
)
def test_bad_write_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(KiplingOptionError, match=message):
        parse_write_options(options)


# -- security: Kafka's client keys, parsed by client.security.from_properties -----------------------

PASSWORD = "pw-Zq81-secret"
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="carol" password="{PASSWORD}";'
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevPki:
    return write_dev_pki(tmp_path_factory.mktemp("pki"), ("client",))


def sasl_ssl(pki: DevPki, **extra: str) -> dict[str, str]:
    """Spark options for SASL_SSL with SCRAM-SHA-512, a PEM truststore and a client certificate."""
    return {
        **BOOT,
        "kafka.security.protocol": "sasl_ssl",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(pki.ca),
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.location": str(pki.keystores["client"]),
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.SASL.Mechanism": "SCRAM-SHA-512",  # keys are case-insensitive, values are Kafka's
        "kafka.sasl.jaas.config": SCRAM_JAAS,
        **extra,
    }


def parsed_security(options: dict[str, str], direction: str) -> ClientSecurityConfig | None:
    if direction == "read":
        return parse_read_options({**options, "subscribe": "a"}, "batch").connection.security
    return parse_write_options(options).connection.security


@pytest.mark.parametrize("direction", ["read", "write"])
def test_security_options_are_kafkas_client_keys(pki: DevPki, direction: str) -> None:
    security = parsed_security(sasl_ssl(pki), direction)
    assert security is not None and security.ssl is not None
    assert (security.protocol, security.sasl_mechanism, security.username, security.password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "carol",
        PASSWORD,
    )
    assert security.ssl.truststore_location == str(pki.ca)
    assert security.ssl.keystore_location == str(pki.keystores["client"])
    assert security.ssl.endpoint_identification_algorithm == ""
    # plain data: it travels to the executors inside every task
    assert pickle.loads(pickle.dumps(security)) == security


@pytest.mark.parametrize("direction", ["read", "write"])
def test_plaintext_and_tls_without_sasl(pki: DevPki, direction: str) -> None:
    assert parsed_security(dict(BOOT), direction) is None
    assert parsed_security({**BOOT, "kafka.security.protocol": "PLAINTEXT"}, direction) is None
    tls = parsed_security(
        {
            **BOOT,
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(pki.ca),
        },
        direction,
    )
    assert tls is not None and tls.uses_tls and not tls.uses_sasl and tls.password is None


def test_security_options_without_effect_are_warned_about_without_their_values() -> None:
    with structlog.testing.capture_logs() as logs:
        security = parse_write_options(
            {**BOOT, "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": SCRAM_JAAS}
        ).connection.security
    assert security is None
    (warning,) = [e for e in logs if "no effect" in e["event"]]
    assert warning["options"] == ["kafka.sasl.jaas.config", "kafka.sasl.mechanism"]
    assert PASSWORD not in repr(logs)


def test_the_password_is_in_no_repr(pki: DevPki) -> None:
    secrets = {
        "kafka.ssl.key.password": PASSWORD + "-key",
        "kafka.ssl.truststore.password": PASSWORD + "-trust",
    }
    read = parse_read_options({**sasl_ssl(pki, **secrets), "subscribe": "a"}, "batch")
    write = parse_write_options(sasl_ssl(pki, **secrets))
    for text in (repr(read), str(read), repr(write), repr(write.connection), repr(read.connection.security)):
        assert "carol" in text and PASSWORD not in text


@pytest.mark.parametrize("direction", ["read", "write"])
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"kafka.security.protocol": "SASL_TLS"},
            "Invalid value SASL_TLS for option 'kafka.security.protocol'",
        ),
        (
            {"kafka.ssl.truststore.type": "JKS"},
            "Invalid option 'kafka.ssl.truststore.type': JKS truststores can only be read by a JVM",
        ),
        ({"kafka.ssl.truststore.location": "/nowhere/ca.pem"}, "option 'kafka.ssl.truststore.location'"),
        ({"kafka.ssl.keystore.type": "PKCS12"}, "option 'kafka.ssl.keystore.location'.* not a PKCS12 file"),
        ({"kafka.ssl.enabled.protocols": "SSLv3"}, "option 'kafka.ssl.enabled.protocols'"),
        ({"kafka.sasl.mechanism": "GSSAPI"}, "Invalid value GSSAPI for option 'kafka.sasl.mechanism'"),
        ({"kafka.sasl.jaas.config": SCRAM_JAAS.rstrip(";")}, "option 'kafka.sasl.jaas.config'.* semi-colon"),
        (
            {"kafka.sasl.jaas.config": f'x required password="{PASSWORD}";'},
            "option 'kafka.sasl.jaas.config'.* no username option",
        ),
    ],
)
def test_bad_security_options_name_the_option_and_never_the_secret(
    pki: DevPki, direction: str, change: dict[str, str], message: str
) -> None:
    options = sasl_ssl(pki, **{"kafka.ssl.keystore.password": PASSWORD + "-ks"})
    options.pop("kafka.SASL.Mechanism")
    options["kafka.sasl.mechanism"] = "SCRAM-SHA-512"
    with pytest.raises(KiplingOptionError, match=message) as caught:
        parsed_security({**options, **change}, direction)
    assert PASSWORD not in str(caught.value)


def test_sasl_needs_a_jaas_config() -> None:
    with pytest.raises(KiplingOptionError, match=r"option 'kafka\.sasl\.jaas\.config': not set"):
        parse_write_options(
            {**BOOT, "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"}
        )
