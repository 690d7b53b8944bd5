"""Sequence and epoch rules of the idempotent producer (storage.producer_state), batch by batch.

Each test drives the manager as PartitionLog does on the leader: ``check_and_prepare`` first, then
``update`` with the offsets the batch got, unless the batch was a duplicate.
"""

from __future__ import annotations

import pathlib

import pytest

from protocol.records import Record, RecordBatchHeader, build_batch, read_header
from storage.errors import StorageError
from storage.producer_state import (
    INT32_MAX,
    DuplicateBatch,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
)

PID = 1000
BASE_TIME = 1_700_000_000_000
HOUR_MS = 3_600_000


def batch_header(
    producer_id: int = PID,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    *,
    timestamp: int = BASE_TIME,
    transactional: bool = False,
    control: bool = False,
) -> RecordBatchHeader:
    """The header of a real v2 batch with these producer fields and ``count`` records."""
    records = [Record(value=b"v", timestamp=timestamp) for _ in range(count)]
    data = build_batch(
        records,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
        is_control=control,
    )
    return read_header(data)


def apply(manager: ProducerStateManager, header: RecordBatchHeader) -> tuple[int, int]:
    """Append ``header`` at the state's end offset without validation; returns its offsets."""
    first = manager.map_end_offset
    last = first + header.last_offset_delta
    manager.update(header, first, last)
    return first, last


def produce(
    manager: ProducerStateManager, header: RecordBatchHeader, now_ms: int = BASE_TIME
) -> DuplicateBatch | tuple[int, int]:
    """The leader's path: validate, then append unless it is a duplicate."""
    duplicate = manager.check_and_prepare(header, origin="leader", now_ms=now_ms)
    if duplicate is not None:
        return duplicate
    return apply(manager, header)


@pytest.fixture
def partition_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    return directory


@pytest.fixture
def manager(partition_dir: pathlib.Path) -> ProducerStateManager:
    return ProducerStateManager(partition_dir)


# -- in order, gaps, duplicates ------------------------------------------------------------------


def test_batches_in_sequence_are_accepted_and_remembered(manager: ProducerStateManager) -> None:
    assert produce(manager, batch_header(seq=0, count=3, timestamp=BASE_TIME + 1)) == (0, 2)
    assert produce(manager, batch_header(seq=3, count=2, timestamp=BASE_TIME + 2)) == (3, 4)
    entry = manager.last_entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (0, 0, 4)
    assert entry.last_data_offset == 4
    assert entry.last_timestamp == BASE_TIME + 2
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batch_metadata] == [
        (0, 2, 0, 2),
        (3, 4, 3, 4),
    ]
    assert manager.map_end_offset == 5


def test_gap_in_sequence_is_out_of_order_and_changes_nothing(manager: ProducerStateManager) -> None:
    produce(manager, batch_header(seq=0, count=3))
    with pytest.raises(OutOfOrderSequenceError, match="does not follow the last sequence 2"):
        produce(manager, batch_header(seq=4))
    entry = manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 2
    assert manager.map_end_offset == 3


def test_sequence_going_back_without_matching_a_batch_is_out_of_order(manager: ProducerStateManager) -> None:
    produce(manager, batch_header(seq=0, count=3))
    with pytest.raises(OutOfOrderSequenceError):
        produce(manager, batch_header(seq=1, count=1))  # inside the first batch, not the same range
    with pytest.raises(OutOfOrderSequenceError):
        produce(manager, batch_header(seq=0, count=2))  # same first sequence, different last


def test_duplicate_of_each_of_the_last_five_batches_returns_its_original_offsets(
    manager: ProducerStateManager,
) -> None:
    written = []
    for i in range(7):
        header = batch_header(seq=2 * i, count=2, timestamp=BASE_TIME + i)
        written.append((header, produce(manager, header)))
    end = manager.map_end_offset
    for i, (header, (first, last)) in enumerate(written[2:], start=2):
        assert produce(manager, header) == DuplicateBatch(first, last, BASE_TIME + i)
    assert manager.map_end_offset == end  # nothing was appended


def test_duplicate_older_than_the_last_five_is_out_of_order(manager: ProducerStateManager) -> None:
    headers = [batch_header(seq=2 * i, count=2) for i in range(7)]
    for header in headers:
        produce(manager, header)
    for header in headers[:2]:
        with pytest.raises(OutOfOrderSequenceError):
            produce(manager, header)


def test_errors_are_storage_errors() -> None:
    assert issubclass(OutOfOrderSequenceError, StorageError)
    assert issubclass(InvalidProducerEpochError, StorageError)


# -- epochs --------------------------------------------------------------------------------------


def test_first_batch_of_a_new_epoch_must_start_at_zero(manager: ProducerStateManager) -> None:
    produce(manager, batch_header(epoch=0, seq=0, count=5))
    with pytest.raises(OutOfOrderSequenceError, match="must start at 0"):
        produce(manager, batch_header(epoch=1, seq=5))
    assert produce(manager, batch_header(epoch=1, seq=0)) == (5, 5)
    entry = manager.last_entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 1
    assert [b.last_offset for b in entry.batch_metadata] == [5]  # the old epoch's batches are gone


def test_lower_epoch_is_fenced(manager: ProducerStateManager) -> None:
    produce(manager, batch_header(epoch=3, seq=0))
    with pytest.raises(InvalidProducerEpochError, match="epoch 2 is older than the current epoch 3"):
        produce(manager, batch_header(epoch=2, seq=1))


def test_retry_of_an_old_epoch_batch_after_a_bump_is_fenced_not_a_duplicate(
    manager: ProducerStateManager,
) -> None:
    old = batch_header(epoch=0, seq=0)
    produce(manager, old)
    produce(manager, batch_header(epoch=1, seq=0))
    with pytest.raises(InvalidProducerEpochError):
        produce(manager, old)


# -- wrap-around ---------------------------------------------------------------------------------


def test_sequence_wraps_from_int_max_to_zero(manager: ProducerStateManager) -> None:
    produce(manager, batch_header(seq=INT32_MAX - 1, count=2))
    entry = manager.last_entry(PID)
    assert entry is not None and entry.last_seq == INT32_MAX
    with pytest.raises(OutOfOrderSequenceError):
        produce(manager, batch_header(seq=1))  # skips 0
    assert produce(manager, batch_header(seq=0)) == (2, 2)


def test_batch_spanning_the_wrap_is_followed_and_detected_as_duplicate(manager: ProducerStateManager) -> None:
    spanning = batch_header(seq=INT32_MAX, count=3, timestamp=BASE_TIME + 7)  # sequences MAX, 0, 1
    produce(manager, batch_header(seq=INT32_MAX - 2, count=2))
    assert produce(manager, spanning) == (2, 4)
    entry = manager.last_entry(PID)
    assert entry is not None
    assert (entry.batch_metadata[-1].first_seq, entry.last_seq) == (INT32_MAX, 1)
    assert produce(manager, spanning) == DuplicateBatch(2, 4, BASE_TIME + 7)
    assert produce(manager, batch_header(seq=2)) == (5, 5)


# -- unknown producers, producer id -1, replication ----------------------------------------------


def test_unknown_producer_may_start_at_any_sequence_as_in_kafka_2_5(manager: ProducerStateManager) -> None:
    assert produce(manager, batch_header(seq=42)) == (0, 0)
    assert produce(manager, batch_header(seq=43)) == (1, 1)


def test_unknown_producer_with_nonzero_sequence_is_out_of_order_when_required(
    partition_dir: pathlib.Path,
) -> None:
    manager = ProducerStateManager(partition_dir, require_zero_first_sequence=True)
    with pytest.raises(OutOfOrderSequenceError, match="unknown producer must start at 0"):
        produce(manager, batch_header(seq=42))
    assert manager.last_entry(PID) is None
    assert produce(manager, batch_header(seq=0)) == (0, 0)
    assert produce(manager, batch_header(seq=1)) == (1, 1)


def test_producer_id_minus_one_skips_every_check_and_stores_nothing(manager: ProducerStateManager) -> None:
    for _ in range(3):  # kafkajs: producer id -1, epoch 0, sequence 0, batch after batch
        assert produce(manager, batch_header(producer_id=-1, epoch=0, seq=0, count=2)) is not None
    assert manager.check_and_prepare(batch_header(producer_id=-1, epoch=-1, seq=-1), origin="leader") is None
    assert dict(manager.producers) == {}
    assert manager.map_end_offset == 6


def test_replication_origin_skips_validation_but_updates_state(manager: ProducerStateManager) -> None:
    produce(manager, batch_header(epoch=2, seq=0, count=2))
    for header in (
        batch_header(epoch=2, seq=10),  # gap
        batch_header(epoch=2, seq=0, count=2),  # would be a duplicate
        batch_header(epoch=1, seq=0),  # lower epoch
    ):
        assert manager.check_and_prepare(header, origin="replication", now_ms=BASE_TIME) is None
    header = batch_header(epoch=2, seq=10)
    apply(manager, header)
    entry = manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 10 and entry.last_data_offset == 2


def test_check_and_prepare_changes_nothing(manager: ProducerStateManager) -> None:
    produce(manager, batch_header(seq=0))
    before = manager.last_entry(PID)
    assert before is not None
    snapshot = (before.producer_epoch, list(before.batch_metadata), before.last_timestamp)
    manager.check_and_prepare(batch_header(epoch=5, seq=0), origin="leader", now_ms=BASE_TIME)
    entry = manager.last_entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, list(entry.batch_metadata), entry.last_timestamp) == snapshot
    assert manager.map_end_offset == 1


# -- control and transactional batches ------------------------------------------------------------


def test_control_batch_bumps_the_epoch_and_the_next_batch_must_start_at_zero(
    manager: ProducerStateManager,
) -> None:
    produce(manager, batch_header(epoch=0, seq=0, count=3, transactional=True))
    entry = manager.last_entry(PID)
    assert entry is not None and entry.current_txn_first_offset == 0
    marker = batch_header(epoch=1, seq=-1, control=True, timestamp=BASE_TIME + 50)
    assert manager.check_and_prepare(marker, origin="leader", now_ms=BASE_TIME) is None
    apply(manager, marker)
    entry = manager.last_entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.is_empty, entry.current_txn_first_offset) == (1, True, None)
    assert entry.last_timestamp == BASE_TIME + 50
    with pytest.raises(OutOfOrderSequenceError):
        produce(manager, batch_header(epoch=1, seq=3))
    assert produce(manager, batch_header(epoch=1, seq=0)) == (4, 4)


def test_control_batch_with_an_older_epoch_is_fenced(manager: ProducerStateManager) -> None:
    produce(manager, batch_header(epoch=4, seq=0))
    with pytest.raises(InvalidProducerEpochError):
        produce(manager, batch_header(epoch=3, seq=-1, control=True))


def test_empty_control_batch_left_by_the_cleaner_changes_no_producer(manager: ProducerStateManager) -> None:
    apply(manager, batch_header(epoch=0, seq=-1, count=0, control=True))
    assert manager.last_entry(PID) is None
    assert manager.map_end_offset == 1


def test_transaction_first_offset_is_the_first_transactional_batch(manager: ProducerStateManager) -> None:
    apply(manager, batch_header(producer_id=-1, seq=-1, count=4))
    apply(manager, batch_header(seq=0, count=2, transactional=True))
    apply(manager, batch_header(seq=2, count=2, transactional=True))
    entry = manager.last_entry(PID)
    assert entry is not None and entry.current_txn_first_offset == 4


# -- bookkeeping -----------------------------------------------------------------------------------


def test_update_below_the_map_end_offset_is_a_caller_bug(manager: ProducerStateManager) -> None:
    apply(manager, batch_header(seq=0, count=3))
    with pytest.raises(ValueError):
        manager.update(batch_header(seq=3), 2, 2)


def test_producers_view_is_read_only_and_live(manager: ProducerStateManager) -> None:
    view = manager.producers
    assert len(view) == 0
    produce(manager, batch_header(producer_id=7))
    assert list(view) == [7]
    with pytest.raises(TypeError):
        view[8] = view[7]  # type: ignore[index]
    assert manager.last_entry(8) is None


# -- expiration ------------------------------------------------------------------------------------


def test_remove_expired_producers_forgets_idle_ones(partition_dir: pathlib.Path) -> None:
    manager = ProducerStateManager(partition_dir, max_producer_id_expiration_ms=HOUR_MS)
    produce(manager, batch_header(producer_id=1, timestamp=BASE_TIME))
    produce(manager, batch_header(producer_id=2, timestamp=BASE_TIME + HOUR_MS // 2))
    produce(manager, batch_header(producer_id=3, timestamp=BASE_TIME, transactional=True))
    assert manager.remove_expired_producers(BASE_TIME + HOUR_MS - 1) == []
    assert manager.remove_expired_producers(BASE_TIME + HOUR_MS) == [1]  # idle for exactly the limit
    assert sorted(manager.producers) == [2, 3]  # 3 is in a transaction
    assert manager.remove_expired_producers(BASE_TIME + 2 * HOUR_MS) == [2]
    assert produce(manager, batch_header(producer_id=1, seq=17)) is not None  # unknown again: any sequence


def test_check_and_prepare_keeps_validating_a_producer_with_old_timestamps(
    manager: ProducerStateManager,
) -> None:
    """Batch timestamps come from the producer (MirrorMaker keeps old ones): no implicit expiry."""
    old = batch_header(seq=0, timestamp=BASE_TIME - 30 * 24 * HOUR_MS)
    produce(manager, old)
    assert produce(manager, old, now_ms=BASE_TIME) == DuplicateBatch(0, 0, old.max_timestamp)
    with pytest.raises(OutOfOrderSequenceError):
        produce(manager, batch_header(seq=5), now_ms=BASE_TIME)
