"""Parse and validate the options of the ``kipling`` format: pure, so it is tested without Spark.

The option names, defaults, JSON formats and error messages are those of Spark's built-in Kafka source
(``KafkaSourceProvider``), so a job moves from ``format("kafka")`` to ``format("kipling")`` by changing
the format name. Where Spark silently passes an unknown ``kafka.*`` option to its Kafka client, this
source has no such client to pass it to, so an option it would ignore is refused with a clear error
instead: a job must not believe a setting (group, serializer) is in force when it is not.

Kafka's client security keys (``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.mechanism``,
``kafka.sasl.jaas.config``) are honoured: stripped of ``kafka.`` they are Kafka client properties, parsed
by :func:`client.security.from_properties` (the parser of the CLI's ``--command-config``) into a
:class:`~client.security.ClientSecurityConfig`. That is plain data, so it travels to the executors
inside :class:`ConnectionSettings`; the SSLContext is built from it where connections are opened
(:mod:`pipeline.cluster`). Its ``repr`` and every error message leave the passwords out.

Option keys are case-insensitive, as in Spark: everything here works on lower-cased keys.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from client.fetch_session import TopicPartition
from client.security import PLAINTEXT, SECURITY_PROPERTY_KEYS, ClientSecurityConfig, from_properties
from pipeline.errors import KiplingOptionError
from protocol.records import CompressionType
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, IsolationLevel

Mode = Literal["batch", "stream", "any"]
"""Which query kind the options are validated for ("any": only what both kinds share, at ``load()``)."""

_log = structlog.get_logger("kipling.pipeline.options")

# -- option keys (lower case) ----------------------------------------------------------------------

BOOTSTRAP_SERVERS = "kafka.bootstrap.servers"
ASSIGN = "assign"
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribepattern"
STRATEGY_KEYS = (ASSIGN, SUBSCRIBE, SUBSCRIBE_PATTERN)
STRATEGY_NAMES = "assign, subscribe, subscribePattern"
STARTING_OFFSETS = "startingoffsets"
ENDING_OFFSETS = "endingoffsets"
STARTING_TIMESTAMP = "startingtimestamp"
ENDING_TIMESTAMP = "endingtimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingoffsetsbytimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingoffsetsbytimestamp"
STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY = "startingoffsetsbytimestampstrategy"
FAIL_ON_DATA_LOSS = "failondataloss"
INCLUDE_HEADERS = "includeheaders"
MIN_PARTITIONS = "minpartitions"
MAX_RECORDS_PER_PARTITION = "maxrecordsperpartition"
MAX_OFFSETS_PER_TRIGGER = "maxoffsetspertrigger"
POLL_TIMEOUT_MS = "kafkaconsumer.polltimeoutms"
FETCH_OFFSET_NUM_RETRIES = "fetchoffset.numretries"
FETCH_OFFSET_RETRY_INTERVAL_MS = "fetchoffset.retryintervalms"
GROUP_ID_PREFIX = "groupidprefix"
PUSH_FILTERS = "pushfilters"
"""kipling's own: let a batch reader take Spark's pushed filters (pipeline.pushdown says why opt-in)."""
TOPIC = "topic"

READ_KEYS = frozenset(
    {
        *STRATEGY_KEYS,
        STARTING_OFFSETS,
        ENDING_OFFSETS,
        STARTING_TIMESTAMP,
        ENDING_TIMESTAMP,
        STARTING_OFFSETS_BY_TIMESTAMP,
        ENDING_OFFSETS_BY_TIMESTAMP,
        STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
        FAIL_ON_DATA_LOSS,
        INCLUDE_HEADERS,
        MIN_PARTITIONS,
        MAX_RECORDS_PER_PARTITION,
        MAX_OFFSETS_PER_TRIGGER,
        POLL_TIMEOUT_MS,
        FETCH_OFFSET_NUM_RETRIES,
        FETCH_OFFSET_RETRY_INTERVAL_MS,
        GROUP_ID_PREFIX,
        PUSH_FILTERS,
    }
)
SPARK_ENGINE_KEYS = frozenset({"checkpointlocation", "queryname"})
"""Options Spark itself passes along to the source or sink (``writeStream.option("checkpointLocation")``)."""

UNSUPPORTED_READ_KEYS = {
    "minoffsetspertrigger": "minOffsetsPerTrigger needs a composite read limit (with maxTriggerDelay), "
    "which pyspark's Python data source API does not offer",
    "maxtriggerdelay": "maxTriggerDelay only applies with minOffsetsPerTrigger, which is not supported",
}

# kafka.* settings the kipling client honours, with the Kafka client's defaults.
CLIENT_ID = "kafka.client.id"
REQUEST_TIMEOUT_MS = "kafka.request.timeout.ms"
MAX_PARTITION_FETCH_BYTES = "kafka.max.partition.fetch.bytes"
FETCH_MAX_WAIT_MS = "kafka.fetch.max.wait.ms"
ISOLATION_LEVEL = "kafka.isolation.level"
GROUP_ID = "kafka.group.id"
ACKS = "kafka.acks"
COMPRESSION_TYPE = "kafka.compression.type"
BATCH_SIZE = "kafka.batch.size"
LINGER_MS = "kafka.linger.ms"
MAX_IN_FLIGHT = "kafka.max.in.flight.requests.per.connection"
KAFKA_PREFIX = "kafka."
SECURITY_KEYS = frozenset(KAFKA_PREFIX + key for key in SECURITY_PROPERTY_KEYS)
"""``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``:
the Kafka client security keys :func:`client.security.from_properties` reads, for reading and writing."""

DEFAULT_CLIENT_ID = "kipling-spark"
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
DEFAULT_MAX_PARTITION_FETCH_BYTES = 1_048_576
DEFAULT_FETCH_MAX_WAIT_MS = 500
DEFAULT_POLL_TIMEOUT_MS = 120_000
"""Spark's default is ``spark.network.timeout`` (120 s)."""
DEFAULT_FETCH_OFFSET_NUM_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1000
DEFAULT_BATCH_SIZE = 16_384
"""Kafka's ``batch.size``: bytes of records per produced batch."""
DEFAULT_MAX_IN_FLIGHT = 5

_CONSUMER_KAFKA_KEYS = frozenset(
    {BOOTSTRAP_SERVERS, CLIENT_ID, REQUEST_TIMEOUT_MS, MAX_PARTITION_FETCH_BYTES, FETCH_MAX_WAIT_MS}
    | {ISOLATION_LEVEL, GROUP_ID}
    | SECURITY_KEYS
)
_PRODUCER_KAFKA_KEYS = frozenset(
    {BOOTSTRAP_SERVERS, CLIENT_ID, REQUEST_TIMEOUT_MS, ACKS, COMPRESSION_TYPE, BATCH_SIZE, LINGER_MS}
    | {MAX_IN_FLIGHT}
    | SECURITY_KEYS
)

ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'
OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'

_AUTO_OFFSET_RESET_MESSAGE = (
    "Kafka option 'auto.offset.reset' is not supported. Instead set the source option 'startingOffsets' "
    "to 'earliest' or 'latest' to specify where to start. Structured Streaming manages which offsets "
    "are consumed internally, rather than relying on the consumer to do it. This will ensure that no "
    "data is missed when new topics/partitions are dynamically subscribed. Note that 'startingOffsets' "
    "only applies when a new Streaming query is started, and that resuming will always pick up from "
    "where the query left off. See the docs for more details."
)
_SPARK_REFUSED_KAFKA_OPTIONS = {
    "kafka.auto.offset.reset": _AUTO_OFFSET_RESET_MESSAGE,
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported as keys are deserialized "
    "as byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys.",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported as values are "
    "deserialized as byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
    "deserialize the values.",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
_SPARK_REFUSED_PRODUCER_OPTIONS = {
    "kafka.key.serializer": "Kafka option 'key.serializer' is not supported as keys are serialized with "
    "ByteArraySerializer.",
    "kafka.value.serializer": "Kafka option 'value.serializer' is not supported as value are serialized "
    "with ByteArraySerializer.",
}


# -- parsed values ---------------------------------------------------------------------------------


class NoMatchStrategy(enum.Enum):
    """``startingOffsetsByTimestampStrategy``: what a starting timestamp that matches no record means."""

    ERROR = "error"
    LATEST = "latest"


@dataclass(frozen=True, slots=True)
class Earliest:
    """Start (or end) at each partition's log start offset."""


@dataclass(frozen=True, slots=True)
class Latest:
    """Start (or end) at each partition's high watermark."""


@dataclass(frozen=True, slots=True)
class SpecificOffsets:
    """Offsets per partition; -2 means earliest and -1 latest for that partition (Spark's JSON)."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class SpecificTimestamps:
    """A timestamp (ms) per partition: the first offset whose record timestamp is at or after it."""

    timestamps: Mapping[TopicPartition, int]
    strategy: NoMatchStrategy = NoMatchStrategy.ERROR


@dataclass(frozen=True, slots=True)
class GlobalTimestamp:
    """One timestamp (ms) for every partition of the subscription."""

    timestamp: int
    strategy: NoMatchStrategy = NoMatchStrategy.ERROR


OffsetSpec = Earliest | Latest | SpecificOffsets | SpecificTimestamps | GlobalTimestamp


@dataclass(frozen=True, slots=True)
class Assign:
    """``assign``: exactly these partitions."""

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class Subscribe:
    """``subscribe``: every partition of these topics."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    """``subscribePattern``: every partition of every non-internal topic whose whole name matches.

    Java's ``Pattern.matcher(topic).matches()`` is a whole-string match, hence ``fullmatch``.
    """

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


Subscription = Assign | Subscribe | SubscribePattern


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How to reach the cluster; small and picklable, so it travels inside every Spark task."""

    bootstrap: tuple[BrokerAddress, ...]
    client_id: str = DEFAULT_CLIENT_ID
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    security: ClientSecurityConfig | None = None
    """TLS and SASL settings (None: PLAINTEXT). Plain data, secrets left out of its ``repr``; the
    SSLContext is built from it by each connection pool, on the executor that uses it."""


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Everything the source needs, parsed once on the driver."""

    connection: ConnectionSettings
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    """Batch queries only (streaming refuses ending options); Latest when not given."""
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_num_retries: int = DEFAULT_FETCH_OFFSET_NUM_RETRIES
    fetch_offset_retry_interval_ms: int = DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
    max_partition_fetch_bytes: int = DEFAULT_MAX_PARTITION_FETCH_BYTES
    fetch_max_wait_ms: int = DEFAULT_FETCH_MAX_WAIT_MS
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    push_filters: bool = False
    """Batch reads take ``partition``/``offset`` filters from Spark (needs
    ``spark.sql.python.filterPushdown.enabled``); :mod:`pipeline.pushdown`."""


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Everything the sink needs, parsed once on the driver."""

    connection: ConnectionSettings
    topic: str | None = None
    """The ``topic`` option: overrides any ``topic`` column."""
    acks: int = -1
    compression: CompressionType = CompressionType.NONE
    batch_size: int = DEFAULT_BATCH_SIZE
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT


# -- entry points ----------------------------------------------------------------------------------


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's options are case-insensitive: ``startingOffsets`` and ``startingoffsets`` are one key."""
    out: dict[str, str] = {}
    for key, value in options.items():
        lowered = key.lower()
        if lowered in out and out[lowered] != value:
            raise KiplingOptionError(f"Option '{key}' is given twice with different values")
        out[lowered] = value
    return out


def parse_read_options(options: Mapping[str, str], mode: Mode) -> ReadOptions:
    """Validate ``options`` for a ``mode`` query and parse them; raises :class:`KiplingOptionError`."""
    params = lower_keys(options)
    _check_read_keys(params)
    if mode == "stream":
        if ENDING_OFFSETS in params:
            raise KiplingOptionError("ending offset not valid in streaming queries")
        if ENDING_OFFSETS_BY_TIMESTAMP in params or ENDING_TIMESTAMP in params:
            raise KiplingOptionError("ending timestamp not valid in streaming queries")
        if parse_bool(params, PUSH_FILTERS, False):
            raise KiplingOptionError(
                "pushFilters applies to batch reads only: a streaming query reads every record "
                "from its offsets (filter it in Spark)"
            )
    subscription = parse_subscription(params)
    connection = parse_connection(params, "consumer")
    min_partitions = _positive_int(params, MIN_PARTITIONS, "minPartitions must be positive")
    max_records = _positive_int(params, MAX_RECORDS_PER_PARTITION, "maxRecordsPerPartition must be positive")
    max_per_trigger = _positive_int(params, MAX_OFFSETS_PER_TRIGGER, "maxOffsetsPerTrigger must be positive")
    default_start: OffsetSpec = Latest() if mode == "stream" else Earliest()
    starting = parse_offset_spec(
        params, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS, default_start
    )
    ending = parse_offset_spec(
        params, ENDING_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS, Latest()
    )
    if mode == "batch":
        _check_batch_offsets(starting, ending)
        if max_per_trigger is not None:
            _log.warning("maxOffsetsPerTrigger option ignored in batch queries")
    if GROUP_ID in params:
        _log.warning(
            "option kafka.group.id is ignored: the kipling source tracks offsets in Spark's checkpoint "
            "and never joins a consumer group"
        )
    return ReadOptions(
        connection=connection,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=parse_bool(params, FAIL_ON_DATA_LOSS, True),
        include_headers=parse_bool(params, INCLUDE_HEADERS, False),
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        max_offsets_per_trigger=max_per_trigger,
        poll_timeout_ms=_non_negative_int(params, POLL_TIMEOUT_MS, DEFAULT_POLL_TIMEOUT_MS),
        fetch_offset_num_retries=_non_negative_int(
            params, FETCH_OFFSET_NUM_RETRIES, DEFAULT_FETCH_OFFSET_NUM_RETRIES
        ),
        fetch_offset_retry_interval_ms=_non_negative_int(
            params, FETCH_OFFSET_RETRY_INTERVAL_MS, DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
        ),
        max_partition_fetch_bytes=_non_negative_int(
            params, MAX_PARTITION_FETCH_BYTES, DEFAULT_MAX_PARTITION_FETCH_BYTES
        )
        or DEFAULT_MAX_PARTITION_FETCH_BYTES,
        fetch_max_wait_ms=_non_negative_int(params, FETCH_MAX_WAIT_MS, DEFAULT_FETCH_MAX_WAIT_MS),
        isolation_level=_isolation_level(params),
        push_filters=parse_bool(params, PUSH_FILTERS, False),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate and parse the sink's options; raises :class:`KiplingOptionError`.

    Read-side options are tolerated (a job may build one option map for both directions) but have no
    effect; unknown options and ``kafka.*`` settings the producer would not honour are refused.
    """
    params = lower_keys(options)
    for key in params:
        if key in _SPARK_REFUSED_PRODUCER_OPTIONS:
            raise KiplingOptionError(_SPARK_REFUSED_PRODUCER_OPTIONS[key])
        if key.startswith("kafka."):
            if key not in _PRODUCER_KAFKA_KEYS:
                raise KiplingOptionError(_unsupported_kafka_option(key, _PRODUCER_KAFKA_KEYS))
        elif key not in (READ_KEYS | SPARK_ENGINE_KEYS | UNSUPPORTED_READ_KEYS.keys()) and key != TOPIC:
            raise KiplingOptionError(_unknown_option(key, {TOPIC} | _PRODUCER_KAFKA_KEYS))
    topic = params.get(TOPIC)
    if topic is not None:
        topic = topic.strip()
        if not topic:
            raise KiplingOptionError("Option 'topic' is empty")
    return WriteOptions(
        connection=parse_connection(params, "producer"),
        topic=topic,
        acks=_acks(params.get(ACKS, "all")),
        compression=_compression(params.get(COMPRESSION_TYPE, "none")),
        batch_size=_positive_int(params, BATCH_SIZE, "kafka.batch.size must be positive")
        or DEFAULT_BATCH_SIZE,
        max_in_flight=_positive_int(params, MAX_IN_FLIGHT, f"{MAX_IN_FLIGHT} must be positive")
        or DEFAULT_MAX_IN_FLIGHT,
    )


# -- pieces ----------------------------------------------------------------------------------------


def parse_subscription(params: Mapping[str, str]) -> Subscription:
    """Exactly one of assign, subscribe, subscribePattern, with Spark's messages."""
    given = [key for key in STRATEGY_KEYS if key in params]
    if not given:
        raise KiplingOptionError(
            f"One of the following options must be specified for the kipling source: {STRATEGY_NAMES}. "
            "See the docs for more details."
        )
    if len(given) > 1:
        raise KiplingOptionError(
            f"Only one of the following options can be specified for the kipling source: {STRATEGY_NAMES}. "
            "See the docs for more details."
        )
    key = given[0]
    value = params[key]
    if key == ASSIGN:
        if not value.strip().startswith("{"):
            raise KiplingOptionError(
                f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
            )
        return Assign(parse_assign_json(value))
    if key == SUBSCRIBE:
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KiplingOptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return Subscribe(tuple(dict.fromkeys(topics)))
    pattern = value.strip()
    if not pattern:
        raise KiplingOptionError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise KiplingOptionError(
            f"Option 'subscribePattern' is not a valid regular expression: {exc}"
        ) from None
    return SubscribePattern(pattern)


def parse_connection(params: Mapping[str, str], role: Literal["consumer", "producer"]) -> ConnectionSettings:
    servers = params.get(BOOTSTRAP_SERVERS)
    if servers is None:
        raise KiplingOptionError(
            f"Option '{BOOTSTRAP_SERVERS}' must be specified for configuring the kipling {role}"
        )
    return ConnectionSettings(
        bootstrap=parse_bootstrap(servers),
        client_id=params.get(CLIENT_ID, DEFAULT_CLIENT_ID),
        request_timeout_ms=_positive_int(params, REQUEST_TIMEOUT_MS, f"{REQUEST_TIMEOUT_MS} must be positive")
        or DEFAULT_REQUEST_TIMEOUT_MS,
        security=parse_security(params),
    )


def parse_security(params: Mapping[str, str]) -> ClientSecurityConfig | None:
    """The ``kafka.``-prefixed Kafka client security keys, parsed by the client's own parser (None for
    PLAINTEXT). The TLS material is loaded once here, so that a missing or unreadable truststore fails
    on the driver, naming the option, before any task is planned."""
    props = {key.removeprefix(KAFKA_PREFIX): value for key, value in params.items() if key in SECURITY_KEYS}
    if not props:
        return None
    try:
        config = from_properties(props)
    except ValueError as exc:
        raise KiplingOptionError(security_error_message(exc)) from None
    unused = sorted(
        KAFKA_PREFIX + key
        for key in props
        if (key.startswith("ssl.") and not config.uses_tls)
        or (key.startswith("sasl.") and not config.uses_sasl)
    )
    if unused:
        _log.warning(
            "Kafka security options have no effect with this security.protocol",
            security_protocol=config.protocol,
            options=unused,
        )
    return None if config.protocol == PLAINTEXT else config


_CONFIGURATION_KEY = re.compile(r"configuration ((?:security|ssl|sasl)\.[a-z.]+[a-z])")


def security_error_message(exc: Exception) -> str:
    """A security error of the client's parser, naming the Spark option (``kafka.ssl.truststore.type``)
    where the client names its property (``ssl.truststore.type``). Those messages never quote a secret."""
    return _CONFIGURATION_KEY.sub(lambda m: f"option '{KAFKA_PREFIX}{m.group(1)}'", str(exc))


def parse_bootstrap(servers: str) -> tuple[BrokerAddress, ...]:
    """``host1:port1,host2:port2`` (IPv6 hosts in brackets, as Kafka's clients accept them)."""
    out: list[BrokerAddress] = []
    for raw in servers.split(","):
        item = raw.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise KiplingOptionError(f"Invalid url in {BOOTSTRAP_SERVERS}: '{item}' (expected host:port)")
        out.append(BrokerAddress(host.strip("[]"), int(port)))
    if not out:
        raise KiplingOptionError(f"Option '{BOOTSTRAP_SERVERS}' lists no broker: '{servers}'")
    return tuple(out)


def parse_offset_spec(
    params: Mapping[str, str], global_ts_key: str, by_ts_key: str, offsets_key: str, default: OffsetSpec
) -> OffsetSpec:
    """Spark's precedence: a global timestamp, then timestamps per partition, then offsets."""
    strategy = _no_match_strategy(params)
    if global_ts_key in params:
        raw = params[global_ts_key].strip()
        try:
            return GlobalTimestamp(int(raw), strategy)
        except ValueError:
            raise KiplingOptionError(f"Expected a single long value, got {raw}") from None
    if by_ts_key in params:
        return SpecificTimestamps(parse_partition_longs(params[by_ts_key], TIMESTAMPS_EXAMPLE), strategy)
    if offsets_key in params:
        raw = params[offsets_key].strip()
        lowered = raw.lower()
        if lowered == "earliest":
            return Earliest()
        if lowered == "latest":
            return Latest()
        offsets = parse_partition_longs(raw, OFFSETS_EXAMPLE)
        for tp, offset in offsets.items():
            if offset < EARLIEST_TIMESTAMP:
                raise KiplingOptionError(
                    f"Option '{offsets_key}' has offset {offset} for {tp.topic}-{tp.partition}: offsets are "
                    "-2 (earliest), -1 (latest) or >= 0"
                )
        return SpecificOffsets(offsets)
    return default


def parse_assign_json(value: str) -> tuple[TopicPartition, ...]:
    """``{"topicA":[0,1],"topicB":[2,4]}`` → partitions, in the order given, without duplicates."""
    data = _json(value, ASSIGN_EXAMPLE)
    if not isinstance(data, dict) or not data:
        raise KiplingOptionError(f"Expected e.g. {ASSIGN_EXAMPLE}, got {value}")
    out: list[TopicPartition] = []
    for topic, partitions in data.items():
        if not isinstance(partitions, list) or not all(_is_int(p) and p >= 0 for p in partitions):
            raise KiplingOptionError(f"Expected e.g. {ASSIGN_EXAMPLE}, got {value}")
        out.extend(TopicPartition(topic, int(p)) for p in partitions)
    if not out:
        raise KiplingOptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
        )
    return tuple(dict.fromkeys(out))


def parse_partition_longs(value: str, example: str) -> dict[TopicPartition, int]:
    """``{"topicA":{"0":23,"1":-1}}`` → {TopicPartition: long}."""
    data = _json(value, example)
    if not isinstance(data, dict):
        raise KiplingOptionError(f"Expected e.g. {example}, got {value}")
    out: dict[TopicPartition, int] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise KiplingOptionError(f"Expected e.g. {example}, got {value}")
        for partition, number in partitions.items():
            if not str(partition).isdigit() or not _is_int(number):
                raise KiplingOptionError(f"Expected e.g. {example}, got {value}")
            out[TopicPartition(topic, int(partition))] = int(number)
    return out


def parse_bool(params: Mapping[str, str], key: str, default: bool) -> bool:
    raw = params.get(key)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise KiplingOptionError(f"Option '{key}' must be 'true' or 'false', got '{raw}'")


def _check_read_keys(params: Mapping[str, str]) -> None:
    for key in params:
        if key in _SPARK_REFUSED_KAFKA_OPTIONS:
            raise KiplingOptionError(_SPARK_REFUSED_KAFKA_OPTIONS[key])
        if key.startswith("kafka."):
            if key not in _CONSUMER_KAFKA_KEYS:
                raise KiplingOptionError(_unsupported_kafka_option(key, _CONSUMER_KAFKA_KEYS))
        elif key in UNSUPPORTED_READ_KEYS:
            raise KiplingOptionError(
                f"Option '{key}' is not supported by the kipling source: {UNSUPPORTED_READ_KEYS[key]}"
            )
        elif key == "path":
            raise KiplingOptionError(
                "The kipling source takes no path: name the data with subscribe, subscribePattern or assign"
            )
        elif key not in READ_KEYS and key not in SPARK_ENGINE_KEYS and key != TOPIC:
            raise KiplingOptionError(_unknown_option(key, READ_KEYS))


def _check_batch_offsets(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Spark's ``validateBatchOptions`` and ``checkOffsetLimitValidity``."""
    if isinstance(starting, Latest):
        raise KiplingOptionError("starting offset can't be latest for batch queries on kipling")
    if isinstance(starting, SpecificOffsets):
        for tp, offset in starting.offsets.items():
            if offset == LATEST_TIMESTAMP:
                raise KiplingOptionError(
                    f"startingOffsets for {_tp(tp)} can't be latest for batch queries on kipling"
                )
    if isinstance(ending, Earliest):
        raise KiplingOptionError("ending offset can't be earliest for batch queries on kipling")
    if isinstance(ending, SpecificOffsets):
        for tp, offset in ending.offsets.items():
            if offset == EARLIEST_TIMESTAMP:
                raise KiplingOptionError(
                    f"ending offset for {_tp(tp)} can't be earliest for batch queries on kipling"
                )
    pairs: tuple[Mapping[TopicPartition, int], Mapping[TopicPartition, int]] | None = None
    what = "offset"
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        pairs = (starting.offsets, ending.offsets)
    elif isinstance(starting, SpecificTimestamps) and isinstance(ending, SpecificTimestamps):
        pairs, what = (starting.timestamps, ending.timestamps), "timestamp"
    if pairs is None:
        return
    start, end = pairs
    if set(start) != set(end):
        raise KiplingOptionError(
            "The topic partitions of the starting and ending options must be the same: starting "
            f"{sorted(map(_tp, start))}, ending {sorted(map(_tp, end))}"
        )
    for tp, begin in start.items():
        if begin >= 0 and end[tp] >= 0 and begin > end[tp]:
            raise KiplingOptionError(
                f"The starting {what} ({begin}) of {_tp(tp)} is greater than the ending {what} ({end[tp]})"
            )


def _no_match_strategy(params: Mapping[str, str]) -> NoMatchStrategy:
    raw = params.get(STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY, "error")
    try:
        return NoMatchStrategy(raw.strip().lower())
    except ValueError:
        raise KiplingOptionError(
            f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got '{raw}'"
        ) from None


def _isolation_level(params: Mapping[str, str]) -> IsolationLevel:
    raw = params.get(ISOLATION_LEVEL, "read_uncommitted").strip().lower()
    if raw == "read_uncommitted":
        return IsolationLevel.READ_UNCOMMITTED
    if raw == "read_committed":
        return IsolationLevel.READ_COMMITTED
    raise KiplingOptionError(
        f"Option '{ISOLATION_LEVEL}' must be read_uncommitted or read_committed, got '{raw}'"
    )


def _acks(raw: str) -> int:
    value = raw.strip().lower()
    if value == "all":
        return -1
    if value in ("-1", "0", "1"):
        return int(value)
    raise KiplingOptionError(f"Option '{ACKS}' must be all, -1, 0 or 1, got '{raw}'")


def _compression(raw: str) -> CompressionType:
    try:
        return CompressionType.from_name(raw.strip().lower())
    except (KeyError, ValueError):
        raise KiplingOptionError(
            f"Option '{COMPRESSION_TYPE}' must be one of none, gzip, snappy, lz4, zstd, got '{raw}'"
        ) from None


def _positive_int(params: Mapping[str, str], key: str, message: str) -> int | None:
    raw = params.get(key)
    if raw is None:
        return None
    value = _int(key, raw)
    if value <= 0:
        raise KiplingOptionError(message)
    return value


def _non_negative_int(params: Mapping[str, str], key: str, default: int) -> int:
    raw = params.get(key)
    if raw is None:
        return default
    value = _int(key, raw)
    if value < 0:
        raise KiplingOptionError(f"Option '{key}' must not be negative, got {value}")
    return value


def _int(key: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise KiplingOptionError(f"Option '{key}' must be an integer, got '{raw}'") from None


def _json(value: str, example: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise KiplingOptionError(f"Expected e.g. {example}, got {value}") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tp(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _unknown_option(key: str, known: frozenset[str] | set[str]) -> str:
    return f"Unknown option '{key}' for the kipling format; known options: {', '.join(sorted(known))}"


def _unsupported_kafka_option(key: str, supported: frozenset[str]) -> str:
    return (
        f"Kafka option '{key.removeprefix('kafka.')}' is not supported by the kipling client; supported "
        f"kafka.* options here: {', '.join(sorted(supported))}"
    )


__all__ = [
    "Assign",
    "BrokerAddress",
    "ConnectionSettings",
    "Earliest",
    "GlobalTimestamp",
    "Latest",
    "NoMatchStrategy",
    "OffsetSpec",
    "ReadOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "WriteOptions",
    "lower_keys",
    "parse_bootstrap",
    "parse_read_options",
    "parse_security",
    "parse_write_options",
    "security_error_message",
]
