"""CreateTopics, CreatePartitions and DeleteTopics through the controller, on several brokers."""

from __future__ import annotations

import uuid

import pytest

from metadata.controller.controller import ControllerConfig
from metadata.controller.replication_control import CreatableTopic, CreatePartitionsTopic
from metadata.records import ConfigRecord, PartitionRecord, RemoveTopicRecord, TopicRecord
from metadata.topics import PartitionState
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import SESSION_MS, Cluster, replayed


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1, 2, 3)
    return cluster


# -- CreateTopics ----------------------------------------------------------------------------------


def test_placement_on_three_brokers_spreads_leaders(cluster: Cluster) -> None:
    topic = cluster.create("t", 6, 2)
    partitions = topic.sorted_partitions()
    assert [p.replicas for p in partitions] == [[1, 2], [2, 3], [3, 1], [1, 2], [2, 3], [3, 1]]
    assert all(
        p == PartitionState(p.partition, p.replicas[0], 0, 0, p.replicas, p.replicas) for p in partitions
    )
    assert topic.replication_factor == 2


def test_leaders_of_successive_topics_rotate(cluster: Cluster) -> None:
    leaders = [cluster.create(f"t{i}").partitions[0].leader_id for i in range(4)]
    assert leaders == [1, 2, 3, 1]


def test_fenced_brokers_get_no_replicas(cluster: Cluster) -> None:
    cluster.heartbeat(2, want_fence=True)
    topic = cluster.create("t", 4, 2)
    assert {b for p in topic.partitions.values() for b in p.replicas} == {1, 3}


def test_too_few_usable_brokers_is_invalid_replication_factor(cluster: Cluster) -> None:
    cluster.heartbeat(3, want_fence=True)
    [result] = cluster.controller.create_topics([CreatableTopic("t", 1, 3)])
    assert result.error is ErrorCode.INVALID_REPLICATION_FACTOR
    assert result.message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
        "reached because only 2 broker(s) are registered."
    )
    assert cluster.image.get("t") is None


def test_one_batch_holds_topic_configs_and_partitions(cluster: Cluster) -> None:
    start = cluster.log.end_offset
    topic = cluster.create("t", 2, 1, {"retention.ms": " 1000 ", "cleanup.policy": "delete"})
    batch = cluster.log.read(start)
    assert len({epoch for _, epoch, _ in batch}) == 1
    assert [type(r) for _, _, r in batch] == [
        TopicRecord,
        ConfigRecord,
        ConfigRecord,
        PartitionRecord,
        PartitionRecord,
    ]
    assert topic.configs == {"retention.ms": "1000", "cleanup.policy": "delete"}
    assert topic is cluster.image.get("t")


def test_validate_only_writes_nothing(cluster: Cluster) -> None:
    end = cluster.log.end_offset
    [result] = cluster.controller.create_topics([CreatableTopic("t", 3, 3)], validate_only=True)
    assert result.error is ErrorCode.NONE
    assert result.topic is not None and len(result.topic.partitions) == 3
    assert cluster.log.end_offset == end and cluster.image.get("t") is None


def test_a_request_creates_its_valid_topics_in_one_batch(cluster: Cluster) -> None:
    cluster.create("exists")
    start = cluster.log.end_offset
    results = cluster.controller.create_topics(
        [
            CreatableTopic("a.b", 1, 1),
            CreatableTopic("exists", 1, 1),
            CreatableTopic("a_b", 1, 1),
            CreatableTopic("c", 2, 1),
            CreatableTopic("c", 1, 1),
            CreatableTopic("bad name", 1, 1),
            CreatableTopic("d", 1, 1, {"retention.ms": "soon"}),
        ]
    )
    assert [(r.name, r.error) for r in results] == [
        ("a.b", ErrorCode.NONE),
        ("exists", ErrorCode.TOPIC_ALREADY_EXISTS),
        ("a_b", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("c", ErrorCode.NONE),
        ("c", ErrorCode.TOPIC_ALREADY_EXISTS),
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("d", ErrorCode.INVALID_CONFIG),
    ]
    assert results[2].message == "Topic 'a_b' collides with existing topic: a.b"
    assert [r.topic is cluster.image.get(r.name) for r in results if r.error is ErrorCode.NONE] == [
        True,
        True,
    ]
    assert len({epoch for _, epoch, _ in cluster.log.read(start)}) == 1
    assert [type(r) for _, _, r in cluster.log.read(start)].count(TopicRecord) == 2


def test_defaults_come_from_the_config() -> None:
    config = ControllerConfig(
        broker_session_timeout_ms=SESSION_MS, default_num_partitions=4, default_replication_factor=2
    )
    cluster = Cluster(config)
    cluster.join(1, 2)
    topic = cluster.create("t", -1, -1)
    assert len(topic.partitions) == 4 and topic.replication_factor == 2


def test_manual_assignment_may_name_fenced_brokers(cluster: Cluster) -> None:
    cluster.heartbeat(1, want_fence=True)
    topic = cluster.create_assigned("t", [1, 2], [3, 1])
    assert [(p.leader_id, p.isr) for p in topic.sorted_partitions()] == [(2, [2]), (3, [3])]
    [result] = cluster.controller.create_topics([CreatableTopic("u", -1, -1, {}, [(0, [1])])])
    assert result.error is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert result.message is not None and "are fenced or in controlled shutdown" in result.message
    [result] = cluster.controller.create_topics([CreatableTopic("u", -1, -1, {}, [(0, [7])])])
    assert result.error is ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_recreated_topic_gets_a_new_id(cluster: Cluster) -> None:
    first = cluster.create("t")
    cluster.controller.delete_topics(["t"])
    assert cluster.create("t").topic_id != first.topic_id


# -- DeleteTopics ----------------------------------------------------------------------------------


def test_delete_by_name_and_by_id_in_one_batch(cluster: Cluster) -> None:
    a = cluster.create("a.b", 2)
    b = cluster.create("b")
    start = cluster.log.end_offset
    results = cluster.controller.delete_topics(["a.b", b.topic_id, "missing", uuid.UUID(int=5), "b"])
    assert [(r.name, r.topic_id, r.error) for r in results] == [
        ("a.b", a.topic_id, ErrorCode.NONE),
        ("b", b.topic_id, ErrorCode.NONE),
        ("missing", None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (None, uuid.UUID(int=5), ErrorCode.UNKNOWN_TOPIC_ID),
        ("b", b.topic_id, ErrorCode.NONE),
    ]
    assert results[0].topic is a and len(a.partitions) == 2
    assert [r for _, _, r in cluster.log.read(start)] == [
        RemoveTopicRecord(a.topic_id),
        RemoveTopicRecord(b.topic_id),
    ]
    assert cluster.image.all() == []
    assert cluster.create("a_b").name == "a_b"  # the collision went with the topic


def test_deleting_nothing_writes_nothing(cluster: Cluster) -> None:
    end = cluster.log.end_offset
    assert cluster.controller.delete_topics(["missing"])[0].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.log.end_offset == end


# -- CreatePartitions ------------------------------------------------------------------------------


def test_create_partitions_places_the_new_ones(cluster: Cluster) -> None:
    cluster.create("t", 1, 2)
    [result] = cluster.controller.create_partitions([CreatePartitionsTopic("t", 4)])
    assert result.error is ErrorCode.NONE
    assert [(p.partition, p.replicas, p.isr, p.leader_epoch) for p in result.partitions] == [
        (1, [2, 3], [2, 3], 0),
        (2, [3, 1], [3, 1], 0),
        (3, [1, 2], [1, 2], 0),
    ]
    assert sorted(cluster.image.get("t").partitions) == [0, 1, 2, 3]  # type: ignore[union-attr]


def test_create_partitions_errors(cluster: Cluster) -> None:
    cluster.create("t", 2, 1)
    results = cluster.controller.create_partitions(
        [
            CreatePartitionsTopic("missing", 3),
            CreatePartitionsTopic("t", 1),
            CreatePartitionsTopic("t", 2),
            CreatePartitionsTopic("t", 4, [[1]]),
            CreatePartitionsTopic("t", 3, [[9]]),
        ]
    )
    assert [r.error for r in results] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PARTITIONS,
        ErrorCode.INVALID_PARTITIONS,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    ]
    assert results[1].message == "The topic t currently has 2 partition(s); 1 would not be an increase."


def test_create_partitions_with_assignments_and_validate_only(cluster: Cluster) -> None:
    cluster.create("t", 1, 2)
    end = cluster.log.end_offset
    [result] = cluster.controller.create_partitions(
        [CreatePartitionsTopic("t", 2, [[3, 2]])], validate_only=True
    )
    assert [(p.partition, p.leader_id) for p in result.partitions] == [(1, 3)]
    assert cluster.log.end_offset == end
    [result] = cluster.controller.create_partitions([CreatePartitionsTopic("t", 2, [[3, 2]])])
    assert cluster.partition("t", 1).replicas == [3, 2]


def test_every_admin_change_replays_to_the_same_image(cluster: Cluster) -> None:
    cluster.create("a", 3, 3, {"retention.ms": "10"})
    cluster.create("b", 2, 2)
    cluster.controller.create_partitions([CreatePartitionsTopic("b", 5)])
    cluster.controller.delete_topics(["a"])
    assert replayed(cluster.log) == cluster.image
    assert cluster.restart().image == cluster.image
