"""TxnOffsetCommit (KIP-98, KIP-447): offsets written in a transaction, visible only after its COMMIT."""

from __future__ import annotations

from coordinator.group import OffsetCommitRequest, PartitionCommit, PartitionOffset, TxnOffsetCommitRequest
from coordinator.group.log import LoggedRecord, TxnProducer
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import Harness, Reply

E = ErrorCode
T0 = ("topic", 0)
T1 = ("topic", 1)
PRODUCER = TxnProducer(producer_id=4000, producer_epoch=2)


def txn_commit(
    h: Harness,
    offsets: dict[tuple[str, int], int],
    *,
    group_id: str = "group",
    producer: TxnProducer = PRODUCER,
    member_id: str = "",
    generation: int = -1,
) -> Reply[dict[tuple[str, int], ErrorCode]]:
    reply: Reply[dict[tuple[str, int], ErrorCode]] = Reply()
    partitions = tuple(PartitionCommit(t, p, offset) for (t, p), offset in offsets.items())
    commit = OffsetCommitRequest(group_id, partitions, member_id, generation)
    h.coordinator.commit_txn_offsets(
        TxnOffsetCommitRequest(commit, producer.producer_id, producer.producer_epoch), reply
    )
    return reply


def fetched(h: Harness, *partitions: tuple[str, int], stable: bool = False) -> dict[tuple[str, int], int]:
    result = h.coordinator.fetch_offsets("group", list(partitions), require_stable=stable)
    return {tp: (p.error if p.error is not E.NONE else p.offset) for tp, p in result.partitions.items()}


def test_transactional_offsets_wait_for_the_commit_marker() -> None:
    h = Harness()
    assert txn_commit(h, {T0: 10, T1: 20}).value == {T0: E.NONE, T1: E.NONE}
    assert fetched(h, T0, T1) == {T0: -1, T1: -1}
    assert fetched(h, T0, stable=True) == {T0: E.UNSTABLE_OFFSET_COMMIT}
    [record, _] = h.log.records(0)
    assert isinstance(record, LoggedRecord) and record.producer_id == PRODUCER.producer_id
    h.coordinator.on_transaction_completed(PRODUCER.producer_id, [0], commit=True)
    assert fetched(h, T0, T1, stable=True) == {T0: 10, T1: 20}


def test_an_abort_drops_the_transactional_offsets_and_keeps_the_old_ones() -> None:
    h = Harness()
    h.commit("group", {T0: 5})
    txn_commit(h, {T0: 10})
    h.coordinator.on_transaction_completed(PRODUCER.producer_id, [0], commit=False)
    assert fetched(h, T0, stable=True) == {T0: 5}
    assert not h.coordinator.group("group").offsets.pending_txn


def test_a_marker_for_another_partition_or_producer_changes_nothing() -> None:
    h = Harness()
    txn_commit(h, {T0: 10})
    h.coordinator.on_transaction_completed(PRODUCER.producer_id, [7], commit=True)
    h.coordinator.on_transaction_completed(99, [0], commit=True)
    assert fetched(h, T0, stable=True) == {T0: E.UNSTABLE_OFFSET_COMMIT}


def test_a_failed_write_leaves_nothing_to_commit() -> None:
    h = Harness()
    h.log.fail_with = E.NOT_ENOUGH_REPLICAS
    assert txn_commit(h, {T0: 10}).value == {T0: E.COORDINATOR_NOT_AVAILABLE}
    h.log.fail_with = None
    h.coordinator.on_transaction_completed(PRODUCER.producer_id, [0], commit=True)
    assert fetched(h, T0, stable=True) == {T0: -1}


def test_a_commit_without_generation_is_accepted_while_the_group_has_members() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.commit("group", {T0: 1}).value == {T0: E.UNKNOWN_MEMBER_ID}
    assert txn_commit(h, {T0: 1}).value == {T0: E.NONE}


def test_a_member_of_a_stale_generation_is_fenced() -> None:
    h = Harness()
    [member] = h.stable_group(1)
    stale = txn_commit(h, {T0: 1}, member_id=member.member_id, generation=member.generation_id + 1)
    assert stale.value == {T0: E.ILLEGAL_GENERATION}
    unknown = txn_commit(h, {T0: 1}, member_id="ghost", generation=member.generation_id)
    assert unknown.value == {T0: E.UNKNOWN_MEMBER_ID}
    ok = txn_commit(h, {T0: 1}, member_id=member.member_id, generation=member.generation_id)
    assert ok.value == {T0: E.NONE}


def test_loading_applies_markers_and_keeps_open_transactions_pending() -> None:
    h = Harness()
    h.commit("group", {T0: 1})
    txn_commit(h, {T0: 10})
    h.log.append_marker(0, PRODUCER.producer_id, commit=True)
    other = TxnProducer(5000, 0)
    txn_commit(h, {T1: 30}, producer=other)
    h.log.append_marker(0, other.producer_id, commit=False)
    third = TxnProducer(6000, 0)
    txn_commit(h, {T1: 60}, producer=third)  # still open when the partition is loaded

    h.coordinator.unload_partition(0)
    h.coordinator.load_partition(0, h.log.records(0))
    assert fetched(h, T0, T1) == {T0: 10, T1: -1}
    assert fetched(h, T1, stable=True) == {T1: E.UNSTABLE_OFFSET_COMMIT}
    h.coordinator.on_transaction_completed(third.producer_id, [0], commit=True)
    assert fetched(h, T1, stable=True) == {T1: 60}


def test_a_later_plain_commit_wins_over_an_earlier_transactional_one() -> None:
    h = Harness()
    txn_commit(h, {T0: 10})
    h.commit("group", {T0: 50})
    h.coordinator.on_transaction_completed(PRODUCER.producer_id, [0], commit=True)
    assert h.coordinator.fetch_offsets("group", [T0]).partitions[T0] == PartitionOffset(50, 7, "", E.NONE)


def test_a_marker_arriving_while_the_partition_loads_is_applied_after_the_load() -> None:
    h = Harness()
    txn_commit(h, {T0: 10})
    records = h.log.records(0)  # what the load read, before the marker
    h.coordinator.unload_partition(0)
    h.coordinator.begin_loading(0)
    h.log.append_marker(0, PRODUCER.producer_id, commit=True)
    h.coordinator.on_transaction_completed(PRODUCER.producer_id, [0], commit=True)
    h.coordinator.load_partition(0, records)
    assert fetched(h, T0, stable=True) == {T0: 10}
