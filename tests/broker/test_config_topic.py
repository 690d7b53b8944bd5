"""Topic-level configs: CreateTopics validation, DescribeConfigs of a topic, and the derived LogConfig."""

from __future__ import annotations

import pytest

from broker.config import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    describe_topic_configs,
    load_config,
    to_log_config,
    validate_topic_configs,
)
from broker.config.definitions import DEFINITIONS, LONG_MAX, TOPIC_BY_NAME, TOPIC_DEFINITIONS
from storage.config import LogConfig


def broker(*overrides: str) -> BrokerConfig:
    return load_config(None, overrides)[0]


def test_valid_configs_come_back_in_canonical_form() -> None:
    configs = {
        "retention.ms": " 1000 ",
        "cleanup.policy": "delete , compact",
        "unclean.leader.election.enable": "TRUE",
        "message.timestamp.type": "LogAppendTime",
        "segment.bytes": "14",
        "retention.bytes": "-1",
    }
    assert validate_topic_configs(configs) == {
        "retention.ms": "1000",
        "cleanup.policy": "delete,compact",
        "unclean.leader.election.enable": "true",
        "message.timestamp.type": "LogAppendTime",
        "segment.bytes": "14",
        "retention.bytes": "-1",
    }
    assert validate_topic_configs({}) == {}


def test_unknown_topic_key_is_an_invalid_config() -> None:
    with pytest.raises(ConfigError, match=r"Unknown topic config name: retention\.hours") as exc:
        validate_topic_configs({"retention.hours": "1"})
    assert exc.value.key == "retention.hours"
    with pytest.raises(ConfigError, match=r"log\.retention\.ms"):
        validate_topic_configs({"log.retention.ms": "1"})  # a broker key, not a topic key


def test_null_value_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"Null value not supported for topic config retention\.ms"):
        validate_topic_configs({"retention.ms": None})


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("retention.ms", "-2", "at least -1"),
        ("retention.ms", "forever", "64-bit integer"),
        ("segment.bytes", "13", "at least 14"),
        ("segment.ms", "0", "at least 1"),
        ("segment.index.bytes", "3", "at least 4"),
        ("segment.jitter.ms", "-1", "at least 0"),
        ("flush.messages", "0", "at least 1"),
        ("max.message.bytes", "-1", "at least 0"),
        ("min.insync.replicas", "0", "at least 1"),
        ("cleanup.policy", "delete,delete", "distinct"),
        ("cleanup.policy", "purge", "compact, delete"),
        ("message.timestamp.type", "AppendTime", "CreateTime, LogAppendTime"),
        ("unclean.leader.election.enable", "1", "true or false"),
        ("file.delete.delay.ms", "-5", "at least 0"),
        ("index.interval.bytes", "4096.0", "32-bit integer"),
    ],
)
def test_invalid_topic_values(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        validate_topic_configs({key: value})
    assert key in str(exc.value) and repr(value) in str(exc.value) and fragment in str(exc.value)


def test_topic_keys_and_broker_keys_are_linked_both_ways() -> None:
    linked = {d.topic_name for d in DEFINITIONS if d.topic_name}
    assert linked == set(TOPIC_BY_NAME)
    assert [d.name for d in TOPIC_BY_NAME["retention.ms"].broker_keys] == [
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ]
    pairs = {d.name: d.topic_name for d in DEFINITIONS if d.topic_name}
    assert pairs["message.max.bytes"] == "max.message.bytes"
    assert pairs["log.index.size.max.bytes"] == "segment.index.bytes"
    assert pairs["log.segment.delete.delay.ms"] == "file.delete.delay.ms"
    assert pairs["log.flush.interval.messages"] == "flush.messages"


def test_describe_with_overrides_and_defaults() -> None:
    cfg = broker("log.retention.hours=24", "log.segment.bytes=5000")
    entries = {
        e.name: e for e in describe_topic_configs({"retention.ms": "1000", "cleanup.policy": "compact"}, cfg)
    }
    assert set(entries) == set(TOPIC_BY_NAME)
    assert [e.name for e in describe_topic_configs({}, cfg)] == sorted(TOPIC_BY_NAME)

    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert retention.source.code == 1
    assert not retention.read_only and not retention.is_sensitive
    assert retention.type is ConfigType.LONG
    assert retention.synonyms == (
        ConfigSynonym("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )

    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)

    jitter = entries["segment.jitter.ms"]
    assert (jitter.value, jitter.source) == ("0", ConfigSource.DEFAULT_CONFIG)
    flush = entries["flush.ms"]
    assert (flush.value, flush.source, flush.synonyms) == (str(LONG_MAX), ConfigSource.DEFAULT_CONFIG, ())
    assert entries["cleanup.policy"].value == "compact"
    assert entries["unclean.leader.election.enable"].value == "false"


def test_log_config_from_broker_defaults_and_overrides() -> None:
    cfg = broker("log.retention.minutes=10", "log.roll.ms=60000", "message.max.bytes=500")
    assert to_log_config({}, cfg) == LogConfig(retention_ms=600_000, segment_ms=60_000, max_message_bytes=500)
    overridden = to_log_config({"retention.ms": "5", "message.timestamp.type": "LogAppendTime"}, cfg)
    assert overridden.retention_ms == 5
    assert overridden.log_append_time
    assert overridden.segment_ms == 60_000


def test_log_config_defaults_match_storage_defaults() -> None:
    assert to_log_config({}, broker()) == LogConfig()


def test_compact_only_policy_turns_retention_off() -> None:
    log_config = to_log_config({"cleanup.policy": "compact", "retention.bytes": "100"}, broker())
    assert (log_config.retention_ms, log_config.retention_bytes) == (-1, -1)
    both = to_log_config({"cleanup.policy": "compact,delete", "retention.bytes": "100"}, broker())
    assert both.retention_bytes == 100


def test_every_topic_default_is_valid_for_its_topic_key() -> None:
    defaults = broker().topic_defaults()
    assert set(defaults) == {d.name for d in TOPIC_DEFINITIONS}
    assert validate_topic_configs(defaults) == defaults
