"""AlterPartition on the controller: Kafka's checks and order, accepted shrinks and expansions, and
kipling's resignation (a leader proposing an ISR without itself)."""

from __future__ import annotations

import uuid

import pytest

from metadata.controller.replication_control import AlterPartitionItem, AlterPartitionResponse
from metadata.records import PartitionChangeRecord
from metadata.topics import TopicState
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import Cluster, replayed


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1, 2, 3)
    return cluster


@pytest.fixture
def topic(cluster: Cluster) -> TopicState:
    """Partition 0 on [1, 2, 3] led by 1 at leader epoch 0, partition epoch 0."""
    return cluster.create_assigned("t", [1, 2, 3])


def item(
    isr: tuple[int, ...],
    *,
    topic: str | uuid.UUID = "t",
    partition: int = 0,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
    broker_epochs: tuple[int, ...] | None = None,
) -> AlterPartitionItem:
    return AlterPartitionItem(topic, partition, leader_epoch, isr, partition_epoch, broker_epochs)


def alter(cluster: Cluster, *items: AlterPartitionItem, broker: int = 1) -> AlterPartitionResponse:
    return cluster.controller.alter_partition(broker, cluster.epochs[broker], items)


def test_an_accepted_shrink_bumps_only_the_partition_epoch(cluster: Cluster, topic: TopicState) -> None:
    start = cluster.log.end_offset
    response = alter(cluster, item((1, 2), topic=topic.topic_id))
    assert response.error is ErrorCode.NONE
    [result] = response.partitions
    assert (result.error, result.leader_id, result.leader_epoch, result.isr, result.partition_epoch) == (
        ErrorCode.NONE,
        1,
        0,
        (1, 2),
        1,
    )
    assert [r for _, _, r in cluster.log.read(start)] == [
        PartitionChangeRecord(0, topic.topic_id, (1, 2, 3), (1, 2), 1, 0, 1)
    ]
    assert cluster.partition("t").isr == [1, 2]


def test_an_accepted_expansion(cluster: Cluster, topic: TopicState) -> None:
    alter(cluster, item((1,)))
    [result] = alter(cluster, item((1, 3), partition_epoch=1)).partitions
    assert (result.error, result.isr, result.partition_epoch) == (ErrorCode.NONE, (1, 3), 2)
    assert replayed(cluster.log) == cluster.image


def test_the_current_isr_is_answered_without_a_record(cluster: Cluster, topic: TopicState) -> None:
    end = cluster.log.end_offset
    [result] = alter(cluster, item((1, 2, 3))).partitions
    assert (result.error, result.isr, result.partition_epoch) == (ErrorCode.NONE, (1, 2, 3), 0)
    assert cluster.log.end_offset == end


def test_a_stale_broker_epoch_fails_the_whole_request(cluster: Cluster, topic: TopicState) -> None:
    response = cluster.controller.alter_partition(1, cluster.epochs[1] + 100, [item((1,))])
    assert response == AlterPartitionResponse(ErrorCode.STALE_BROKER_EPOCH)
    assert cluster.controller.alter_partition(9, 0, [item((1,))]).error is ErrorCode.STALE_BROKER_EPOCH
    assert cluster.partition("t").isr == [1, 2, 3]


@pytest.mark.parametrize(
    ("proposal", "code"),
    [
        (item((1,), topic="missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (item((1,), topic=uuid.UUID(int=77)), ErrorCode.UNKNOWN_TOPIC_ID),
        (item((1,), partition=5), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (item((1,), leader_epoch=1), ErrorCode.NOT_CONTROLLER),
        (item((1,), partition_epoch=1), ErrorCode.NOT_CONTROLLER),
        (item((1, 4)), ErrorCode.INVALID_REQUEST),
        (item(()), ErrorCode.INVALID_REQUEST),
        (item((1, 1)), ErrorCode.INVALID_REQUEST),
        (item((2, 4)), ErrorCode.INVALID_REQUEST),
        (item((1, 2), broker_epochs=(-1, 999)), ErrorCode.INELIGIBLE_REPLICA),
        (item((1, 2), broker_epochs=(-1,)), ErrorCode.INELIGIBLE_REPLICA),
    ],
)
def test_refused_proposals(
    cluster: Cluster, topic: TopicState, proposal: AlterPartitionItem, code: ErrorCode
) -> None:
    end = cluster.log.end_offset
    response = alter(cluster, proposal)
    assert response.error is ErrorCode.NONE
    [result] = response.partitions
    assert result.error is code
    assert cluster.log.end_offset == end


def test_only_the_leader_may_alter(cluster: Cluster, topic: TopicState) -> None:
    [result] = alter(cluster, item((2, 3)), broker=2).partitions
    assert result.error is ErrorCode.INVALID_REQUEST


def test_older_epochs_are_fenced_or_outdated(cluster: Cluster, topic: TopicState) -> None:
    alter(cluster, item((1, 2)))  # partition epoch 1
    [result] = alter(cluster, item((1,))).partitions
    assert result.error is ErrorCode.INVALID_UPDATE_VERSION
    cluster.heartbeat(1, want_fence=True)  # leader moves to 2 at leader epoch 1
    [result] = alter(cluster, item((2,), partition_epoch=2), broker=2).partitions
    assert result.error is ErrorCode.FENCED_LEADER_EPOCH
    [result] = alter(cluster, item((2,), leader_epoch=1, partition_epoch=2), broker=2).partitions
    assert (result.error, result.isr) == (ErrorCode.NONE, (2,))


def test_broker_epochs_matching_or_skipped_are_accepted(cluster: Cluster, topic: TopicState) -> None:
    [result] = alter(cluster, item((1, 2), broker_epochs=(cluster.epochs[1], -1))).partitions
    assert result.error is ErrorCode.NONE


def test_a_fenced_replica_cannot_join_the_isr(cluster: Cluster, topic: TopicState) -> None:
    cluster.heartbeat(3, want_fence=True)  # ISR becomes [1, 2]
    [result] = alter(cluster, item((1, 2, 3), partition_epoch=1)).partitions
    assert result.error is ErrorCode.INELIGIBLE_REPLICA


def test_a_replica_in_controlled_shutdown_cannot_join_the_isr(cluster: Cluster, topic: TopicState) -> None:
    cluster.create_assigned("led-by-3", [3, 1])
    cluster.heartbeat(3, want_shutdown=True)
    assert cluster.partition("t").isr == [1, 2]
    [result] = alter(cluster, item((1, 2, 3), partition_epoch=1)).partitions
    assert result.error is ErrorCode.INELIGIBLE_REPLICA


def test_mixed_results_in_one_batch(cluster: Cluster, topic: TopicState) -> None:
    other = cluster.create_assigned("u", [1, 2])
    start = cluster.log.end_offset
    response = alter(cluster, item((1, 9)), item((1,), topic=other.topic_id), item((1,)))
    assert [r.error for r in response.partitions] == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
        ErrorCode.NONE,
    ]
    assert [(o, type(r)) for o, _, r in cluster.log.read(start)] == [
        (start, PartitionChangeRecord),
        (start + 1, PartitionChangeRecord),
    ]
    assert len({e for _, e, _ in cluster.log.read(start)}) == 1


def test_the_same_partition_twice_is_checked_against_the_first_change(
    cluster: Cluster, topic: TopicState
) -> None:
    response = alter(cluster, item((1, 2)), item((1,)), item((1,), partition_epoch=1))
    assert [(r.error, r.isr, r.partition_epoch) for r in response.partitions] == [
        (ErrorCode.NONE, (1, 2), 1),
        (ErrorCode.INVALID_UPDATE_VERSION, (), -1),
        (ErrorCode.NONE, (1,), 2),
    ]
    assert cluster.partition("t").isr == [1]
    assert replayed(cluster.log) == cluster.image


# -- a leader proposing an ISR without itself resigns (kipling's deviation from Kafka) -------------


def test_a_leader_leaving_the_isr_hands_leadership_to_the_first_in_sync_replica(
    cluster: Cluster, topic: TopicState
) -> None:
    start = cluster.log.end_offset
    [result] = alter(cluster, item((3, 2))).partitions
    assert (result.error, result.leader_id, result.leader_epoch, result.isr, result.partition_epoch) == (
        ErrorCode.NONE,
        2,  # assignment order [1, 2, 3], not the proposal's order
        1,
        (3, 2),
        1,
    )
    assert [r for _, _, r in cluster.log.read(start)] == [
        PartitionChangeRecord(0, topic.topic_id, (1, 2, 3), (3, 2), 2, 1, 1)
    ]
    partition = cluster.partition("t")
    assert (partition.leader_id, partition.leader_epoch, partition.isr) == (2, 1, [3, 2])
    assert replayed(cluster.log) == cluster.image


def test_a_resignation_is_checked_like_any_proposal(cluster: Cluster, topic: TopicState) -> None:
    alter(cluster, item((1, 2)))  # partition epoch 1
    end = cluster.log.end_offset
    [stale] = alter(cluster, item((2,))).partitions
    assert stale.error is ErrorCode.INVALID_UPDATE_VERSION
    [not_leader] = alter(cluster, item((3,), partition_epoch=1), broker=2).partitions
    assert not_leader.error is ErrorCode.INVALID_REQUEST
    assert cluster.log.end_offset == end
    [accepted] = alter(cluster, item((2,), partition_epoch=1)).partitions
    assert (accepted.error, accepted.leader_id, accepted.leader_epoch, accepted.partition_epoch) == (
        ErrorCode.NONE,
        2,
        1,
        2,
    )


def test_a_resignation_naming_a_broker_that_cannot_lead_is_refused(
    cluster: Cluster, topic: TopicState
) -> None:
    cluster.heartbeat(2, want_fence=True)  # ISR becomes [1, 3], partition epoch 1
    end = cluster.log.end_offset
    [result] = alter(cluster, item((2,), partition_epoch=1)).partitions
    assert result.error is ErrorCode.INELIGIBLE_REPLICA
    assert cluster.log.end_offset == end
    assert cluster.partition("t").leader_id == 1
    [moved] = alter(cluster, item((3,), partition_epoch=1)).partitions
    assert (moved.error, moved.leader_id, moved.isr) == (ErrorCode.NONE, 3, (3,))


def test_a_sole_leader_cannot_resign_to_an_empty_isr(cluster: Cluster, topic: TopicState) -> None:
    alter(cluster, item((1,)))
    [result] = alter(cluster, item((), partition_epoch=1)).partitions
    assert result.error is ErrorCode.INVALID_REQUEST
    assert cluster.partition("t").leader_id == 1
