"""The broker keys of consumer-protocol groups (KIP-848): Kafka 4.0's defaults and start-up checks."""

from __future__ import annotations

import pytest

from server_common.config import ConfigError, load_config


def test_kafka_4_defaults() -> None:
    cfg, warnings = load_config(None, [])
    assert warnings == []
    assert cfg.group_coordinator_rebalance_protocols == ["classic", "consumer"]
    assert cfg.group_consumer_session_timeout_ms == 45_000
    assert cfg.group_consumer_heartbeat_interval_ms == 5_000
    assert cfg.group_consumer_assignors == ["uniform", "range"]
    assert cfg.group_consumer_migration_policy == "bidirectional"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["group.coordinator.rebalance.protocols=consumer"], "group.coordinator.rebalance.protocols"),
        (["group.coordinator.rebalance.protocols=classic,share"], "group.coordinator.rebalance.protocols"),
        (["group.consumer.session.timeout.ms=30000"], "group.consumer.session.timeout.ms"),
        (["group.consumer.heartbeat.interval.ms=20000"], "group.consumer.heartbeat.interval.ms"),
        (
            [
                "group.consumer.min.session.timeout.ms=1000",
                "group.consumer.session.timeout.ms=5000",
                "group.consumer.heartbeat.interval.ms=5000",
            ],
            "group.consumer.heartbeat.interval.ms",
        ),
        (["group.consumer.assignors=sticky"], "group.consumer.assignors"),
        (["group.consumer.migration.policy=sometimes"], "group.consumer.migration.policy"),
    ],
)
def test_refused(overrides: list[str], key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(None, overrides)
    assert refused.value.key == key


def test_classic_only_and_kafka_class_names() -> None:
    cfg, _ = load_config(
        None,
        [
            "group.coordinator.rebalance.protocols=classic",
            "group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform",
        ],
    )
    assert cfg.group_coordinator_rebalance_protocols == ["classic"]
    assert cfg.group_consumer_assignors[0].endswith("RangeAssignor")
