"""Leader election and ISR changes when brokers are fenced and unfenced (KRaft semantics)."""

from __future__ import annotations

import pytest

from metadata.controller.controller import ControllerConfig
from metadata.controller.replication_control import elect_leader
from metadata.records import FenceBrokerRecord, PartitionChangeRecord, UnfenceBrokerRecord
from metadata.topics import NO_LEADER, PartitionState
from tests.metadata.controller.helpers import SESSION_MS, Cluster, replayed

UNCLEAN = "unclean.leader.election.enable"


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1, 2, 3)
    return cluster


def expire(cluster: Cluster, *broker_ids: int) -> list[int]:
    """Let the session of ``broker_ids`` expire while every other live broker heartbeats."""
    cluster.clock.advance(SESSION_MS + 1)
    cluster.keep_alive(b for b in cluster.image.live_broker_ids() if b not in broker_ids)
    return cluster.controller.tick()


def test_fenced_leader_is_replaced_by_the_next_isr_member_in_assignment_order(cluster: Cluster) -> None:
    topic = cluster.create_assigned("t", [1, 3, 2], [2, 1, 3])
    start = cluster.log.end_offset
    assert expire(cluster, 1) == [1]
    led = cluster.partition("t", 0)
    assert (led.leader_id, led.isr, led.leader_epoch, led.partition_epoch) == (3, [3, 2], 1, 1)
    follower = cluster.partition("t", 1)
    assert (follower.leader_id, follower.isr, follower.leader_epoch, follower.partition_epoch) == (
        2,
        [2, 3],
        0,
        1,
    )
    # one PartitionChangeRecord per changed partition, in the batch with the FenceBrokerRecord
    batch = cluster.log.read(start)
    assert len({epoch for _, epoch, _ in batch}) == 1
    assert [type(r) for _, _, r in batch] == [PartitionChangeRecord, PartitionChangeRecord, FenceBrokerRecord]
    assert {r.topic_id for _, _, r in batch[:2]} == {topic.topic_id}  # type: ignore[union-attr]


def test_a_partition_without_the_fenced_broker_does_not_change(cluster: Cluster) -> None:
    cluster.create_assigned("t", [2, 3])
    before = cluster.partition("t")
    expire(cluster, 1)
    assert cluster.partition("t") is before


def test_last_isr_member_fenced_leaves_no_leader_and_keeps_the_isr(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2])
    expire(cluster, 2)
    expire(cluster, 1)
    partition = cluster.partition("t")
    assert (partition.leader_id, partition.isr, partition.leader_epoch, partition.partition_epoch) == (
        NO_LEADER,
        [1],
        1,
        2,
    )


def test_brokers_fenced_together_are_fenced_one_batch_at_a_time(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3])
    assert expire(cluster, 1, 2) == [1, 2]
    partition = cluster.partition("t")
    assert (partition.leader_id, partition.isr) == (3, [3])
    assert partition.leader_epoch == 1  # never led by the already-doomed broker 2


def test_without_unclean_election_a_live_replica_outside_the_isr_does_not_lead(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2])
    expire(cluster, 2)
    assert not cluster.heartbeat(2).is_fenced  # back, but not in the ISR
    expire(cluster, 1)
    partition = cluster.partition("t")
    assert (partition.leader_id, partition.isr) == (NO_LEADER, [1])


def test_unclean_election_by_controller_default() -> None:
    cluster = Cluster(
        ControllerConfig(broker_session_timeout_ms=SESSION_MS, unclean_leader_election_enable=True)
    )
    cluster.join(1, 2, 3)
    cluster.create_assigned("t", [1, 2, 3])
    expire(cluster, 2, 3)
    cluster.heartbeat(2)
    cluster.heartbeat(3)
    expire(cluster, 1)
    partition = cluster.partition("t")
    assert (partition.leader_id, partition.isr) == (2, [2])
    assert (partition.leader_epoch, partition.partition_epoch) == (1, 3)


@pytest.mark.parametrize(("default", "override", "elected"), [(False, "true", 2), (True, "false", NO_LEADER)])
def test_topic_override_beats_the_default(default: bool, override: str, elected: int) -> None:
    config = ControllerConfig(broker_session_timeout_ms=SESSION_MS, unclean_leader_election_enable=default)
    cluster = Cluster(config)
    cluster.join(1, 2)
    cluster.create("t", 1, 2, {UNCLEAN: override})
    assert cluster.partition("t").leader_id == 1
    expire(cluster, 2)
    cluster.heartbeat(2)
    expire(cluster, 1)
    assert cluster.partition("t").leader_id == elected


def test_unfencing_the_last_isr_member_brings_the_partition_back(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2])
    expire(cluster, 2)
    expire(cluster, 1)
    leaderless = cluster.partition("t")
    start = cluster.log.end_offset
    result = cluster.heartbeat(1)
    assert not result.is_fenced
    partition = cluster.partition("t")
    assert (partition.leader_id, partition.isr) == (1, [1])
    assert partition.leader_epoch == leaderless.leader_epoch + 1
    assert partition.partition_epoch == leaderless.partition_epoch + 1
    assert [type(r) for _, _, r in cluster.log.read(start)] == [UnfenceBrokerRecord, PartitionChangeRecord]


def test_unfencing_a_replica_outside_the_isr_elects_it_only_if_unclean() -> None:
    config = ControllerConfig(broker_session_timeout_ms=SESSION_MS, unclean_leader_election_enable=True)
    cluster = Cluster(config)
    cluster.join(1, 2)
    cluster.create("clean", 1, 2, {UNCLEAN: "false"})
    cluster.create("unclean", 1, 2)
    expire(cluster, 2)
    expire(cluster, 1)
    assert cluster.partition("clean").leader_id == cluster.partition("unclean").leader_id == NO_LEADER
    cluster.heartbeat(2)
    assert cluster.partition("clean").leader_id == NO_LEADER
    unclean = cluster.partition("unclean")
    assert (unclean.leader_id, unclean.isr) == (2, [2])


def test_elections_replay_to_the_same_image(cluster: Cluster) -> None:
    cluster.create("t", 3, 3)
    expire(cluster, 1)
    cluster.heartbeat(1)
    expire(cluster, 2, 3)
    assert replayed(cluster.log) == cluster.image


def test_elect_leader_keeps_a_valid_leader() -> None:
    partition = PartitionState(0, 2, 4, 9, [1, 2, 3], [2, 1, 3])
    assert elect_leader(partition, [2, 1, 3], lambda b: True, unclean=False) == (2, [2, 1, 3])
    assert elect_leader(partition, [1, 3], lambda b: b != 1, unclean=False) == (3, [1, 3])
    assert elect_leader(partition, [1], lambda b: b != 1, unclean=True) == (2, [2])
    assert elect_leader(partition, [1], lambda b: b != 1, unclean=False) == (NO_LEADER, [1])
