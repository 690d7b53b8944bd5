"""Partition, transactions: markers, the last stable offset, read_committed reads, KIP-890's guard."""

from __future__ import annotations

import pathlib

import pytest

from broker.replication.partition import Partition
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import IsolationLevel
from storage.clock import FakeClock
from storage.txn_index import AbortedTxn
from tests.broker.test_partition import NODE, NOW, batch, open_partition

PRODUCER = 42


def txn_batch(n: int, sequence: int, *, producer_id: int = PRODUCER, epoch: int = 0) -> bytes:
    return batch(n, producer_id=producer_id, epoch=epoch, sequence=sequence, transactional=True)


def append_txn(partition: Partition, n: int, sequence: int, *, producer_id: int = PRODUCER) -> None:
    """A transactional append the coordinator verified (as the produce path does first)."""
    guard = partition.start_txn_verification(producer_id)
    partition.append_records(
        txn_batch(n, sequence, producer_id=producer_id), required_acks=1, now_ms=NOW, verification=guard
    )


def marker(
    partition: Partition, commit: bool, *, producer_id: int = PRODUCER, coordinator_epoch: int = 0
) -> None:
    partition.append_txn_marker(
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=coordinator_epoch,
        commit=commit,
        now_ms=NOW,
    )


def read(partition: Partition, offset: int, isolation: IsolationLevel) -> tuple[int, tuple[AbortedTxn, ...]]:
    result = partition.read(
        offset,
        1 << 20,
        isolation_level=isolation,
        is_follower=False,
        min_one_batch=True,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
    )
    return result.records_size, result.aborted_transactions


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


def test_the_lso_holds_at_the_oldest_open_transaction(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock)
    partition.append_records(batch(2), required_acks=1, now_ms=NOW)  # 0..1
    append_txn(partition, 3, 0)  # 2..4
    partition.append_records(batch(1), required_acks=1, now_ms=NOW)  # 5
    assert (partition.high_watermark, partition.last_stable_offset) == (6, 2)
    assert partition.end_offset_for(IsolationLevel.READ_COMMITTED, is_follower=False) == 2
    marker(partition, commit=True)  # 6
    assert (partition.high_watermark, partition.last_stable_offset) == (7, 7)


def test_a_read_committed_read_gets_the_aborted_transactions_of_its_range(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    partition = open_partition(tmp_path / "t-0", clock)
    append_txn(partition, 2, 0)  # 0..1
    marker(partition, commit=False)  # 2
    append_txn(partition, 1, 2, producer_id=7)  # 3
    marker(partition, commit=True, producer_id=7)  # 4
    size, aborted = read(partition, 0, IsolationLevel.READ_COMMITTED)
    assert size > 0 and aborted == (AbortedTxn(PRODUCER, 0, 2, 3),)
    assert read(partition, 3, IsolationLevel.READ_COMMITTED)[1] == ()
    assert read(partition, 0, IsolationLevel.READ_UNCOMMITTED)[1] == ()
    assert list(partition.log.segments()[0].txn_index.all_entries()) == [AbortedTxn(PRODUCER, 0, 2, 3)]


def test_an_unverified_transactional_batch_is_refused(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock)
    with pytest.raises(KafkaError) as refused:
        partition.append_records(txn_batch(1, 0), required_acks=1, now_ms=NOW)
    assert refused.value.code is ErrorCode.INVALID_TXN_STATE
    assert partition.log_end_offset == 0


def test_a_marker_between_verification_and_append_voids_the_guard(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    """A late batch of a transaction the coordinator aborted meanwhile must not open a new one."""
    partition = open_partition(tmp_path / "t-0", clock)
    guard = partition.start_txn_verification(PRODUCER)
    marker(partition, commit=False)
    with pytest.raises(KafkaError) as refused:
        partition.append_records(txn_batch(1, 0), required_acks=1, now_ms=NOW, verification=guard)
    assert refused.value.code is ErrorCode.INVALID_TXN_STATE
    assert partition.last_stable_offset == partition.high_watermark


def test_later_batches_of_an_ongoing_transaction_need_no_verification(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    partition = open_partition(tmp_path / "t-0", clock)
    append_txn(partition, 1, 0)
    assert partition.has_ongoing_transaction(PRODUCER, 0)
    partition.append_records(txn_batch(1, 1), required_acks=1, now_ms=NOW)
    assert partition.log_end_offset == 2


def test_markers_of_a_stale_coordinator_or_producer_epoch_are_fenced(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    partition = open_partition(tmp_path / "t-0", clock)
    guard = partition.start_txn_verification(PRODUCER)
    partition.append_records(txn_batch(1, 0, epoch=1), required_acks=1, now_ms=NOW, verification=guard)
    partition.append_txn_marker(
        producer_id=PRODUCER, producer_epoch=1, coordinator_epoch=3, commit=True, now_ms=NOW
    )
    with pytest.raises(KafkaError) as fenced:
        partition.append_txn_marker(
            producer_id=PRODUCER, producer_epoch=1, coordinator_epoch=2, commit=False, now_ms=NOW
        )
    assert fenced.value.code is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    with pytest.raises(KafkaError) as stale:
        partition.append_txn_marker(
            producer_id=PRODUCER, producer_epoch=0, coordinator_epoch=3, commit=False, now_ms=NOW
        )
    assert stale.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    assert partition.log_end_offset == 2


def test_the_lso_waits_for_the_marker_to_be_replicated(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock, replicas=[NODE, 2], isr=[NODE, 2])
    append_txn(partition, 2, 0)  # 0..1
    marker(partition, commit=True)  # 2
    assert partition.high_watermark == 0 and partition.last_stable_offset == 0
    partition.update_follower_fetch(2, 2, 0, NOW, 3, -1)  # the follower has the data, not the marker
    assert (partition.high_watermark, partition.last_stable_offset) == (2, 0)
    partition.update_follower_fetch(2, 3, 0, NOW, 3, -1)
    assert (partition.high_watermark, partition.last_stable_offset) == (3, 3)


def test_reopening_rebuilds_the_open_transaction(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock)
    partition.append_records(batch(1), required_acks=1, now_ms=NOW)
    append_txn(partition, 2, 0)  # 1..2
    partition.close()
    partition.log.close()
    reopened = open_partition(tmp_path / "t-0", clock)
    assert reopened.last_stable_offset == 1
    marker(reopened, commit=False)
    assert reopened.last_stable_offset == reopened.high_watermark == 4
    assert read(reopened, 0, IsolationLevel.READ_COMMITTED)[1] == (AbortedTxn(PRODUCER, 1, 3, 4),)


def test_a_non_transactional_batch_inside_an_open_transaction_is_refused(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    partition = open_partition(tmp_path / "t-0", clock)
    append_txn(partition, 1, 0)
    with pytest.raises(KafkaError) as refused:
        partition.append_records(
            batch(1, producer_id=PRODUCER, epoch=0, sequence=1), required_acks=1, now_ms=NOW
        )
    assert refused.value.code is ErrorCode.INVALID_TXN_STATE
    assert partition.log_end_offset == 1
