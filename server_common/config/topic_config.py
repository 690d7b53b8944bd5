"""Topic-level configuration: validating CreateTopics configs, describing a topic, building its LogConfig.

A topic stores only its overrides (the configs given at creation); every other topic-level key takes
the value derived from the broker's keys (:meth:`BrokerConfig.topic_defaults`), so changing
``log.retention.hours`` and restarting changes every topic that did not override ``retention.ms``,
as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from server_common.config.definitions import (
    DEFINITIONS,
    TOPIC_BY_NAME,
    TOPIC_DEFINITIONS,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    format_value,
    own_synonyms,
)
from storage.config import LogConfig


class BrokerDefaults(Protocol):
    """Where a topic's defaults come from: a :class:`~server_common.config.BrokerConfig`, or the
    same with the dynamic broker configs on top
    (:class:`~server_common.config.dynamic.BrokerConfigLayers`)."""

    def topic_defaults(self) -> dict[str, str]: ...

    def synonyms(self, keys: Sequence[str]) -> tuple[ConfigSynonym, ...]: ...


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check the configs of a CreateTopics request and return them in canonical text form.

    Raises :class:`ConfigError` (answered as INVALID_CONFIG) for a key that is not a topic-level key
    Kafka 4 defines, a null value (Kafka refuses those too), a value the key does not allow, or one
    of Kafka's rules between keys (:func:`_check_relations`).
    """
    result: dict[str, str] = {}
    typed: dict[str, object] = {}
    for key, raw in configs.items():
        definition = TOPIC_BY_NAME.get(key)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {key}", key=key, value=raw)
        if raw is None:
            raise ConfigError(f"Null value not supported for topic config {key}", key=key)
        typed[key] = definition.parse(raw)
        text = format_value(typed[key])
        assert text is not None
        result[key] = text
    _check_relations(typed)
    return result


def _check_relations(overrides: Mapping[str, object]) -> None:
    """Kafka's checks between topic keys (``LogConfig.validateValues`` and the broker's checks).

    Keys not overridden take Kafka's defaults here: the validator does not see the broker's keys.
    ``remote.storage.enable=true`` is refused as by a Kafka broker whose tiered storage is disabled
    (``remote.log.storage.system.enable=false``, the default): kipling has none.
    """
    min_lag = overrides.get("min.compaction.lag.ms", _kafka_default("min.compaction.lag.ms"))
    max_lag = overrides.get("max.compaction.lag.ms", _kafka_default("max.compaction.lag.ms"))
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    if min_lag > max_lag:
        raise ConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})",
            key="min.compaction.lag.ms",
            value=str(min_lag),
        )
    if overrides.get("remote.storage.enable") is True:
        raise ConfigError(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
            "remote log storage.",
            key="remote.storage.enable",
            value="true",
        )


def _kafka_default(key: str) -> object:
    """A topic key's value when neither the topic nor the broker sets it."""
    return TOPIC_BY_NAME[key].resolve({d.name: d.default for d in DEFINITIONS})


def describe_topic_configs(overrides: Mapping[str, str], broker: BrokerDefaults) -> list[ConfigEntry]:
    """Every topic-level key of a topic, sorted by name, as DescribeConfigs reports it.

    An override is DYNAMIC_TOPIC_CONFIG; otherwise the value is the broker's derived default and
    the source that of the first synonym, DEFAULT_CONFIG if none. Synonyms list the override first,
    then the broker keys in precedence order from the first broker key's own first entry on, as
    Kafka's ConfigHelper does: with no ``log.retention.ms`` set anywhere (its default is null),
    ``retention.ms`` lists no broker synonyms and its source is DEFAULT_CONFIG, even when
    ``log.retention.hours`` was set and supplies the value.
    """
    defaults = broker.topic_defaults()
    entries: list[ConfigEntry] = []
    for definition in TOPIC_DEFINITIONS:
        broker_keys = [d.name for d in definition.broker_keys]
        synonyms = own_synonyms(broker_keys[0], broker.synonyms(broker_keys)) if broker_keys else ()
        override = overrides.get(definition.name)
        if override is not None:
            value: str | None = override
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
            synonyms = (ConfigSynonym(definition.name, override, source), *synonyms)
        else:
            value = defaults[definition.name]
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
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
    return entries


def effective_topic_configs(overrides: Mapping[str, str], broker: BrokerDefaults) -> dict[str, str]:
    """The value of every topic-level key for a topic: its overrides over the broker's defaults."""
    return {**broker.topic_defaults(), **overrides}


def to_log_config(overrides: Mapping[str, str], broker: BrokerDefaults) -> LogConfig:
    """The storage settings of a topic's partitions.

    The log applies the cleanup policy itself (:attr:`LogConfig.delete`, :attr:`LogConfig.compact`):
    without ``delete`` it keeps no time or size retention, with ``compact`` the log cleaner takes it.
    The keys declared ``acted_on=False`` are not part of it (nothing reads them yet).
    """
    props = effective_topic_configs(overrides, broker)
    try:
        return LogConfig.from_properties(props)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
