"""Topic-level configs: CreateTopics validation, DescribeConfigs of a topic, and the derived LogConfig."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from server_common.config import (
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
from server_common.config.definitions import DEFINITIONS, LONG_MAX, TOPIC_BY_NAME, TOPIC_DEFINITIONS
from storage.config import LogConfig

TOPIC_CONFIG_DOC = Path(__file__).resolve().parents[2] / "docs" / "topic-configs.md"


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
    assert linked == {d.name for d in TOPIC_DEFINITIONS if not d.topic_only}
    # Kafka's LogConfig.CONFIGS_WITH_NO_SERVER_DEFAULTS: no broker key behind them.
    assert {d.name for d in TOPIC_DEFINITIONS if d.topic_only} == {
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
    }
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
    # Kafka's ServerTopicConfigSynonyms for the keys added with issue 12.
    assert pairs["compression.type"] == "compression.type"
    assert pairs["compression.gzip.level"] == "compression.gzip.level"
    assert pairs["compression.lz4.level"] == "compression.lz4.level"
    assert pairs["compression.zstd.level"] == "compression.zstd.level"
    assert pairs["log.cleaner.delete.retention.ms"] == "delete.retention.ms"
    assert pairs["log.cleaner.min.compaction.lag.ms"] == "min.compaction.lag.ms"
    assert pairs["log.cleaner.max.compaction.lag.ms"] == "max.compaction.lag.ms"
    assert pairs["log.cleaner.min.cleanable.ratio"] == "min.cleanable.dirty.ratio"
    assert pairs["log.preallocate"] == "preallocate"
    assert pairs["log.message.timestamp.before.max.ms"] == "message.timestamp.before.max.ms"
    assert pairs["log.message.timestamp.after.max.ms"] == "message.timestamp.after.max.ms"
    assert pairs["log.local.retention.ms"] == "local.retention.ms"
    assert pairs["log.local.retention.bytes"] == "local.retention.bytes"


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
    # Kafka's ConfigHelper lists the broker synonyms from log.retention.ms's own first entry on:
    # none here, log.retention.ms is unset and has no default.
    assert retention.synonyms == (ConfigSynonym("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),)

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


def test_cleanup_policy_reaches_the_log_config() -> None:
    compact = to_log_config({"cleanup.policy": "compact", "retention.bytes": "100"}, broker())
    assert compact.compact and not compact.delete and compact.retention_bytes == 100
    both = to_log_config({"cleanup.policy": "compact,delete", "delete.retention.ms": "5"}, broker())
    assert both.compact and both.delete and both.delete_retention_ms == 5
    assert both.to_properties()["cleanup.policy"] == "compact,delete"
    tuned = to_log_config({"min.cleanable.dirty.ratio": "0.1", "min.compaction.lag.ms": "7"}, broker())
    assert (tuned.min_cleanable_dirty_ratio, tuned.min_compaction_lag_ms) == (0.1, 7)
    assert not tuned.compact and tuned.delete


def test_every_topic_default_is_valid_for_its_topic_key() -> None:
    defaults = broker().topic_defaults()
    assert set(defaults) == {d.name for d in TOPIC_DEFINITIONS}
    assert validate_topic_configs(defaults) == defaults


# -- every Kafka 4 topic key (issue 12) ------------------------------------------------------------

KAFKA_4_TOPIC_KEYS = {
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
}
"""Kafka 4's LogConfig keys. message.format.version, message.timestamp.difference.max.ms and
message.downconversion.enable left LogConfig in 4.0, so a Kafka 4 broker refuses them by name too."""


def test_every_kafka_4_topic_key_is_declared() -> None:
    assert set(TOPIC_BY_NAME) == KAFKA_4_TOPIC_KEYS


@pytest.mark.parametrize("removed", ["message.format.version", "message.downconversion.enable"])
def test_keys_kafka_4_removed_are_unknown(removed: str) -> None:
    with pytest.raises(ConfigError, match="Unknown topic config name"):
        validate_topic_configs({removed: "true"})


def test_new_keys_are_accepted_in_canonical_form() -> None:
    configs = {
        "compression.type": "lz4",
        "compression.gzip.level": "-1",
        "compression.lz4.level": "17",
        "compression.zstd.level": "-131072",
        "delete.retention.ms": "1000",
        "min.cleanable.dirty.ratio": " .3 ",
        "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": "60000",
        "local.retention.ms": "-2",
        "local.retention.bytes": "-1",
        "message.timestamp.before.max.ms": "0",
        "message.timestamp.after.max.ms": "9223372036854775807",
        "preallocate": "True",
        "remote.storage.enable": "false",
        "remote.log.copy.disable": "false",
        "remote.log.delete.on.disable": "TRUE",
        "leader.replication.throttled.replicas": "0:1, 1:2",
        "follower.replication.throttled.replicas": "*",
    }
    assert validate_topic_configs(configs) == {
        **configs,
        "min.cleanable.dirty.ratio": "0.3",
        "preallocate": "true",
        "remote.log.delete.on.disable": "true",
        "leader.replication.throttled.replicas": "0:1,1:2",
    }
    assert validate_topic_configs({"min.cleanable.dirty.ratio": "1"}) == {"min.cleanable.dirty.ratio": "1.0"}
    assert validate_topic_configs({"min.cleanable.dirty.ratio": "5e-1d"}) == {
        "min.cleanable.dirty.ratio": "0.5"
    }
    assert validate_topic_configs({"leader.replication.throttled.replicas": ""}) == {
        "leader.replication.throttled.replicas": ""
    }
    for codec in ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"):
        assert validate_topic_configs({"compression.type": codec}) == {"compression.type": codec}


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("compression.type", "brotli", "uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("compression.type", "GZIP", "one of"),
        ("compression.gzip.level", "0", "-1 or between 1 and 9"),
        ("compression.gzip.level", "10", "-1 or between 1 and 9"),
        ("compression.lz4.level", "0", "between 1 and 17"),
        ("compression.lz4.level", "18", "between 1 and 17"),
        ("compression.zstd.level", "23", "between -131072 and 22"),
        ("compression.zstd.level", "-131073", "between -131072 and 22"),
        ("delete.retention.ms", "-1", "at least 0"),
        ("delete.retention.ms", "1d", "64-bit integer"),
        ("min.cleanable.dirty.ratio", "1.5", "between 0 and 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "between 0 and 1"),
        ("min.cleanable.dirty.ratio", "half", "a number"),
        ("min.cleanable.dirty.ratio", "NaN", "a number"),
        ("min.compaction.lag.ms", "-1", "at least 0"),
        ("max.compaction.lag.ms", "0", "at least 1"),
        ("local.retention.ms", "-3", "at least -2"),
        ("local.retention.bytes", "-3", "at least -2"),
        ("message.timestamp.before.max.ms", "-1", "at least 0"),
        ("message.timestamp.after.max.ms", "-1", "at least 0"),
        ("preallocate", "yes", "true or false"),
        ("remote.log.copy.disable", "0", "true or false"),
        ("remote.log.delete.on.disable", "1", "true or false"),
        ("remote.storage.enable", "on", "true or false"),
        ("leader.replication.throttled.replicas", "0-1", "partitionId:brokerId"),
        ("follower.replication.throttled.replicas", "*,0:1", "partitionId:brokerId"),
    ],
)
def test_invalid_values_of_the_new_keys(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        validate_topic_configs({key: value})
    assert key in str(exc.value) and repr(value) in str(exc.value) and fragment in str(exc.value)
    assert exc.value.key == key


def test_min_compaction_lag_may_not_exceed_max() -> None:
    with pytest.raises(
        ConfigError,
        match=r"conflict topic config setting min\.compaction\.lag\.ms \(10\) > "
        r"max\.compaction\.lag\.ms \(5\)",
    ):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(ConfigError, match="conflict topic config setting"):
        validate_topic_configs({"max.compaction.lag.ms": "5", "min.compaction.lag.ms": "6"})
    # The other side takes Kafka's default (0 and Long.MAX_VALUE).
    assert validate_topic_configs({"min.compaction.lag.ms": str(LONG_MAX)})
    assert validate_topic_configs({"max.compaction.lag.ms": "1"})


def test_remote_storage_is_refused_as_by_a_broker_without_tiered_storage() -> None:
    with pytest.raises(ConfigError, match="Tiered Storage functionality is disabled in the broker") as exc:
        validate_topic_configs({"remote.storage.enable": "true"})
    assert exc.value.key == "remote.storage.enable"
    assert validate_topic_configs({"remote.storage.enable": "false"}) == {"remote.storage.enable": "false"}


def test_describe_new_keys_with_defaults_sources_and_synonyms() -> None:
    cfg = broker("compression.type=gzip", "log.cleaner.min.cleanable.ratio=0.25")
    entries = {
        e.name: e
        for e in describe_topic_configs({"delete.retention.ms": "1000", "compression.lz4.level": "4"}, cfg)
    }
    assert set(entries) == KAFKA_4_TOPIC_KEYS

    compression = entries["compression.type"]
    assert (compression.value, compression.source, compression.type) == (
        "gzip",
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigType.STRING,
    )
    assert compression.synonyms == (
        ConfigSynonym("compression.type", "gzip", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("compression.type", "producer", ConfigSource.DEFAULT_CONFIG),
    )
    delete_retention = entries["delete.retention.ms"]
    assert (delete_retention.value, delete_retention.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert delete_retention.synonyms == (
        ConfigSynonym("delete.retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.cleaner.delete.retention.ms", "86400000", ConfigSource.DEFAULT_CONFIG),
    )
    ratio = entries["min.cleanable.dirty.ratio"]
    assert (ratio.value, ratio.source, ratio.type) == (
        "0.25",
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigType.DOUBLE,
    )
    assert ratio.synonyms == (
        ConfigSynonym("log.cleaner.min.cleanable.ratio", "0.25", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.cleaner.min.cleanable.ratio", "0.5", ConfigSource.DEFAULT_CONFIG),
    )
    assert entries["compression.lz4.level"].value == "4"
    assert entries["compression.lz4.level"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    expected_defaults = {
        "compression.gzip.level": "-1",
        "compression.zstd.level": "3",
        "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": str(LONG_MAX),
        "message.timestamp.before.max.ms": str(LONG_MAX),
        "message.timestamp.after.max.ms": "3600000",
        "local.retention.ms": "-2",
        "local.retention.bytes": "-2",
        "preallocate": "false",
    }
    for key, value in expected_defaults.items():
        assert (entries[key].value, entries[key].source) == (value, ConfigSource.DEFAULT_CONFIG), key
    for key in (
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ):
        entry = entries[key]
        assert entry.source is ConfigSource.DEFAULT_CONFIG and entry.synonyms == (), key
        assert entry.value == ("" if key.endswith("replicas") else "false"), key


def test_log_config_carries_the_compression_settings() -> None:
    cfg = broker("compression.type=snappy", "compression.zstd.level=9")
    assert to_log_config({}, cfg).compression_type == "snappy"
    log_config = to_log_config({"compression.type": "zstd", "compression.gzip.level": "9"}, cfg)
    assert (log_config.compression_type, log_config.compression_zstd_level) == ("zstd", 9)
    assert log_config.compression_gzip_level == 9
    assert LogConfig.from_properties(log_config.to_properties()) == log_config
    assert to_log_config({}, broker()).compression_type == "producer"


def test_keys_not_acted_on_are_marked_so_everywhere() -> None:
    not_acted_on = {d.name for d in TOPIC_DEFINITIONS if not d.acted_on}
    assert not_acted_on == {
        "local.retention.bytes",
        "local.retention.ms",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
    }
    for definition in TOPIC_DEFINITIONS:
        assert ("not yet acted on" in definition.doc) == (not definition.acted_on), definition.name
        for broker_key in definition.broker_keys:
            assert broker_key.ignored == (not definition.acted_on), broker_key.name


def test_topic_config_documentation_lists_every_key() -> None:
    text = TOPIC_CONFIG_DOC.read_text()
    for definition in TOPIC_DEFINITIONS:
        row = re.search(rf"^\| `{re.escape(definition.name)}` \|.*$", text, re.MULTILINE)
        assert row is not None, f"{definition.name} is missing from {TOPIC_CONFIG_DOC.name}"
        assert ("not yet acted on" in row.group(0)) == (not definition.acted_on), definition.name
        default = broker().topic_defaults()[definition.name]
        assert f"`{default}`" in row.group(0) or (default == "" and "(empty)" in row.group(0)), (
            definition.name
        )
        for broker_key in definition.broker_keys:
            assert f"`{broker_key.name}`" in row.group(0), (definition.name, broker_key.name)
