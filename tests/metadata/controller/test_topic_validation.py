"""CreateTopics, DeleteTopics and CreatePartitions validation on a cluster of one broker, through the
controller (:class:`ControllerTopicAdmin`, as the admin handlers call it): every error code and
message as Kafka's controller gives them.

What only several brokers exercise (placement, fenced brokers, one batch per request, replay) is in
test_topic_admin.py and test_topic_rules.py.
"""

from __future__ import annotations

import pytest

from metadata import topic_names
from metadata.topics import PartitionState
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import ZERO_UUID
from tests.broker.local_topics import LocalTopics

NODE = 1


@pytest.fixture
def store() -> LocalTopics:
    return LocalTopics(NODE, default_num_partitions=3, default_replication_factor=1)


def expect_error(code: ErrorCode, call, *args, **kwargs) -> KafkaError:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as info:
        call(*args, **kwargs)
    assert info.value.code is code, info.value
    return info.value


# -- creation --------------------------------------------------------------------------------------


def test_created_topic_is_led_by_this_node_at_epoch_zero(store: LocalTopics) -> None:
    topic = store.create_topic("orders", 2, 1, {})
    assert topic.name == "orders"
    assert topic.topic_id != ZERO_UUID
    assert sorted(topic.partitions) == [0, 1]
    for index, partition in topic.partitions.items():
        assert partition == PartitionState(index, NODE, 0, 0, [NODE], [NODE])
    assert store.get("orders") is topic
    assert store.get_by_id(topic.topic_id) is topic
    assert store.all() == [topic]
    assert topic.replication_factor == 1


def test_topic_ids_are_random_and_distinct(store: LocalTopics) -> None:
    ids = {store.create_topic(f"t{i}", 1, 1, {}).topic_id for i in range(20)}
    assert len(ids) == 20
    assert ZERO_UUID not in ids


def test_all_lists_topics_by_name(store: LocalTopics) -> None:
    for name in ("b", "c", "a"):
        store.create_topic(name, 1, 1, {})
    assert [t.name for t in store.all()] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is illegal, it can't be empty"),
        (".", 'Topic name cannot be "." or ".."'),
        ("..", 'Topic name cannot be "." or ".."'),
        ("a" * 250, "can't be longer than 249 characters"),
        ("bad name", "contains a character other than ASCII alphanumerics"),
        ("bad/name", "contains a character other than ASCII alphanumerics"),
        ("caf\u00e9", "contains a character other than ASCII alphanumerics"),
    ],
)
def test_illegal_names_are_invalid_topic_exception(store: LocalTopics, name: str, message: str) -> None:
    error = expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, store.create_topic, name, 1, 1, {})
    assert message in error.message
    assert store.all() == []


def test_longest_legal_name_is_accepted(store: LocalTopics) -> None:
    name = "x" * topic_names.MAX_NAME_LENGTH
    assert store.create_topic(name, 1, 1, {}).name == name


def test_existing_name_is_topic_already_exists(store: LocalTopics) -> None:
    store.create_topic("a.b", 1, 1, {})
    error = expect_error(ErrorCode.TOPIC_ALREADY_EXISTS, store.create_topic, "a.b", 1, 1, {})
    assert error.message == "Topic 'a.b' already exists."


def test_collision_is_forgotten_once_the_topic_is_deleted(store: LocalTopics) -> None:
    store.create_topic("a_b", 1, 1, {})
    store.delete_topic("a_b")
    assert store.create_topic("a.b", 1, 1, {}).name == "a.b"


def test_cluster_metadata_topic_cannot_be_created(store: LocalTopics) -> None:
    error = expect_error(ErrorCode.INVALID_REQUEST, store.create_topic, "__cluster_metadata", 1, 1, {})
    assert "prohibited" in error.message


def test_internal_topics_can_be_created_and_are_internal(store: LocalTopics) -> None:
    assert store.create_topic("__consumer_offsets", 1, 1, {}).is_internal
    assert not store.create_topic("plain", 1, 1, {}).is_internal


def test_default_replication_factor_above_the_broker_count() -> None:
    store = LocalTopics(NODE, default_replication_factor=3)
    expect_error(ErrorCode.INVALID_REPLICATION_FACTOR, store.create_topic, "t", 1, -1, {})


@pytest.mark.parametrize("factor", [0, -2])
def test_non_positive_replication_factor(store: LocalTopics, factor: int) -> None:
    error = expect_error(ErrorCode.INVALID_REPLICATION_FACTOR, store.create_topic, "t", 1, factor, {})
    assert error.message == "Replication factor must be larger than 0, or -1 to use the default value."


@pytest.mark.parametrize("count", [0, -2])
def test_non_positive_partition_count(store: LocalTopics, count: int) -> None:
    error = expect_error(ErrorCode.INVALID_PARTITIONS, store.create_topic, "t", count, 1, {})
    assert error.message == "Number of partitions was set to an invalid non-positive value."


def test_too_many_partitions_is_a_policy_violation(store: LocalTopics) -> None:
    expect_error(ErrorCode.POLICY_VIOLATION, store.create_topic, "t", 10_001, 1, {})


def test_configs_are_validated_and_kept(store: LocalTopics) -> None:
    topic = store.create_topic("t", 1, 1, {"retention.ms": " 1000 ", "cleanup.policy": "delete"})
    assert topic.configs == {"retention.ms": "1000", "cleanup.policy": "delete"}


@pytest.mark.parametrize(
    "configs",
    [{"no.such.key": "1"}, {"retention.ms": "soon"}, {"segment.bytes": "1"}, {"retention.ms": None}],
)
def test_bad_configs_are_invalid_config(store: LocalTopics, configs: dict[str, str | None]) -> None:
    expect_error(ErrorCode.INVALID_CONFIG, store.create_topic, "t", 1, 1, configs)
    assert store.get("t") is None


def test_null_config_message_names_the_keys(store: LocalTopics) -> None:
    error = expect_error(ErrorCode.INVALID_CONFIG, store.create_topic, "t", 1, 1, {"a": None, "b": None})
    assert error.message == "Null value not supported for topic configs: a,b"


def test_manual_assignment_on_this_node(store: LocalTopics) -> None:
    topic = store.create_topic("t", -1, -1, {}, assignments=[(1, [NODE]), (0, [NODE])])
    assert sorted(topic.partitions) == [0, 1]
    assert topic.partitions[1].leader_id == NODE


@pytest.mark.parametrize(
    ("count", "factor", "assignments", "code", "message"),
    [
        (-1, 1, [(0, [NODE])], ErrorCode.INVALID_REQUEST, "replication factor was not set to -1"),
        (1, -1, [(0, [NODE])], ErrorCode.INVALID_REQUEST, "numPartitions was not set to -1"),
        (-1, -1, [(0, [NODE]), (0, [NODE])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "multiple manual"),
        (-1, -1, [(0, [])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "empty replica list"),
        (-1, -1, [(0, [2])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 2, but no such broker"),
        (-1, -1, [(0, [NODE, NODE])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "more than once"),
        (-1, -1, [(0, [NODE]), (2, [NODE])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "consecutive 0-based"),
    ],
)
def test_bad_manual_assignments(
    store: LocalTopics,
    count: int,
    factor: int,
    assignments: list[tuple[int, list[int]]],
    code: ErrorCode,
    message: str,
) -> None:
    error = expect_error(code, store.create_topic, "t", count, factor, {}, assignments=assignments)
    assert message in error.message


def test_validate_only_still_validates(store: LocalTopics) -> None:
    store.create_topic("t", 1, 1, {})
    expect_error(ErrorCode.TOPIC_ALREADY_EXISTS, store.create_topic, "t", 1, 1, {}, validate_only=True)


# -- deletion --------------------------------------------------------------------------------------


def test_delete_removes_the_topic(store: LocalTopics) -> None:
    created = store.create_topic("t", 2, 1, {})
    assert store.delete_topic("t") is created
    assert store.get("t") is None
    assert store.get_by_id(created.topic_id) is None
    assert store.all() == []


def test_delete_unknown_topic(store: LocalTopics) -> None:
    expect_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, store.delete_topic, "missing")


# -- partitions ------------------------------------------------------------------------------------


def test_create_partitions_adds_the_missing_ones(store: LocalTopics) -> None:
    store.create_topic("t", 2, 1, {})
    added = store.create_partitions("t", 5)
    assert [p.partition for p in added] == [2, 3, 4]
    assert all(p.leader_id == NODE and p.leader_epoch == 0 and p.isr == [NODE] for p in added)
    assert sorted(store.get("t").partitions) == [0, 1, 2, 3, 4]  # type: ignore[union-attr]


def test_create_partitions_must_increase(store: LocalTopics) -> None:
    store.create_topic("t", 3, 1, {})
    error = expect_error(ErrorCode.INVALID_PARTITIONS, store.create_partitions, "t", 2)
    assert error.message == "The topic t currently has 3 partition(s); 2 would not be an increase."
    error = expect_error(ErrorCode.INVALID_PARTITIONS, store.create_partitions, "t", 3)
    assert error.message == "Topic already has 3 partition(s)."


def test_create_partitions_with_assignments(store: LocalTopics) -> None:
    store.create_topic("t", 1, 1, {})
    assert [p.partition for p in store.create_partitions("t", 3, assignments=[[NODE], [NODE]])] == [1, 2]
    error = expect_error(
        ErrorCode.INVALID_REPLICA_ASSIGNMENT, store.create_partitions, "t", 5, assignments=[[NODE]]
    )
    assert (
        error.message
        == "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
    )
    expect_error(ErrorCode.INVALID_REPLICA_ASSIGNMENT, store.create_partitions, "t", 4, assignments=[[7]])


def test_create_partitions_too_many(store: LocalTopics) -> None:
    store.create_topic("t", 1, 1, {})
    expect_error(ErrorCode.POLICY_VIOLATION, store.create_partitions, "t", 10_002)


# -- names -----------------------------------------------------------------------------------------


def test_name_helpers() -> None:
    assert topic_names.is_internal("__consumer_offsets")
    assert topic_names.is_internal("__transaction_state")
    assert not topic_names.is_internal("__other")
    assert topic_names.has_collision("a.b_c", "a_b.c")
    assert not topic_names.has_collision("a-b", "a_b")
    assert topic_names.is_valid("Az09._-")
    assert not topic_names.is_valid(None)
