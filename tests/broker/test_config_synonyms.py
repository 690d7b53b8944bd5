"""DescribeConfigs synonyms as Kafka's ConfigHelper lists them.

Kafka collects a key's synonyms layer by layer (per-broker, cluster default, static, default; each
layer in the synonym group's precedence order), then drops every entry before the described key's
own first one: ``configSynonyms(...).dropWhile(s => s.name != name)``. A topic key is described
through its first broker synonym (``log.retention.ms`` for ``retention.ms``), whose default is
null, so without any ``log.retention.ms`` the topic key shows no broker synonyms and DEFAULT_CONFIG.
"""

from __future__ import annotations

from server_common.config import BrokerConfig, BrokerConfigLayers, ConfigSource, describe_topic_configs
from server_common.config.definitions import ConfigEntry, ConfigSynonym, own_synonyms

DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC = ConfigSource.STATIC_BROKER_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG


def static(*props: str) -> BrokerConfig:
    config, _ = BrokerConfig.from_properties(dict(prop.split("=", 1) for prop in props))
    return config


def topic_entry(layers: BrokerConfigLayers, key: str, overrides: dict[str, str] | None = None) -> ConfigEntry:
    return {e.name: e for e in describe_topic_configs(overrides or {}, layers)}[key]


def broker_entry(layers: BrokerConfigLayers, key: str) -> ConfigEntry:
    return {e.name: e for e in layers.describe()}[key]


def test_own_synonyms_drops_the_entries_before_the_key() -> None:
    ms = ConfigSynonym("log.retention.ms", "5", DYNAMIC_DEFAULT)
    hours = ConfigSynonym("log.retention.hours", "168", DEFAULT)
    assert own_synonyms("log.retention.ms", (ms, hours)) == (ms, hours)
    assert own_synonyms("log.retention.hours", (ms, hours)) == (hours,)
    assert own_synonyms("log.retention.minutes", (ms, hours)) == ()


def test_topic_retention_without_log_retention_ms_is_default_with_no_synonyms() -> None:
    for layers in (BrokerConfigLayers(static()), BrokerConfigLayers(static("log.retention.hours=24"))):
        entry = topic_entry(layers, "retention.ms")
        assert (entry.source, entry.synonyms) == (DEFAULT, ())
    assert topic_entry(BrokerConfigLayers(static("log.retention.hours=24")), "retention.ms").value == str(
        24 * 3_600_000
    )


def test_topic_retention_lists_from_log_retention_ms_on() -> None:
    layers = BrokerConfigLayers(
        static("log.retention.ms=1000", "log.retention.hours=24"),
        cluster_default={"log.retention.ms": "7200000"},
    )
    entry = topic_entry(layers, "retention.ms")
    assert entry.source is DYNAMIC_DEFAULT
    assert entry.synonyms == (
        ConfigSynonym("log.retention.ms", "7200000", DYNAMIC_DEFAULT),
        ConfigSynonym("log.retention.ms", "1000", STATIC),
        ConfigSynonym("log.retention.hours", "24", STATIC),
        ConfigSynonym("log.retention.hours", "168", DEFAULT),
    )
    overridden = topic_entry(layers, "retention.ms", {"retention.ms": "5"})
    assert overridden.synonyms[0] == ConfigSynonym("retention.ms", "5", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert overridden.synonyms[1:] == entry.synonyms


def test_topic_key_with_a_defaulted_broker_key_keeps_its_default_synonym() -> None:
    entry = topic_entry(BrokerConfigLayers(static()), "segment.bytes")
    assert entry.source is DEFAULT
    assert entry.synonyms == (ConfigSynonym("log.segment.bytes", "1073741824", DEFAULT),)


def test_broker_key_drops_the_higher_synonyms_listed_before_it() -> None:
    layers = BrokerConfigLayers(static("log.retention.hours=24"), per_broker={"log.retention.ms": "5000"})
    hours = broker_entry(layers, "log.retention.hours")
    assert hours.synonyms == (
        ConfigSynonym("log.retention.hours", "24", STATIC),
        ConfigSynonym("log.retention.hours", "168", DEFAULT),
    )
    assert hours.source is STATIC
    ms = broker_entry(layers, "log.retention.ms")
    assert ms.synonyms[0] == ConfigSynonym("log.retention.ms", "5000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert ms.synonyms[1:] == hours.synonyms


def test_log_dirs_and_log_dir_are_not_synonyms() -> None:
    """Kafka's brokerConfigSynonyms groups only the retention, roll and flush keys."""
    entries = {e.name: e for e in static("log.dirs=/tmp/a").describe()}
    assert entries["log.dirs"].synonyms == (ConfigSynonym("log.dirs", "/tmp/a", STATIC),)
    assert all(s.name == "log.dir" for s in entries["log.dir"].synonyms)
