"""``unclean.leader.election.enable`` per node.

Kafka's controller resolves the key for a topic without an override through its
ConfigurationControlManager: the ACTIVE controller's own per-node dynamic value (BROKER resource
named after its node id), then the cluster-wide dynamic default, then its static value. kipling
passes its node id through ControllerConfig and uses BrokerConfigLayers' precedence.
"""

from __future__ import annotations

import pytest

from metadata.controller.config_control import AlterableConfig, ConfigResourceChange, OpType
from metadata.controller.controller import ControllerConfig
from metadata.records import ConfigResourceType
from metadata.topics import NO_LEADER
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import SESSION_MS, Cluster
from tests.metadata.controller.test_elections import expire

BROKER = int(ConfigResourceType.BROKER)
UNCLEAN = "unclean.leader.election.enable"
CONTROLLER_ID = 1


def _set(name: str, value: str | None) -> ConfigResourceChange:
    op = OpType.SET if value is not None else OpType.DELETE
    return ConfigResourceChange(BROKER, name, (AlterableConfig(UNCLEAN, value, op),))


def _leaderless(config: ControllerConfig) -> Cluster:
    """Topic "t" on brokers 1 and 2, leaderless: 2 came back outside the ISR, then 1 died."""
    cluster = Cluster(config)
    cluster.join(1, 2)
    cluster.create_assigned("t", [1, 2])
    expire(cluster, 2)
    assert not cluster.heartbeat(2).is_fenced
    expire(cluster, 1)
    assert cluster.partition("t").leader_id == NO_LEADER
    return cluster


def _alter(cluster: Cluster, change: ConfigResourceChange) -> None:
    [result] = cluster.controller.incremental_alter_configs([change])
    assert result.error == ErrorCode.NONE, result


@pytest.mark.timeout(30)
def test_controllers_own_node_value_beats_the_cluster_default() -> None:
    cluster = _leaderless(ControllerConfig(broker_session_timeout_ms=SESSION_MS, node_id=CONTROLLER_ID))
    _alter(cluster, _set(str(CONTROLLER_ID), "false"))
    _alter(cluster, _set("", "true"))
    assert cluster.partition("t").leader_id == NO_LEADER  # the controller's own "false" wins
    _alter(cluster, _set(str(CONTROLLER_ID), None))
    assert (cluster.partition("t").leader_id, cluster.partition("t").isr) == (2, [2])


@pytest.mark.timeout(30)
def test_controllers_own_node_value_beats_its_static_value() -> None:
    cluster = _leaderless(ControllerConfig(broker_session_timeout_ms=SESSION_MS, node_id=CONTROLLER_ID))
    _alter(cluster, _set(str(CONTROLLER_ID), "true"))
    assert cluster.partition("t").leader_id == 2


@pytest.mark.timeout(30)
def test_another_nodes_value_does_not_count() -> None:
    cluster = _leaderless(ControllerConfig(broker_session_timeout_ms=SESSION_MS, node_id=CONTROLLER_ID))
    _alter(cluster, _set("2", "true"))
    assert cluster.partition("t").leader_id == NO_LEADER


@pytest.mark.timeout(30)
def test_without_a_node_id_only_the_cluster_default_and_static_value_count() -> None:
    cluster = _leaderless(ControllerConfig(broker_session_timeout_ms=SESSION_MS))
    _alter(cluster, _set(str(CONTROLLER_ID), "true"))
    assert cluster.partition("t").leader_id == NO_LEADER
    _alter(cluster, _set("", "true"))
    assert cluster.partition("t").leader_id == 2
