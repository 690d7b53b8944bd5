"""AlterPartitionReassignments with allow_replication_factor_change false (KIP-860):
Kafka's ReplicationControlManager answers INVALID_REPLICATION_FACTOR with "The replication factor is
changed from <current> to <target>" (what kafka-reassign-partitions.sh prints per partition), the
current factor being the one the partition is headed for, and checks it before the target list."""

from __future__ import annotations

import pytest

from metadata.controller.reassignment_control import ReassignablePartition
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import Cluster


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(0, 1, 2, 3, 4, 5)
    cluster.create_assigned("t", [0, 1, 2])
    return cluster


def refused(cluster: Cluster, replicas: tuple[int, ...]) -> tuple[ErrorCode, str | None]:
    [result] = cluster.controller.alter_partition_reassignments(
        [ReassignablePartition("t", 0, replicas)], allow_replication_factor_change=False
    )
    return result.error, result.message


def test_the_message_is_kafkas(cluster: Cluster) -> None:
    assert refused(cluster, (3, 4)) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "The replication factor is changed from 3 to 2",
    )
    assert not cluster.partition("t").is_reassigning


def test_during_a_reassignment_the_factor_is_the_targets(cluster: Cluster) -> None:
    assert refused(cluster, (3, 4, 5)) == (ErrorCode.NONE, None)
    assert cluster.partition("t").replicas == [3, 4, 5, 0, 1, 2]
    assert refused(cluster, (3, 4, 5, 0)) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "The replication factor is changed from 3 to 4",
    )


def test_the_factor_is_checked_before_the_target_list(cluster: Cluster) -> None:
    assert refused(cluster, (3, 3)) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "The replication factor is changed from 3 to 2",
    )
