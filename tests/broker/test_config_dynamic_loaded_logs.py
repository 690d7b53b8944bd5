"""Logs opened before the metadata image is loaded get their dynamic configs.

The LogManager opens every log at start-up, before any metadata is read (the metadata log is one of
them), so each log starts with the static defaults. Once the local metadata copy is replayed, the
broker hands every loaded log its topic's configuration (:func:`reconfigure_loaded_logs`), rather
than waiting until it leads or follows the partition.
"""

from __future__ import annotations

import pathlib
import uuid

import pytest

from broker.dynamic_config import DynamicBrokerConfig, reconfigure_loaded_logs
from metadata.controller.config_control import AlterableConfig, ConfigResourceChange
from metadata.records import ConfigResourceType
from protocol.error_codes import ErrorCode
from server_common.config import BrokerConfig, to_log_config
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.metadata.controller.helpers import Cluster


def _alter(cluster: Cluster, resource_type: ConfigResourceType, name: str, key: str, value: str) -> None:
    change = ConfigResourceChange(int(resource_type), name, (AlterableConfig(key, value),))
    assert [r.error for r in cluster.controller.incremental_alter_configs([change])] == [ErrorCode.NONE]


@pytest.mark.timeout(30)
def test_loaded_logs_take_topic_overrides_and_dynamic_broker_defaults(tmp_path: pathlib.Path) -> None:
    cluster = Cluster()
    cluster.join(1)
    orders = cluster.create("orders", 1, 1)
    plain = cluster.create("plain", 1, 1)
    _alter(cluster, ConfigResourceType.TOPIC, "orders", "retention.ms", "1000")
    _alter(cluster, ConfigResourceType.BROKER, "", "log.index.size.max.bytes", "4096")
    static, _ = BrokerConfig.from_properties({"node.id": "1"})
    clock = FakeClock()
    logs = LogManager([tmp_path], to_log_config({}, static), clock)
    logs.get_or_create_log("orders", 0, orders.topic_id)
    logs.get_or_create_log("plain", 0, plain.topic_id)
    logs.get_or_create_log("unknown", 0, uuid.uuid4())
    logs.get_or_create_log("plain", 1, uuid.uuid4())  # an older topic of the same name
    try:
        before = {(log.topic, log.partition): log.config for log in logs.all_logs()}
        changed = reconfigure_loaded_logs(
            logs.all_logs(), DynamicBrokerConfig(static, cluster.image), cluster.image
        )
        after = {(log.topic, log.partition): log.config for log in logs.all_logs()}
    finally:
        logs.shutdown()
    assert changed == 2
    assert (after["orders", 0].retention_ms, after["orders", 0].max_index_size) == (1000, 4096)
    assert after["plain", 0].max_index_size == 4096
    assert after["plain", 0].retention_ms == before["plain", 0].retention_ms
    assert after["unknown", 0] == before["unknown", 0]
    assert after["plain", 1] == before["plain", 1]
    again = reconfigure_loaded_logs([], DynamicBrokerConfig(static, cluster.image), cluster.image)
    assert again == 0
