"""OffsetCommit, OffsetFetch and offset expiry (KIP-211, KIP-496) against an in-memory log."""

from __future__ import annotations

import pytest

from coordinator.group import GroupState, MemberIdentity, PartitionOffset
from protocol.consumer_offsets import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_key,
    decode_offset_commit_value,
)
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import SESSION_MS, Harness, config, consumer_protocols

E = ErrorCode
T0 = ("topic", 0)
RETENTION_MS = 10080 * 60_000


def offset_records(h: Harness) -> list[tuple[OffsetCommitKey, bytes | None]]:
    keyed = [(decode_key(r.key), r.value) for r in h.log.records(0)]
    return [(key, value) for key, value in keyed if isinstance(key, OffsetCommitKey)]


def keep_alive(h: Harness, member_id: str, duration_ms: int, generation: int = 1) -> None:
    for _ in range(duration_ms // 5000):
        h.advance(5000)
        assert h.heartbeat("group", member_id, generation) is E.NONE


# -- OffsetCommit ---------------------------------------------------------------------------------


def test_a_consumer_without_group_management_commits_to_a_new_group() -> None:
    h = Harness()
    assert h.commit("manual", {T0: 42, ("topic", 1): 7}, metadata="meta").value == {
        T0: E.NONE,
        ("topic", 1): E.NONE,
    }
    group = h.coordinator.group("manual")
    assert group.state is GroupState.EMPTY and group.protocol_type is None and group.generation_id == 0
    fetched = h.coordinator.fetch_offsets("manual", [T0])
    assert fetched.partitions == {T0: PartitionOffset(42, 7, "meta", E.NONE)}
    (key, value), _ = offset_records(h)
    assert key == OffsetCommitKey("manual", "topic", 0)
    stored = decode_offset_commit_value(value)
    assert stored.version == 3 and stored.data.commit_timestamp == h.now and stored.data.leader_epoch == 7


def test_null_metadata_is_stored_as_empty() -> None:
    h = Harness()
    h.commit("manual")
    assert h.coordinator.fetch_offsets("manual", [T0]).partitions[T0].metadata == ""


def test_a_commit_with_a_generation_for_a_missing_group_is_illegal() -> None:
    h = Harness()
    assert h.commit("missing", generation=3, member_id="m").value == {T0: E.ILLEGAL_GENERATION}
    assert h.coordinator.group("missing") is None


def test_only_members_commit_to_a_group_with_members() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.commit().value == {T0: E.UNKNOWN_MEMBER_ID}


def test_members_commit_with_their_generation() -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    assert h.commit(member_id=leader.member_id, generation=1).value == {T0: E.NONE}
    assert h.commit(member_id=leader.member_id, generation=0).value == {T0: E.ILLEGAL_GENERATION}
    assert h.commit(member_id="ghost", generation=1).value == {T0: E.UNKNOWN_MEMBER_ID}


def test_a_commit_is_a_sign_of_life() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    for _ in range(5):
        h.advance(SESSION_MS - 1)
        assert h.commit(member_id=member.member_id, generation=1).value == {T0: E.NONE}
    assert h.coordinator.group("group").has(member.member_id)


def test_the_previous_generation_may_commit_while_a_rebalance_prepares() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.join(member_id=leader.member_id)
    assert h.commit(member_id=follower.member_id, generation=1).value == {T0: E.NONE}


def test_commits_wait_while_completing_rebalance() -> None:
    h = Harness()
    replies = [h.join_new(), h.join_new()]
    h.settle()
    reply = h.commit(member_id=replies[0].value.member_id, generation=1)
    assert reply.value == {T0: E.REBALANCE_IN_PROGRESS}


def test_oversized_metadata_is_refused_per_partition() -> None:
    h = Harness(config(offset_metadata_max_bytes=4))
    assert h.commit("g", {T0: 1}, metadata="12345").value == {T0: E.OFFSET_METADATA_TOO_LARGE}
    assert h.log.records(0) == []
    assert h.commit("g", {T0: 1}, metadata="1234").value == {T0: E.NONE}


def test_metadata_length_counts_utf16_units_like_java() -> None:
    h = Harness(config(offset_metadata_max_bytes=2))
    assert h.commit("g", {T0: 1}, metadata="é\U0001f600"[1:]).value == {T0: E.NONE}  # one surrogate pair
    assert h.commit("g", {T0: 1}, metadata="é\U0001f600").value == {T0: E.OFFSET_METADATA_TOO_LARGE}


def test_a_commit_with_a_retention_time_is_written_with_an_expire_timestamp() -> None:
    h = Harness()
    h.commit("g", retention_ms=5000)
    ((_, value),) = offset_records(h)
    stored = decode_offset_commit_value(value)
    assert stored.version == 1 and stored.data.expire_timestamp == h.now + 5000


@pytest.mark.parametrize(
    ("log_error", "answered"),
    [
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
        (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
        (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
        (E.RECORD_LIST_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
        (E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS),
        (E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT),
    ],
)
def test_a_failed_write_keeps_the_previous_offset(log_error: ErrorCode, answered: ErrorCode) -> None:
    h = Harness()
    h.commit("g", {T0: 1})
    h.log.fail_with = log_error
    assert h.commit("g", {T0: 2}).value == {T0: answered}
    assert h.coordinator.fetch_offsets("g", [T0]).partitions[T0].offset == 1
    assert not h.coordinator.group("g").offsets.pending


def test_offsets_in_flight_are_invisible_until_written() -> None:
    h = Harness(defer_log=True)
    reply = h.commit("g", {T0: 5})
    assert not reply.done
    assert h.coordinator.fetch_offsets("g", [T0]).partitions[T0] == PartitionOffset()
    stable = h.coordinator.fetch_offsets("g", [T0], require_stable=True)
    assert stable.partitions[T0].error is E.UNSTABLE_OFFSET_COMMIT
    h.log.complete_next()
    assert reply.value == {T0: E.NONE}
    assert h.coordinator.fetch_offsets("g", [T0], require_stable=True).partitions[T0].offset == 5


def test_of_two_commits_in_flight_the_later_record_wins() -> None:
    h = Harness(defer_log=True)
    h.commit("g", {T0: 5})
    h.commit("g", {T0: 6})
    h.log.complete_all()
    assert h.coordinator.fetch_offsets("g", [T0]).partitions[T0].offset == 6
    assert not h.coordinator.group("g").offsets.pending


def test_a_commit_answered_after_the_group_moved_away_keeps_nothing() -> None:
    h = Harness(defer_log=True)
    reply = h.commit("g", {T0: 5})
    h.coordinator.unload_partition(0)
    h.log.complete_next()
    assert reply.value == {T0: E.NONE}  # written: the next coordinator will load it
    assert h.coordinator.group("g") is None


# -- OffsetFetch ----------------------------------------------------------------------------------


def test_fetch_all_or_some_partitions() -> None:
    h = Harness()
    h.commit("g", {T0: 1, ("topic", 1): 2, ("other", 0): 3})
    everything = h.coordinator.fetch_offsets("g", None)
    assert {tp: p.offset for tp, p in everything.partitions.items()} == {
        T0: 1,
        ("topic", 1): 2,
        ("other", 0): 3,
    }
    some = h.coordinator.fetch_offsets("g", [("topic", 1), ("topic", 9)])
    assert some.partitions == {("topic", 1): PartitionOffset(2, 7, ""), ("topic", 9): PartitionOffset()}


def test_fetch_for_a_missing_group_answers_no_offsets() -> None:
    h = Harness()
    assert h.coordinator.fetch_offsets("nobody", None).partitions == {}
    missing = h.coordinator.fetch_offsets("nobody", [T0])
    assert missing.error is E.NONE and missing.partitions == {T0: PartitionOffset(-1, -1, "", E.NONE)}


def test_fetch_several_groups_at_once() -> None:
    h = Harness()
    h.commit("a", {T0: 1})
    h.commit("b", {T0: 2})
    results = h.coordinator.fetch_offsets_of_groups([("a", None), ("b", [T0]), ("", None)])
    assert [(r.group_id, r.error) for r in results] == [("a", E.NONE), ("b", E.NONE), ("", E.NONE)]
    assert results[1].partitions[T0].offset == 2


def test_the_empty_group_id_is_valid_for_offsets() -> None:
    h = Harness()
    assert h.commit("").value == {T0: E.NONE}
    assert h.coordinator.fetch_offsets("", [T0]).partitions[T0].offset == 42


def test_offsets_of_a_stable_group_are_fetched_too() -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    h.commit(member_id=leader.member_id, generation=1, offsets={T0: 99})
    assert h.coordinator.fetch_offsets("group", [T0]).partitions[T0].offset == 99


# -- expiry ---------------------------------------------------------------------------------------


def test_offsets_of_an_empty_group_expire_a_retention_after_it_became_empty() -> None:
    h = Harness(config(offsets_retention_minutes=1))
    (member,) = h.stable_group(1)
    h.commit(member_id=member.member_id, generation=1)
    keep_alive(h, member.member_id, 30_000)  # the commit ages while the group still has a member
    h.coordinator.leave_group("group", [MemberIdentity(member.member_id)])
    became_empty = h.now
    h.advance(60_000 - 1)
    assert h.coordinator.expire_offsets() == 0
    h.advance(1)
    assert h.now - became_empty == 60_000
    assert h.coordinator.expire_offsets() == 1
    assert h.coordinator.group("group") is None  # Empty without offsets: gone
    tail = [(decode_key(r.key), r.value) for r in h.log.records(0)[-2:]]
    assert tail == [(OffsetCommitKey("group", "topic", 0), None), (GroupMetadataKey("group"), None)]


def test_offsets_of_a_group_without_members_expire_a_retention_after_the_commit() -> None:
    h = Harness()
    h.commit("manual", {T0: 1})
    h.advance(1000)
    h.commit("manual", {("topic", 1): 2})
    h.advance(RETENTION_MS - 1000)
    assert h.coordinator.expire_offsets() == 1
    assert h.coordinator.fetch_offsets("manual", None).partitions.keys() == {("topic", 1)}
    h.advance(1000)
    assert h.coordinator.expire_offsets() == 1
    assert h.coordinator.group("manual") is None
    # Generation 0: no metadata record was ever written, so no group tombstone either.
    assert [decode_key(r.key) for r in h.log.records(0) if r.value is None] == [
        OffsetCommitKey("manual", "topic", 0),
        OffsetCommitKey("manual", "topic", 1),
    ]


def test_a_stable_consumer_group_keeps_offsets_of_subscribed_topics_only() -> None:
    h = Harness(config(offsets_retention_minutes=1))
    (member,) = h.stable_group(1, protocols=consumer_protocols("topic"))
    h.commit(member_id=member.member_id, generation=1, offsets={T0: 1, ("dropped", 0): 2})
    keep_alive(h, member.member_id, 60_000)
    assert h.coordinator.expire_offsets() == 1
    assert h.coordinator.fetch_offsets("group", None).partitions.keys() == {T0}
    assert h.coordinator.group("group").state is GroupState.STABLE


def test_a_group_with_unknown_subscriptions_keeps_its_offsets() -> None:
    h = Harness(config(offsets_retention_minutes=1))
    (member,) = h.stable_group(1, protocol_type="connect")
    h.commit(member_id=member.member_id, generation=1, offsets={("dropped", 0): 2})
    keep_alive(h, member.member_id, 60_000)
    assert h.coordinator.expire_offsets() == 0


def test_an_expire_timestamp_takes_precedence() -> None:
    h = Harness()
    h.commit("manual", retention_ms=1000)
    h.advance(999)
    assert h.coordinator.expire_offsets() == 0
    h.advance(1)
    assert h.coordinator.expire_offsets() == 1


def test_offsets_being_written_do_not_expire() -> None:
    h = Harness(defer_log=True)
    h.commit("manual", {T0: 1})
    h.log.complete_all()
    h.advance(RETENTION_MS)
    h.commit("manual", {T0: 2})  # in flight
    assert h.coordinator.expire_offsets() == 0
    assert h.coordinator.group("manual") is not None


def test_deleted_topics_lose_their_offsets() -> None:
    h = Harness()
    h.commit("a", {T0: 1, ("kept", 0): 1})
    h.commit("b", {T0: 2})
    assert h.coordinator.on_partitions_deleted([T0]) == 2
    assert h.coordinator.fetch_offsets("a", None).partitions.keys() == {("kept", 0)}
    assert h.coordinator.group("b") is None
