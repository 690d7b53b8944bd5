"""Group configs (Kafka 4.0's GroupConfig): validation with Kafka's messages, effective values and
the DescribeConfigs entries."""

from __future__ import annotations

import pytest

from server_common.config import BrokerConfig, BrokerConfigLayers, ConfigError, ConfigSource
from server_common.config.group_config import (
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    GroupConfigBounds,
    GroupConsumerSettings,
    describe_group_configs,
    effective_group_config,
    validate_group_configs,
)

BOUNDS = (
    GroupConfigBounds()
)  # Kafka's defaults: session 45000 in [45000, 60000], heartbeat 5000 in [5000, 15000]
SESSION, HEARTBEAT = CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS


def test_valid_overrides_come_back_canonical() -> None:
    assert validate_group_configs({SESSION: " 50000 ", HEARTBEAT: "+6000"}, BOUNDS) == {
        SESSION: "50000",
        HEARTBEAT: "6000",
    }
    assert validate_group_configs({SESSION: None}, BOUNDS) == {}  # a key being removed


_NOT_INT = "Not a number of type INT"
_MIN, _MAX = "must be greater than or equal to", "must be less than or equal to"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"foobar": "1"}, "Unknown group config name: foobar"),
        ({SESSION: "abc"}, f"Invalid value abc for configuration {SESSION}: {_NOT_INT}"),
        ({SESSION: "2147483648"}, f"Invalid value 2147483648 for configuration {SESSION}: {_NOT_INT}"),
        ({HEARTBEAT: "0"}, f"Invalid value 0 for configuration {HEARTBEAT}: Value must be at least 1"),
        ({HEARTBEAT: "4999"}, f"{HEARTBEAT} {_MIN} group.consumer.min.heartbeat.interval.ms"),
        ({HEARTBEAT: "15001"}, f"{HEARTBEAT} {_MAX} group.consumer.max.heartbeat.interval.ms"),
        ({SESSION: "44999"}, f"{SESSION} {_MIN} group.consumer.min.session.timeout.ms"),
        ({SESSION: "60001"}, f"{SESSION} {_MAX} group.consumer.max.session.timeout.ms"),
    ],
)
def test_kafkas_messages(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        validate_group_configs(overrides, BOUNDS)
    assert str(raised.value) == message


def test_session_must_exceed_heartbeat_with_the_defaults_filled_in() -> None:
    wide = GroupConfigBounds(45_000, 1_000, 60_000, 5_000, 1_000, 60_000)
    # only the heartbeat is given: checked against the default session timeout
    message = "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    for overrides in ({HEARTBEAT: "45000"}, {SESSION: "5000"}):
        with pytest.raises(ConfigError) as raised:
            validate_group_configs(overrides, wide)
        assert str(raised.value) == message
    assert validate_group_configs({SESSION: "2000", HEARTBEAT: "1000"}, wide) == {
        SESSION: "2000",
        HEARTBEAT: "1000",
    }


def test_share_group_keys_are_refused_in_one_line() -> None:
    for key in ("share.session.timeout.ms", "share.heartbeat.interval.ms", "share.auto.offset.reset"):
        with pytest.raises(ConfigError) as raised:
            validate_group_configs({key: "1"}, BOUNDS)
        assert str(raised.value) == f"Share groups are not supported: {key} cannot be set"


def test_effective_settings_fall_back_to_the_broker() -> None:
    bounds = GroupConfigBounds(
        group_consumer_session_timeout_ms=50_000, group_consumer_heartbeat_interval_ms=6_000
    )
    assert effective_group_config({}, bounds) == GroupConsumerSettings(50_000, 6_000)
    assert effective_group_config({HEARTBEAT: "7000"}, bounds) == GroupConsumerSettings(50_000, 7_000)
    assert effective_group_config({SESSION: "garbage"}, bounds) == GroupConsumerSettings(50_000, 6_000)


def test_bounds_of_a_broker_config() -> None:
    config, _ = BrokerConfig.from_properties(
        {"node.id": "1", "log.dirs": "/tmp/x", "group.consumer.heartbeat.interval.ms": "6000"}
    )
    assert GroupConfigBounds.of(config) == GroupConfigBounds(group_consumer_heartbeat_interval_ms=6_000)


def test_describe_defaults_and_overrides() -> None:
    config, _ = BrokerConfig.from_properties(
        {"node.id": "1", "log.dirs": "/tmp/x", "group.consumer.heartbeat.interval.ms": "6000"}
    )
    layers = BrokerConfigLayers(config)
    defaults = {e.name: e for e in describe_group_configs({}, layers)}
    assert sorted(defaults) == [HEARTBEAT, SESSION]  # no share.* key
    assert (defaults[SESSION].value, defaults[SESSION].source) == ("45000", ConfigSource.DEFAULT_CONFIG)
    assert [(s.name, s.value, s.source) for s in defaults[SESSION].synonyms] == [
        ("group.consumer.session.timeout.ms", "45000", ConfigSource.DEFAULT_CONFIG)
    ]
    assert (defaults[HEARTBEAT].value, defaults[HEARTBEAT].source) == ("6000", ConfigSource.DEFAULT_CONFIG)
    assert [(s.name, s.value, s.source) for s in defaults[HEARTBEAT].synonyms] == [
        ("group.consumer.heartbeat.interval.ms", "6000", ConfigSource.STATIC_BROKER_CONFIG)
    ]
    overridden = {e.name: e for e in describe_group_configs({SESSION: "50000"}, layers)}
    entry = overridden[SESSION]
    assert (entry.value, entry.source, entry.read_only, entry.is_sensitive) == (
        "50000",
        ConfigSource.GROUP_CONFIG,
        False,
        False,
    )
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        (SESSION, "50000", ConfigSource.GROUP_CONFIG),
        ("group.consumer.session.timeout.ms", "45000", ConfigSource.DEFAULT_CONFIG),
    ]
    assert entry.doc
    assert ConfigSource.GROUP_CONFIG.code == 8
