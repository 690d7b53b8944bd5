"""Dynamic broker configs: which keys are dynamic, how values are checked, and the precedence rule
(topic override > per-broker > cluster default > static > default) in BrokerConfigLayers."""

from __future__ import annotations

import pytest

from server_common.config import (
    DYNAMIC_BROKER_KEYS,
    BrokerConfig,
    BrokerConfigLayers,
    ConfigError,
    ConfigSource,
    NotDynamicError,
    describe_topic_configs,
    layers_of,
    to_log_config,
    validate_broker_configs,
)
from server_common.config.definitions import LONG_MAX
from server_common.config.dynamic import (
    FOLLOWER_REPLICATION_THROTTLED_RATE,
    LEADER_REPLICATION_THROTTLED_RATE,
    default_list_value,
    is_list_key,
)


def static(**props: str) -> BrokerConfig:
    config, _ = BrokerConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})
    return config


def test_dynamic_keys_are_the_topic_defaults_and_throttle_rates() -> None:
    for key in ("log.retention.ms", "log.segment.bytes", "message.max.bytes", "min.insync.replicas",
                "log.cleanup.policy", "compression.type", "log.cleaner.delete.retention.ms"):  # fmt: skip
        assert key in DYNAMIC_BROKER_KEYS, key
    assert {LEADER_REPLICATION_THROTTLED_RATE, FOLLOWER_REPLICATION_THROTTLED_RATE} <= DYNAMIC_BROKER_KEYS
    assert "unclean.leader.election.enable" in DYNAMIC_BROKER_KEYS
    for key in ("log.dirs", "node.id", "listeners", "num.partitions", "log.cleaner.threads"):
        assert key not in DYNAMIC_BROKER_KEYS, key


def test_validation_uses_the_start_up_messages() -> None:
    assert validate_broker_configs(
        {"log.retention.ms": " 60000 ", "log.cleanup.policy": "delete, compact"}
    ) == {
        "log.retention.ms": "60000",
        "log.cleanup.policy": "delete,compact",
    }
    with pytest.raises(
        NotDynamicError, match=r"Cannot update these configs dynamically: Set\(log.dirs, node.id\)"
    ):
        validate_broker_configs({"node.id": "3", "log.dirs": "/x", "log.retention.ms": "1"})
    with pytest.raises(ConfigError) as info:
        validate_broker_configs({"log.segment.bytes": "10"})
    assert str(info.value) == (
        "Invalid value '10' for configuration log.segment.bytes: expected a 32-bit integer, at least 14"
    )
    # a key no definition knows is kept as given, as Kafka keeps it; a null value is refused
    assert validate_broker_configs({"nope": " 1"}) == {"nope": " 1"}
    with pytest.raises(ConfigError, match="Null value not supported for broker config nope"):
        validate_broker_configs({"nope": None})


def test_unknown_dynamic_keys_are_described_as_kafka_describes_them() -> None:
    """Sensitive (value hidden) and read-only, of type UNKNOWN, from their highest layer."""
    layers = BrokerConfigLayers(static(), {"plugin.key": "a", "other": "b"}, {"plugin.key": "c"})
    unknown = {e.name: e for e in layers.describe() if e.name in ("plugin.key", "other")}
    assert {name: (e.value, e.source, e.is_sensitive, e.read_only) for name, e in unknown.items()} == {
        "other": (None, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, True, True),
        "plugin.key": (None, ConfigSource.DYNAMIC_BROKER_CONFIG, True, True),
    }
    assert [s.source for s in unknown["plugin.key"].synonyms] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ]
    assert [e.name for e in layers.describe_cluster_defaults()] == ["other", "plugin.key"]
    assert layers.effective is layers.static  # no effect on anything kipling reads


def test_precedence_per_broker_over_default_over_static() -> None:
    base = static(log_segment_bytes="4096", message_max_bytes="5000")
    layers = BrokerConfigLayers(
        base, {"log.segment.bytes": "8192", "log.retention.ms": "1000"}, {"log.segment.bytes": "16384"}
    )
    assert layers.effective.log_segment_bytes == 16384
    assert layers.effective.log_retention_ms == 1000
    assert layers.effective.message_max_bytes == 5000  # static, nothing dynamic
    log = to_log_config({}, layers)
    assert (log.segment_bytes, log.retention_ms, log.max_message_bytes) == (16384, 1000, 5000)
    assert to_log_config({"segment.bytes": "2048"}, layers).segment_bytes == 2048  # the topic wins
    assert base.log_segment_bytes == 4096  # the static config is untouched


def test_static_synonym_of_higher_rank_still_wins() -> None:
    """Kafka merges the layers key by key, then resolves ms > minutes > hours over the merged map."""
    layers = BrokerConfigLayers(static(log_retention_ms="5000"), {"log.retention.hours": "1"})
    assert layers.effective.log_retention_ms == 5000
    layers = BrokerConfigLayers(static(log_retention_hours="5"), {"log.retention.hours": "1"})
    assert layers.effective.log_retention_ms == 3_600_000


def test_sources_and_synonyms_in_kafkas_order() -> None:
    layers = BrokerConfigLayers(
        static(log_segment_bytes="4096"), {"log.segment.bytes": "8192"}, {"log.segment.bytes": "16384"}
    )
    entries = {e.name: e for e in layers.describe()}
    segment = entries["log.segment.bytes"]
    assert (segment.value, segment.source, segment.read_only) == (
        "16384",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )
    assert [(s.value, s.source) for s in segment.synonyms] == [
        ("16384", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("8192", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("4096", ConfigSource.STATIC_BROKER_CONFIG),
        ("1073741824", ConfigSource.DEFAULT_CONFIG),
    ]
    assert entries["num.partitions"].read_only
    rate = entries[LEADER_REPLICATION_THROTTLED_RATE]
    assert (rate.value, rate.source, rate.read_only) == (str(LONG_MAX), ConfigSource.DEFAULT_CONFIG, False)
    topic = {e.name: e for e in describe_topic_configs({"retention.ms": "5"}, layers)}
    assert (topic["segment.bytes"].value, topic["segment.bytes"].source) == (
        "16384",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert topic["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    [default] = layers.describe_cluster_defaults()
    assert (default.name, default.value, default.source) == (
        "log.segment.bytes",
        "8192",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )


def test_throttle_rate_values_and_layers_of() -> None:
    configs = {
        "": {LEADER_REPLICATION_THROTTLED_RATE: "1000"},
        "2": {LEADER_REPLICATION_THROTTLED_RATE: "50"},
    }
    assert layers_of(static(), configs, 1).value(LEADER_REPLICATION_THROTTLED_RATE) == 1000
    assert layers_of(static(), configs, 2).value(LEADER_REPLICATION_THROTTLED_RATE) == 50
    assert layers_of(static(), configs, 2).value(FOLLOWER_REPLICATION_THROTTLED_RATE) == LONG_MAX
    assert layers_of(static(), configs, 2).value("min.insync.replicas") == 1


def test_an_invalid_stored_value_falls_back_to_the_layer_below() -> None:
    layers = BrokerConfigLayers(static(), {"log.segment.bytes": "4096"}, {"log.segment.bytes": "oops"})
    assert layers.effective.log_segment_bytes == 4096


def test_list_helpers_for_append_and_subtract() -> None:
    assert is_list_key("cleanup.policy", topic=True) and is_list_key("log.cleanup.policy", topic=False)
    assert not is_list_key("retention.ms", topic=True)
    assert default_list_value("cleanup.policy", topic=True) == ["delete"]
    assert default_list_value("log.cleanup.policy", topic=False) == ["delete"]


def test_listener_keystores_are_dynamic_per_broker_only() -> None:
    key = "listener.name.ssl.ssl.keystore.location"
    assert validate_broker_configs({key: " /etc/kipling/new.pem"}) == {key: "/etc/kipling/new.pem"}
    with pytest.raises(NotDynamicError, match=r"broker id must be specified: Set\(listener\.name\.ssl"):
        validate_broker_configs({key: "/etc/kipling/new.pem"}, per_broker=False)
    with pytest.raises(ConfigError, match=r"Unknown broker config name: listener\.name\.ssl\.ssl\.client"):
        validate_broker_configs({"listener.name.ssl.ssl.client.auth": "required"})
