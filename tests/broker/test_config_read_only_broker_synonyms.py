"""Of Kafka's multi-name broker keys only the first name is dynamic.

Kafka's DynamicLogConfig reconfigures the broker key of highest precedence behind each topic key
(``ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS``): ``log.retention.ms``, ``log.roll.ms`` and
``log.roll.jitter.ms``. ``log.retention.minutes`` / ``.hours``, ``log.roll.hours`` and
``log.roll.jitter.hours`` are read-only (DescribeConfigs says so) and a change of them is refused
with "Cannot update these configs dynamically". Overrides already stored keep applying.
"""

from __future__ import annotations

import pytest

from metadata.controller.config_control import AlterableConfig, ConfigResourceChange
from metadata.records import ConfigResourceType
from protocol.error_codes import ErrorCode
from server_common.config import (
    DYNAMIC_BROKER_KEYS,
    BrokerConfig,
    BrokerConfigLayers,
    NotDynamicError,
    validate_broker_configs,
)
from tests.metadata.controller.helpers import Cluster

READ_ONLY = ("log.retention.minutes", "log.retention.hours", "log.roll.hours", "log.roll.jitter.hours")


def test_only_the_first_synonym_is_dynamic() -> None:
    assert {"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms"} <= DYNAMIC_BROKER_KEYS
    assert not set(READ_ONLY) & DYNAMIC_BROKER_KEYS
    with pytest.raises(NotDynamicError) as caught:
        validate_broker_configs({"log.retention.hours": "1", "log.retention.ms": "5"})
    assert str(caught.value) == "Cannot update these configs dynamically: Set(log.retention.hours)"


def test_the_controller_refuses_them_for_a_broker_and_the_cluster_defaults() -> None:
    cluster = Cluster()
    cluster.join(1)
    broker = int(ConfigResourceType.BROKER)
    results = cluster.controller.incremental_alter_configs(
        [
            ConfigResourceChange(broker, "", (AlterableConfig("log.retention.hours", "1"),)),
            ConfigResourceChange(broker, "1", (AlterableConfig("log.roll.hours", "2"),)),
            ConfigResourceChange(broker, "2", (AlterableConfig("log.retention.ms", "3600000"),)),
        ]
    )
    assert [(r.error, r.message) for r in results] == [
        (ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.retention.hours)"),
        (ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.roll.hours)"),
        (ErrorCode.NONE, None),
    ]
    assert cluster.image.broker_configs("") == {}
    assert cluster.image.broker_configs("2") == {"log.retention.ms": "3600000"}


def test_describe_marks_them_read_only_and_stored_values_still_apply() -> None:
    static, _ = BrokerConfig.from_properties({"node.id": "1"})
    layers = BrokerConfigLayers(static, {"log.retention.hours": "2"})
    entries = {entry.name: entry for entry in layers.describe()}
    assert all(entries[key].read_only for key in READ_ONLY)
    assert not entries["log.retention.ms"].read_only
    assert layers.effective.log_retention_ms == 2 * 3_600_000  # written before: still honoured
