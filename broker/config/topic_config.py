"""Topic-level configuration: validating CreateTopics configs, describing a topic, building its LogConfig.

A topic stores only its overrides (the configs given at creation); every other topic-level key takes
the value derived from the broker's keys (:meth:`BrokerConfig.topic_defaults`), so changing
``log.retention.hours`` and restarting changes every topic that did not override ``retention.ms``,
as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.config.broker_config import BrokerConfig
from broker.config.definitions import (
    CLEANUP_DELETE,
    TOPIC_BY_NAME,
    TOPIC_DEFINITIONS,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    format_value,
)
from storage.config import LogConfig


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check the configs of a CreateTopics request and return them in canonical text form.

    Raises :class:`ConfigError` (answered as INVALID_CONFIG) for a key that is not a topic-level key
    kipling knows, a null value (Kafka refuses those too), or a value the key does not allow.
    """
    result: dict[str, str] = {}
    for key, raw in configs.items():
        definition = TOPIC_BY_NAME.get(key)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {key}", key=key, value=raw)
        if raw is None:
            raise ConfigError(f"Null value not supported for topic config {key}", key=key)
        text = format_value(definition.parse(raw))
        assert text is not None
        result[key] = text
    return result


def describe_topic_configs(overrides: Mapping[str, str], broker: BrokerConfig) -> list[ConfigEntry]:
    """Every topic-level key of a topic, sorted by name, as DescribeConfigs reports it.

    An override is DYNAMIC_TOPIC_CONFIG; otherwise the value is the broker's derived default, with
    source STATIC_BROKER_CONFIG if one of the broker keys behind it was set, else DEFAULT_CONFIG.
    Synonyms list the override first, then the broker keys in precedence order.
    """
    defaults = broker.topic_defaults()
    entries: list[ConfigEntry] = []
    for definition in TOPIC_DEFINITIONS:
        broker_keys = [d.name for d in definition.broker_keys]
        synonyms = broker.synonyms(broker_keys)
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


def effective_topic_configs(overrides: Mapping[str, str], broker: BrokerConfig) -> dict[str, str]:
    """The value of every topic-level key for a topic: its overrides over the broker's defaults."""
    return {**broker.topic_defaults(), **overrides}


def to_log_config(overrides: Mapping[str, str], broker: BrokerConfig) -> LogConfig:
    """The storage settings of a topic's partitions.

    A cleanup policy without ``delete`` turns retention off (time and size), because in Kafka only
    the delete policy removes segments; compaction itself is not implemented.
    """
    props = effective_topic_configs(overrides, broker)
    policy = TOPIC_BY_NAME["cleanup.policy"].parse(props["cleanup.policy"])
    assert isinstance(policy, list)
    if CLEANUP_DELETE not in policy:
        props["retention.ms"] = "-1"
        props["retention.bytes"] = "-1"
    try:
        return LogConfig.from_properties(props)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
