"""Group configs (KIP-848, Kafka 4.0's ``GroupConfig``): per-group overrides of the consumer-group
session timeout and heartbeat interval, set through the GROUP config resource (type 32).

A group's overrides are ConfigRecords of the GROUP resource named after the group (the group need
not exist). Each key falls back to the broker key behind it (``consumer.session.timeout.ms`` to
``group.consumer.session.timeout.ms``), and every value, override or not, must lie within the
broker's ``group.consumer.min.*`` / ``group.consumer.max.*`` bounds, as :func:`validate_group_configs`
checks with Kafka's messages. The consumer-group coordinator reads the effective values per group
(:func:`effective_group_config`), from the next heartbeat on after a change, as Kafka's
``GroupMetadataManager`` does.

Kafka 4.0 also defines ``share.*`` group keys for share groups (KIP-932). kipling has no share
groups, so those keys are refused rather than stored and ignored, and DescribeConfigs does not list
them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from server_common.config.definitions import (
    BY_NAME,
    INT_MAX,
    INT_MIN,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
)
from server_common.config.dynamic import BrokerConfigLayers

__all__ = [
    "CONSUMER_HEARTBEAT_INTERVAL_MS",
    "CONSUMER_SESSION_TIMEOUT_MS",
    "GROUP_CONFIG_DEFINITIONS",
    "GroupConfigBounds",
    "GroupConfigDef",
    "GroupConsumerSettings",
    "describe_group_configs",
    "effective_group_config",
    "group_config_defaults",
    "parse_group_value",
    "validate_group_configs",
]

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_GROUP_PREFIX = "share."
_DECIMAL = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group-level key: an INT whose default is the value of ``broker_key``."""

    name: str
    broker_key: str
    doc: str
    type: ConfigType = ConfigType.INT


GROUP_CONFIG_DEFINITIONS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef(
        CONSUMER_SESSION_TIMEOUT_MS,
        "group.consumer.session.timeout.ms",
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    GroupConfigDef(
        CONSUMER_HEARTBEAT_INTERVAL_MS,
        "group.consumer.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a consumer group.",
    ),
)
"""In Kafka's definition order (the order in which values are parsed, and errors found)."""
GROUP_BY_NAME: Mapping[str, GroupConfigDef] = {d.name: d for d in GROUP_CONFIG_DEFINITIONS}


def _broker_default(key: str) -> int:
    """A broker key's default, from its one definition."""
    default = BY_NAME[key].default
    assert isinstance(default, int), key
    return default


@dataclass(frozen=True, slots=True)
class GroupConfigBounds:
    """The broker settings group configs default to and are bounded by (the broker keys' defaults
    unless given)."""

    group_consumer_session_timeout_ms: int = _broker_default("group.consumer.session.timeout.ms")
    group_consumer_min_session_timeout_ms: int = _broker_default("group.consumer.min.session.timeout.ms")
    group_consumer_max_session_timeout_ms: int = _broker_default("group.consumer.max.session.timeout.ms")
    group_consumer_heartbeat_interval_ms: int = _broker_default("group.consumer.heartbeat.interval.ms")
    group_consumer_min_heartbeat_interval_ms: int = _broker_default(
        "group.consumer.min.heartbeat.interval.ms"
    )
    group_consumer_max_heartbeat_interval_ms: int = _broker_default(
        "group.consumer.max.heartbeat.interval.ms"
    )

    @classmethod
    def of(cls, config: object) -> GroupConfigBounds:
        """The bounds of a config with the same ``group_consumer_*`` attributes (the broker's
        BrokerConfig, the coordinator's GroupCoordinatorConfig)."""
        return cls(**{name: getattr(config, name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class GroupConsumerSettings:
    """What the coordinator applies to one consumer group."""

    session_timeout_ms: int
    heartbeat_interval_ms: int


def group_config_defaults(bounds: GroupConfigBounds) -> dict[str, int]:
    """Each group key's value for a group without overrides."""
    return {
        CONSUMER_SESSION_TIMEOUT_MS: bounds.group_consumer_session_timeout_ms,
        CONSUMER_HEARTBEAT_INTERVAL_MS: bounds.group_consumer_heartbeat_interval_ms,
    }


def parse_group_value(name: str, raw: str) -> int:
    """Kafka's ConfigDef INT parsing: trimmed decimal text within 32 bits, then ``atLeast(1)``."""
    text = raw.strip()
    value = int(text) if _DECIMAL.fullmatch(text) else None
    if value is None or not INT_MIN <= value <= INT_MAX:
        raise ConfigError(
            f"Invalid value {raw} for configuration {name}: Not a number of type INT", key=name, value=raw
        )
    if value < 1:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Value must be at least 1", key=name, value=raw
        )
    return value


def validate_group_configs(overrides: Mapping[str, str | None], bounds: GroupConfigBounds) -> dict[str, str]:
    """The group's overrides in canonical form (an int's decimal text), or ConfigError with
    Kafka's GroupConfig.validate message; the checks run on the overrides over the defaults, so a
    session timeout override is checked against the heartbeat interval in force and vice versa.
    A None value (a key being removed) is left out."""
    given = {name: value for name, value in overrides.items() if value is not None}
    for name in given:
        if name.startswith(SHARE_GROUP_PREFIX):
            raise ConfigError(f"Share groups are not supported: {name} cannot be set", key=name)
        if name not in GROUP_BY_NAME:
            raise ConfigError(f"Unknown group config name: {name}", key=name)
    values = group_config_defaults(bounds)
    for definition in GROUP_CONFIG_DEFINITIONS:
        if definition.name in given:
            values[definition.name] = parse_group_value(definition.name, given[definition.name])
    heartbeat, session = values[CONSUMER_HEARTBEAT_INTERVAL_MS], values[CONSUMER_SESSION_TIMEOUT_MS]
    checks = (
        (heartbeat < bounds.group_consumer_min_heartbeat_interval_ms, CONSUMER_HEARTBEAT_INTERVAL_MS,
         "must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        (heartbeat > bounds.group_consumer_max_heartbeat_interval_ms, CONSUMER_HEARTBEAT_INTERVAL_MS,
         "must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        (session < bounds.group_consumer_min_session_timeout_ms, CONSUMER_SESSION_TIMEOUT_MS,
         "must be greater than or equal to group.consumer.min.session.timeout.ms"),
        (session > bounds.group_consumer_max_session_timeout_ms, CONSUMER_SESSION_TIMEOUT_MS,
         "must be less than or equal to group.consumer.max.session.timeout.ms"),
        (session <= heartbeat, CONSUMER_SESSION_TIMEOUT_MS,
         f"must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}"),
    )  # fmt: skip
    for failed, name, rule in checks:
        if failed:
            raise ConfigError(f"{name} {rule}", key=name, value=str(values[name]))
    return {name: str(values[name]) for name in given}


def effective_group_config(overrides: Mapping[str, str], bounds: GroupConfigBounds) -> GroupConsumerSettings:
    """The settings of a group with ``overrides`` (as stored: validated when written). A stored
    value that no longer parses falls back to the broker default rather than failing a heartbeat."""
    values = group_config_defaults(bounds)
    for name, raw in overrides.items():
        if name in values:
            try:
                values[name] = parse_group_value(name, raw)
            except ConfigError:
                continue
    return GroupConsumerSettings(
        session_timeout_ms=values[CONSUMER_SESSION_TIMEOUT_MS],
        heartbeat_interval_ms=values[CONSUMER_HEARTBEAT_INTERVAL_MS],
    )


def describe_group_configs(overrides: Mapping[str, str], layers: BrokerConfigLayers) -> list[ConfigEntry]:
    """Every group config of a group with ``overrides`` as DescribeConfigs reports it, by name: the
    override as GROUP_CONFIG, else the broker key's effective value as DEFAULT_CONFIG; synonyms are
    the override (if any), then the broker key with its own source."""
    entries = []
    for definition in sorted(GROUP_CONFIG_DEFINITIONS, key=lambda d: d.name):
        broker = layers.synonyms([definition.broker_key])
        override = overrides.get(definition.name)
        source = ConfigSource.DEFAULT_CONFIG if override is None else ConfigSource.GROUP_CONFIG
        own = () if override is None else (ConfigSynonym(definition.name, override, source),)
        entries.append(
            ConfigEntry(
                name=definition.name,
                value=override if override is not None else str(layers.value(definition.broker_key)),
                source=source,
                is_sensitive=False,
                read_only=False,
                doc=definition.doc,
                type=definition.type,
                synonyms=own + broker[:1],
            )
        )
    return entries
