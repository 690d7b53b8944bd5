"""The broker's typed configuration, built from ``server.properties`` and ``--override KEY=VALUE``.

``load_config`` reads the file, applies the overrides on top (an override always wins, even when the
file used another name of the same key, such as ``broker.id`` for ``node.id``), and builds a frozen
:class:`BrokerConfig`. A key kipling does not know, or accepts without acting on, yields a warning for
the caller to log; an invalid value raises :class:`ConfigError` so that the broker does not start.

Attribute names are the keys in snake case (``cfg.num_partitions``). Where Kafka lets several keys set
one thing, the attribute holds the resolved value: ``log_retention_ms`` is already derived from
``log.retention.ms``/``.minutes``/``.hours`` (and is -1 when unlimited), ``log_roll_ms`` and
``log_roll_jitter_ms`` likewise, ``log_dirs`` from ``log.dirs`` or ``log.dir``, ``node_id`` from
``node.id`` or ``broker.id``. Address keys are parsed: ``listeners`` into :class:`Listener` values,
``metrics_listener`` into ``(host, port)``.
"""

from __future__ import annotations

import difflib
import os
import re
import socket
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server_common.config.definitions import (
    ALIASES,
    BY_NAME,
    DEFINITIONS,
    INT_MAX,
    ROLE_BROKER,
    ROLE_CONTROLLER,
    TOPIC_BY_NAME,
    TOPIC_DEFINITIONS,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    broker_synonyms,
    format_value,
    own_synonyms,
)
from server_common.config.listener_security import (
    JAAS_KEY,
    LISTENER_KEYS,
    ListenerOverrides,
    ListenerSecurity,
    OutboundSecurity,
    is_listener_key,
    outbound_security,
    parse_listener_overrides,
    resolve_listener_security,
)
from server_common.config.properties import PropertiesError, parse_overrides, read_properties_file

PLAINTEXT = "PLAINTEXT"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
INTER_BROKER_MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"
CONTROLLER_MECHANISM_KEY = "sasl.mechanism.controller.protocol"
"""Kafka's security protocol names, all of which kipling implements."""
NON_ROUTABLE_HOSTS = ("0.0.0.0", "::")
LOOPBACK = "127.0.0.1"
LOOPBACK_OF = {"0.0.0.0": LOOPBACK, "::": "::1"}
"""The loopback address of each wildcard's family (an IPv6 wildcard socket is IPv6-only)."""

FOLDED_KEYS = frozenset(
    {"log.dir", "log.roll.hours", "log.roll.jitter.hours", "log.retention.minutes", "log.retention.hours"}
)
"""Keys with no attribute of their own: they only feed a resolved one (log_dirs, log_roll_ms, ...)."""

_LISTENER = re.compile(
    r"(?P<name>[A-Za-z0-9_-]+)://(?:\[(?P<v6>[^\]]+)\]|(?P<host>[A-Za-z0-9._%-]*)):(?P<port>\d+)"
)
_HOST_PORT = re.compile(r"(?:\[(?P<v6>[^\]]+)\]|(?P<host>[A-Za-z0-9._%-]*)):(?P<port>\d+)")
_VOTER = re.compile(r"(?P<id>\d+)@(?:\[(?P<v6>[^\]]+)\]|(?P<host>[A-Za-z0-9._%-]+)):(?P<port>\d+)")
_MAX_PORT = 65535
_COUNT = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` address. An empty host means every interface (for binding)."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True)
class QuorumVoter:
    """One ``id@host:port`` entry of ``controller.quorum.voters``."""

    node_id: int
    host: str
    port: int


INTERNAL_CONTROLLER_LISTENER = Listener("CONTROLLER", LOOPBACK, 0)
"""A combined node's controller listener when none is configured (BrokerConfig.controller_listener)."""


@dataclass(frozen=True)
class BrokerConfig:
    """The validated configuration of one kipling node. Build it with :func:`load_config`."""

    node_id: int
    process_roles: list[str]
    broker_rack: str | None
    kipling_node_processes: int
    controller_quorum_voters: list[QuorumVoter]
    controller_quorum_bootstrap_servers: list[tuple[str, int]]
    controller_listener_names: list[str]
    controller_quorum_election_timeout_ms: int
    controller_quorum_fetch_timeout_ms: int
    controller_quorum_election_backoff_max_ms: int
    controller_quorum_request_timeout_ms: int
    controller_quorum_retry_backoff_ms: int
    metadata_log_max_record_bytes_between_snapshots: int
    cluster_id: str | None
    listeners: list[Listener]
    advertised_listeners: list[Listener]
    listener_security_protocol_map: dict[str, str]
    listener_security: dict[str, ListenerSecurity]
    """Each bound listener's protocol, TLS material and SASL mechanisms, prefixed keys resolved."""
    sasl_mechanism_inter_broker_protocol: str
    sasl_mechanism_controller_protocol: str
    connection_failed_authentication_delay_ms: int
    kipling_authentication_timeout_ms: int
    authorizer_class_name: str
    """Empty (no authorization) or one of ``AUTHORIZER_CLASS_NAMES`` (metadata/authorizer/)."""
    super_users: str
    """``super.users`` as given: principals separated by ``;``, each checked to be ``Type:name``."""
    allow_everyone_if_no_acl_found: bool
    inter_broker_listener_name: str | None
    metrics_listener: tuple[str, int] | None
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: dict[str, int]
    """``max.connections.per.ip.overrides`` parsed: host name or IP address → most connections."""
    max_connection_creation_rate: int
    queued_max_request_bytes: int
    kipling_request_receive_timeout_ms: int
    num_network_threads: int
    num_io_threads: int
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    log_dirs: list[Path]
    metadata_log_dir: Path
    """Where the metadata log lives: ``metadata.log.dir``, else the first of ``log_dirs``."""
    kipling_log_open_files_max: int
    message_max_bytes: int
    log_segment_bytes: int
    log_roll_ms: int
    log_roll_jitter_ms: int
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    log_message_timestamp_type: str
    log_message_timestamp_before_max_ms: int
    log_message_timestamp_after_max_ms: int
    log_preallocate: bool
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    log_retention_ms: int
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_cleanup_policy: list[str]
    log_segment_delete_delay_ms: int
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_io_buffer_size: int
    log_cleaner_io_buffer_load_factor: float
    log_cleaner_io_max_bytes_per_second: float
    log_cleaner_backoff_ms: int
    log_local_retention_ms: int
    log_local_retention_bytes: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int | None
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    replica_lag_time_max_ms: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    replica_fetch_max_bytes: int
    replica_fetch_response_max_bytes: int
    replica_fetch_backoff_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    replica_selector_class: str | None
    """None (the leader serves every consumer) or ``RACK_AWARE_REPLICA_SELECTOR``."""
    num_replica_fetchers: int
    replica_socket_timeout_ms: int
    broker_session_timeout_ms: int
    broker_heartbeat_interval_ms: int
    fetch_max_bytes: int
    max_incremental_fetch_session_cache_slots: int
    min_incremental_fetch_session_eviction_ms: int
    fetch_purgatory_purge_interval_requests: int
    producer_purgatory_purge_interval_requests: int
    producer_id_expiration_ms: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    offset_metadata_max_bytes: int
    offsets_commit_timeout_ms: int
    offsets_retention_check_interval_ms: int
    group_coordinator_rebalance_protocols: list[str]
    group_consumer_session_timeout_ms: int
    group_consumer_min_session_timeout_ms: int
    group_consumer_max_session_timeout_ms: int
    group_consumer_heartbeat_interval_ms: int
    group_consumer_min_heartbeat_interval_ms: int
    group_consumer_max_heartbeat_interval_ms: int
    group_consumer_max_size: int
    group_consumer_assignors: list[str]
    group_consumer_migration_policy: str
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    transaction_state_log_segment_bytes: int
    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int
    transaction_remove_expired_transaction_cleanup_interval_ms: int
    transaction_partition_verification_enable: bool
    quota_window_num: int
    quota_window_size_seconds: int
    values: Mapping[str, object] = field(repr=False, compare=False)
    """Every defined key's own typed value (as given, else its default), for DescribeConfigs."""
    explicit_keys: frozenset[str] = field(repr=False, compare=False)
    """The defined keys that the file or the overrides set (under any of their names)."""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> tuple[BrokerConfig, list[str]]:
        """Validate raw properties (keys as in a file) into a config, plus warnings to log."""
        canonical = canonicalize(props)
        overrides, warnings = parse_listener_overrides(canonical)
        values: dict[str, object] = {d.name: d.default for d in DEFINITIONS}
        for key, raw in canonical.items():
            definition = BY_NAME.get(key)
            if definition is None:
                if not is_listener_key(key):
                    warnings.append(_unknown_key_warning(key))
                continue
            values[key] = definition.parse(raw)
            if definition.ignored:
                warnings.append(
                    f"{key} is accepted for compatibility with Kafka but has no effect in kipling"
                )
        explicit = frozenset(k for k in canonical if k in BY_NAME)
        config = _build(values, explicit, overrides)
        return config, warnings

    @property
    def is_broker(self) -> bool:
        return ROLE_BROKER in self.process_roles

    @property
    def is_controller(self) -> bool:
        return ROLE_CONTROLLER in self.process_roles

    @property
    def controller_listener(self) -> Listener | None:
        """Where this node's controller listens: the first of controller.listener.names, or, on a
        single node (broker and controller, no voters, no controller listener configured), a
        listener of its own bound to loopback on a port the system picks. The configuration is
        refused (:func:`_check_quorum`) where neither applies."""
        if not self.is_controller:
            return None
        for listener in self.listeners:
            if listener.name in self.controller_listener_names:
                return listener
        return INTERNAL_CONTROLLER_LISTENER if self.is_cluster_of_one else None

    @property
    def is_cluster_of_one(self) -> bool:
        """A single node: broker and controller with no controller.quorum.voters, its own only voter."""
        return self.is_broker and self.is_controller and not self.controller_quorum_voters

    @property
    def quorum_voters(self) -> list[QuorumVoter]:
        """controller.quorum.voters, or, when it is empty on a controller, this node alone: a
        single node is a KRaft cluster of one, the only voter of its own quorum."""
        if self.controller_quorum_voters or self.controller_listener is None:
            return list(self.controller_quorum_voters)
        listener = self.controller_listener
        reachable = LOOPBACK_OF.get(listener.host, listener.host) or LOOPBACK
        return [QuorumVoter(self.node_id, reachable, listener.port)]

    @property
    def is_voter(self) -> bool:
        return self.is_controller and any(v.node_id == self.node_id for v in self.quorum_voters)

    def client_listeners(self) -> list[Listener]:
        """The bound listeners that serve clients and brokers (every one but the controller's)."""
        return [li for li in self.listeners if li.name not in self.controller_listener_names]

    @property
    def all_log_dirs(self) -> list[Path]:
        """Every directory the node keeps logs in: ``log_dirs``, and ``metadata_log_dir`` when apart."""
        data = {os.path.abspath(d) for d in self.log_dirs}
        extra = [] if os.path.abspath(self.metadata_log_dir) in data else [self.metadata_log_dir]
        return [*self.log_dirs, *extra]

    @property
    def inter_broker_listener(self) -> Listener | None:
        """The advertised address other brokers use to reach this one."""
        return next(
            (li for li in self.advertised_listeners if li.name == self.inter_broker_listener_name), None
        )

    def inter_broker_security(self) -> OutboundSecurity:
        """How this node connects to other brokers: the inter-broker listener's protocol and TLS
        settings, and (SASL) sasl.mechanism.inter.broker.protocol with the login of that
        listener's JAAS for it. ConfigError naming the key when the login is missing (checked at
        load, so a node that loaded its config can always build it)."""
        name = self.inter_broker_listener_name
        security = self.listener_security.get(name) if name is not None else None
        if security is None:
            return OutboundSecurity(name or PLAINTEXT, PLAINTEXT, None)
        mechanism = self.sasl_mechanism_inter_broker_protocol.strip().upper()
        return outbound_security(security, mechanism, INTER_BROKER_MECHANISM_KEY, offered=True)

    def controller_security(self) -> OutboundSecurity:
        """How this node connects to the controllers (its broker side, and a voter to the other
        voters): the first of controller.listener.names, with sasl.mechanism.controller.protocol;
        PLAINTEXT for a single node's internal controller listener."""
        name = self.controller_listener_names[0] if self.controller_listener_names else None
        security = self.listener_security.get(name) if name is not None else None
        if name is None or security is None:
            return OutboundSecurity(name or INTERNAL_CONTROLLER_LISTENER.name, PLAINTEXT, None)
        mechanism = self.sasl_mechanism_controller_protocol.strip().upper()
        offered = any(listener.name == name for listener in self.listeners)
        return outbound_security(security, mechanism, CONTROLLER_MECHANISM_KEY, offered=offered)

    @property
    def connects_to_controllers(self) -> bool:
        """A broker (ControllerChannel) or a voter with other voters (the quorum's requests)."""
        return self.is_broker or (self.is_voter and len(self.quorum_voters) > 1)

    def listener(self, name: str) -> Listener:
        """The bound listener called ``name`` (names are upper case)."""
        for candidate in self.listeners:
            if candidate.name == name.upper():
                return candidate
        raise KeyError(name)

    def describe(self) -> list[ConfigEntry]:
        """Every broker key as DescribeConfigs on this broker reports it, sorted by name.

        All keys are read-only: kipling has no dynamic broker configuration. ``broker.id`` is listed
        as well, with the value of ``node.id``, because tools still ask for it.
        """
        entries: list[ConfigEntry] = []
        for definition in DEFINITIONS:
            names = (definition.name, *definition.aliases)
            synonyms = own_synonyms(definition.name, self.synonyms(broker_synonyms(definition.name)))
            for name in names:
                entries.append(
                    ConfigEntry(
                        name=name,
                        value=format_value(self.values[definition.name]),
                        source=self.source_of(definition.name),
                        is_sensitive=definition.type is ConfigType.PASSWORD,
                        read_only=True,
                        doc=definition.doc,
                        type=definition.type,
                        synonyms=synonyms,
                    )
                )
        entries.sort(key=lambda entry: entry.name)
        return entries

    def source_of(self, key: str) -> ConfigSource:
        """STATIC_BROKER_CONFIG if the key was set in the file or overrides, else DEFAULT_CONFIG."""
        return ConfigSource.STATIC_BROKER_CONFIG if key in self.explicit_keys else ConfigSource.DEFAULT_CONFIG

    def synonyms(self, keys: Sequence[str]) -> tuple[ConfigSynonym, ...]:
        """The values that ``keys`` (highest precedence first) contribute, as DescribeConfigs lists them."""
        found: list[ConfigSynonym] = []
        for key in keys:
            if key in self.explicit_keys:
                value = format_value(self.values[key])
                found.append(ConfigSynonym(key, value, ConfigSource.STATIC_BROKER_CONFIG))
            default = BY_NAME[key].default
            if default is not None:
                found.append(ConfigSynonym(key, format_value(default), ConfigSource.DEFAULT_CONFIG))
        return tuple(found)

    def topic_defaults(self) -> dict[str, str]:
        """Each topic-level key's value for a topic without overrides, derived from the broker keys."""
        result: dict[str, str] = {}
        for topic_def in TOPIC_DEFINITIONS:
            text = format_value(topic_def.resolve(self.values))
            assert text is not None, topic_def.name
            result[topic_def.name] = text
        return result


def load_config(path: Path | None, overrides: Sequence[str] = ()) -> tuple[BrokerConfig, list[str]]:
    """Read ``path`` (if any), apply ``overrides`` (``KEY=VALUE``) on top, and validate.

    Returns the config and the warnings to log. Raises :class:`ConfigError` for an unreadable or
    malformed file, a malformed override or an invalid value.
    """
    file_props: dict[str, str] = {}
    if path is not None:
        try:
            file_props = read_properties_file(path)
        except OSError as exc:
            raise ConfigError(f"Cannot read configuration file {path}: {exc.strerror or exc}") from exc
        except PropertiesError as exc:
            raise ConfigError(f"Malformed configuration file {path}: {exc}") from exc
    try:
        override_props = parse_overrides(overrides)
    except PropertiesError as exc:
        raise ConfigError(str(exc)) from exc
    # Resolve aliases per layer first, so an override under one name beats the file under another.
    merged = {**canonicalize(file_props), **canonicalize(override_props)}
    return BrokerConfig.from_properties(merged)


def canonicalize(props: Mapping[str, str]) -> dict[str, str]:
    """Rename aliases to their key; unknown keys pass through. Refuses an alias that contradicts its key."""
    result: dict[str, str] = {}
    for key, raw in props.items():
        name = ALIASES.get(key)
        if name is None:
            result[key] = raw
            continue
        if name in props:
            definition = BY_NAME[name]
            if definition.parse(props[name]) != definition.parse(raw, key):
                raise ConfigError(
                    f"Configurations {name}={props[name]!r} and {key}={raw!r} disagree; "
                    f"{key} is another name for {name}, set only {name}",
                    key=key,
                    value=raw,
                )
            continue
        result[name] = raw
    return result


# -- building ------------------------------------------------------------------------------------


def _build(
    values: Mapping[str, object], explicit: frozenset[str], overrides: ListenerOverrides
) -> BrokerConfig:
    """Turn typed per-key values into a validated :class:`BrokerConfig`."""
    # Each value has its definition's type (parsed and validated per key): one that the
    # corresponding BrokerConfig field declares, which object cannot say for a dict of them.
    simple: dict[str, Any] = {
        d.name.replace(".", "_"): values[d.name]
        for d in DEFINITIONS
        if d.name not in FOLDED_KEYS and d.name not in _COMPUTED_KEYS and d.name not in SECURITY_KEYS
    }
    roles = _list(values["process.roles"])
    protocol_map = _parse_protocol_map(str(values["listener.security.protocol.map"]))
    controller_names = [name.upper() for name in _list(values["controller.listener.names"])]
    listeners = _parse_listeners("listeners", str(values["listeners"]))
    if not listeners:
        raise ConfigError.invalid("listeners", str(values["listeners"]), "expected at least one listener")
    advertised = _advertised_listeners(values, listeners, controller_names, roles)
    for key, group in (("listeners", listeners), ("advertised.listeners", advertised)):
        for listener in group:
            _check_protocol(key, listener, protocol_map)
    if ROLE_CONTROLLER in roles:
        _check_names_exist("controller.listener.names", controller_names, listeners)
    inter_broker = _inter_broker_listener_name(values, advertised, controller_names, roles)
    security = _listener_security(
        values, listeners, protocol_map, overrides, outbound={inter_broker, *controller_names[:1]}
    )
    voters = _parse_voters(_list(values["controller.quorum.voters"]))
    bootstrap = _parse_bootstrap_servers(_list(values["controller.quorum.bootstrap.servers"]))
    node_id = values["node.id"]
    assert isinstance(node_id, int)
    _check_bootstrap_servers(roles, voters, bootstrap)
    _check_quorum(node_id, roles, voters, controller_names, found_through_bootstrap=bool(bootstrap))
    retention = TOPIC_BY_NAME["retention.ms"].resolve(values)
    roll = TOPIC_BY_NAME["segment.ms"].resolve(values)
    jitter = TOPIC_BY_NAME["segment.jitter.ms"].resolve(values)
    assert isinstance(retention, int) and isinstance(roll, int) and isinstance(jitter, int)
    config = BrokerConfig(
        **simple,
        process_roles=roles,
        controller_quorum_voters=voters,
        controller_quorum_bootstrap_servers=bootstrap,
        controller_listener_names=controller_names,
        listeners=listeners,
        advertised_listeners=advertised,
        listener_security_protocol_map=protocol_map,
        listener_security=security,
        inter_broker_listener_name=inter_broker,
        metrics_listener=_parse_metrics_listener(str(values["metrics.listener"])),
        max_connections_per_ip_overrides=_parse_per_ip_overrides(
            str(values["max.connections.per.ip.overrides"])
        ),
        log_dirs=(data_dirs := _log_dirs(values)),
        metadata_log_dir=Path(str(values["metadata.log.dir"]))
        if values["metadata.log.dir"]
        else data_dirs[0],
        log_retention_ms=retention,
        log_roll_ms=roll,
        log_roll_jitter_ms=jitter,
        values=dict(values),
        explicit_keys=explicit,
    )
    _check_relations(config)
    _check_outbound_logins(config)
    return config


def _check_outbound_logins(cfg: BrokerConfig) -> None:
    """Refuse at load what would fail at the first connection to another node: a SASL
    inter-broker or controller listener without a mechanism the listener enables or without a
    login (Kafka checks the first in KafkaConfig, the second when its login module starts)."""
    if cfg.is_broker:
        cfg.inter_broker_security()
    if cfg.connects_to_controllers:
        cfg.controller_security()


_COMPUTED_KEYS = frozenset(
    {
        "process.roles",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "metrics.listener",
        "max.connections.per.ip.overrides",
        "log.dirs",
        "metadata.log.dir",
        "log.retention.ms",
        "log.roll.ms",
        "log.roll.jitter.ms",
    }
)
"""Keys whose attribute is parsed or resolved rather than copied from the typed value."""


def _list(value: object) -> list[str]:
    assert isinstance(value, list)
    return [str(item) for item in value]


def _unknown_key_warning(key: str) -> str:
    known = [*BY_NAME, *ALIASES]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"Unknown configuration {key!r} is ignored{hint}"


def _split_host(match: re.Match[str]) -> tuple[str, int]:
    host = match.group("v6") or match.group("host") or ""
    return host, int(match.group("port"))


def _parse_listeners(key: str, raw: str) -> list[Listener]:
    """Parse ``NAME://host:port`` entries; names are upper-cased, as Kafka normalises them."""
    result: list[Listener] = []
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        match = _LISTENER.fullmatch(entry)
        if match is None:
            raise ConfigError.invalid(key, raw, f"{entry!r} is not of the form NAME://host:port")
        host, port = _split_host(match)
        if port > _MAX_PORT:
            raise ConfigError.invalid(key, raw, f"port {port} of {entry!r} is not between 0 and {_MAX_PORT}")
        listener = Listener(match.group("name").upper(), host, port)
        if any(other.name == listener.name for other in result):
            raise ConfigError.invalid(key, raw, f"listener name {listener.name} is used twice")
        if port != 0 and any((other.host, other.port) == (host, port) for other in result):
            raise ConfigError.invalid(key, raw, f"{host or '*'}:{port} is used by two listeners")
        result.append(listener)
    return result


def _parse_protocol_map(raw: str) -> dict[str, str]:
    key = "listener.security.protocol.map"
    result: dict[str, str] = {}
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError.invalid(
                key,
                raw,
                f"{entry!r} is not LISTENER_NAME:PROTOCOL, PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}",
            )
        if name in result:
            raise ConfigError.invalid(key, raw, f"listener name {name} is mapped twice")
        result[name] = protocol
    return result


def _check_protocol(key: str, listener: Listener, protocol_map: Mapping[str, str]) -> None:
    protocol = protocol_map.get(listener.name)
    if protocol is None:
        raise ConfigError(
            f"Invalid configuration {key}: listener {listener.name} has no security protocol in "
            f"listener.security.protocol.map",
            key=key,
        )


SECURITY_KEYS = LISTENER_KEYS | {JAAS_KEY}
"""Keys read per listener (:mod:`server_common.config.listener_security`), not as attributes."""


def _listener_security(
    values: Mapping[str, object],
    listeners: list[Listener],
    protocol_map: Mapping[str, str],
    overrides: ListenerOverrides,
    *,
    outbound: Collection[str | None] = (),
) -> dict[str, ListenerSecurity]:
    """Each bound listener's security, and that of a listener in ``outbound`` (those this node
    connects to: inter-broker, the first controller listener) that it does not bind: a broker's
    view of the controllers' listener, from listener.security.protocol.map and its
    ``listener.name.<controller>.`` keys, as Kafka's brokers read it."""
    bound = {listener.name for listener in listeners}
    remote = sorted(name for name in outbound if name is not None and name not in bound)
    for name in sorted(overrides.listeners - bound - set(remote)):
        raise ConfigError(
            f"Invalid configuration listener.name.{name.lower()}.*: there is no listener {name} "
            f"(listeners: {', '.join(sorted(bound))})",
            key=f"listener.name.{name.lower()}",
        )
    resolved = {
        listener.name: resolve_listener_security(
            listener.name,
            protocol_map[listener.name],
            values,
            overrides,
            connects=listener.name in outbound,
        )
        for listener in listeners
    }
    for name in remote:
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(
                f"Invalid configuration listener.security.protocol.map: controller listener {name} "
                f"has no security protocol in it",
                key="listener.security.protocol.map",
            )
        resolved[name] = resolve_listener_security(name, protocol, values, overrides, bound=False)
    return resolved


def _advertised_listeners(
    values: Mapping[str, object], listeners: list[Listener], controller_names: list[str], roles: list[str]
) -> list[Listener]:
    """The explicit advertised listeners, else the bound ones (minus controller listeners on a broker)."""
    key = "advertised.listeners"
    raw = values[key]
    if raw is not None and str(raw).strip():
        advertised = _parse_listeners(key, str(raw))
        bound = {li.name for li in listeners}
        for listener in advertised:
            if listener.name not in bound:
                raise ConfigError.invalid(
                    key,
                    str(raw),
                    f"listener {listener.name} is not one of the listeners ({', '.join(sorted(bound))})",
                )
        source = key
    else:
        drop = set(controller_names) if ROLE_BROKER in roles else set()
        advertised = [li for li in listeners if li.name not in drop]
        raw, source = values["listeners"], "listeners"
    result = []
    for listener in advertised:
        if listener.host in NON_ROUTABLE_HOSTS:
            hint = "" if source == key else "; set advertised.listeners to an address clients can reach"
            raise ConfigError.invalid(
                source,
                str(raw),
                f"{listener} cannot be advertised: clients cannot connect to {listener.host}{hint}",
            )
        if not listener.host:
            # As Kafka: an empty host is advertised as this machine's canonical host name.
            listener = Listener(listener.name, socket.getfqdn(), listener.port)
        result.append(listener)
    return result


def _check_names_exist(key: str, names: Sequence[str], listeners: Sequence[Listener]) -> None:
    bound = {li.name for li in listeners}
    for name in names:
        if name not in bound:
            raise ConfigError.invalid(key, ",".join(names), f"{name} is not the name of one of the listeners")


def _inter_broker_listener_name(
    values: Mapping[str, object], advertised: list[Listener], controller_names: list[str], roles: list[str]
) -> str | None:
    key = "inter.broker.listener.name"
    raw = values[key]
    names = [li.name for li in advertised if li.name not in controller_names]
    if raw is not None and str(raw).strip():
        name = str(raw).strip().upper()
        if ROLE_BROKER in roles and name not in names:
            raise ConfigError.invalid(
                key,
                str(raw),
                f"expected the name of an advertised, non-controller listener ({', '.join(names)})",
            )
        return name
    if ROLE_BROKER not in roles:
        return None
    if not names:
        raise ConfigError.invalid(
            "listeners",
            str(values["listeners"]),
            "a broker needs at least one listener that is not a controller listener",
        )
    return PLAINTEXT if PLAINTEXT in names else names[0]


def _parse_voters(entries: list[str]) -> list[QuorumVoter]:
    key = "controller.quorum.voters"
    voters: list[QuorumVoter] = []
    for entry in entries:
        match = _VOTER.fullmatch(entry)
        if match is None:
            raise ConfigError.invalid(key, ",".join(entries), f"{entry!r} is not of the form id@host:port")
        host, port = _split_host(match)
        voter = QuorumVoter(int(match.group("id")), host, port)
        if port > _MAX_PORT:
            raise ConfigError.invalid(
                key, ",".join(entries), f"port {port} of {entry!r} is not between 0 and {_MAX_PORT}"
            )
        if any(other.node_id == voter.node_id for other in voters):
            raise ConfigError.invalid(key, ",".join(entries), f"voter id {voter.node_id} appears twice")
        voters.append(voter)
    return voters


def _parse_bootstrap_servers(entries: list[str]) -> list[tuple[str, int]]:
    key = "controller.quorum.bootstrap.servers"
    servers: list[tuple[str, int]] = []
    for entry in entries:
        match = _HOST_PORT.fullmatch(entry)
        if match is None or int(match.group("port")) > _MAX_PORT:
            raise ConfigError.invalid(key, ",".join(entries), f"{entry!r} is not of the form host:port")
        servers.append(_split_host(match))
    return servers


def _check_bootstrap_servers(
    roles: list[str], voters: list[QuorumVoter], bootstrap: list[tuple[str, int]]
) -> None:
    """A controller without controller.quorum.voters would need a dynamic quorum (KIP-853)."""
    if bootstrap and not voters and ROLE_CONTROLLER in roles:
        raise ConfigError.invalid(
            "controller.quorum.bootstrap.servers",
            ",".join(f"{host}:{port}" for host, port in bootstrap),
            "a dynamic quorum (KIP-853) is not supported: list the voters in controller.quorum.voters",
        )


def _check_quorum(
    node_id: int,
    roles: list[str],
    voters: list[QuorumVoter],
    controller_names: list[str],
    *,
    found_through_bootstrap: bool = False,
) -> None:
    """A controller among voters listens where they say (its controller listener); a node with
    voters but no controller listener would start a controller nobody can reach."""
    key = "controller.quorum.voters"
    text = ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in voters)
    if ROLE_CONTROLLER in roles and voters and all(v.node_id != node_id for v in voters):
        raise ConfigError.invalid(key, text, f"a controller's node.id ({node_id}) must be one of the voters")
    if ROLE_CONTROLLER not in roles and not voters and not found_through_bootstrap:
        raise ConfigError.invalid(
            key,
            text,
            "a node without the controller role needs the voters (or controller.quorum.bootstrap.servers) "
            "to find the controller",
        )
    if ROLE_CONTROLLER not in roles and any(v.node_id == node_id for v in voters):
        raise ConfigError.invalid(key, text, f"node.id {node_id} is a voter, so it needs the controller role")
    if ROLE_BROKER not in roles and not voters:
        raise ConfigError.invalid(
            key, text, "a controller-only node needs the voters (itself among them) for brokers to find it"
        )
    if ROLE_CONTROLLER in roles and voters and not controller_names:
        raise ConfigError.invalid(
            "controller.listener.names",
            "",
            "a controller among controller.quorum.voters needs the name of the listener it serves them on",
        )


def _parse_metrics_listener(raw: str) -> tuple[str, int] | None:
    text = raw.strip()
    if not text:
        return None
    match = _HOST_PORT.fullmatch(text)
    if match is None or int(match.group("port")) > _MAX_PORT:
        raise ConfigError.invalid(
            "metrics.listener", raw, f"expected host:port with a port up to {_MAX_PORT}, or empty"
        )
    return _split_host(match)


def _parse_per_ip_overrides(raw: str) -> dict[str, int]:
    """Kafka's ``host:count,host:count`` (the count after the last colon, so an IPv6 address may
    be written plain or in brackets)."""
    key = "max.connections.per.ip.overrides"
    result: dict[str, int] = {}
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        host, sep, count = (part.strip() for part in entry.rpartition(":"))
        host = host.removeprefix("[").removesuffix("]")
        if not sep or not host or not _COUNT.fullmatch(count) or int(count) > INT_MAX:
            raise ConfigError.invalid(
                key, raw, f"{entry!r} is not host:count with a count between 0 and {INT_MAX}"
            )
        if host in result:
            raise ConfigError.invalid(key, raw, f"host {host} is listed twice")
        result[host] = int(count)
    return result


def _log_dirs(values: Mapping[str, object]) -> list[Path]:
    dirs = values["log.dirs"]
    key = "log.dirs"
    if dirs is None:
        key = "log.dir"
        dirs = [str(values["log.dir"]).strip()]
    entries = [d for d in _list(dirs) if d]
    if not entries:
        raise ConfigError.invalid(key, "", "expected at least one directory")
    seen: set[str] = set()
    for entry in entries:
        absolute = os.path.abspath(entry)
        if absolute in seen:
            raise ConfigError.invalid(key, ",".join(entries), f"directory {entry} is listed twice")
        seen.add(absolute)
    return [Path(entry) for entry in entries]


def _check_consumer_groups(cfg: BrokerConfig) -> None:
    """Kafka 4.0's GroupCoordinatorConfig requirements: the classic protocol stays enabled, the
    consumer groups' session timeout and heartbeat interval lie within their bounds, and the
    interval is shorter than the session."""
    if "classic" not in cfg.group_coordinator_rebalance_protocols:
        raise ConfigError.invalid(
            "group.coordinator.rebalance.protocols",
            ",".join(cfg.group_coordinator_rebalance_protocols),
            "disabling the 'classic' protocol is not supported",
        )
    for what, low, value, high in (
        (
            "session.timeout.ms",
            cfg.group_consumer_min_session_timeout_ms,
            cfg.group_consumer_session_timeout_ms,
            cfg.group_consumer_max_session_timeout_ms,
        ),
        (
            "heartbeat.interval.ms",
            cfg.group_consumer_min_heartbeat_interval_ms,
            cfg.group_consumer_heartbeat_interval_ms,
            cfg.group_consumer_max_heartbeat_interval_ms,
        ),
    ):
        if not low <= value <= high:
            raise ConfigError.invalid(
                f"group.consumer.{what}",
                str(value),
                f"must be between group.consumer.min.{what} ({low}) and group.consumer.max.{what} ({high})",
            )
    if cfg.group_consumer_heartbeat_interval_ms >= cfg.group_consumer_session_timeout_ms:
        raise ConfigError.invalid(
            "group.consumer.heartbeat.interval.ms",
            str(cfg.group_consumer_heartbeat_interval_ms),
            f"must be less than group.consumer.session.timeout.ms ({cfg.group_consumer_session_timeout_ms})",
        )


def _check_relations(cfg: BrokerConfig) -> None:
    """The rules between keys that Kafka enforces at start-up."""
    wait = cfg.replica_fetch_wait_max_ms
    if wait > cfg.replica_socket_timeout_ms:
        raise ConfigError(
            f"replica.socket.timeout.ms ({cfg.replica_socket_timeout_ms}) must be at least "
            f"replica.fetch.wait.max.ms ({wait}), or follower fetches time out while the leader waits",
            key="replica.socket.timeout.ms",
            value=str(cfg.replica_socket_timeout_ms),
        )
    if wait > cfg.replica_lag_time_max_ms:
        raise ConfigError(
            f"replica.fetch.wait.max.ms ({wait}) must be at most replica.lag.time.max.ms "
            f"({cfg.replica_lag_time_max_ms}), or idle followers keep dropping out of the ISR",
            key="replica.fetch.wait.max.ms",
            value=str(wait),
        )
    if cfg.group_min_session_timeout_ms > cfg.group_max_session_timeout_ms:
        raise ConfigError(
            f"group.min.session.timeout.ms ({cfg.group_min_session_timeout_ms}) must be at most "
            f"group.max.session.timeout.ms ({cfg.group_max_session_timeout_ms})",
            key="group.min.session.timeout.ms",
            value=str(cfg.group_min_session_timeout_ms),
        )
    _check_consumer_groups(cfg)
    if cfg.max_connections_per_ip == 0 and not cfg.max_connections_per_ip_overrides:
        raise ConfigError.invalid(
            "max.connections.per.ip",
            "0",
            "0 refuses every connection; it is allowed only with max.connections.per.ip.overrides",
        )
    for entry in cfg.super_users.split(";"):
        if entry.strip() and ":" not in entry:
            raise ConfigError.invalid(
                "super.users", cfg.super_users, f"{entry.strip()!r} is not a principal of the form Type:name"
            )
    if (
        cfg.inter_broker_listener_name is not None
        and cfg.inter_broker_listener_name in cfg.controller_listener_names
    ):
        raise ConfigError.invalid(
            "inter.broker.listener.name",
            cfg.inter_broker_listener_name,
            "a controller listener cannot carry broker traffic",
        )
