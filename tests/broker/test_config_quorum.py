"""The metadata quorum's timing keys (controller.quorum.*): Kafka's defaults, validation, RaftConfig."""

from __future__ import annotations

import pytest

from metadata.raft.config import RaftConfig
from server_common.config import ConfigError, load_config
from server_common.config import quorum as defaults
from server_common.config.definitions import BY_NAME

QUORUM_KEYS = {
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 1000,
    "controller.quorum.request.timeout.ms": 2000,
    "controller.quorum.retry.backoff.ms": 20,
}
"""Kafka's QuorumConfig defaults, written out here to check the declared ones against."""


def test_kafka_defaults_on_broker_config_and_raft_config() -> None:
    cfg, warnings = load_config(None, [])
    assert warnings == []
    assert {key: getattr(cfg, key.replace(".", "_")) for key in QUORUM_KEYS} == QUORUM_KEYS
    assert {key: BY_NAME[key].default for key in QUORUM_KEYS} == QUORUM_KEYS
    assert RaftConfig.from_broker_config(cfg) == RaftConfig()
    assert tuple(QUORUM_KEYS.values()) == (
        defaults.QUORUM_ELECTION_TIMEOUT_MS,
        defaults.QUORUM_FETCH_TIMEOUT_MS,
        defaults.QUORUM_ELECTION_BACKOFF_MAX_MS,
        defaults.QUORUM_REQUEST_TIMEOUT_MS,
        defaults.QUORUM_RETRY_BACKOFF_MS,
    )


def test_raft_config_takes_the_configured_values() -> None:
    cfg, _ = load_config(
        None,
        [
            "controller.quorum.election.timeout.ms=150",
            "controller.quorum.fetch.timeout.ms=300",
            "controller.quorum.election.backoff.max.ms=400",
            "controller.quorum.request.timeout.ms=250",
            "controller.quorum.retry.backoff.ms=5",
        ],
    )
    assert (cfg.controller_quorum_election_timeout_ms, cfg.controller_quorum_retry_backoff_ms) == (150, 5)
    raft = RaftConfig.from_broker_config(cfg)
    assert raft == RaftConfig(
        election_timeout_ms=150,
        fetch_timeout_ms=300,
        election_backoff_max_ms=400,
        request_timeout_ms=250,
        retry_backoff_ms=5,
    )
    assert raft.check_quorum_timeout_ms == 450


def test_described_with_their_source() -> None:
    cfg, _ = load_config(None, ["controller.quorum.fetch.timeout.ms=3000"])
    entries = {e.name: e for e in cfg.describe()}
    assert entries["controller.quorum.fetch.timeout.ms"].value == "3000"
    assert entries["controller.quorum.fetch.timeout.ms"].source.name == "STATIC_BROKER_CONFIG"
    assert entries["controller.quorum.retry.backoff.ms"].value == "20"
    assert entries["controller.quorum.retry.backoff.ms"].source.name == "DEFAULT_CONFIG"


@pytest.mark.parametrize("key", sorted(QUORUM_KEYS))
@pytest.mark.parametrize("value", ["0", "-1", "abc", "2147483648"])
def test_values_that_are_not_positive_32_bit_integers_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, [f"{key}={value}"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"Invalid value {value!r} for configuration {key}: ")
    assert "32-bit integer, at least 1" in message
    assert (caught.value.key, caught.value.value) == (key, value)
