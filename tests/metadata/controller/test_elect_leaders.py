"""ElectLeaders on the controller (Kafka's ReplicationControlManager.electLeaders): preferred and
unclean elections, their answers and the PartitionChangeRecords they write."""

from __future__ import annotations

import pytest

from metadata.controller.leader_election import KAFKA_MESSAGES, ElectionType, TopicElectionResult
from metadata.controller.replication_control import AlterPartitionItem
from metadata.records import PartitionChangeRecord
from metadata.topics import NO_LEADER, PartitionState
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import SESSION_MS, Cluster, replayed

PREFERRED = ElectionType.PREFERRED
UNCLEAN = ElectionType.UNCLEAN


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1, 2, 3)
    return cluster


def expire(cluster: Cluster, *broker_ids: int) -> None:
    cluster.clock.advance(SESSION_MS + 1)
    cluster.keep_alive(b for b in cluster.image.live_broker_ids() if b not in broker_ids)
    cluster.controller.tick()


def rejoin(cluster: Cluster, broker_id: int, generation: int = 1) -> None:
    cluster.register(broker_id, generation)
    assert not cluster.heartbeat(broker_id).is_fenced


def errors(results: list[TopicElectionResult]) -> dict[tuple[str, int], ErrorCode]:
    return {(t.topic, p.partition): p.error for t in results for p in t.partitions}


def bounce_leader(cluster: Cluster) -> None:
    """Broker 1 (the preferred leader of t-0) is fenced and comes back: it is in the ISR again
    (the leader adds it) but no longer leads."""
    expire(cluster, 1)
    rejoin(cluster, 1)
    partition = cluster.partition("t")
    assert partition.leader_id == 2
    result = cluster.controller.alter_partition(
        2,
        cluster.epochs[2],
        [_isr_item(partition, [2, 3, 1])],
    )
    assert result.partitions[0].error is ErrorCode.NONE


def _isr_item(partition: PartitionState, isr: list[int]) -> AlterPartitionItem:
    """The leader's AlterPartition that sets the ISR of t-``partition`` to ``isr``."""
    return AlterPartitionItem(
        "t", partition.partition, partition.leader_epoch, tuple(isr), partition.partition_epoch
    )


def test_preferred_election_moves_leadership_back_to_the_first_replica(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3])
    bounce_leader(cluster)
    before = cluster.partition("t")
    start = cluster.log.end_offset
    results = cluster.controller.elect_leaders(PREFERRED, [("t", [0])])
    assert errors(results) == {("t", 0): ErrorCode.NONE}
    assert results[0].partitions[0].message is None
    after = cluster.partition("t")
    assert (after.leader_id, after.isr) == (1, before.isr)
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.partition_epoch == before.partition_epoch + 1
    [(_, _, record)] = cluster.log.read(start)
    assert isinstance(record, PartitionChangeRecord) and record.leader == 1
    assert replayed(cluster.log) == cluster.image


def test_preferred_leader_already_leading_is_election_not_needed(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3])
    start = cluster.log.end_offset
    results = cluster.controller.elect_leaders(PREFERRED, [("t", [0])])
    [partition] = results[0].partitions
    assert partition.error is ErrorCode.ELECTION_NOT_NEEDED
    assert partition.message == KAFKA_MESSAGES[ErrorCode.ELECTION_NOT_NEEDED]
    assert cluster.log.end_offset == start  # nothing written


def test_preferred_replica_fenced_or_out_of_the_isr_is_not_available(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3])
    expire(cluster, 1)  # fenced: out of the ISR, broker 2 leads
    results = cluster.controller.elect_leaders(PREFERRED, [("t", [0])])
    assert errors(results) == {("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    assert results[0].partitions[0].message == "The preferred leader was not available."
    rejoin(cluster, 1)  # unfenced, but not yet back in the ISR
    assert errors(cluster.controller.elect_leaders(PREFERRED, [("t", [0])])) == {
        ("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }
    assert cluster.partition("t").leader_id == 2


def test_preferred_replica_in_controlled_shutdown_may_not_lead(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3])
    bounce_leader(cluster)
    cluster.heartbeat(1, want_shutdown=True)
    assert errors(cluster.controller.elect_leaders(PREFERRED, [("t", [0])])) == {
        ("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }


def test_unclean_election_elects_a_live_replica_outside_the_isr(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2])
    expire(cluster, 2)
    expire(cluster, 1)  # the last ISR member is gone: no leader, ISR [1]
    rejoin(cluster, 2)  # back, but outside the ISR: a clean election cannot use it
    before = cluster.partition("t")
    assert (before.leader_id, before.isr) == (NO_LEADER, [1])
    results = cluster.controller.elect_leaders(UNCLEAN, [("t", [0])])
    assert errors(results) == {("t", 0): ErrorCode.NONE}
    after = cluster.partition("t")
    assert (after.leader_id, after.isr) == (2, [2])
    assert after.leader_epoch == before.leader_epoch + 1
    assert replayed(cluster.log) == cluster.image


def test_unclean_election_with_a_leader_is_not_needed(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2])
    results = cluster.controller.elect_leaders(UNCLEAN, [("t", [0])])
    assert errors(results) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}


def test_unclean_election_without_any_live_replica_is_eligible_leaders_not_available(
    cluster: Cluster,
) -> None:
    cluster.create_assigned("t", [1, 2])
    expire(cluster, 2)
    expire(cluster, 1)
    results = cluster.controller.elect_leaders(UNCLEAN, [("t", [0])])
    assert errors(results) == {("t", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}
    assert results[0].partitions[0].message == "Eligible topic partition leaders are not available."


def test_unknown_topics_and_partitions_carry_kafkas_messages(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2])
    results = cluster.controller.elect_leaders(PREFERRED, [("nope", [0, 1]), ("t", [5])])
    assert [(r.topic, [(p.partition, p.error, p.message) for p in r.partitions]) for r in results] == [
        (
            "nope",
            [
                (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope"),
                (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope"),
            ],
        ),
        ("t", [(5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-5")]),
    ]


def test_all_partitions_leave_out_those_that_need_no_election(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3], [2, 3, 1])
    cluster.create_assigned("u", [3, 1, 2])
    bounce_leader(cluster)  # t-0 led by 2; t-1 and u-0 still by their preferred replica
    start = cluster.log.end_offset
    results = cluster.controller.elect_leaders(PREFERRED, None)
    assert [(r.topic, [(p.partition, p.error) for p in r.partitions]) for r in results] == [
        ("t", [(0, ErrorCode.NONE)]),
        ("u", []),
    ]
    assert cluster.partition("t", 0).leader_id == 1
    assert len(cluster.log.read(start)) == 1


def test_a_partition_named_twice_is_elected_once(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3])
    bounce_leader(cluster)
    start = cluster.log.end_offset
    results = cluster.controller.elect_leaders(PREFERRED, [("t", [0, 0])])
    assert [p.error for p in results[0].partitions] == [ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED]
    assert len(cluster.log.read(start)) == 1
    assert replayed(cluster.log) == cluster.image


def test_elections_of_one_request_are_one_batch(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3], [1, 3, 2])
    expire(cluster, 1)
    rejoin(cluster, 1)
    for index in (0, 1):
        partition = cluster.partition("t", index)
        result = cluster.controller.alter_partition(
            partition.leader_id,
            cluster.epochs[partition.leader_id],
            [_isr_item(partition, [*partition.isr, 1])],
        )
        assert result.partitions[0].error is ErrorCode.NONE
    start = cluster.log.end_offset
    results = cluster.controller.elect_leaders(PREFERRED, [("t", [0, 1])])
    assert errors(results) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    batch = cluster.log.read(start)
    assert len(batch) == 2 and len({epoch for _, epoch, _ in batch}) == 1
    assert [cluster.partition("t", i).leader_id for i in (0, 1)] == [1, 1]
