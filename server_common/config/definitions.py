"""Every configuration key kipling reads, declared once as data, with Kafka's names and defaults.

The table drives everything else: parsing and validation of ``server.properties`` and overrides, the
broker's DescribeConfigs answer, topic-level validation for CreateTopics, and the test that
``config/server.properties`` documents every key. Values are parsed as Kafka's ``ConfigDef`` does:
the text is trimmed, integers are plain decimal within the type's width, booleans are ``true`` or
``false`` in any case, and lists are comma-separated with the items trimmed.

A broker key that provides the default of a topic-level key names it in ``topic_name``. Several broker
keys may feed one topic key; they are then listed in precedence order (``log.retention.ms`` before
``log.retention.minutes`` before ``log.retention.hours``) and ``topic_scale`` turns their unit into
the topic key's unit. :data:`TOPIC_DEFINITIONS` declares the topic-level keys themselves, whose
allowed values can differ from the broker keys' (``retention.ms`` must be at least -1 where the
broker keys accept any number and treat every negative one as -1, as Kafka does).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum, StrEnum

from protocol.records.compression import (
    GZIP_DEFAULT_LEVEL,
    GZIP_MAX_LEVEL,
    GZIP_MIN_LEVEL,
    LZ4_DEFAULT_LEVEL,
    LZ4_MAX_LEVEL,
    LZ4_MIN_LEVEL,
    ZSTD_DEFAULT_LEVEL,
    ZSTD_MAX_LEVEL,
    ZSTD_MIN_LEVEL,
)
from server_common.config.quorum import (
    QUORUM_ELECTION_BACKOFF_MAX_MS,
    QUORUM_ELECTION_TIMEOUT_MS,
    QUORUM_FETCH_TIMEOUT_MS,
    QUORUM_REQUEST_TIMEOUT_MS,
    QUORUM_RETRY_BACKOFF_MS,
)
from storage.config import COMPRESSION_PRODUCER, COMPRESSION_TYPES

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
MIN_SEGMENT_BYTES = 14
"""Kafka's lower bound for segment sizes: the overhead of the smallest legacy record."""
MIN_FETCH_MAX_BYTES = 1024
MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000

CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
ROLE_BROKER = "broker"
ROLE_CONTROLLER = "controller"
AUTHORIZER_CLASS_NAMES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)
"""What ``authorizer.class.name`` accepts besides empty: both name Kafka's StandardAuthorizer rules."""
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
"""The one ``replica.selector.class`` kipling implements (broker/fetch/replica_selector.py)."""


class ConfigError(ValueError):
    """A configuration that kipling refuses: the message names the key, the value and what is allowed.

    Raised at start-up (the broker does not start) and for CreateTopics configs (INVALID_CONFIG).
    """

    def __init__(self, message: str, *, key: str | None = None, value: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.value = value

    @classmethod
    def invalid(cls, key: str, value: str | None, allowed: str) -> ConfigError:
        """The standard message for a value that is not allowed."""
        return cls(f"Invalid value {value!r} for configuration {key}: {allowed}", key=key, value=value)


class ConfigType(IntEnum):
    """Kafka's ``ConfigDef.Type``; the numbers are those of DescribeConfigs' ConfigType field (v3+)."""

    UNKNOWN = 0
    """A name no definition knows (a broker's dynamic config Kafka stores without checking it)."""
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_TYPE_TEXT = {
    ConfigType.BOOLEAN: "true or false",
    ConfigType.STRING: "a string",
    ConfigType.INT: "a 32-bit integer",
    ConfigType.SHORT: "a 16-bit integer",
    ConfigType.LONG: "a 64-bit integer",
    ConfigType.DOUBLE: "a number",
    ConfigType.LIST: "a comma-separated list",
    ConfigType.CLASS: "a class name",
}
_INTEGER_BOUNDS = {
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_FLOATING = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?")
"""Java's ``Double.parseDouble`` syntax for finite numbers (``0.5``, ``.5``, ``5e-1``, ``0.5d``)."""


class Importance(Enum):
    """Kafka's documentation ranking of a key; informative only."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ConfigSource(StrEnum):
    """Where a described value comes from; ``code`` is DescribeConfigs' ConfigSource number."""

    UNKNOWN = "UNKNOWN"
    DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
    DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
    DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"
    GROUP_CONFIG = "GROUP_CONFIG"
    """A group's override of a group config (Kafka 4.0, the GROUP resource)."""

    @property
    def code(self) -> int:
        return _SOURCE_CODES[self]


_SOURCE_CODES = {
    ConfigSource.UNKNOWN: 0,
    ConfigSource.DYNAMIC_TOPIC_CONFIG: 1,
    ConfigSource.DYNAMIC_BROKER_CONFIG: 2,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: 3,
    ConfigSource.STATIC_BROKER_CONFIG: 4,
    ConfigSource.DEFAULT_CONFIG: 5,
    ConfigSource.GROUP_CONFIG: 8,
}


@dataclass(frozen=True)
class ConfigSynonym:
    """One key that can supply a described value, with where its value comes from."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One configuration as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: ConfigSource
    is_sensitive: bool
    read_only: bool
    doc: str
    type: ConfigType
    synonyms: tuple[ConfigSynonym, ...] = ()


# -- validators ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    """A number between ``low`` and ``high`` inclusive; ``None`` leaves that side open."""

    low: int | None = None
    high: int | None = None

    def __call__(self, value: object) -> bool:
        assert isinstance(value, int | float)
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self) -> str:
        if self.high is None:
            return f"at least {self.low}"
        if self.low is None:
            return f"at most {self.high}"
        if self.low == self.high:
            return str(self.low)
        return f"between {self.low} and {self.high}"


def at_least(low: int) -> Range:
    return Range(low=low)


@dataclass(frozen=True)
class OneOf:
    """A string that must be one of ``choices`` (case-sensitive, as Kafka's ``ValidString``)."""

    choices: tuple[str, ...]

    def __call__(self, value: object) -> bool:
        return value in self.choices

    def describe(self) -> str:
        return "one of " + ", ".join(choice or '""' for choice in self.choices)


@dataclass(frozen=True)
class SubsetOf:
    """A list whose items are all in ``choices``, without repeats; empty only if ``allow_empty``."""

    choices: tuple[str, ...]
    allow_empty: bool = False

    def __call__(self, value: object) -> bool:
        assert isinstance(value, list)
        if not value and not self.allow_empty:
            return False
        return len(set(value)) == len(value) and all(item in self.choices for item in value)

    def describe(self) -> str:
        need = "" if self.allow_empty else "one or more "
        return f"{need}distinct items from " + ", ".join(self.choices)


@dataclass(frozen=True)
class AnyRange:
    """A number in any of ``ranges``: Kafka's gzip level is -1 or between 1 and 9."""

    ranges: tuple[Range, ...]

    def __call__(self, value: object) -> bool:
        return any(allowed(value) for allowed in self.ranges)

    def describe(self) -> str:
        return " or ".join(allowed.describe() for allowed in self.ranges)


_REPLICA = re.compile(r"[0-9]+:[0-9]+")


@dataclass(frozen=True)
class ReplicaList:
    """Kafka's ``ThrottledReplicaListValidator``: ``*``, or partition:broker pairs (possibly none)."""

    def __call__(self, value: object) -> bool:
        assert isinstance(value, list)
        return value == ["*"] or all(_REPLICA.fullmatch(item) for item in value)

    def describe(self) -> str:
        return "* or a list of replicas as partitionId:brokerId,partitionId:brokerId,..."


Validator = Range | AnyRange | OneOf | SubsetOf | ReplicaList


# -- parsing -------------------------------------------------------------------------------------


def parse_value(key: str, type_: ConfigType, raw: str, validator: Validator | None) -> object:
    """Convert text to the key's type and check it, raising a :class:`ConfigError` that names the key."""
    text = raw.strip()
    value: object
    if type_ in _INTEGER_BOUNDS:
        low, high = _INTEGER_BOUNDS[type_]
        if not _DECIMAL.fullmatch(text) or not low <= int(text) <= high:
            raise ConfigError.invalid(key, raw, _allowed_text(type_, validator))
        value = int(text)
    elif type_ is ConfigType.DOUBLE:
        if not _FLOATING.fullmatch(text):
            raise ConfigError.invalid(key, raw, _allowed_text(type_, validator))
        value = float(text.rstrip("dDfF"))
    elif type_ is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise ConfigError.invalid(key, raw, _allowed_text(type_, validator))
        value = text.lower() == "true"
    elif type_ is ConfigType.LIST:
        value = [item.strip() for item in text.split(",") if item.strip()]
    elif type_ in (ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS):
        value = text
    else:  # pragma: no cover - no key of another type is declared
        raise TypeError(f"{key}: unsupported type {type_.name}")
    if validator is not None and not validator(value):
        shown = "[hidden]" if type_ is ConfigType.PASSWORD else raw
        raise ConfigError.invalid(key, shown, _allowed_text(type_, validator))
    return value


def format_value(value: object) -> str | None:
    """Kafka's textual form of a typed value (``true``, ``a,b``), for DescribeConfigs."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)


def _allowed_text(type_: ConfigType, validator: Validator | None) -> str:
    text = _TYPE_TEXT[type_]
    if validator is not None:
        text += ", " + validator.describe()
    return f"expected {text}"


# -- broker keys ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigDef:
    """The declaration of one broker key.

    ``default`` is the typed value used when the key is not given (``None``: unset, some other key or
    rule decides). ``topic_name`` is the topic-level key whose default this key provides, and
    ``topic_scale`` multiplies this key's value into that key's unit. ``aliases`` are other names
    accepted for the same key (``broker.id`` for ``node.id``). ``ignored`` keys are accepted for
    compatibility with Kafka files but have no effect, so setting one draws a warning.
    """

    name: str
    type: ConfigType
    default: object
    importance: Importance
    doc: str
    validator: Validator | None = None
    topic_name: str | None = None
    topic_scale: int = 1
    aliases: tuple[str, ...] = ()
    ignored: bool = False

    def parse(self, raw: str, name: str | None = None) -> object:
        """Parse a value given for this key (under ``name`` when an alias was used)."""
        return parse_value(name or self.name, self.type, raw, self.validator)

    def allowed(self) -> str:
        """What the key accepts, for documentation and messages."""
        return _allowed_text(self.type, self.validator)


H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
T = ConfigType

# fmt: off
_GZIP_LEVELS = AnyRange(
    (Range(GZIP_DEFAULT_LEVEL, GZIP_DEFAULT_LEVEL), Range(GZIP_MIN_LEVEL, GZIP_MAX_LEVEL))
)
_LZ4_LEVELS = Range(LZ4_MIN_LEVEL, LZ4_MAX_LEVEL)
_ZSTD_LEVELS = Range(ZSTD_MIN_LEVEL, ZSTD_MAX_LEVEL)
"""The ``compression.<codec>.level`` ranges, for the broker keys and the topic keys alike."""

DEFINITIONS: tuple[ConfigDef, ...] = (
    # -- node identity and roles
    ConfigDef("node.id", T.INT, 1, H, "Id of this node; unique in the cluster. broker.id is accepted as "
              "another name for it.", at_least(0), aliases=("broker.id",)),
    ConfigDef("process.roles", T.LIST, [ROLE_BROKER, ROLE_CONTROLLER], H, "What this process runs: "
              "broker, controller, or both (the default, a self-contained single node).",
              SubsetOf((ROLE_BROKER, ROLE_CONTROLLER))),
    ConfigDef("broker.rack", T.STRING, None, M, "The rack (or host, or zone) of this broker. Replica "
              "placement puts a partition's replicas in as many different racks as it can, as Kafka's "
              "rack-aware assignment does. Unset: no rack, unless kipling.node.processes > 1, which "
              "sets it to the host name."),
    ConfigDef("kipling.node.processes", T.INT, 1, H, "Broker processes this node runs, to use that "
              "many cores (a kipling key). Above 1, the process started becomes a supervisor of that "
              "many brokers, each one core: broker i (from 0) has node.id + i, listens on every "
              "listener port + i and keeps its logs in log.dirs (broker 0) or log.dirs with -i "
              "appended; broker 0 keeps the controller role. Clients see them as brokers of one rack, "
              "broker.rack.", at_least(1)),
    ConfigDef("controller.quorum.voters", T.LIST, [], H, "The controllers as id@host:port entries. "
              "Empty means this node is its own controller, which needs the controller role."),
    ConfigDef("controller.quorum.bootstrap.servers", T.LIST, [], H, "Kafka 4's host:port list of "
              "controllers to find the quorum through. A broker that is not a voter may use it instead "
              "of controller.quorum.voters; a dynamic quorum (KIP-853) is not supported, so voters still "
              "need controller.quorum.voters."),
    ConfigDef("controller.listener.names", T.LIST, [], H, "Names of the listeners that serve "
              "controller traffic; they are not advertised to clients."),
    # -- the metadata quorum's timing (Kafka's QuorumConfig; metadata.raft.config.RaftConfig)
    ConfigDef("controller.quorum.election.timeout.ms", T.INT, QUORUM_ELECTION_TIMEOUT_MS, H, "A voter "
              "that hears from no leader waits a random time between this and twice this before it "
              "starts an election.", at_least(1)),
    ConfigDef("controller.quorum.fetch.timeout.ms", T.INT, QUORUM_FETCH_TIMEOUT_MS, H, "A follower "
              "with no successful fetch from the leader for this long starts an election; a leader "
              "that no majority fetched from for 1.5 times this resigns.", at_least(1)),
    ConfigDef("controller.quorum.election.backoff.max.ms", T.INT, QUORUM_ELECTION_BACKOFF_MAX_MS, H,
              "Longest wait before a new election after a lost one (the cap of the exponential "
              "backoff).", at_least(1)),
    ConfigDef("controller.quorum.request.timeout.ms", T.INT, QUORUM_REQUEST_TIMEOUT_MS, M, "A quorum "
              "request (Fetch, Vote, BeginQuorumEpoch) unanswered for this long is sent again.",
              at_least(1)),
    ConfigDef("controller.quorum.retry.backoff.ms", T.INT, QUORUM_RETRY_BACKOFF_MS, L, "Unit of the "
              "exponential election backoff, and the pause before a failed quorum request is retried.",
              at_least(1)),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", T.LONG, 20 * 1024 * 1024, H, "A "
              "controller voter writes a snapshot of the committed metadata log (KIP-630) once this many "
              "bytes of it have committed since the last one; the log before a snapshot may then be "
              "cleaned, and a broker that needs it fetches the snapshot instead.", at_least(1)),
    ConfigDef("cluster.id", T.STRING, None, M, "The cluster's id. Unset: generated when the log "
              "directories are first formatted and kept in meta.properties."),
    # -- network
    ConfigDef("listeners", T.STRING, "PLAINTEXT://127.0.0.1:9092", H, "Comma-separated NAME://host:port "
              "addresses to accept connections on; an empty host binds every interface, port 0 an "
              "ephemeral port."),
    ConfigDef("advertised.listeners", T.STRING, None, H, "The NAME://host:port addresses given to "
              "clients and other brokers, if they differ from listeners (the default)."),
    ConfigDef("listener.security.protocol.map", T.STRING,
              "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
              "SASL_SSL:SASL_SSL", M, "LISTENER_NAME:PROTOCOL pairs giving each listener's security "
              "protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    ConfigDef("inter.broker.listener.name", T.STRING, None, M, "The listener brokers use to reach each "
              "other. Unset: the PLAINTEXT listener, else the first advertised one."),
    ConfigDef("metrics.listener", T.STRING, "127.0.0.1:9404", M, "host:port of the Prometheus /metrics "
              "endpoint (a kipling key); empty disables it."),
    ConfigDef("socket.request.max.bytes", T.INT, 104857600, H, "Largest request frame accepted; a "
              "bigger one closes the connection.", at_least(1)),
    ConfigDef("connections.max.idle.ms", T.LONG, 600000, M, "Close connections idle for longer than "
              "this.", at_least(0)),
    ConfigDef("max.connections", T.INT, INT_MAX, M, "Most client connections the broker accepts at "
              "once; one more is closed as soon as it is accepted. With several client listeners, the "
              "inter-broker one is exempt.", at_least(0)),
    ConfigDef("max.connections.per.ip", T.INT, INT_MAX, M, "Most connections the broker accepts from "
              "one IP address; one more is closed as soon as it is accepted. 0 only with overrides.",
              at_least(0)),
    ConfigDef("max.connections.per.ip.overrides", T.STRING, "", M, "host:count pairs, comma-separated, "
              "overriding max.connections.per.ip for those IP addresses or host names."),
    ConfigDef("max.connection.creation.rate", T.INT, INT_MAX, M, "Most new connections per second the "
              "broker accepts across its client listeners (KIP-612); one over it waits, unserved, "
              "until the rate allows it, as Kafka's acceptor blocks. With several client listeners, "
              "the inter-broker one is exempt.", at_least(0)),
    ConfigDef("queued.max.request.bytes", T.LONG, 104857600, M, "Bytes that requests received and not "
              "yet answered may hold, partial ones included, across all connections; when they are "
              "reached the broker stops reading until some are answered. 0 or less: no bound (Kafka's "
              "default, -1; kipling bounds it by default)."),
    ConfigDef("kipling.request.receive.timeout.ms", T.LONG, 30000, M, "Close a connection whose "
              "current request started arriving longer ago than this (a kipling key; Kafka has none): "
              "a peer trickling bytes is never idle. 0 disables it.", at_least(0)),
    ConfigDef("num.network.threads", T.INT, 3, H, "Accepted for Kafka compatibility and ignored: an "
              "asyncio broker has no network thread pool.", at_least(1), ignored=True),
    ConfigDef("num.io.threads", T.INT, 8, H, "Accepted for Kafka compatibility and ignored: an "
              "asyncio broker has no request handler pool.", at_least(1), ignored=True),
    # -- security (listener-scoped as listener.name.<listener>.<key>; the keys marked so also
    #    per mechanism, listener.name.<listener>.<mechanism>.<key>: server_common/config/listener_security.py)
    ConfigDef("ssl.keystore.type", T.STRING, "JKS", M, "Format of the keystore: PEM or PKCS12 (JKS, "
              "Kafka's default, needs a JVM and is refused).", OneOf(("JKS", "PKCS12", "PEM"))),
    ConfigDef("ssl.keystore.location", T.STRING, None, H, "The keystore file: a PEM file with the "
              "private key and certificate chain, or a PKCS12 file."),
    ConfigDef("ssl.keystore.password", T.PASSWORD, None, H, "Password of a PKCS12 keystore (of the "
              "key in a PEM keystore file when ssl.key.password is unset)."),
    ConfigDef("ssl.key.password", T.PASSWORD, None, H, "Password of the private key."),
    ConfigDef("ssl.keystore.certificate.chain", T.PASSWORD, None, H, "The certificate chain in PEM, "
              "inline (ssl.keystore.type=PEM)."),
    ConfigDef("ssl.keystore.key", T.PASSWORD, None, H, "The private key in PEM, inline "
              "(ssl.keystore.type=PEM)."),
    ConfigDef("ssl.truststore.type", T.STRING, "JKS", M, "Format of the truststore: PEM or PKCS12.",
              OneOf(("JKS", "PKCS12", "PEM"))),
    ConfigDef("ssl.truststore.location", T.STRING, None, H, "The truststore file: PEM certificates or "
              "a PKCS12 file, the authorities that sign trusted peers."),
    ConfigDef("ssl.truststore.password", T.PASSWORD, None, H, "Password of a PKCS12 truststore."),
    ConfigDef("ssl.truststore.certificates", T.PASSWORD, None, H, "Trusted certificates in PEM, inline "
              "(ssl.truststore.type=PEM)."),
    ConfigDef("ssl.client.auth", T.STRING, "none", M, "Whether a TLS listener asks clients for a "
              "certificate: required, requested or none. A verified certificate's subject becomes the "
              "principal (ssl.principal.mapping.rules).", OneOf(("required", "requested", "none"))),
    ConfigDef("ssl.enabled.protocols", T.LIST, ["TLSv1.2", "TLSv1.3"], M, "TLS versions allowed, "
              "consecutive versions among TLSv1, TLSv1.1, TLSv1.2 and TLSv1.3."),
    ConfigDef("ssl.protocol", T.STRING, "TLSv1.3", M, "Accepted for Kafka compatibility: OpenSSL "
              "negotiates the highest of ssl.enabled.protocols both sides allow."),
    ConfigDef("ssl.cipher.suites", T.LIST, [], L, "TLS 1.2 cipher suites allowed, by Kafka's (IANA) or "
              "OpenSSL's names; empty: OpenSSL's defaults. TLS 1.3 always uses its AEAD suites."),
    ConfigDef("ssl.endpoint.identification.algorithm", T.STRING, "https", L, "https: kipling's own "
              "connections to other brokers and controllers check that the certificate names the host "
              "they connect to; empty: they do not."),
    ConfigDef("ssl.principal.mapping.rules", T.STRING, "DEFAULT", L, "Rules turning a client "
              "certificate's distinguished name into the principal's name: RULE:pattern/replacement/ "
              "entries (optional L or U suffix) and DEFAULT (the whole name), first match wins."),
    ConfigDef("sasl.enabled.mechanisms", T.LIST, ["GSSAPI"], M, "SASL mechanisms a SASL listener offers: "
              "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI, Kafka's default, and OAUTHBEARER are not "
              "implemented and refused)."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", M, "SASL mechanism brokers "
              "use to reach each other when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL."),
    ConfigDef("sasl.mechanism.controller.protocol", T.STRING, "GSSAPI", M, "SASL mechanism used to "
              "reach the controllers when their listener is SASL_PLAINTEXT or SASL_SSL."),
    ConfigDef("sasl.jaas.config", T.PASSWORD, None, M, "JAAS login module and options of a SASL "
              "mechanism, set per listener and mechanism: "
              "listener.name.<listener>.<mechanism>.sasl.jaas.config. PLAIN lists its users as "
              "user_<name>=\"<password>\"; username and password are what this broker sends."),
    ConfigDef("connections.max.reauth.ms", T.LONG, 0, M, "Longest a SASL session lasts before the "
              "client must re-authenticate (KIP-368); the connection is closed otherwise. 0: "
              "sessions do not expire.", at_least(0)),
    ConfigDef("connection.failed.authentication.delay.ms", T.INT, 100, L, "How long a connection whose "
              "authentication failed stays open after the error is sent, to slow down password "
              "guessing.", at_least(0)),
    ConfigDef("kipling.authentication.timeout.ms", T.INT, 30000, L, "Close a connection that has not "
              "finished its TLS handshake or SASL authentication this long after it was accepted (a "
              "kipling key: Kafka bounds them by connections.max.idle.ms only).", at_least(1)),
    ConfigDef("sasl.server.max.receive.size", T.INT, 524288, L, "Largest request a connection may send "
              "before it has authenticated; a bigger one closes it.", at_least(1)),
    ConfigDef("authorizer.class.name", T.STRING, "", M, "The authorizer: "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or its older name "
              "kafka.security.authorizer.AclAuthorizer) checks requests against the ACLs kept in the "
              "cluster metadata; empty: no authorization, and the ACL APIs answer SECURITY_DISABLED. "
              "Set it on controllers too.", OneOf(("", *AUTHORIZER_CLASS_NAMES))),
    ConfigDef("super.users", T.STRING, "", M, "Principals allowed every action whatever the ACLs, "
              "separated by ';' (User:admin;User:broker)."),
    ConfigDef("allow.everyone.if.no.acl.found", T.BOOLEAN, False, M, "Allow an action on a resource "
              "that no ACL applies to; false: deny it, so principals get only what ACLs grant."),
    # -- topics
    ConfigDef("num.partitions", T.INT, 1, M, "Partitions of an automatically created topic, and of a "
              "CreateTopics request that leaves the count to the broker.", at_least(1)),
    ConfigDef("default.replication.factor", T.INT, 1, M, "Replication factor of topics whose creator "
              "leaves it to the broker.", at_least(1)),
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, True, H, "Create a topic when a client asks for "
              "metadata of one that does not exist."),
    ConfigDef("delete.topic.enable", T.BOOLEAN, True, H, "Allow DeleteTopics; when false such requests "
              "are refused."),
    # -- log directories and segments
    ConfigDef("log.dirs", T.LIST, None, H, "Comma-separated directories holding partition logs. Unset: "
              "log.dir."),
    ConfigDef("log.dir", T.STRING, "./kipling-data", H, "The single log directory used when log.dirs "
              "is unset."),
    ConfigDef("metadata.log.dir", T.STRING, None, H, "The directory of the KRaft metadata log "
              "(__cluster_metadata-0). Unset: the first of log.dirs. A directory of its own keeps the "
              "metadata log writable when the data log dirs fill up."),
    ConfigDef("kipling.log.open.files.max", T.INT, 0, M, "Most descriptors a broker process (and "
              "each follower process) keeps open for segment files and indexes, across all its "
              "partitions (a kipling key; Kafka keeps every segment open): the least recently used "
              "is closed when another must open, and reopened when used. 0: half the process's "
              "open-files limit, leaving the rest to connections.", at_least(0)),
    ConfigDef("message.max.bytes", T.INT, 1048588, H, "Largest record batch a partition accepts, after "
              "compression.", at_least(0), topic_name="max.message.bytes"),
    ConfigDef("log.segment.bytes", T.INT, 1073741824, H, "Roll to a new segment file once the active "
              "one reaches this size.", at_least(MIN_SEGMENT_BYTES), topic_name="segment.bytes"),
    ConfigDef("log.roll.ms", T.LONG, None, H, "Roll to a new segment once the active one is this old. "
              "Unset: log.roll.hours.", at_least(1), topic_name="segment.ms"),
    ConfigDef("log.roll.hours", T.INT, 168, H, "log.roll.ms in hours, used when log.roll.ms is unset.",
              at_least(1), topic_name="segment.ms", topic_scale=MS_PER_HOUR),
    ConfigDef("log.roll.jitter.ms", T.LONG, None, H, "Random time subtracted from the roll time so that "
              "partitions do not all roll at once. Unset: log.roll.jitter.hours.", at_least(0),
              topic_name="segment.jitter.ms"),
    ConfigDef("log.roll.jitter.hours", T.INT, 0, H, "log.roll.jitter.ms in hours, used when "
              "log.roll.jitter.ms is unset.", at_least(0), topic_name="segment.jitter.ms",
              topic_scale=MS_PER_HOUR),
    ConfigDef("log.index.interval.bytes", T.INT, 4096, M, "Bytes of records between two offset index "
              "entries.", at_least(0), topic_name="index.interval.bytes"),
    ConfigDef("log.index.size.max.bytes", T.INT, 10485760, M, "Size preallocated for each offset and "
              "time index file; a full index rolls the segment.", at_least(4),
              topic_name="segment.index.bytes"),
    ConfigDef("log.message.timestamp.type", T.STRING, CREATE_TIME, M, "Whether record timestamps are "
              "the producer's (CreateTime) or the broker's append time (LogAppendTime).",
              OneOf((CREATE_TIME, LOG_APPEND_TIME)), topic_name="message.timestamp.type"),
    ConfigDef("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, M, "Produce refuses "
              "(INVALID_TIMESTAMP) a CreateTime record more than this much older than the broker's "
              "clock.", at_least(0), topic_name="message.timestamp.before.max.ms"),
    ConfigDef("log.message.timestamp.after.max.ms", T.LONG, 3600000, M, "Produce refuses "
              "(INVALID_TIMESTAMP) a CreateTime record more than this much ahead of the broker's "
              "clock.", at_least(0), topic_name="message.timestamp.after.max.ms"),
    ConfigDef("log.preallocate", T.BOOLEAN, False, M, "Accepted, not yet acted on: Kafka preallocates "
              "each new segment file to its full size.", topic_name="preallocate", ignored=True),
    # -- compression
    ConfigDef("compression.type", T.STRING, COMPRESSION_PRODUCER, H, "Codec of the stored batches: "
              "producer keeps each batch as the producer compressed it; uncompressed, gzip, snappy, lz4 "
              "or zstd make the leader recompress a batch that uses another codec.",
              OneOf(COMPRESSION_TYPES), topic_name="compression.type"),
    ConfigDef("compression.gzip.level", T.INT, GZIP_DEFAULT_LEVEL, M, "gzip level of batches the "
              "broker recompresses to gzip; -1 is the codec's default (6).", _GZIP_LEVELS,
              topic_name="compression.gzip.level"),
    ConfigDef("compression.lz4.level", T.INT, LZ4_DEFAULT_LEVEL, M, "lz4 level of batches the broker "
              "recompresses to lz4.", _LZ4_LEVELS, topic_name="compression.lz4.level"),
    ConfigDef("compression.zstd.level", T.INT, ZSTD_DEFAULT_LEVEL, M, "zstd level of batches the "
              "broker recompresses to zstd.", _ZSTD_LEVELS, topic_name="compression.zstd.level"),
    # -- retention and deletion
    ConfigDef("log.retention.ms", T.LONG, None, H, "Delete segments whose newest record is older than "
              "this; any negative value keeps them forever. Unset: log.retention.minutes.",
              topic_name="retention.ms"),
    ConfigDef("log.retention.minutes", T.INT, None, H, "log.retention.ms in minutes, used when "
              "log.retention.ms is unset. Unset: log.retention.hours.", topic_name="retention.ms",
              topic_scale=MS_PER_MINUTE),
    ConfigDef("log.retention.hours", T.INT, 168, H, "log.retention.ms in hours, used when neither "
              "log.retention.ms nor log.retention.minutes is set.", topic_name="retention.ms",
              topic_scale=MS_PER_HOUR),
    ConfigDef("log.retention.bytes", T.LONG, -1, H, "Delete the oldest segments while a partition is "
              "bigger than this; -1 means no size limit.", topic_name="retention.bytes"),
    ConfigDef("log.retention.check.interval.ms", T.LONG, 300000, M, "How often retention is applied.",
              at_least(1)),
    ConfigDef("log.cleanup.policy", T.LIST, [CLEANUP_DELETE], M, "delete: retention removes old "
              "segments; compact: the log cleaner keeps the latest record of each key; both may be "
              "given.", SubsetOf((CLEANUP_COMPACT, CLEANUP_DELETE)), topic_name="cleanup.policy"),
    ConfigDef("log.segment.delete.delay.ms", T.LONG, 60000, H, "How long a segment removed from a log "
              "stays on disk (as .deleted) before its files are deleted.", at_least(0),
              topic_name="file.delete.delay.ms"),
    # -- log cleaner (compaction)
    ConfigDef("log.cleaner.enable", T.BOOLEAN, True, M, "Run the log cleaner, which compacts the logs "
              "whose cleanup.policy includes compact (__consumer_offsets among them)."),
    ConfigDef("log.cleaner.threads", T.INT, 1, M, "0 turns the cleaner off; otherwise the broker and "
              "each follower process clean in one cleaner process per log dir, off their event loops.",
              at_least(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", T.LONG, 128 * 1024 * 1024, M, "Memory for the "
              "offset map (key digest -> latest offset) of a cleaning round, over all cleaners."),
    ConfigDef("log.cleaner.io.buffer.size", T.INT, 512 * 1024, M, "I/O buffer memory of the "
              "cleaners, over all of them.", at_least(0)),
    ConfigDef("log.cleaner.io.buffer.load.factor", T.DOUBLE, 0.9, M, "How full the offset map may "
              "get before a round stops at the offset it reached."),
    ConfigDef("log.cleaner.io.max.bytes.per.second", T.DOUBLE, sys.float_info.max, M, "Throttle of "
              "the bytes a cleaner reads and writes per second."),
    ConfigDef("log.cleaner.backoff.ms", T.LONG, 15000, M, "How long the cleaner sleeps when no log "
              "is dirty enough to clean.", at_least(0)),
    ConfigDef("log.cleaner.delete.retention.ms", T.LONG, 86400000, M, "How long tombstones (and the "
              "markers of removed transactions) stay in a compacted log once it was cleaned.",
              at_least(0), topic_name="delete.retention.ms"),
    ConfigDef("log.cleaner.min.compaction.lag.ms", T.LONG, 0, M, "The youngest a record may be and "
              "still be compacted.", at_least(0), topic_name="min.compaction.lag.ms"),
    ConfigDef("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, M, "The oldest an uncompacted "
              "record may get before its log is cleaned whatever its dirty ratio.", at_least(1),
              topic_name="max.compaction.lag.ms"),
    ConfigDef("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, M, "The share of a log that must be "
              "uncompacted (dirty) before it is cleaned.", Range(0, 1),
              topic_name="min.cleanable.dirty.ratio"),
    # -- tiered storage: accepted, not yet acted on
    ConfigDef("log.local.retention.ms", T.LONG, -2, M, "Accepted, not yet acted on (no tiered "
              "storage): how long segments stay on local disk; -2 means retention.ms.", at_least(-2),
              topic_name="local.retention.ms", ignored=True),
    ConfigDef("log.local.retention.bytes", T.LONG, -2, M, "Accepted, not yet acted on (no tiered "
              "storage): local size limit of a partition; -2 means retention.bytes.", at_least(-2),
              topic_name="local.retention.bytes", ignored=True),
    # -- flushing and checkpoints
    ConfigDef("log.flush.interval.messages", T.LONG, LONG_MAX, H, "fsync a partition's log after this "
              "many appended records. The default leaves durability to replication.", at_least(1),
              topic_name="flush.messages"),
    ConfigDef("log.flush.interval.ms", T.LONG, None, H, "fsync a partition's log once unflushed data "
              "is this old. Unset: never on a timer.", at_least(0), topic_name="flush.ms"),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", T.INT, 60000, H, "How often the "
              "recovery-point-offset-checkpoint files are written.", at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000, H, "How often the "
              "log-start-offset-checkpoint files are written.", at_least(0)),
    # -- replication
    ConfigDef("min.insync.replicas", T.INT, 1, H, "Replicas that must be in sync for an acks=all "
              "produce to succeed.", at_least(1), topic_name="min.insync.replicas"),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, False, H, "Let a replica outside the ISR "
              "become leader when no in-sync one is left, losing records.",
              topic_name="unclean.leader.election.enable"),
    ConfigDef("replica.lag.time.max.ms", T.LONG, 30000, H, "A follower that has not caught up with the "
              "leader for this long leaves the ISR.", at_least(1)),
    ConfigDef("replica.fetch.wait.max.ms", T.INT, 500, M, "Longest time a follower's fetch waits at the "
              "leader for data; keep it below replica.lag.time.max.ms.", at_least(0)),
    ConfigDef("replica.fetch.min.bytes", T.INT, 1, M, "Bytes a follower's fetch waits for before the "
              "leader answers.", at_least(0)),
    ConfigDef("replica.fetch.max.bytes", T.INT, 1048576, M, "Bytes a follower asks for per partition "
              "(a soft limit: a bigger first batch still comes whole).", at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", T.INT, 10485760, M, "Bytes a follower asks for per "
              "fetch response (a soft limit, like replica.fetch.max.bytes).", at_least(0)),
    ConfigDef("replica.fetch.backoff.ms", T.INT, 1000, M, "Pause after a follower's fetch fails, or when "
              "it has nothing to fetch.", at_least(0)),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", T.LONG, 5000, H, "How often high "
              "watermarks are written to replication-offset-checkpoint.", at_least(1)),
    ConfigDef("replica.selector.class", T.CLASS, None, M, "How a partition leader picks the replica a "
              "consumer that sent its client.rack should fetch from (KIP-392). Unset: the leader "
              "always serves. " + RACK_AWARE_REPLICA_SELECTOR + ": an in-sync replica in the "
              "consumer's rack (the leader if it is there), named in the fetch response's "
              "PreferredReadReplica. No other selector is implemented.",
              OneOf((RACK_AWARE_REPLICA_SELECTOR,))),
    ConfigDef("num.replica.fetchers", T.INT, 1, H, "Follower processes per broker; each fetches for "
              "its share of the followed partitions.", at_least(1)),
    ConfigDef("replica.socket.timeout.ms", T.INT, 30000, H, "Network timeout of a follower's requests; "
              "at least replica.fetch.wait.max.ms.", at_least(1)),
    # -- controller liveness
    ConfigDef("broker.session.timeout.ms", T.INT, 9000, M, "A broker whose heartbeats stop for this "
              "long is fenced by the controller.", at_least(1)),
    ConfigDef("broker.heartbeat.interval.ms", T.INT, 2000, M, "Time between a broker's heartbeats to "
              "the controller.", at_least(1)),
    # -- fetch requests and sessions
    ConfigDef("fetch.max.bytes", T.INT, 57671680, M, "Upper bound on the bytes of any fetch response, "
              "whatever the request asks for.", at_least(MIN_FETCH_MAX_BYTES)),
    ConfigDef("max.incremental.fetch.session.cache.slots", T.INT, 1000, M, "Incremental fetch sessions "
              "(KIP-227) the broker keeps.", at_least(0)),
    ConfigDef("min.incremental.fetch.session.eviction.ms", T.LONG, 120000, M, "A fetch session unused "
              "for this long may be evicted for a new one (a constant in Kafka, a key in kipling).",
              at_least(0)),
    ConfigDef("fetch.purgatory.purge.interval.requests", T.INT, 1000, M, "Completed delayed fetches "
              "after which their watch lists are purged.", at_least(1)),
    ConfigDef("producer.purgatory.purge.interval.requests", T.INT, 1000, M, "Completed delayed "
              "produces after which their watch lists are purged.", at_least(1)),
    ConfigDef("producer.id.expiration.ms", T.INT, 86400000, L, "Forget a producer id's sequence state "
              "once it has written nothing for this long.", at_least(1)),
    # -- consumer groups
    ConfigDef("offsets.topic.num.partitions", T.INT, 50, H, "Partitions of __consumer_offsets; fixed "
              "once the topic exists.", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", T.SHORT, 3, H, "Replication factor of "
              "__consumer_offsets; it is not created until that many brokers are up.", at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", T.INT, 104857600, H, "Segment size of __consumer_offsets "
              "(kept small, its compaction and the coordinator's load stay fast).", at_least(1)),
    ConfigDef("offsets.retention.minutes", T.INT, 10080, H, "Committed offsets of a group that has no "
              "members are dropped after this long.", at_least(1)),
    ConfigDef("group.initial.rebalance.delay.ms", T.INT, 3000, M, "How long the first rebalance of an "
              "empty group waits for more members to join.", at_least(0)),
    ConfigDef("group.min.session.timeout.ms", T.INT, 6000, M, "Smallest session timeout a group member "
              "may ask for.", at_least(0)),
    ConfigDef("group.max.session.timeout.ms", T.INT, 1800000, M, "Largest session timeout a group "
              "member may ask for.", at_least(0)),
    ConfigDef("group.max.size", T.INT, 2147483647, M, "Most members a consumer group may have.",
              at_least(1)),
    ConfigDef("offset.metadata.max.bytes", T.INT, 4096, H, "Largest metadata string an offset commit "
              "may carry.", at_least(0)),
    ConfigDef("offsets.commit.timeout.ms", T.INT, 5000, H, "How long an offset commit waits for every "
              "in-sync replica of __consumer_offsets before it fails.", at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", T.LONG, 600000, H, "How often expired committed "
              "offsets are looked for.", at_least(1)),
    # -- consumer-protocol groups (KIP-848)
    ConfigDef("group.coordinator.rebalance.protocols", T.LIST, ["classic", "consumer"], M, "The group "
              "protocols served: classic (JoinGroup, SyncGroup, Heartbeat) and consumer "
              "(ConsumerGroupHeartbeat, ConsumerGroupDescribe; not advertised without it).",
              SubsetOf(("classic", "consumer"))),
    ConfigDef("group.consumer.session.timeout.ms", T.INT, 45000, M, "A consumer-protocol member "
              "that does not heartbeat for this long is removed from its group.", at_least(1)),
    ConfigDef("group.consumer.min.session.timeout.ms", T.INT, 45000, M, "Smallest "
              "group.consumer.session.timeout.ms allowed.", at_least(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", T.INT, 60000, M, "Largest "
              "group.consumer.session.timeout.ms allowed.", at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", T.INT, 5000, M, "How often consumer-protocol "
              "members are told to heartbeat.", at_least(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", T.INT, 5000, M, "Smallest "
              "group.consumer.heartbeat.interval.ms allowed.", at_least(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", T.INT, 15000, M, "Largest "
              "group.consumer.heartbeat.interval.ms allowed.", at_least(1)),
    ConfigDef("group.consumer.max.size", T.INT, 2147483647, M, "Most members a consumer-protocol group "
              "may have.", at_least(1)),
    ConfigDef("group.consumer.assignors", T.LIST, ["uniform", "range"], M, "The server-side assignors of "
              "consumer-protocol groups, by name or Kafka class name; the first is the default.",
              SubsetOf(("uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                        "org.apache.kafka.coordinator.group.assignor.RangeAssignor"))),
    ConfigDef("group.consumer.migration.policy", T.STRING, "bidirectional", M, "Kafka's conversion of "
              "groups with members between the classic and consumer protocols; kipling converts only "
              "empty groups (whatever the policy), a group with members keeps its protocol.",
              OneOf(("bidirectional", "upgrade", "downgrade", "disabled"))),
    # -- transactions
    ConfigDef("transaction.state.log.num.partitions", T.INT, 50, H, "Partitions of "
              "__transaction_state; fixed once the topic exists.", at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", T.SHORT, 3, H, "Replication factor of "
              "__transaction_state; it is not created until that many brokers are up.", at_least(1)),
    ConfigDef("transaction.state.log.min.isr", T.INT, 2, H, "min.insync.replicas of "
              "__transaction_state.", at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", T.INT, 104857600, H, "Segment size of "
              "__transaction_state.", at_least(1)),
    ConfigDef("transaction.max.timeout.ms", T.INT, 900000, H, "Largest transaction.timeout.ms a "
              "producer may ask for.", at_least(1)),
    ConfigDef("transactional.id.expiration.ms", T.INT, 604800000, H, "A transactional id with no "
              "transaction for this long is forgotten.", at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000, L, "How "
              "often transactions past their timeout are looked for and aborted.", at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000, L, "How "
              "often expired transactional ids are looked for.", at_least(1)),
    ConfigDef("transaction.partition.verification.enable", T.BOOLEAN, True, L, "A partition leader asks "
              "the transaction coordinator whether a transactional batch belongs to an ongoing "
              "transaction before appending it (KIP-890).", None),
    # -- client quotas
    ConfigDef("quota.window.num", T.INT, 11, L, "Samples a client quota's rate is measured over.",
              at_least(1)),
    ConfigDef("quota.window.size.seconds", T.INT, 1, L, "Length of each sample of a client quota's "
              "rate.", at_least(1)),
)
# fmt: on

BY_NAME: Mapping[str, ConfigDef] = {d.name: d for d in DEFINITIONS}
ALIASES: Mapping[str, str] = {alias: d.name for d in DEFINITIONS for alias in d.aliases}


# -- topic-level keys ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicConfigDef:
    """The declaration of one topic-level key.

    Its default comes from the broker keys that name it as ``topic_name`` (in table order, the first
    one set wins, times its ``topic_scale``), then ``fallback`` if none is set, then ``normalise``.
    A ``topic_only`` key has no broker key at all (Kafka's ``CONFIGS_WITH_NO_SERVER_DEFAULTS``): its
    default is ``fallback``. A key kipling accepts, validates and describes but whose behaviour is not
    implemented yet (tiered storage, preallocation) is declared with ``acted_on=False``; its
    broker keys are then ``ignored`` ones, and the topic-config documentation says so.
    """

    name: str
    type: ConfigType
    doc: str
    validator: Validator | None = None
    fallback: object = None
    normalise: Callable[[object], object] | None = None
    topic_only: bool = False
    acted_on: bool = True

    @property
    def broker_keys(self) -> tuple[ConfigDef, ...]:
        """The broker keys supplying this key's default, highest precedence first."""
        return _BROKER_KEYS_OF.get(self.name, ())

    def parse(self, raw: str) -> object:
        return parse_value(self.name, self.type, raw, self.validator)

    def allowed(self) -> str:
        return _allowed_text(self.type, self.validator)

    def resolve(self, broker_values: Mapping[str, object]) -> object:
        """This key's value derived from the broker's typed values (keyed by broker key name)."""
        value = self.fallback
        for definition in self.broker_keys:
            given = broker_values.get(definition.name)
            if given is not None:
                if definition.topic_scale != 1:
                    assert isinstance(given, int)
                    given = given * definition.topic_scale
                value = given
                break
        return self.normalise(value) if self.normalise is not None else value


def _unlimited_if_negative(value: object) -> object:
    """Kafka treats every negative retention time as -1 (keep forever)."""
    assert isinstance(value, int)
    return -1 if value < 0 else value


_NOT_YET = "Accepted, not yet acted on"
_REPLICAS = ReplicaList()

# fmt: off
TOPIC_DEFINITIONS: tuple[TopicConfigDef, ...] = (
    TopicConfigDef("cleanup.policy", T.LIST, "delete: retention removes old segments; compact: the "
                   "log cleaner keeps the latest record of each key. Without delete there is no time "
                   "or size retention and DeleteRecords is refused.",
                   SubsetOf((CLEANUP_COMPACT, CLEANUP_DELETE))),
    TopicConfigDef("compression.gzip.level", T.INT, "gzip level of batches the leader recompresses to "
                   "gzip; -1 is the codec's default.", _GZIP_LEVELS),
    TopicConfigDef("compression.lz4.level", T.INT, "lz4 level of batches the leader recompresses to "
                   "lz4.", _LZ4_LEVELS),
    TopicConfigDef("compression.type", T.STRING, "Codec of the stored batches: producer keeps the "
                   "producer's; uncompressed, gzip, snappy, lz4 or zstd make the leader recompress "
                   "batches that use another codec.", OneOf(COMPRESSION_TYPES)),
    TopicConfigDef("compression.zstd.level", T.INT, "zstd level of batches the leader recompresses to "
                   "zstd.", _ZSTD_LEVELS),
    TopicConfigDef("delete.retention.ms", T.LONG, "How long tombstones stay in a compacted log once "
                   "it was cleaned.", at_least(0)),
    TopicConfigDef("file.delete.delay.ms", T.LONG, "How long a removed segment stays on disk before "
                   "its files are deleted.", at_least(0)),
    TopicConfigDef("flush.messages", T.LONG, "fsync the log after this many appended records.",
                   at_least(1)),
    TopicConfigDef("flush.ms", T.LONG, "fsync the log once unflushed data is this old.", at_least(0),
                   fallback=LONG_MAX),
    TopicConfigDef("follower.replication.throttled.replicas", T.LIST, "The replicas whose follower "
                   "fetches are throttled to follower.replication.throttled.rate, as partition:broker "
                   "pairs or *.", _REPLICAS, fallback=[], topic_only=True),
    TopicConfigDef("index.interval.bytes", T.INT, "Bytes of records between two offset index entries.",
                   at_least(0)),
    TopicConfigDef("leader.replication.throttled.replicas", T.LIST, "The replicas whose leader side "
                   "of replication is throttled to leader.replication.throttled.rate, as "
                   "partition:broker pairs or *.", _REPLICAS, fallback=[], topic_only=True),
    TopicConfigDef("local.retention.bytes", T.LONG, f"{_NOT_YET} (no tiered storage): local size limit "
                   "of a partition; -2 means retention.bytes.", at_least(-2), acted_on=False),
    TopicConfigDef("local.retention.ms", T.LONG, f"{_NOT_YET} (no tiered storage): how long segments "
                   "stay on local disk; -2 means retention.ms.", at_least(-2), acted_on=False),
    TopicConfigDef("max.compaction.lag.ms", T.LONG, "The oldest an uncompacted record may get before "
                   "the log is cleaned whatever its dirty ratio.", at_least(1)),
    TopicConfigDef("max.message.bytes", T.INT, "Largest record batch the topic accepts, after "
                   "compression.", at_least(0)),
    TopicConfigDef("message.timestamp.after.max.ms", T.LONG, "Produce refuses (INVALID_TIMESTAMP) a "
                   "CreateTime record more than this much ahead of the broker's clock.", at_least(0)),
    TopicConfigDef("message.timestamp.before.max.ms", T.LONG, "Produce refuses (INVALID_TIMESTAMP) a "
                   "CreateTime record more than this much older than the broker's clock.",
                   at_least(0)),
    TopicConfigDef("message.timestamp.type", T.STRING, "CreateTime keeps the producer's timestamps, "
                   "LogAppendTime replaces them with the broker's clock.",
                   OneOf((CREATE_TIME, LOG_APPEND_TIME))),
    TopicConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, "The share of the log that must be "
                   "uncompacted before it is cleaned.", Range(0, 1)),
    TopicConfigDef("min.compaction.lag.ms", T.LONG, "The youngest a record may be and still be "
                   "compacted.", at_least(0)),
    TopicConfigDef("min.insync.replicas", T.INT, "Replicas that must be in sync for an acks=all "
                   "produce to succeed.", at_least(1)),
    TopicConfigDef("preallocate", T.BOOLEAN, f"{_NOT_YET}: Kafka preallocates each new segment file "
                   "to its full size.", acted_on=False),
    TopicConfigDef("remote.log.copy.disable", T.BOOLEAN, f"{_NOT_YET} (no tiered storage): stop "
                   "copying segments to remote storage, keeping what is there.", fallback=False,
                   topic_only=True, acted_on=False),
    TopicConfigDef("remote.log.delete.on.disable", T.BOOLEAN, f"{_NOT_YET} (no tiered storage): "
                   "delete the remote data when remote storage is turned off.", fallback=False,
                   topic_only=True, acted_on=False),
    TopicConfigDef("remote.storage.enable", T.BOOLEAN, f"{_NOT_YET} (no tiered storage): true is "
                   "refused, as by a Kafka broker whose tiered storage is disabled.", fallback=False,
                   topic_only=True, acted_on=False),
    TopicConfigDef("retention.bytes", T.LONG, "Delete the oldest segments while a partition is bigger "
                   "than this; -1 means no size limit."),
    TopicConfigDef("retention.ms", T.LONG, "Delete segments whose newest record is older than this; "
                   "-1 keeps them forever.", at_least(-1), normalise=_unlimited_if_negative),
    TopicConfigDef("segment.bytes", T.INT, "Roll to a new segment once the active one reaches this "
                   "size.", at_least(MIN_SEGMENT_BYTES)),
    TopicConfigDef("segment.index.bytes", T.INT, "Size preallocated for each index file of a "
                   "segment.", at_least(4)),
    TopicConfigDef("segment.jitter.ms", T.LONG, "Random time subtracted from segment.ms for each "
                   "segment.", at_least(0)),
    TopicConfigDef("segment.ms", T.LONG, "Roll to a new segment once the active one is this old.",
                   at_least(1)),
    TopicConfigDef("unclean.leader.election.enable", T.BOOLEAN, "Let a replica outside the ISR become "
                   "leader when no in-sync one is left, losing records."),
)
# fmt: on

TOPIC_BY_NAME: Mapping[str, TopicConfigDef] = {d.name: d for d in TOPIC_DEFINITIONS}


def _broker_keys_by_topic_name(definitions: Sequence[ConfigDef]) -> dict[str, tuple[ConfigDef, ...]]:
    grouped: dict[str, list[ConfigDef]] = {}
    for definition in definitions:
        if definition.topic_name is not None:
            grouped.setdefault(definition.topic_name, []).append(definition)
    return {name: tuple(defs) for name, defs in grouped.items()}


_BROKER_KEYS_OF = _broker_keys_by_topic_name(DEFINITIONS)
assert set(_BROKER_KEYS_OF) <= set(TOPIC_BY_NAME), "a broker key names an unknown topic key"
for _topic_def in TOPIC_DEFINITIONS:
    assert _topic_def.topic_only != (_topic_def.name in _BROKER_KEYS_OF), _topic_def.name
    assert not _topic_def.topic_only or _topic_def.fallback is not None, _topic_def.name
    assert all(d.ignored != _topic_def.acted_on for d in _topic_def.broker_keys), _topic_def.name

SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
"""Broker keys that set the same thing, highest precedence first (DescribeConfigs' synonyms)."""


def broker_synonyms(key: str) -> tuple[str, ...]:
    """The keys that can supply ``key``'s setting, highest precedence first (just ``key`` if none)."""
    for group in SYNONYM_GROUPS:
        if key in group:
            return group
    return (key,)


def own_synonyms(name: str, synonyms: Sequence[ConfigSynonym]) -> tuple[ConfigSynonym, ...]:
    """``synonyms`` from ``name``'s own first entry on, as Kafka's ConfigHelper lists them: the
    values of higher-precedence keys listed before it are dropped, so ``log.retention.hours``
    does not show a dynamic ``log.retention.ms``, and a topic's ``retention.ms`` with no
    ``log.retention.ms`` set (its default is null) has no broker synonyms at all."""
    for index, synonym in enumerate(synonyms):
        if synonym.name == name:
            return tuple(synonyms[index:])
    return ()
