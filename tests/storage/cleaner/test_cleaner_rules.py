"""One test per cleaning rule (Kafka's LogCleaner/CleanedTransactionMetadata/MemoryRecords.filterTo)."""

from __future__ import annotations

import pathlib

import pytest

from protocol.records.batch import DELETE_HORIZON_MASK
from protocol.records.compression import CompressionType
from storage.cleaner import (
    CleanerOffsetCheckpoint,
    LastRecord,
    OffsetMap,
    SegmentInfo,
    clean_log,
    group_segments_by_size,
)
from storage.cleaner.checkpoint import CLEANER_OFFSET_CHECKPOINT
from tests.storage.cleaner.helpers import BASE_TIME, Writer, open_log, read_batches, read_records

DAY = 86_400_000


def test_offset_map_is_bounded_and_keeps_latest() -> None:
    m = OffsetMap(memory=24 * 10, load_factor=0.5)
    assert m.slots == 10 and m.max_entries == 5
    m.put(b"a", 1)
    m.put(b"a", 7)
    assert m.get(b"a") == 7 and m.get(b"b") == -1 and len(m) == 1 and m.latest_offset == 7
    for i in range(4):
        m.put(b"k%d" % i, 10 + i)
    assert m.full
    with pytest.raises(ValueError):
        OffsetMap(memory=24, load_factor=0.5)


def test_dedupes_keeps_latest_value_at_its_offset(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1"), (b"b", b"1")])
    w.put([(b"a", b"2")])
    w.put([(b"c", b"1"), (b"a", b"3")])
    log.roll()
    w.put([(b"a", b"4")])  # active segment: untouched
    result = clean_log(
        log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=BASE_TIME
    )
    assert result.end_offset == 5
    assert read_records(log) == [
        (1, b"b", b"1", False),
        (3, b"c", b"1", False),
        (4, b"a", b"3", False),
        (5, b"a", b"4", False),
    ]
    assert result.records_removed == 2 and result.segments_replaced == [[0]]
    assert log.log_end_offset == 6 and log.segments()[0].next_offset == 5


def test_batches_keep_offsets_and_last_offset_delta_and_codec(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1")], codec=CompressionType.GZIP)
    w.put([(b"c", b"2")])
    log.roll()
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=BASE_TIME)
    (header, records), (second, _) = read_batches(log)
    assert (
        header.base_offset == 0
        and header.last_offset_delta == 3
        and header.compression == CompressionType.GZIP
    )
    assert [(r.offset, r.key) for r in records] == [(1, b"b"), (2, b"a")]
    assert second.base_offset == 4


def test_null_keys_are_dropped(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(None, b"x"), (b"a", b"1")])
    w.put([(b"b", b"1")])
    log.roll()
    result = clean_log(
        log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=BASE_TIME
    )
    assert [r[0] for r in read_records(log)] == [1, 2]
    assert result.invalid_records == 1


def test_tombstone_gets_horizon_then_goes_after_delete_retention(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1")])
    w.put([(b"a", None), (b"b", b"1")])
    log.roll()
    end = log.log_end_offset
    clean_log(
        log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME, delete_retention_ms=DAY
    )
    batches = read_batches(log)
    assert [(r.offset, r.value) for _, rs in batches for r in rs] == [(1, None), (2, b"1")]
    header = batches[0][0]
    assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == BASE_TIME + DAY
    # younger than delete.retention.ms: kept
    clean_log(log, first_dirty_offset=end, first_uncleanable_offset=end, now_ms=BASE_TIME + DAY - 1)
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME + DAY - 1)
    assert [r[0] for r in read_records(log)] == [1, 2]
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME + DAY)
    assert [r[0] for r in read_records(log)] == [2]


def test_aborted_data_is_removed_and_marker_kept_until_data_gone(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1")], producer_id=7)
    w.put([(b"b", b"1")])
    abort = w.end_txn(7, commit=False)
    w.put([(b"c", b"1")])
    log.roll()
    end = log.log_end_offset
    clean_log(
        log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME, delete_retention_ms=DAY
    )
    records = read_records(log)
    assert [(r[0], r[3]) for r in records] == [(1, False), (abort, True), (3, False)]
    assert [e.last_offset for s in log.segments() for e in s.txn_index.all_entries()] == [abort]
    # second round: the transaction has no data left: the marker gets a horizon, then goes
    clean_log(log, first_dirty_offset=end, first_uncleanable_offset=end, now_ms=BASE_TIME)
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME + 1)
    marker = [h for h, _ in read_batches(log) if h.is_control]
    assert marker and marker[0].has_delete_horizon and marker[0].base_timestamp == BASE_TIME + 1 + DAY
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME + 1 + DAY)
    assert [r[0] for r in read_records(log)] == [1, 3]
    assert [e for s in log.segments() for e in s.txn_index.all_entries()] == []


def test_commit_marker_kept_while_transaction_data_remains(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1")], producer_id=7)
    commit = w.end_txn(7, commit=True)
    w.put([(b"z", b"1")])
    log.roll()
    end = log.log_end_offset
    clean_log(
        log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME, delete_retention_ms=DAY
    )
    assert [r[0] for r in read_records(log)] == [0, commit, 2]
    w.put([(b"a", b"2")])
    log.roll()
    end = log.log_end_offset
    clean_log(
        log, first_dirty_offset=2, first_uncleanable_offset=end, now_ms=BASE_TIME, delete_retention_ms=DAY
    )
    # that round still traversed the transaction's batch (Kafka: the marker stays, no horizon yet)
    assert [r[0] for r in read_records(log)] == [commit, 2, 3]
    assert not next(h for h, _ in read_batches(log) if h.is_control).has_delete_horizon
    # the next round finds no data: the marker gets its horizon, and goes once it passed
    clean_log(
        log,
        first_dirty_offset=0,
        first_uncleanable_offset=end,
        now_ms=BASE_TIME + DAY,
        delete_retention_ms=DAY,
    )
    marker = next(h for h, _ in read_batches(log) if h.is_control)
    assert marker.has_delete_horizon and marker.base_timestamp == BASE_TIME + 2 * DAY
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME + 2 * DAY - 1)
    assert [r[0] for r in read_records(log)] == [commit, 2, 3]
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME + 2 * DAY)
    assert [r[0] for r in read_records(log)] == [2, 3]


def test_last_batch_of_active_producer_is_kept_empty(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1")], producer_id=7)
    w.end_txn(7, commit=True)
    w.put([(b"a", b"2")])
    w.put([(b"q", b"2")])
    log.roll()
    end = log.log_end_offset
    producers = {7: LastRecord(last_data_offset=0, producer_epoch=0)}
    clean_log(
        log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME, active_producers=producers
    )
    batches = read_batches(log)
    assert batches[0][0].base_offset == 0 and batches[0][0].producer_id == 7 and batches[0][1] == []
    assert batches[0][0].base_sequence == 0
    assert (batches[0][0].base_timestamp, batches[0][0].max_timestamp) == (-1, BASE_TIME)


def test_last_batch_of_the_round_is_kept_empty(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1")])
    w.put([(None, b"1")])
    log.roll()
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=BASE_TIME)
    headers = [h for h, _ in read_batches(log)]
    assert [(h.base_offset, h.records_count) for h in headers] == [(0, 1), (1, 0)]
    assert log.segments()[0].next_offset == 2


def test_full_offset_map_cleans_up_to_where_it_filled(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    for i in range(6):
        w.put([(b"k%d" % (i % 3), b"%d" % i)])
        log.roll()
    small = OffsetMap(memory=24 * 2, load_factor=1.0)
    result = clean_log(
        log,
        first_dirty_offset=0,
        first_uncleanable_offset=log.log_end_offset,
        now_ms=BASE_TIME,
        offset_map=small,
    )
    assert result.end_offset == 2  # k0 and k1 filled the map at offset 1
    assert [r[0] for r in read_records(log)] == [0, 1, 2, 3, 4, 5]
    result = clean_log(
        log,
        first_dirty_offset=2,
        first_uncleanable_offset=log.log_end_offset,
        now_ms=BASE_TIME,
        offset_map=small,
    )
    assert result.end_offset == 4  # k2 and k0 filled it at offset 3; k1@4 waits for the next round
    assert [r[0] for r in read_records(log)] == [1, 2, 3, 4, 5]


def test_nothing_at_or_above_the_uncleanable_segment_is_touched(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1")])
    log.roll()
    w.put([(b"a", b"2")])
    w.put([(b"a", b"3")])
    log.roll()
    before = log.segments()[1]
    result = clean_log(
        log, first_dirty_offset=0, first_uncleanable_offset=2, now_ms=BASE_TIME
    )  # inside segment 1
    assert result.end_offset == 1
    assert log.segments()[1] is before
    assert [r[0] for r in read_records(log)] == [0, 1, 2]


def test_grouping_by_size(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    for i in range(4):
        w.put([(b"k%d" % i, b"x" * 100)])
        log.roll()
    segments = [SegmentInfo.of(s) for s in log.segments()[:-1]]
    size = segments[0].size
    groups = group_segments_by_size(segments, 2 * size, 10_000, log.log_end_offset)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 1], [2, 3]]
    result = clean_log(
        log,
        first_dirty_offset=0,
        first_uncleanable_offset=log.log_end_offset,
        now_ms=BASE_TIME,
        max_segment_bytes=2 * size,
    )
    assert result.segments_replaced == [[0, 1], [2, 3]]
    assert [s.base_offset for s in log.segments()] == [0, 2, 4]
    assert [r[0] for r in read_records(log)] == [0, 1, 2, 3]


def test_cleaned_log_reopens(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    for i in range(5):
        w.put([(b"k%d" % (i % 2), b"%d" % i)])
        log.roll()
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=BASE_TIME)
    expected = read_records(log)
    log.close()
    reopened = open_log(tmp_path)
    assert read_records(reopened) == expected == [(3, b"k1", b"3", False), (4, b"k0", b"4", False)]
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir() if "clean" in p.name or "swap" in p.name) == []


def test_cleaner_checkpoint_format(tmp_path: pathlib.Path) -> None:
    checkpoint = CleanerOffsetCheckpoint(tmp_path)
    assert checkpoint.read() == {}
    checkpoint.update("t", 0, 42)
    checkpoint.update("other", 3, 7)
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == "0\n2\nother 3 7\nt 0 42\n"
    checkpoint.remove("t", 0)
    assert checkpoint.read() == {("other", 3): 7}


def test_replaced_files_wait_for_file_delete_delay(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path, file_delete_delay_ms=60_000)
    w = Writer(log)
    w.put([(b"a", b"1")])
    w.put([(b"a", b"2")])
    log.roll()
    old_file = log.segments()[0].file
    clean_log(log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=BASE_TIME)
    directory = tmp_path / "t-0"
    assert sorted(p.name for p in directory.glob("*.deleted")) == [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    assert not old_file.closed  # a reader's slice of the old segment stays readable meanwhile
    log.close()
    assert list(directory.glob("*.deleted")) == []


def test_a_failed_round_leaves_the_log_as_it_was(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage.cleaner import cleaner

    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1")])
    w.put([(b"a", b"2")])
    log.roll()
    before = read_records(log)

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cleaner, "_filter_batch", fail)
    with pytest.raises(OSError):
        clean_log(log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=BASE_TIME)
    assert read_records(log) == before
    assert [p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".cleaned"] == []


def test_last_records_from_producer_state() -> None:
    from storage.cleaner import last_records_of_active_producers
    from storage.producer_state import BatchMetadata, ProducerStateEntry

    with_data = ProducerStateEntry(7, producer_epoch=3)
    with_data.add_batch(3, BatchMetadata(last_seq=4, last_offset=40, offset_delta=4, timestamp=BASE_TIME))
    marker_only = ProducerStateEntry(8, producer_epoch=1)
    assert last_records_of_active_producers({7: with_data, 8: marker_only}) == {
        7: LastRecord(40, 3),
        8: LastRecord(None, 1),
    }


def test_last_marker_of_producer_without_data_is_kept_empty(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.put([(b"a", b"1")], producer_id=7)
    marker = w.end_txn(7, commit=True)
    w.put([(b"a", b"2")])
    w.put([(b"b", b"2")])
    log.roll()
    end = log.log_end_offset
    producers = {7: LastRecord(last_data_offset=None, producer_epoch=0)}
    for now in (BASE_TIME, BASE_TIME + 1, BASE_TIME + 2 * DAY):
        clean_log(
            log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=now, active_producers=producers
        )
    headers = [h for h, _ in read_batches(log)]
    assert [(h.base_offset, h.is_control, h.records_count) for h in headers] == [
        (marker, True, 0),
        (2, False, 1),
        (3, False, 1),
    ]
