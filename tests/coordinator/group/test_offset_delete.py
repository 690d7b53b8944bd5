"""OffsetDelete (KIP-496): which offsets a group may lose, the tombstones, and what a reload sees."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from coordinator.group import GroupState, LoggedRecord, MemberIdentity, OffsetDeleteResult
from coordinator.group.offsets import TopicPartition
from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey, decode_key
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import Harness, Reply, config, consumer_protocols
from tests.coordinator.group.test_txn_offsets import PRODUCER, txn_commit

pytestmark = pytest.mark.timeout(30)

E = ErrorCode
T0, T1, O0 = ("topic", 0), ("topic", 1), ("other", 0)


def delete_offsets(
    h: Harness, partitions: Sequence[TopicPartition], group_id: str = "group"
) -> OffsetDeleteResult:
    reply: Reply[OffsetDeleteResult] = Reply()
    h.coordinator.delete_offsets(group_id, partitions, reply)
    return reply.value


def committed(h: Harness, *partitions: TopicPartition, group_id: str = "group") -> dict[TopicPartition, int]:
    result = h.coordinator.fetch_offsets(group_id, list(partitions))
    return {tp: p.offset for tp, p in result.partitions.items()}


def tombstones(h: Harness) -> list[object]:
    return [decode_key(r.key) for r in h.log.records(0) if isinstance(r, LoggedRecord) and r.value is None]


def state(h: Harness, group_id: str = "group") -> GroupState | None:
    group = h.coordinator.group(group_id)
    return group.state if group is not None else None


def reload(h: Harness) -> Harness:
    """A new coordinator over the same log (the partition moved, or the broker restarted)."""
    fresh = Harness(h.config, load=False)
    fresh.log = h.log
    fresh.coordinator = fresh.new_coordinator()
    for partition in range(h.config.offsets_topic_num_partitions):
        fresh.coordinator.load_partition(partition, h.log.records(partition))
    return fresh


def test_an_empty_group_loses_the_named_offsets_and_keeps_the_others() -> None:
    h = Harness()
    h.commit("group", {T0: 10, T1: 11, O0: 12})
    result = delete_offsets(h, [T0, O0, T0])
    assert result == OffsetDeleteResult(E.NONE, {T0: E.NONE, O0: E.NONE})
    assert committed(h, T0, T1, O0) == {T0: -1, T1: 11, O0: -1}
    assert tombstones(h) == [OffsetCommitKey("group", "topic", 0), OffsetCommitKey("group", "other", 0)]
    again = reload(h)
    assert committed(again, T0, T1, O0) == {T0: -1, T1: 11, O0: -1}
    assert state(again) is GroupState.EMPTY


def test_a_partition_without_an_offset_is_answered_none_and_gets_no_tombstone() -> None:
    h = Harness()
    h.commit("group", {T0: 10})
    assert delete_offsets(h, [T1]) == OffsetDeleteResult(E.NONE, {T1: E.NONE})
    assert tombstones(h) == []
    assert committed(h, T0) == {T0: 10}


def test_deleting_the_last_offsets_of_an_empty_group_removes_the_group() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    h.commit(member_id=member.member_id, generation=1, offsets={T0: 1})
    h.coordinator.leave_group("group", [MemberIdentity(member.member_id)])
    assert delete_offsets(h, [T0]).error is E.NONE
    assert h.coordinator.group("group") is None
    assert tombstones(h) == [OffsetCommitKey("group", "topic", 0), GroupMetadataKey("group")]
    assert reload(h).coordinator.group("group") is None
    assert delete_offsets(h, [T0]) == OffsetDeleteResult(E.GROUP_ID_NOT_FOUND)


def test_a_consumer_group_keeps_the_offsets_of_topics_it_subscribes_to() -> None:
    h = Harness()
    (member,) = h.stable_group(1, protocols=consumer_protocols("topic"))
    h.commit(member_id=member.member_id, generation=1, offsets={T0: 1, T1: 2, O0: 3})
    result = delete_offsets(h, [T0, O0])
    assert result == OffsetDeleteResult(E.NONE, {T0: E.GROUP_SUBSCRIBED_TO_TOPIC, O0: E.NONE})
    assert committed(h, T0, T1, O0) == {T0: 1, T1: 2, O0: -1}
    assert tombstones(h) == [OffsetCommitKey("group", "other", 0)]
    assert state(h) is GroupState.STABLE


def test_a_rebalancing_consumer_group_with_unknown_subscriptions_keeps_everything() -> None:
    """A new group's first rebalance has no generation yet, so no subscriptions: nothing is deleted
    on a guess (Kafka's isSubscribedToTopic answers true when they are unknown)."""
    h = Harness(config(group_initial_rebalance_delay_ms=3000))
    h.join_new("group")
    assert state(h) is GroupState.PREPARING_REBALANCE
    result = delete_offsets(h, [O0])
    assert result == OffsetDeleteResult(E.NONE, {O0: E.GROUP_SUBSCRIBED_TO_TOPIC})


def test_a_group_with_members_that_is_not_a_consumer_group_is_refused() -> None:
    h = Harness()
    (member,) = h.stable_group(1, protocol_type="connect")
    h.commit(member_id=member.member_id, generation=1, offsets={O0: 3})
    assert delete_offsets(h, [O0]) == OffsetDeleteResult(E.NON_EMPTY_GROUP)
    assert delete_offsets(h, []) == OffsetDeleteResult(E.NON_EMPTY_GROUP)
    assert committed(h, O0) == {O0: 3}


def test_group_level_errors() -> None:
    h = Harness(config(offsets_topic_num_partitions=2), load=False)
    h.coordinator.load_partition(0, [])
    ours = next(g for g in (f"g{i}" for i in range(50)) if h.coordinator.partition_for(g) == 0)
    elsewhere = next(g for g in (f"g{i}" for i in range(50)) if h.coordinator.partition_for(g) == 1)
    assert delete_offsets(h, [T0], ours) == OffsetDeleteResult(E.GROUP_ID_NOT_FOUND)
    assert delete_offsets(h, [T0], "") == OffsetDeleteResult(E.INVALID_GROUP_ID)
    assert delete_offsets(h, [T0], elsewhere) == OffsetDeleteResult(E.NOT_COORDINATOR)
    h.coordinator.begin_loading(1)
    assert delete_offsets(h, [T0], elsewhere) == OffsetDeleteResult(E.COORDINATOR_LOAD_IN_PROGRESS)
    h.coordinator.shutdown()
    assert delete_offsets(h, [T0], ours) == OffsetDeleteResult(E.COORDINATOR_NOT_AVAILABLE)


def test_answered_once_the_tombstones_are_written() -> None:
    h = Harness(defer_log=True)
    h.commit("group", {T0: 10, T1: 11})
    h.log.complete_all()
    reply: Reply[OffsetDeleteResult] = Reply()
    h.coordinator.delete_offsets("group", [T0], reply)
    assert not reply.done
    assert committed(h, T0) == {T0: -1}  # gone at once, as Kafka's cache forgets it before the write
    h.log.complete_next()
    assert reply.value == OffsetDeleteResult(E.NONE, {T0: E.NONE})


def test_offsets_waiting_in_an_open_transaction_are_dropped_too() -> None:
    h = Harness()
    h.commit("group", {T0: 5})
    txn_commit(h, {T0: 10, T1: 20})
    assert delete_offsets(h, [T0]).error is E.NONE
    h.coordinator.on_transaction_completed(PRODUCER.producer_id, [0], commit=True)
    assert committed(h, T0, T1) == {T0: -1, T1: 20}
