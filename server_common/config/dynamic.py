"""Dynamic broker configuration (KIP-226 in KRaft): which broker keys may change at run time, how
their new values are checked, and the one rule that turns the layers into effective values.

A broker's configuration has four layers, highest precedence first, as in Kafka:

1. ``DYNAMIC_BROKER_CONFIG``: overrides for this broker id (ConfigRecords of the BROKER resource
   named after the id),
2. ``DYNAMIC_DEFAULT_BROKER_CONFIG``: cluster-wide overrides (the BROKER resource named ``""``),
3. ``STATIC_BROKER_CONFIG``: ``server.properties`` and ``--override``,
4. ``DEFAULT_CONFIG``: the key's default.

The layers are merged key by key into one map, and keys that Kafka resolves from several names
(``log.retention.ms`` / ``.minutes`` / ``.hours``) are then resolved from that map exactly as at
start-up, so a static ``log.retention.ms`` still beats a dynamic ``log.retention.hours``, as in
Kafka. A topic's override of a topic-level key beats all four (:func:`to_log_config` with a
:class:`BrokerConfigLayers` in place of a plain :class:`BrokerConfig`).

Only keys whose new value kipling really applies without a restart are dynamic
(:data:`DYNAMIC_BROKER_KEYS`): the broker keys that provide a topic-level default (applied to every
partition's log, led or followed; of ``log.retention.ms`` / ``.minutes`` / ``.hours`` and the
``log.roll`` pairs only the first, as in Kafka), and the replication throttle rates, which exist
only as dynamic configs in Kafka too (:data:`DYNAMIC_ONLY_DEFINITIONS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from server_common.config.broker_config import FOLDED_KEYS, BrokerConfig
from server_common.config.definitions import (
    ALIASES,
    BY_NAME,
    LONG_MAX,
    TOPIC_BY_NAME,
    ConfigDef,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    Importance,
    at_least,
    broker_synonyms,
    format_value,
    own_synonyms,
)

LEADER_REPLICATION_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_THROTTLED_RATE = "follower.replication.throttled.rate"
CLUSTER_DEFAULT = ""
"""The BROKER resource name of the cluster-wide dynamic defaults (``kafka-configs --entity-default``)."""

# fmt: off
DYNAMIC_ONLY_DEFINITIONS: tuple[ConfigDef, ...] = (
    ConfigDef(LEADER_REPLICATION_THROTTLED_RATE, ConfigType.LONG, LONG_MAX, Importance.MEDIUM,
              "Bytes per second the leaders on this broker may send to throttled replicas "
              "(leader.replication.throttled.replicas of their topics). Dynamic only, as in Kafka.",
              at_least(0)),
    ConfigDef(FOLLOWER_REPLICATION_THROTTLED_RATE, ConfigType.LONG, LONG_MAX, Importance.MEDIUM,
              "Bytes per second the followers on this broker may fetch for throttled replicas "
              "(follower.replication.throttled.replicas of their topics). Dynamic only, as in Kafka.",
              at_least(0)),
)
# fmt: on
DYNAMIC_ONLY_BY_NAME: Mapping[str, ConfigDef] = {d.name: d for d in DYNAMIC_ONLY_DEFINITIONS}

_NOT_LIVE: frozenset[str] = frozenset()
"""Topic-default keys whose new value nothing would apply at run time (none today:
``unclean.leader.election.enable`` is read by the controller at each election, topic override, then
these layers as seen from the active controller's node id)."""

_FIRST_SYNONYMS: frozenset[str] = frozenset(
    topic.broker_keys[0].name for topic in TOPIC_BY_NAME.values() if topic.broker_keys
)
"""The broker key of highest precedence behind each topic key: Kafka's DynamicLogConfig makes only
these reconfigurable (``ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS`` keeps the first synonym),
so ``log.retention.ms`` is dynamic and ``log.retention.minutes`` / ``.hours``, ``log.roll.hours``
and ``log.roll.jitter.hours`` are read-only."""

DYNAMIC_BROKER_KEYS: frozenset[str] = frozenset(
    {
        d.name
        for d in BY_NAME.values()
        if d.topic_name is not None
        and d.name in _FIRST_SYNONYMS
        and not d.ignored
        and d.name not in _NOT_LIVE
    }
    | set(DYNAMIC_ONLY_BY_NAME)
)
"""The broker keys IncrementalAlterConfigs and AlterConfigs accept for a BROKER resource."""


class NotDynamicError(ConfigError):
    """A real broker key that cannot change at run time (answered INVALID_REQUEST, as Kafka)."""


def broker_definition(key: str) -> ConfigDef | None:
    """The declaration of a broker key (an alias resolves to its key), dynamic-only ones included."""
    return BY_NAME.get(ALIASES.get(key, key)) or DYNAMIC_ONLY_BY_NAME.get(key)


DYNAMIC_LISTENER_KEYS: frozenset[str] = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
    }
)
"""Keys a broker takes at run time per listener, ``listener.name.<listener>.<key>``: its TLS
keystore, so that a certificate is replaced without a restart (Kafka's dynamic listener SSL
config). Per broker only, as in Kafka: each broker has its own certificate."""


def dynamic_listener_key(key: str) -> tuple[str, str] | None:
    """``(LISTENER, key)`` of a per-listener dynamic key, else None."""
    if not key.startswith("listener.name."):
        return None
    listener, dot, rest = key[len("listener.name.") :].partition(".")
    if not dot or not listener or rest not in DYNAMIC_LISTENER_KEYS:
        return None
    return listener.upper(), rest


def validate_broker_configs(configs: Mapping[str, str | None], *, per_broker: bool = True) -> dict[str, str]:
    """Check the dynamic overrides of a BROKER resource (one broker's, or the cluster default when
    ``per_broker`` is false); return them in canonical text form.

    Raises :class:`NotDynamicError` naming every key that exists but is read-only (Kafka's
    "Cannot update these configs dynamically: Set(...)") or, for the cluster default, a key that
    only a broker may set; :class:`ConfigError` for a null value, a value the key does not allow
    (the message start-up would give), or an unknown ``listener.name.<listener>.`` key. A name no
    definition knows is kept as given, as Kafka keeps it (see :func:`unknown_entries`).
    """
    listener_keys = {key: found for key in configs if (found := dynamic_listener_key(key)) is not None}
    if listener_keys and not per_broker:
        names = ", ".join(sorted(listener_keys))
        raise NotDynamicError(
            "Cannot update these configs at default cluster level, broker id must be specified: "
            f"Set({names})",
            key=min(listener_keys),
        )
    result: dict[str, str] = {}
    for key, (_, name) in listener_keys.items():
        raw = configs[key]
        if raw is None:
            raise ConfigError(f"Null value not supported for broker config {key}", key=key)
        text = format_value(BY_NAME[name].parse(raw, key))
        assert text is not None
        result[key] = text
    configs = {key: raw for key, raw in configs.items() if key not in listener_keys}
    not_dynamic = sorted(
        key for key in configs if broker_definition(key) is not None and key not in DYNAMIC_BROKER_KEYS
    )
    if not_dynamic:
        raise NotDynamicError(
            f"Cannot update these configs dynamically: Set({', '.join(not_dynamic)})", key=not_dynamic[0]
        )
    for key, raw in configs.items():
        if raw is None:
            raise ConfigError(f"Null value not supported for broker config {key}", key=key)
        definition = broker_definition(key)
        if definition is None and key.startswith("listener.name."):
            # kipling takes only the keystore per listener; another listener key would be stored
            # and silently not applied, where Kafka reconfigures the listener with it
            raise ConfigError(f"Unknown broker config name: {key}", key=key, value=raw)
        if definition is None:
            # Kafka's DynamicBrokerConfig.validateConfigs checks only the keys KafkaConfig defines:
            # any other name is stored as given (a plugin's config; or a Kafka key kipling lacks,
            # background.threads, sasl.kerberos.*), and has no effect here.
            result[key] = raw
            continue
        text = format_value(definition.parse(raw))
        assert text is not None
        result[key] = text
    return result


def default_list_value(key: str, *, topic: bool) -> list[str]:
    """The items a list key has when nothing overrides it (what APPEND adds to, as Kafka's
    controller does with the key's static or default value)."""
    if topic:
        definition = TOPIC_BY_NAME.get(key)
        if definition is None or definition.type is not ConfigType.LIST:
            return []
        value = definition.resolve({d.name: d.default for d in BY_NAME.values()})
    else:
        broker_def = broker_definition(key)
        value = broker_def.default if broker_def is not None else None
    return [str(item) for item in value] if isinstance(value, list) else []


def is_list_key(key: str, *, topic: bool) -> bool:
    """Whether APPEND and SUBTRACT apply to ``key`` (Kafka: only keys of type LIST)."""
    definition: Any = TOPIC_BY_NAME.get(key) if topic else broker_definition(key)
    return definition is not None and definition.type is ConfigType.LIST


@dataclass(frozen=True)
class BrokerConfigLayers:
    """A broker's static configuration with the dynamic overrides on top: the effective values.

    Anything that needs a broker-level value (a topic's defaults, min.insync.replicas, the
    throttle rates) asks this object; it answers ``topic_defaults()`` and ``synonyms()`` as a
    :class:`BrokerConfig` does, so :func:`~server_common.config.topic_config.to_log_config` and
    ``describe_topic_configs`` resolve a topic's overrides over it unchanged.
    """

    static: BrokerConfig
    cluster_default: Mapping[str, str] = field(default_factory=dict)
    """The dynamic overrides of resource ``""`` (text, as in the ConfigRecords)."""
    per_broker: Mapping[str, str] = field(default_factory=dict)
    """The dynamic overrides of this broker's id."""

    @cached_property
    def _dynamic_values(self) -> dict[str, object]:
        """Typed dynamic values, per-broker over cluster default; a value no longer valid (written by
        an older version, say) is skipped, so the layer below applies."""
        typed: dict[str, object] = {}
        for layer in (self.cluster_default, self.per_broker):
            for key, raw in layer.items():
                definition = broker_definition(key)
                if definition is None:
                    continue
                try:
                    typed[definition.name] = definition.parse(raw)
                except ConfigError:
                    continue
        return typed

    @cached_property
    def effective(self) -> BrokerConfig:
        """The static config with every dynamic value of a static key applied (dynamic-only keys
        are read with :meth:`value`)."""
        dynamic = {k: v for k, v in self._dynamic_values.items() if k in BY_NAME}
        if not dynamic:
            return self.static
        values = {**self.static.values, **dynamic}
        changes: dict[str, Any] = {
            key.replace(".", "_"): value for key, value in dynamic.items() if key not in FOLDED_KEYS
        }
        for attribute, topic_key in (
            ("log_retention_ms", "retention.ms"),
            ("log_roll_ms", "segment.ms"),
            ("log_roll_jitter_ms", "segment.jitter.ms"),
        ):
            changes[attribute] = TOPIC_BY_NAME[topic_key].resolve(values)
        changes = {k: v for k, v in changes.items() if hasattr(self.static, k)}
        return dataclasses.replace(
            self.static,
            values=values,
            explicit_keys=self.static.explicit_keys | frozenset(dynamic),
            **changes,
        )

    def value(self, key: str) -> object:
        """The effective typed value of a broker key, dynamic-only keys included."""
        if key in self._dynamic_values:
            return self._dynamic_values[key]
        definition = broker_definition(key)
        if definition is None:
            raise KeyError(key)
        if definition.name in BY_NAME:
            return self.static.values[definition.name]
        return definition.default

    def topic_defaults(self) -> dict[str, str]:
        """Each topic-level key's value for a topic without overrides, dynamic layers included."""
        return self.effective.topic_defaults()

    def source_of(self, key: str) -> ConfigSource:
        if key in self.per_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if key in self.cluster_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if key in DYNAMIC_ONLY_BY_NAME:
            return ConfigSource.DEFAULT_CONFIG
        return self.static.source_of(key)

    def synonyms(self, keys: Sequence[str]) -> tuple[ConfigSynonym, ...]:
        """Kafka's synonym order: every key's per-broker value, then every key's cluster default,
        then the static and default values (as :meth:`BrokerConfig.synonyms` lists them)."""
        found: list[ConfigSynonym] = []
        for layer, source in (
            (self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ):
            found += [ConfigSynonym(key, layer[key], source) for key in keys if key in layer]
        static_keys = [key for key in keys if key in BY_NAME]
        found += self.static.synonyms(static_keys)
        for key in keys:
            definition = DYNAMIC_ONLY_BY_NAME.get(key)
            if definition is not None:
                found.append(
                    ConfigSynonym(key, format_value(definition.default), ConfigSource.DEFAULT_CONFIG)
                )
        return tuple(found)

    def describe(self) -> list[ConfigEntry]:
        """Every broker key of this broker as DescribeConfigs reports it, sorted by name: the
        dynamic keys are writable and show their dynamic source; the rest stay read-only."""
        entries: list[ConfigEntry] = []
        for entry in self.static.describe():
            definition = broker_definition(entry.name)
            assert definition is not None
            dynamic = entry.name in DYNAMIC_BROKER_KEYS
            if not dynamic:
                entries.append(entry)
                continue
            synonyms = own_synonyms(definition.name, self.synonyms(broker_synonyms(definition.name)))
            value, source = self._resolved(definition.name, synonyms)
            entries.append(
                dataclasses.replace(entry, value=value, source=source, read_only=False, synonyms=synonyms)
            )
        for definition in DYNAMIC_ONLY_DEFINITIONS:
            synonyms = self.synonyms([definition.name])
            value, source = self._resolved(definition.name, synonyms)
            entries.append(
                ConfigEntry(
                    name=definition.name,
                    value=value,
                    source=source,
                    is_sensitive=False,
                    read_only=False,
                    doc=definition.doc,
                    type=definition.type,
                    synonyms=synonyms,
                )
            )
        entries += unknown_entries(self.per_broker, self.cluster_default)
        entries.sort(key=lambda entry: entry.name)
        return entries

    def describe_cluster_defaults(self) -> list[ConfigEntry]:
        """The cluster-wide dynamic defaults only (DescribeConfigs of BROKER resource ``""``)."""
        entries = []
        for key, raw in sorted(self.cluster_default.items()):
            definition = broker_definition(key)
            if definition is None:
                continue
            source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            entries.append(
                ConfigEntry(
                    name=key,
                    value=raw,
                    source=source,
                    is_sensitive=False,
                    read_only=False,
                    doc=definition.doc,
                    type=definition.type,
                    synonyms=(ConfigSynonym(key, raw, source),),
                )
            )
        entries += unknown_entries({}, self.cluster_default)
        entries.sort(key=lambda entry: entry.name)
        return entries

    def _resolved(self, key: str, synonyms: Sequence[ConfigSynonym]) -> tuple[str | None, ConfigSource]:
        """The key's own value and source: its own highest layer, as Kafka reports a key."""
        own = [s for s in synonyms if s.name == key]
        if own:
            return own[0].value, own[0].source
        return format_value(self.value(key)), self.source_of(key)


def unknown_entries(per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> list[ConfigEntry]:
    """The dynamic keys no definition knows, as Kafka's DescribeConfigs lists a broker's configs
    (``ConfigHelper.allConfigs``: its originals, dynamic ones included): of type UNKNOWN, hence
    sensitive (``KafkaConfig.maybeSensitive``: value hidden) and read-only (not one of its dynamic
    configs), from the per-broker layer, else the cluster default; listener-prefixed keys aside."""
    entries: list[ConfigEntry] = []
    for key in sorted(set(per_broker) | set(cluster_default)):
        if broker_definition(key) is not None or key.startswith("listener.name."):
            continue
        synonyms = tuple(
            ConfigSynonym(key, None, source)
            for layer, source in (
                (per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            )
            if key in layer
        )
        entries.append(
            ConfigEntry(
                name=key,
                value=None,
                source=synonyms[0].source,
                is_sensitive=True,
                read_only=True,
                doc="",
                type=ConfigType.UNKNOWN,
                synonyms=synonyms,
            )
        )
    return entries


def layers_of(
    static: BrokerConfig, broker_configs: Mapping[str, Mapping[str, str]], node_id: int
) -> BrokerConfigLayers:
    """The layers of broker ``node_id`` from the dynamic overrides by resource name (``""`` the
    cluster default, ``"3"`` broker 3), as the metadata image keeps them."""
    return BrokerConfigLayers(
        static,
        dict(broker_configs.get(CLUSTER_DEFAULT, {})),
        dict(broker_configs.get(str(node_id), {})),
    )
