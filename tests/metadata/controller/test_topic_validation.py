"""TopicStore: creation, deletion and partition growth as Kafka's controller validates them,
persistence across restarts, and listeners told only once a change is on disk."""

from __future__ import annotations

import json
import pathlib
import uuid

import pytest

from broker.topics import METADATA_FILE_NAME, TopicMetadataError, TopicStore
from metadata import topic_names
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import ZERO_UUID

NODE = 1


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / METADATA_FILE_NAME


@pytest.fixture
def store(path: pathlib.Path) -> TopicStore:
    return TopicStore(path, NODE, default_num_partitions=3, default_replication_factor=1)


def expect_error(code: ErrorCode, call, *args, **kwargs) -> KafkaError:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as info:
        call(*args, **kwargs)
    assert info.value.code is code, info.value
    return info.value


class Recorder:
    """A listener that records events and what the metadata file held when each arrived."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.events: list[tuple[str, str, object]] = []
        self.on_disk: list[list[str]] = []

    def _seen(self) -> None:
        self.on_disk.append([t["name"] for t in json.loads(self.path.read_text())["topics"]])

    def on_topic_created(self, topic: TopicState) -> None:
        self._seen()
        self.events.append(("created", topic.name, len(topic.partitions)))

    def on_topic_deleted(self, topic: TopicState) -> None:
        self._seen()
        self.events.append(("deleted", topic.name, None))

    def on_partitions_created(self, topic: TopicState, partitions: list[PartitionState]) -> None:
        self._seen()
        self.events.append(("partitions", topic.name, [p.partition for p in partitions]))


# -- creation --------------------------------------------------------------------------------------


def test_created_topic_is_led_by_this_node_at_epoch_zero(store: TopicStore) -> None:
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


def test_minus_one_takes_the_broker_defaults(store: TopicStore) -> None:
    topic = store.create_topic("defaults", -1, -1, {})
    assert len(topic.partitions) == 3
    assert topic.replication_factor == 1


def test_topic_ids_are_random_and_distinct(store: TopicStore) -> None:
    ids = {store.create_topic(f"t{i}", 1, 1, {}).topic_id for i in range(20)}
    assert len(ids) == 20
    assert ZERO_UUID not in ids


def test_all_lists_topics_by_name(store: TopicStore) -> None:
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
def test_illegal_names_are_invalid_topic_exception(store: TopicStore, name: str, message: str) -> None:
    error = expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, store.create_topic, name, 1, 1, {})
    assert message in error.message
    assert store.all() == []


def test_longest_legal_name_is_accepted(store: TopicStore) -> None:
    name = "x" * topic_names.MAX_NAME_LENGTH
    assert store.create_topic(name, 1, 1, {}).name == name


def test_existing_name_is_topic_already_exists(store: TopicStore) -> None:
    store.create_topic("a.b", 1, 1, {})
    error = expect_error(ErrorCode.TOPIC_ALREADY_EXISTS, store.create_topic, "a.b", 1, 1, {})
    assert error.message == "Topic 'a.b' already exists."


def test_dot_underscore_collision_is_invalid_topic(store: TopicStore) -> None:
    store.create_topic("metrics.cpu", 1, 1, {})
    error = expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, store.create_topic, "metrics_cpu", 1, 1, {})
    assert error.message == "Topic 'metrics_cpu' collides with existing topic: metrics.cpu"


def test_collision_is_forgotten_once_the_topic_is_deleted(store: TopicStore) -> None:
    store.create_topic("a_b", 1, 1, {})
    store.delete_topic("a_b")
    assert store.create_topic("a.b", 1, 1, {}).name == "a.b"


def test_cluster_metadata_topic_cannot_be_created(store: TopicStore) -> None:
    error = expect_error(ErrorCode.INVALID_REQUEST, store.create_topic, "__cluster_metadata", 1, 1, {})
    assert "prohibited" in error.message


def test_internal_topics_can_be_created_and_are_internal(store: TopicStore) -> None:
    assert store.create_topic("__consumer_offsets", 1, 1, {}).is_internal
    assert not store.create_topic("plain", 1, 1, {}).is_internal


def test_replication_factor_above_the_broker_count(store: TopicStore) -> None:
    error = expect_error(ErrorCode.INVALID_REPLICATION_FACTOR, store.create_topic, "t", 1, 3, {})
    assert error.message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
        "reached because only 1 broker(s) are registered."
    )


def test_default_replication_factor_above_the_broker_count(path: pathlib.Path) -> None:
    store = TopicStore(path, NODE, default_replication_factor=3)
    expect_error(ErrorCode.INVALID_REPLICATION_FACTOR, store.create_topic, "t", 1, -1, {})


@pytest.mark.parametrize("factor", [0, -2])
def test_non_positive_replication_factor(store: TopicStore, factor: int) -> None:
    error = expect_error(ErrorCode.INVALID_REPLICATION_FACTOR, store.create_topic, "t", 1, factor, {})
    assert error.message == "Replication factor must be larger than 0, or -1 to use the default value."


@pytest.mark.parametrize("count", [0, -2])
def test_non_positive_partition_count(store: TopicStore, count: int) -> None:
    error = expect_error(ErrorCode.INVALID_PARTITIONS, store.create_topic, "t", count, 1, {})
    assert error.message == "Number of partitions was set to an invalid non-positive value."


def test_too_many_partitions_is_a_policy_violation(store: TopicStore) -> None:
    expect_error(ErrorCode.POLICY_VIOLATION, store.create_topic, "t", 10_001, 1, {})


def test_configs_are_validated_and_kept(store: TopicStore) -> None:
    topic = store.create_topic("t", 1, 1, {"retention.ms": " 1000 ", "cleanup.policy": "delete"})
    assert topic.configs == {"retention.ms": "1000", "cleanup.policy": "delete"}


@pytest.mark.parametrize(
    "configs",
    [{"no.such.key": "1"}, {"retention.ms": "soon"}, {"segment.bytes": "1"}, {"retention.ms": None}],
)
def test_bad_configs_are_invalid_config(store: TopicStore, configs: dict[str, str | None]) -> None:
    expect_error(ErrorCode.INVALID_CONFIG, store.create_topic, "t", 1, 1, configs)
    assert store.get("t") is None


def test_null_config_message_names_the_keys(store: TopicStore) -> None:
    error = expect_error(ErrorCode.INVALID_CONFIG, store.create_topic, "t", 1, 1, {"a": None, "b": None})
    assert error.message == "Null value not supported for topic configs: a,b"


def test_manual_assignment_on_this_node(store: TopicStore) -> None:
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
    store: TopicStore,
    count: int,
    factor: int,
    assignments: list[tuple[int, list[int]]],
    code: ErrorCode,
    message: str,
) -> None:
    error = expect_error(code, store.create_topic, "t", count, factor, {}, assignments=assignments)
    assert message in error.message


def test_validate_only_changes_nothing(store: TopicStore, path: pathlib.Path) -> None:
    recorder = Recorder(path)
    store.subscribe(recorder)
    topic = store.create_topic("t", 4, 1, {"retention.ms": "5"}, validate_only=True)
    assert len(topic.partitions) == 4
    assert store.get("t") is None
    assert not path.exists()
    assert recorder.events == []


def test_validate_only_still_validates(store: TopicStore) -> None:
    store.create_topic("t", 1, 1, {})
    expect_error(ErrorCode.TOPIC_ALREADY_EXISTS, store.create_topic, "t", 1, 1, {}, validate_only=True)


# -- deletion --------------------------------------------------------------------------------------


def test_delete_removes_the_topic(store: TopicStore) -> None:
    created = store.create_topic("t", 2, 1, {})
    assert store.delete_topic("t") is created
    assert store.get("t") is None
    assert store.get_by_id(created.topic_id) is None
    assert store.all() == []


def test_delete_unknown_topic(store: TopicStore) -> None:
    expect_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, store.delete_topic, "missing")


def test_recreated_topic_gets_a_new_id(store: TopicStore) -> None:
    first = store.create_topic("t", 1, 1, {})
    store.delete_topic("t")
    assert store.create_topic("t", 1, 1, {}).topic_id != first.topic_id


# -- partitions ------------------------------------------------------------------------------------


def test_create_partitions_adds_the_missing_ones(store: TopicStore) -> None:
    topic = store.create_topic("t", 2, 1, {})
    added = store.create_partitions("t", 5)
    assert [p.partition for p in added] == [2, 3, 4]
    assert all(p.leader_id == NODE and p.leader_epoch == 0 and p.isr == [NODE] for p in added)
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4]


def test_create_partitions_must_increase(store: TopicStore) -> None:
    store.create_topic("t", 3, 1, {})
    error = expect_error(ErrorCode.INVALID_PARTITIONS, store.create_partitions, "t", 2)
    assert error.message == "The topic t currently has 3 partition(s); 2 would not be an increase."
    error = expect_error(ErrorCode.INVALID_PARTITIONS, store.create_partitions, "t", 3)
    assert error.message == "Topic already has 3 partition(s)."


def test_create_partitions_of_unknown_topic(store: TopicStore) -> None:
    expect_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, store.create_partitions, "missing", 3)


def test_create_partitions_with_assignments(store: TopicStore) -> None:
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


def test_create_partitions_validate_only(store: TopicStore, path: pathlib.Path) -> None:
    topic = store.create_topic("t", 1, 1, {})
    before = path.read_text()
    assert len(store.create_partitions("t", 4, validate_only=True)) == 3
    assert len(topic.partitions) == 1
    assert path.read_text() == before


def test_create_partitions_too_many(store: TopicStore) -> None:
    store.create_topic("t", 1, 1, {})
    expect_error(ErrorCode.POLICY_VIOLATION, store.create_partitions, "t", 10_002)


# -- persistence -----------------------------------------------------------------------------------


def test_state_survives_a_restart(store: TopicStore, path: pathlib.Path) -> None:
    kept = store.create_topic("kept", 2, 1, {"retention.ms": "1000"})
    store.create_partitions("kept", 4)
    store.create_topic("gone", 1, 1, {})
    store.delete_topic("gone")
    reloaded = TopicStore(path, NODE)
    assert [t.name for t in reloaded.all()] == ["kept"]
    again = reloaded.get("kept")
    assert again == kept
    assert reloaded.get_by_id(kept.topic_id) == kept
    assert not path.with_name(path.name + ".tmp").exists()


def test_collisions_are_known_after_a_restart(store: TopicStore, path: pathlib.Path) -> None:
    store.create_topic("a.b", 1, 1, {})
    expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, TopicStore(path, NODE).create_topic, "a_b", 1, 1, {})


def test_metadata_of_another_node_is_refused(store: TopicStore, path: pathlib.Path) -> None:
    store.create_topic("t", 1, 1, {})
    with pytest.raises(TopicMetadataError, match="node 1"):
        TopicStore(path, 2)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"version": 1}',
        '{"version": 99, "node_id": 1, "topics": []}',
        '{"version": 1, "node_id": 1, "topics": [{"name": "t"}]}',
    ],
)
def test_corrupt_metadata_is_refused(path: pathlib.Path, text: str) -> None:
    path.write_text(text)
    with pytest.raises(TopicMetadataError):
        TopicStore(path, NODE)


def test_duplicate_topics_in_the_file_are_refused(store: TopicStore, path: pathlib.Path) -> None:
    store.create_topic("t", 1, 1, {})
    document = json.loads(path.read_text())
    twin = dict(document["topics"][0], topic_id=str(uuid.uuid4()))
    document["topics"].append(twin)
    path.write_text(json.dumps(document))
    with pytest.raises(TopicMetadataError):
        TopicStore(path, NODE)


def test_a_failed_write_changes_nothing(tmp_path: pathlib.Path) -> None:
    store = TopicStore(tmp_path / "missing-dir" / METADATA_FILE_NAME, NODE)
    recorder = Recorder(tmp_path / "unused")
    store.subscribe(recorder)
    error = expect_error(ErrorCode.UNKNOWN_SERVER_ERROR, store.create_topic, "t", 1, 1, {})
    assert "persist" in error.message
    assert store.get("t") is None
    assert recorder.events == []


# -- listeners -------------------------------------------------------------------------------------


def test_listeners_hear_each_change_after_it_is_on_disk(store: TopicStore, path: pathlib.Path) -> None:
    recorder = Recorder(path)
    store.subscribe(recorder)
    store.create_topic("t", 2, 1, {})
    store.create_partitions("t", 3)
    store.delete_topic("t")
    assert recorder.events == [("created", "t", 2), ("partitions", "t", [2]), ("deleted", "t", None)]
    assert recorder.on_disk == [["t"], ["t"], []]


def test_a_failing_listener_does_not_undo_the_change(store: TopicStore, path: pathlib.Path) -> None:
    class Broken:
        def on_topic_created(self, topic: TopicState) -> None:
            raise RuntimeError("disk full")

    recorder = Recorder(path)
    store.subscribe(Broken())  # type: ignore[arg-type]
    store.subscribe(recorder)
    store.create_topic("t", 1, 1, {})
    assert store.get("t") is not None
    assert recorder.events == [("created", "t", 1)]


# -- names -----------------------------------------------------------------------------------------


def test_name_helpers() -> None:
    assert topic_names.is_internal("__consumer_offsets")
    assert topic_names.is_internal("__transaction_state")
    assert not topic_names.is_internal("__other")
    assert topic_names.has_collision("a.b_c", "a_b.c")
    assert not topic_names.has_collision("a-b", "a_b")
    assert topic_names.is_valid("Az09._-")
    assert not topic_names.is_valid(None)
