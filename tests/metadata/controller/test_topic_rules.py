"""topic_rules: placement over several brokers, the collision index, new partitions' ISR.

The single-broker behaviour (every error code and message) is covered through the controller in
test_topic_validation.py; this file covers what only a cluster exercises.
"""

from __future__ import annotations

import uuid

import pytest

from metadata.controller import topic_rules
from metadata.controller.topic_rules import ClusterBrokers, NewPartition, TopicDefaults, TopicNames
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import ZERO_UUID
from server_common.config import validate_topic_configs


def test_leaders_go_round_robin_and_followers_follow() -> None:
    assert topic_rules.place(4, 2, (1, 2, 3)) == [[1, 2], [2, 3], [3, 1], [1, 2]]
    assert topic_rules.place(3, 3, (1, 2, 3), start_index=1) == [[2, 3, 1], [3, 1, 2], [1, 2, 3]]


def test_too_few_usable_brokers_is_invalid_replication_factor() -> None:
    with pytest.raises(KafkaError) as info:
        topic_rules.place(1, 3, (1, 2))
    assert info.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert info.value.message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
        "reached because only 2 broker(s) are registered."
    )


def test_placement_uses_only_usable_brokers() -> None:
    brokers = ClusterBrokers.of([3, 1, 2], [3, 1])
    assert brokers == ClusterBrokers((1, 2, 3), (1, 3))
    replicas = topic_rules.placed_replicas(2, 2, brokers, TopicDefaults())
    assert replicas == [[1, 3], [3, 1]]


def test_manual_assignment_may_name_a_fenced_broker_outside_the_isr() -> None:
    brokers = ClusterBrokers.of([1, 2, 3], [1, 3])
    plan = topic_rules.plan_topic(
        "t",
        -1,
        -1,
        {},
        assignments=[(0, [2, 3]), (1, [1, 2])],
        names=TopicNames(),
        brokers=brokers,
        defaults=TopicDefaults(),
        config_validator=validate_topic_configs,
    )
    assert plan.partitions == (NewPartition(0, (2, 3), (3,)), NewPartition(1, (1, 2), (1,)))
    assert [p.leader for p in plan.partitions] == [3, 1]


def test_manual_assignment_needs_one_usable_broker_per_partition() -> None:
    brokers = ClusterBrokers.of([1, 2], [1])
    with pytest.raises(KafkaError) as info:
        topic_rules.manual_replicas(-1, -1, [(0, [1]), (1, [2])], brokers)
    assert info.value.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert info.value.message == (
        "All brokers specified in the manual partition assignment for partition 1 are fenced or in "
        "controlled shutdown."
    )
    with pytest.raises(KafkaError, match="for partition 4 are fenced"):
        topic_rules.additional_replicas(4, 1, 1, [[2]], brokers)


def test_new_partitions_continue_the_numbering() -> None:
    added = topic_rules.plan_new_partitions(
        "t", 2, 2, 4, assignments=None, brokers=ClusterBrokers.of([1, 2, 3], [1, 2, 3]), start_index=2
    )
    assert added == (NewPartition(2, (3, 1), (3, 1)), NewPartition(3, (1, 2), (1, 2)))


def test_topic_names_track_collisions() -> None:
    names = TopicNames(["a.b", "plain"])
    assert "a.b" in names and "a_b" not in names and len(names) == 2
    assert names.collision_with("a_b") == "a.b"
    assert names.collision_with("plain") is None
    copy = names.copy()
    copy.add("x_y")
    assert names.collision_with("x.y") is None and copy.collision_with("x.y") == "x_y"
    names.discard("a.b")
    assert names.collision_with("a_b") is None


def test_new_topic_ids_avoid_ids_in_use_and_zero() -> None:
    taken = {uuid.uuid4() for _ in range(5)}
    fresh = topic_rules.new_topic_id(taken)
    assert fresh not in taken and fresh != ZERO_UUID
