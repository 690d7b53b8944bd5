"""Loading __transaction_state: the last record per id wins, tombstones remove, Prepare* completes."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.transaction import LoggedRecord, TransactionMetadata, TransactionState
from protocol import transaction_log as tl
from protocol.error_codes import ErrorCode
from protocol.errors import DecodeError
from tests.coordinator.transaction.helpers import TIMEOUT_MS, Harness

E = ErrorCode
S = TransactionState


def durable_view(metadata: TransactionMetadata) -> tuple[object, ...]:
    """What the log keeps of an id (Kafka stores no last epoch and no pending state)."""
    return (
        metadata.transactional_id,
        metadata.producer_id,
        metadata.previous_producer_id,
        metadata.next_producer_id,
        metadata.producer_epoch,
        metadata.txn_timeout_ms,
        metadata.state,
        frozenset(metadata.topic_partitions),
        metadata.txn_start_timestamp,
        metadata.txn_last_update_timestamp,
        metadata.client_transaction_version,
    )


def value(producer_id: int, epoch: int, status: S, partitions: object = None) -> bytes:
    return tl.encode_value(
        tl.TransactionLogValue(producer_id, epoch, TIMEOUT_MS, int(status), partitions, 5, 4)  # type: ignore[arg-type]
    )


def test_the_last_record_wins_and_tombstones_remove() -> None:
    h = Harness(load=False)
    records = [
        LoggedRecord(0, tl.encode_key("a"), value(1, 0, S.EMPTY)),
        LoggedRecord(1, tl.encode_key("b"), value(2, 0, S.EMPTY)),
        LoggedRecord(2, tl.encode_key("a"), value(1, 1, S.ONGOING, (("t", (0, 1)),))),
        LoggedRecord(3, tl.encode_key("b"), None),
        LoggedRecord(4, bytes.fromhex("0005") + b"junk", b"whatever"),  # an unknown key version: skipped
    ]
    partition_of = {tid: h.coordinator.partition_for(tid) for tid in ("a", "b")}
    for partition in range(4):
        mine = [r for r in records if r.offset == 4 or partition_of[_tid(r)] == partition]
        h.coordinator.load_partition(partition, 3, mine)
    a = h.coordinator.transaction("a")
    assert a is not None
    assert (a.producer_id, a.producer_epoch, a.state, a.topic_partitions) == (
        1,
        1,
        S.ONGOING,
        {("t", 0), ("t", 1)},
    )
    assert a.last_producer_epoch == -1
    assert h.coordinator.transaction("b") is None


def _tid(record: LoggedRecord) -> str:
    key = tl.decode_key(record.key)
    return key.transactional_id if isinstance(key, tl.TransactionLogKey) else ""


async def test_state_after_a_reload_equals_state_before() -> None:
    h = Harness()
    await h.init("empty")
    await h.begin("open", ("a", 0), ("b", 3))
    pid, epoch = await h.begin("committed")
    await h.coordinator.end_txn("committed", pid, epoch, True, transaction_version=0)
    pid, epoch = await h.begin("v2", transaction_version=2)
    await h.coordinator.end_txn("v2", pid, epoch, False, transaction_version=2)
    await h.settle()
    before = sorted(durable_view(md) for md in h.coordinator.transactions())
    assert sorted(durable_view(md) for md in h.fresh().transactions()) == before
    h.reload()
    assert sorted(durable_view(md) for md in h.coordinator.transactions()) == before


async def test_loading_completes_transactions_left_in_prepare() -> None:
    h = Harness()
    h.markers.hold = True
    pid, epoch = await h.begin("t", ("a", 0))
    await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    await h.settle()
    assert h.markers.held == 1
    # Leadership moves before the markers are written: the work is dropped...
    h.coordinator.unload_partition(h.coordinator.partition_for("t"))
    await h.settle()
    assert h.coordinator.pending_completions == 0
    h.markers.hold = False
    # ... and whoever loads the partition sends the markers again and writes CompleteCommit.
    other = h.fresh()
    await h.settle(other)
    md = other.transaction("t")
    assert md is not None
    assert (md.state, md.pending_state) == (S.COMPLETE_COMMIT, None)
    assert h.markers.requests[-1].coordinator_epoch == h.coordinator_epoch
    assert h.markers.requests[-1].commit is True
    assert h.markers.requests[-1].partitions == {("a", 0)}


async def test_a_write_that_lands_after_leadership_moved_is_not_applied() -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    h.log.hold = True
    pending = asyncio.create_task(h.coordinator.add_partitions("t", pid, epoch, [("a", 0)]))
    await asyncio.sleep(0)
    h.coordinator.unload_partition(h.coordinator.partition_for("t"))
    h.log.release_all()
    assert await pending == {("a", 0): E.NOT_COORDINATOR}
    h.coordinator.begin_loading(h.coordinator.partition_for("t"), 2)
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.COORDINATOR_LOAD_IN_PROGRESS


async def test_a_stale_load_is_ignored() -> None:
    h = Harness(load=False)
    partition = h.coordinator.partition_for("t")
    h.coordinator.begin_loading(partition, 5)
    h.coordinator.load_partition(partition, 4, [LoggedRecord(0, tl.encode_key("t"), value(1, 0, S.EMPTY))])
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.load_partition(partition, 5, [LoggedRecord(0, tl.encode_key("t"), value(1, 0, S.EMPTY))])
    assert h.coordinator.transaction("t") is not None


async def test_a_corrupt_partition_is_left_unserved() -> None:
    h = Harness(load=False)
    partition = h.coordinator.partition_for("t")
    with pytest.raises(DecodeError):
        h.coordinator.load_partition(partition, 1, [LoggedRecord(0, tl.encode_key("t"), b"\x00\x09garbage")])
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.NOT_COORDINATOR
    assert h.coordinator.owned_partitions == frozenset()
