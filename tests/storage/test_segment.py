"""LogSegment: appends and the sparse indexes, reads, truncation, recovery, roll rules, file lifecycle."""

from __future__ import annotations

import os
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.records import read_header, stamp_base_offset
from storage.config import LogConfig
from storage.epoch import LeaderEpochFileCache
from storage.errors import CorruptIndexError
from storage.segment import LogSegment, parse_base_offset, segment_file_name
from tests.storage.log_helpers import (
    BASE_TIME,
    cut_file,
    expected_index_entries,
    flip_byte,
    index_entries,
    make_batch,
    scan_file,
    time_index_entries,
)

CONFIG = LogConfig(index_interval_bytes=200, max_index_size=4096)


def new_segment(tmp_path: pathlib.Path, base_offset: int = 0, config: LogConfig = CONFIG) -> LogSegment:
    return LogSegment(tmp_path, base_offset, config, created_ms=BASE_TIME)


def append_batches(segment: LogSegment, batches: list[bytes]) -> list[bytes]:
    """Append batches one per call, stamping consecutive offsets; returns the stamped bytes."""
    stamped = []
    for batch in batches:
        data = bytearray(batch)
        header = stamp_offset(data, segment.next_offset)
        segment.append(data, [(header[0], header[1], len(data))])
        stamped.append(bytes(data))
    return stamped


def stamp_offset(data: bytearray, base_offset: int) -> tuple[int, int]:
    stamp_base_offset(data, 0, base_offset)
    header = read_header(data)
    return header.last_offset, header.max_timestamp


def test_file_names_are_twenty_digit_base_offsets() -> None:
    assert segment_file_name(5, ".log") == "00000000000000000005.log"
    assert segment_file_name(2**40, ".timeindex") == f"{2**40:020d}.timeindex"
    assert parse_base_offset("00000000000000000042.index") == 42
    assert parse_base_offset("00000000000000000042.log.deleted") == 42
    assert parse_base_offset("leader-epoch-checkpoint") is None


def test_new_segment_creates_three_files(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path, 100)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [segment_file_name(100, s) for s in (".index", ".log", ".timeindex")]
    assert segment.size == 0 and segment.next_offset == 100 and segment.max_timestamp_so_far == -1


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 150)), min_size=1, max_size=30),
    interval=st.sampled_from([0, 1, 100, 200, 1000]),
)
def test_index_follows_kafkas_sparse_rule(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[tuple[int, int]], interval: int
) -> None:
    directory = tmp_path_factory.mktemp("seg")
    config = LogConfig(index_interval_bytes=interval, max_index_size=4096)
    segment = new_segment(directory, 0, config)
    append_batches(segment, [make_batch(n, size, BASE_TIME + i) for i, (n, size) in enumerate(sizes)])
    scanned = scan_file(segment.log_path)
    assert index_entries(segment) == expected_index_entries(scanned, interval)
    # every entry points at the start of the batch whose last offset it names
    positions = {pos: header for pos, header in scanned}
    for offset, position in index_entries(segment):
        assert positions[position].last_offset == offset
    # translate_offset agrees with a linear scan for every offset
    for pos, header in scanned:
        for offset in (header.base_offset, header.last_offset):
            found = segment.translate_offset(offset)
            assert found is not None and found.position == pos
    assert segment.translate_offset(segment.next_offset) is None
    segment.close()


def test_first_batch_is_never_indexed(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path, 0, LogConfig(index_interval_bytes=0, max_index_size=4096))
    append_batches(segment, [make_batch(1, 500)])
    assert segment.offset_index.entries == 0
    append_batches(segment, [make_batch(1, 10)])
    assert index_entries(segment) == [(1, scan_file(segment.log_path)[1][0])]


def test_time_index_tracks_max_timestamp_so_far(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path, 0, LogConfig(index_interval_bytes=0, max_index_size=4096))
    timestamps = [100, 300, 200, 300, 500, 400]
    append_batches(segment, [make_batch(1, 5, BASE_TIME + t) for t in timestamps])
    # entries are written with offset index entries (batches 2..6), only when the max grows
    assert time_index_entries(segment) == [(BASE_TIME + 300, 1), (BASE_TIME + 500, 4)]
    assert segment.max_timestamp_so_far == BASE_TIME + 500
    assert segment.offset_of_max_timestamp_so_far == 4
    segment.close()
    reopened = new_segment(tmp_path, 0)
    assert reopened.max_timestamp_so_far == BASE_TIME + 500
    assert reopened.next_offset == 6


def test_close_appends_final_time_entry_and_trims(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path, 0, LogConfig(index_interval_bytes=10_000, max_index_size=4096))
    append_batches(segment, [make_batch(2, 5, BASE_TIME + 10), make_batch(1, 5, BASE_TIME + 50)])
    assert segment.time_index.entries == 0
    segment.close()
    assert segment.closed
    assert (tmp_path / segment_file_name(0, ".timeindex")).stat().st_size == 12
    assert (tmp_path / segment_file_name(0, ".index")).stat().st_size == 0
    reopened = new_segment(tmp_path, 0)
    assert time_index_entries(reopened) == [(BASE_TIME + 50, 2)]


def test_reopen_continues_indexing_like_a_rebuild(tmp_path: pathlib.Path) -> None:
    """The bytes-since-last-entry counter survives a reopen, so the index equals a rebuild."""
    config = LogConfig(index_interval_bytes=150, max_index_size=4096)
    segment = new_segment(tmp_path, 0, config)
    append_batches(segment, [make_batch(1, 60) for _ in range(5)])
    segment.close()
    segment = new_segment(tmp_path, 0, config)
    append_batches(segment, [make_batch(1, 60) for _ in range(7)])
    assert index_entries(segment) == expected_index_entries(scan_file(segment.log_path), 150)


def test_read_returns_whole_batches_within_limits(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path)
    append_batches(segment, [make_batch(2, 40) for _ in range(6)])
    scanned = scan_file(segment.log_path)
    size = scanned[0][1].size
    file_slice, first = segment.read(0, 3 * size + 5) or (None, None)
    assert file_slice is not None and (file_slice.position, file_slice.length, first) == (0, 3 * size, 0)
    # an offset inside a batch reads from that batch's start
    file_slice, first = segment.read(5, size) or (None, None)
    assert file_slice is not None and (file_slice.position, file_slice.length, first) == (2 * size, size, 4)
    # max_offset excludes the batch holding it and everything after
    file_slice, _ = segment.read(0, 10_000, max_offset=6) or (None, None)
    assert file_slice is not None and file_slice.length == 3 * size
    file_slice, _ = segment.read(0, 10_000, max_offset=5) or (None, None)
    assert file_slice is not None and file_slice.length == 2 * size
    # the first batch comes whole when larger than max_bytes, unless min_one_batch is off
    file_slice, _ = segment.read(0, 1) or (None, None)
    assert file_slice is not None and file_slice.length == size
    file_slice, _ = segment.read(0, 1, min_one_batch=False) or (None, None)
    assert file_slice is not None and file_slice.length == 0
    # a bound at the first batch yields an empty slice; beyond the end, None
    file_slice, _ = segment.read(4, 10_000, max_offset=4) or (None, None)
    assert file_slice is not None and file_slice.length == 0
    assert segment.read(12, 100) is None
    data = segment.read(0, 10_000)
    assert data is not None and data[0].read_bytes() == segment.log_path.read_bytes()


def test_truncate_to_drops_the_batch_holding_the_offset(tmp_path: pathlib.Path) -> None:
    config = LogConfig(index_interval_bytes=50, max_index_size=4096)
    segment = new_segment(tmp_path, 0, config)
    append_batches(segment, [make_batch(3, 30, BASE_TIME + i) for i in range(8)])
    scanned = scan_file(segment.log_path)
    total = segment.size
    removed = segment.truncate_to(10, BASE_TIME)  # batch 9..11 goes, and everything after it
    assert removed == total - scanned[3][0]
    assert segment.next_offset == 9
    assert segment.size == scanned[3][0]
    assert all(offset < 9 for offset, _ in index_entries(segment))
    assert all(offset < 9 for _, offset in time_index_entries(segment))
    assert segment.max_timestamp_so_far == BASE_TIME + 2 + 2
    assert segment.truncate_to(100, BASE_TIME) == 0
    # appends continue with an index identical to a rebuild
    append_batches(segment, [make_batch(2, 30) for _ in range(5)])
    assert index_entries(segment) == expected_index_entries(scan_file(segment.log_path), 50)


def test_truncate_to_zero_resets_roll_timer(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path)
    append_batches(segment, [make_batch(1, 10)])
    assert segment.truncate_to(0, BASE_TIME + 999) > 0
    assert segment.size == 0 and segment.next_offset == 0 and segment.created_ms == BASE_TIME + 999


def test_recover_of_a_valid_segment_rebuilds_identical_indexes(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path, 0, LogConfig(index_interval_bytes=100, max_index_size=4096))
    append_batches(segment, [make_batch(2, 50, BASE_TIME + 7 * i) for i in range(20)])
    before = (index_entries(segment), time_index_entries(segment), segment.next_offset, segment.size)
    assert segment.recover() == 0
    assert (index_entries(segment), time_index_entries(segment), segment.next_offset, segment.size) == before


@settings(max_examples=30, deadline=None)
@given(cut=st.integers(0, 10_000))
def test_recover_truncates_a_torn_tail(tmp_path_factory: pytest.TempPathFactory, cut: int) -> None:
    directory = tmp_path_factory.mktemp("torn")
    segment = new_segment(directory)
    append_batches(segment, [make_batch(1 + i % 3, 40 + i) for i in range(30)])
    scanned = scan_file(segment.log_path)
    cut %= segment.size + 1
    segment.close()
    cut_file(directory / segment_file_name(0, ".log"), cut)
    segment = new_segment(directory)
    truncated = segment.recover()
    survivors = [(pos, h) for pos, h in scan_file(segment.log_path)]
    expected = [(pos, h) for pos, h in scanned if pos + h.size <= cut]
    assert survivors == expected
    assert truncated == cut - (expected[-1][0] + expected[-1][1].size if expected else 0)
    assert segment.next_offset == (expected[-1][1].next_offset if expected else 0)


def test_recover_stops_at_a_corrupt_batch(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path)
    append_batches(segment, [make_batch(2, 30) for _ in range(6)])
    scanned = scan_file(segment.log_path)
    segment.close()
    flip_byte(segment.log_path, scanned[3][0] + 70)  # inside batch 3's records: CRC fails
    segment = new_segment(tmp_path)
    assert segment.recover() == sum(h.size for _, h in scanned[3:])
    assert scan_file(segment.log_path) == scanned[:3]
    assert segment.next_offset == 6


def test_recover_stops_where_offsets_go_backwards(tmp_path: pathlib.Path) -> None:
    good = make_batch(2, 10, base_offset=0)
    backwards = make_batch(1, 10, base_offset=1)
    (tmp_path / segment_file_name(0, ".log")).write_bytes(good + backwards)
    segment = new_segment(tmp_path)
    assert segment.recover() == len(backwards)
    assert segment.next_offset == 2


def test_recover_assigns_newer_epochs_to_the_cache(tmp_path: pathlib.Path) -> None:
    data = b"".join(
        make_batch(2, 10, base_offset=2 * i, epoch=epoch) for i, epoch in enumerate([1, 1, 3, 2, 4])
    )
    (tmp_path / segment_file_name(0, ".log")).write_bytes(data)
    cache = LeaderEpochFileCache(None)
    new_segment(tmp_path).recover(cache)
    assert [tuple(e) for e in cache.entries()] == [(1, 0), (3, 4), (4, 8)]


def test_sanity_check_detects_an_index_past_the_end(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path, 0, LogConfig(index_interval_bytes=0, max_index_size=4096))
    append_batches(segment, [make_batch(1, 50) for _ in range(4)])
    segment.sanity_check()
    segment.close()
    cut_file(segment.log_path, 60)
    reopened = new_segment(tmp_path)
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check()


def test_roll_rules(tmp_path: pathlib.Path) -> None:
    config = LogConfig(segment_bytes=1000, segment_ms=10_000, max_index_size=4096)
    segment = new_segment(tmp_path, 0, config)
    now = BASE_TIME
    assert not segment.should_roll(config, 1000, BASE_TIME, 0, now)  # empty: never by time
    assert segment.should_roll(config, 1001, BASE_TIME, 0, now)  # would pass segment.bytes
    append_batches(segment, [make_batch(1, 100, BASE_TIME)])
    size = segment.size
    assert segment.should_roll(config, 1001 - size, BASE_TIME, 1, now)
    assert not segment.should_roll(config, 1000 - size, BASE_TIME, 1, now)
    # by record time: incoming max timestamp minus the first batch's max timestamp
    assert not segment.should_roll(config, 10, BASE_TIME + 10_000, 1, now)
    assert segment.should_roll(config, 10, BASE_TIME + 10_001, 1, now)
    # jitter shortens the wait
    segment.roll_jitter_ms = 5
    assert segment.should_roll(config, 10, BASE_TIME + 9_996, 1, now)
    # offsets that do not fit the segment's 32-bit relative offsets
    assert segment.should_roll(config, 10, BASE_TIME, 2**31, now)
    assert not segment.should_roll(config, 10, BASE_TIME, 2**31 - 1, now)


def test_roll_by_wall_clock_when_batches_have_no_timestamp(tmp_path: pathlib.Path) -> None:
    config = LogConfig(segment_ms=10_000, max_index_size=4096)
    segment = new_segment(tmp_path, 0, config)
    data = bytearray(make_batch(1, 10, -1, timestamp_step=0))
    segment.append(data, [(0, -1, len(data))])
    assert not segment.should_roll(config, 10, -1, 1, BASE_TIME + 10_000)
    assert segment.should_roll(config, 10, -1, 1, BASE_TIME + 10_001)
    mtime = os.stat(segment.log_path).st_mtime_ns // 1_000_000
    assert segment.largest_timestamp == mtime


def test_full_index_forces_a_roll(tmp_path: pathlib.Path) -> None:
    # 3 offset index slots; 2 time index slots, one of them kept for the final entry
    config = LogConfig(index_interval_bytes=0, max_index_size=24)
    segment = new_segment(tmp_path, 0, config)
    append_batches(segment, [make_batch(1, 5, BASE_TIME)])
    assert not segment.should_roll(config, 10, BASE_TIME, 1, BASE_TIME)
    append_batches(segment, [make_batch(1, 5, BASE_TIME + 5)])
    assert segment.time_index.is_full and not segment.offset_index.is_full
    assert segment.should_roll(config, 10, BASE_TIME, 2, BASE_TIME)


def test_find_offset_by_timestamp(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path, 0, LogConfig(index_interval_bytes=0, max_index_size=4096))
    append_batches(segment, [make_batch(2, 5, BASE_TIME + 10 * i) for i in range(10)])
    batch = segment.find_offset_by_timestamp(BASE_TIME + 41, 0)
    assert batch is not None and batch.base_offset == 8  # batch 4 holds 40 and 41
    batch = segment.find_offset_by_timestamp(BASE_TIME + 42, 0)
    assert batch is not None and batch.base_offset == 10
    batch = segment.find_offset_by_timestamp(BASE_TIME, 15)
    assert batch is not None and batch.base_offset == 14
    assert segment.find_offset_by_timestamp(BASE_TIME + 1000, 0) is None


def test_rename_and_delete(tmp_path: pathlib.Path) -> None:
    segment = new_segment(tmp_path, 7)
    append_batches(segment, [make_batch(1, 5)])
    segment.change_file_suffix(".deleted")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [segment_file_name(7, s + ".deleted") for s in (".index", ".log", ".timeindex")]
    assert segment.read(7, 100) is not None  # open handles survive the rename
    segment.delete()
    assert list(tmp_path.iterdir()) == []
