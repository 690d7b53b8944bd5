"""PartitionLog: appends (leader, follower), reads, roll, truncation, retention, flush, recovery."""

from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import shutil
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage.loader
from protocol.errors import CorruptRecordError, UnsupportedMagicError
from protocol.records import Record, build_batch, verify_batch
from protocol.records.compression import CompressionType
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.epoch import EpochEntry
from storage.errors import (
    InvalidRecordError,
    KiplingStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from storage.log import PartitionLog, parse_topic_partition
from storage.producer_snapshot import list_snapshot_offsets, snapshot_path, write_snapshot
from storage.segment import segment_file_name
from tests.storage.log_helpers import (
    BASE_TIME,
    cut_file,
    expected_index_entries,
    flip_byte,
    headers_of,
    index_entries,
    make_batch,
    scan_file,
    with_magic,
)

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=100, max_index_size=4096, file_delete_delay_ms=0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(BASE_TIME)


def open_log(
    tmp_path: pathlib.Path,
    clock: FakeClock,
    config: LogConfig = SMALL,
    name: str = "topic-0",
    **kwargs: object,
) -> PartitionLog:
    return PartitionLog.open(tmp_path / name, config, clock, **kwargs)  # type: ignore[arg-type]


def read_all(log: PartitionLog, start: int = 0, max_offset: int | None = None) -> bytes:
    """Every batch from ``start`` on, following segments, as bytes."""
    out = b""
    offset = start
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20, max_offset)
        if result.slice is None:
            break
        data = result.slice.read_bytes()
        out += data
        offset = headers_of(data)[-1].next_offset
    return out


def fill(log: PartitionLog, batches: int, records: int = 2, value_size: int = 50, epoch: int = 0) -> None:
    for i in range(batches):
        log.append_as_leader(make_batch(records, value_size, BASE_TIME + i), epoch)


# -- opening ----------------------------------------------------------------------------------------


def test_topic_and_partition_come_from_the_directory_name(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, name="my-topic.v2-13")
    assert (log.topic, log.partition) == ("my-topic.v2", 13)
    assert parse_topic_partition("t-1." + "a" * 32 + "-delete") == ("t", 1)
    with pytest.raises(ValueError):
        parse_topic_partition("nopartition")
    with pytest.raises(ValueError):
        open_log(tmp_path, clock, name="topic-x")


def test_new_log_is_empty(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (0, 0, 0, 0)
    assert [s.base_offset for s in log.segments()] == [0]
    assert log.read(0, 100).slice is None
    assert log.max_timestamp_and_offset() == (-1, -1)


def test_topic_id_is_written_and_checked(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    topic_id = uuid.uuid4()
    open_log(tmp_path, clock, topic_id=topic_id).close()
    assert (tmp_path / "topic-0" / "partition.metadata").exists()
    assert open_log(tmp_path, clock, clean_shutdown=True).topic_id == topic_id
    with pytest.raises(KiplingStorageError):
        open_log(tmp_path, clock, topic_id=uuid.uuid4())


# -- leader appends ---------------------------------------------------------------------------------


def test_leader_append_assigns_offsets_and_stamps_epoch(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    info = log.append_as_leader(make_batch(3, 10, BASE_TIME + 5, base_offset=77), leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 2, 3)
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time) == (BASE_TIME + 7, 2, -1)
    two = make_batch(2, 10, BASE_TIME) + make_batch(1, 10, BASE_TIME + 100)
    info = log.append_as_leader(two, leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.size_in_bytes) == (3, 5, len(two))
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (BASE_TIME + 100, 5)
    assert log.log_end_offset == 6
    headers = headers_of(read_all(log))  # CRCs still valid after stamping
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in headers] == [
        (0, 2, 4),
        (3, 4, 5),
        (5, 5, 5),
    ]
    assert log.leader_epoch_cache.entries() == [EpochEntry(4, 0), EpochEntry(5, 3)]


def test_log_append_time_stamps_batches(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime", max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    clock.set(BASE_TIME + 12345)
    info = log.append_as_leader(make_batch(2, 10, 17) + make_batch(1, 10, 18), 0)
    assert info.log_append_time == BASE_TIME + 12345
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (BASE_TIME + 12345, 1)
    for header in headers_of(read_all(log)):
        assert header.is_log_append_time and header.max_timestamp == BASE_TIME + 12345
    assert log.offset_for_timestamp(BASE_TIME + 12345) == (0, BASE_TIME + 12345, 0)


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        pytest.param(lambda b: b[:-1] + bytes([b[-1] ^ 1]), CorruptRecordError, id="crc"),
        pytest.param(lambda b: b[:-3], CorruptRecordError, id="truncated"),
        pytest.param(lambda b: with_magic(b, 1), UnsupportedMagicError, id="magic1"),
    ],
)
def test_invalid_batches_are_rejected_and_nothing_is_written(
    tmp_path: pathlib.Path, clock: FakeClock, payload: object, error: type[Exception]
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 1)
    good = make_batch(2, 20)
    bad = payload(good)  # type: ignore[operator]
    with pytest.raises(error):
        log.append_as_leader(good + bad, 0)  # the first batch is fine: still nothing is written
    assert log.log_end_offset == 2 and log.size_in_bytes == len(make_batch(2, 50))


def test_count_check_uses_a_valid_crc(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    """A record count that disagrees with the last offset delta, under a valid CRC."""
    from protocol.records.batch import rewrite_crc

    batch = bytearray(make_batch(2, 20))
    batch[57:61] = (5).to_bytes(4, "big")
    rewrite_crc(batch, 0)
    verify_batch(batch)
    with pytest.raises(InvalidRecordError):
        open_log(tmp_path, clock).append_as_leader(batch, 0)


def test_size_limits(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=3000, max_message_bytes=1000, max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch(1, 1000), 0)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(b"".join(make_batch(1, 800) for _ in range(4)), 0)
    # the follower path skips max.message.bytes (the leader accepted it) but not segment.bytes
    log.append_as_follower(make_batch(1, 1000, base_offset=0))
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_follower(make_batch(1, 3000, base_offset=1))
    assert log.log_end_offset == 1


def test_empty_append_writes_nothing(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    info = log.append_as_leader(b"", 0)
    assert info.num_records == 0 and log.log_end_offset == 0 and log.size_in_bytes == 0


# -- follower appends -------------------------------------------------------------------------------


def test_follower_append_keeps_offsets_and_epochs(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    data = make_batch(2, 10, base_offset=0, epoch=1) + make_batch(3, 10, base_offset=2, epoch=3)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 4, 5)
    assert read_all(log) == data  # byte for byte
    assert log.leader_epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 2)]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(make_batch(1, 10, base_offset=4, epoch=3))
    with pytest.raises(InvalidRecordError):
        log.append_as_follower(make_batch(2, 10, base_offset=5) + make_batch(1, 10, base_offset=6))
    log.append_as_follower(make_batch(1, 10, base_offset=9, epoch=3))  # a gap is allowed
    assert log.log_end_offset == 10


def test_follower_append_far_ahead_rolls_at_its_first_offset(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    log.append_as_follower(make_batch(1, 10, base_offset=0))
    far = 2**31 + 10
    log.append_as_follower(make_batch(1, 10, base_offset=far))
    assert [s.base_offset for s in log.segments()] == [0, far]
    assert log.read(far, 100).first_offset == far
    # offsets in the gap read from the next batch
    assert log.read(5, 100).first_offset == far


# -- reads ------------------------------------------------------------------------------------------


def test_read_bounds_and_errors(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 5)  # offsets 0..9 in batches of 2
    size = len(make_batch(2, 50))
    assert log.read(10, 100).slice is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    result = log.read(3, 2 * size + 1)
    assert result.slice is not None and result.slice.length == 2 * size
    assert (result.first_offset, result.log_start_offset, result.log_end_offset) == (2, 0, 10)
    log.update_high_watermark(6)
    result = log.read(0, 10_000, max_offset=log.high_watermark)
    assert result.slice is not None and [h.base_offset for h in headers_of(result.slice.read_bytes())] == [
        0,
        2,
        4,
    ]
    assert log.read(6, 10_000, max_offset=6).slice is None
    assert log.read(0, 10, min_one_batch=False).slice is None
    result = log.read(0, 10)
    assert result.slice is not None and result.slice.length == size


def test_reads_cross_segment_boundaries(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40)
    assert len(log.segments()) > 2
    everything = read_all(log)
    assert [h.base_offset for h in headers_of(everything)] == list(range(0, 80, 2))
    for segment in log.segments():
        result = log.read(segment.base_offset, 1 << 20)
        assert result.slice is not None and result.slice.length == segment.size


def test_update_high_watermark_is_clamped(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 2)
    assert log.update_high_watermark(100) == 4
    assert log.update_high_watermark(-5) == 0


# -- roll -------------------------------------------------------------------------------------------


def test_roll_by_size_starts_new_segment_at_log_end(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40)
    segments = log.segments()
    for before, after in itertools.pairwise(segments):
        assert after.base_offset == before.next_offset
        assert before.size <= SMALL.segment_bytes
        assert before.offset_index.max_entries == before.offset_index.entries  # trimmed
    assert log.recovery_point == segments[-1].base_offset  # the old segment was flushed on roll


def test_roll_by_time(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(segment_ms=1000, max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    log.append_as_leader(make_batch(1, 10, BASE_TIME), 0)
    log.append_as_leader(make_batch(1, 10, BASE_TIME + 1000), 0)
    assert len(log.segments()) == 1
    log.append_as_leader(make_batch(1, 10, BASE_TIME + 1001), 0)
    assert [s.base_offset for s in log.segments()] == [0, 2]


def test_explicit_roll(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    log.roll()  # empty active segment: nothing to do
    assert len(log.segments()) == 1
    fill(log, 1)
    log.roll()
    assert [s.base_offset for s in log.segments()] == [0, 2]
    assert log.recovery_point == 2


# -- truncation -------------------------------------------------------------------------------------


def test_truncate_to(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    for epoch in range(4):
        fill(log, 10, epoch=epoch)  # 20 offsets per epoch
    log.update_high_watermark(70)
    assert not log.truncate_to(80)
    assert log.truncate_to(45)  # inside batch 44..45: the whole batch goes
    assert log.log_end_offset == 44 and log.high_watermark == 44 and log.recovery_point <= 44
    assert all(s.base_offset <= 44 for s in log.segments())
    assert log.leader_epoch_cache.entries() == [EpochEntry(0, 0), EpochEntry(1, 20), EpochEntry(2, 40)]
    assert headers_of(read_all(log))[-1].next_offset == 44
    # appends continue from the new end with a consistent index
    fill(log, 5, epoch=5)
    assert log.log_end_offset == 54
    for segment in log.segments():
        assert index_entries(segment) == expected_index_entries(scan_file(segment.log_path), 100)


def test_truncate_to_the_log_end_drops_epoch_entries_that_cover_no_batch(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    """Kafka's UnifiedLog.truncateTo: no batch goes, but an epoch entry at the log end does (one a
    leader assigned before appending anything, or one retention moved up to the log end), so that a
    follower's last fetched epoch is an epoch its log holds data of."""
    log = open_log(tmp_path, clock)
    fill(log, 2, epoch=0)  # offsets 0..3
    log.leader_epoch_cache.assign(1, 4)  # became leader in epoch 1, appended nothing
    assert not log.truncate_to(4)
    assert log.leader_epoch_cache.entries() == [EpochEntry(0, 0)]
    fill(log, 1, epoch=2)  # offsets 4..5
    log.update_high_watermark(6)
    log.maybe_increment_log_start_offset(6)  # retention: epoch 2 now "starts" at the empty log's end
    assert log.leader_epoch_cache.entries() == [EpochEntry(2, 6)]
    assert not log.truncate_to(9)
    assert log.leader_epoch_cache.entries() == []
    assert (log.log_start_offset, log.log_end_offset) == (6, 6)


def test_truncate_to_a_segment_base_keeps_an_empty_segment(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40)
    base = log.segments()[1].base_offset
    assert log.truncate_to(base)
    assert [s.base_offset for s in log.segments()] == [0, base]
    assert log.segments()[-1].size == 0 and log.log_end_offset == base
    fill(log, 1)
    assert log.log_end_offset == base + 2


def test_truncate_fully_and_start_at(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 30)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert [s.base_offset for s in log.segments()] == [500]
    assert log.leader_epoch_cache.entries() == []
    assert sorted(p.name for p in log.directory.glob("*.log")) == [segment_file_name(500, ".log")]
    fill(log, 1)
    assert log.read(500, 100).first_offset == 500


def test_truncation_deletes_producer_snapshots_above_the_new_end(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    """A snapshot of batches that truncation removed must not be loaded when this replica leads."""
    log = open_log(tmp_path, clock)
    fill(log, 30)
    for offset in (10, 40, 60):
        write_snapshot(snapshot_path(log.directory, offset), [])
    assert log.truncate_to(41)
    assert list_snapshot_offsets(log.directory) == [10, 40]
    log.truncate_fully_and_start_at(500)
    assert list_snapshot_offsets(log.directory) == []


# -- retention --------------------------------------------------------------------------------------


def test_retention_by_time_deletes_a_prefix_below_the_high_watermark(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=10_000, file_delete_delay_ms=0, max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    for i in range(30):
        log.append_as_leader(make_batch(1, 100, BASE_TIME + i * 1000), 0)
    bases = [s.base_offset for s in log.segments()]
    clock.set(BASE_TIME + 40_000)  # every segment's newest record is older than 10 s
    assert log.delete_old_segments() == 0  # HW is 0: nothing may go
    log.update_high_watermark(bases[2])
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == bases[2] and log.segments()[0].base_offset == bases[2]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    # everything qualifies: a new segment is rolled first and the log keeps it
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert [s.base_offset for s in log.segments()] == [30]
    assert log.log_start_offset == 30 and log.segments()[0].size == 0
    assert log.delete_old_segments() == 0  # an empty active segment is never deleted
    assert sorted(p.name for p in log.directory.glob("*.log*")) == [segment_file_name(30, ".log")]


def test_retention_by_time_stops_at_the_first_young_segment(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=10_000, file_delete_delay_ms=0, max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    timestamps = [0] * 8 + [30_000] * 8 + [0] * 8  # a young segment in the middle
    for ts in timestamps:
        log.append_as_leader(make_batch(1, 100, BASE_TIME + ts), 0)
    log.update_high_watermark(log.log_end_offset)
    clock.set(BASE_TIME + 35_000)
    deleted = log.delete_old_segments()
    assert deleted >= 1
    first = log.segments()[0]
    assert first.max_timestamp_so_far == BASE_TIME + 30_000


def test_retention_by_size(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=1000, retention_bytes=2500, file_delete_delay_ms=0, max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    for _ in range(40):
        log.append_as_leader(make_batch(1, 100), 0)
    log.update_high_watermark(log.log_end_offset)
    sizes = [s.size for s in log.segments()]
    total = sum(sizes)
    log.delete_old_segments()
    remaining = log.size_in_bytes
    assert remaining >= 2500
    # one more deletion would have gone below retention.bytes
    assert remaining - log.segments()[0].size < 2500
    assert total - remaining == sum(sizes[: len(sizes) - len(log.segments())])


def test_log_start_offset_breach_and_delete_records(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40)
    log.update_high_watermark(50)
    second = log.segments()[1].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(51)
    log.maybe_increment_log_start_offset(second + 3)
    assert log.log_start_offset == second + 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(second + 2, 100)
    assert log.read(second + 3, 100).first_offset == second + 2  # batch granularity
    assert log.delete_old_segments() == 1
    assert log.segments()[0].base_offset == second and log.log_start_offset == second + 3


def test_deleted_files_wait_for_file_delete_delay(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(
        segment_bytes=1000, retention_ms=1000, file_delete_delay_ms=60_000, max_index_size=4096
    )
    log = open_log(tmp_path, clock, config)
    for _ in range(12):
        log.append_as_leader(make_batch(1, 100), 0)
    log.update_high_watermark(log.log_end_offset)
    held = log.read(0, 1 << 20).slice
    clock.advance(2000)
    deleted = log.delete_old_segments()
    assert deleted >= 1
    pending = sorted(p.name for p in log.directory.glob("*.deleted"))
    assert len(pending) == 3 * deleted
    assert held is not None and held.read_bytes()  # a slice handed out before still reads
    clock.advance(59_999)
    log.delete_old_segments()
    assert len(list(log.directory.glob("*.deleted"))) == 3 * deleted
    clock.advance(1)
    log.delete_old_segments()
    assert list(log.directory.glob("*.deleted")) == []


# -- flush ------------------------------------------------------------------------------------------


def test_flush_messages(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(flush_messages=5, max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    log.append_as_leader(make_batch(3), 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(2), 0)
    assert log.recovery_point == 5
    log.append_as_leader(make_batch(1), 0)
    assert log.recovery_point == 5
    log.flush(up_to=100)  # capped at the log end offset
    assert log.recovery_point == 6


def test_flush_ms(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(flush_ms=1000, max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    log.append_as_leader(make_batch(1), 0)
    clock.advance(999)
    log.append_as_leader(make_batch(1), 0)
    assert log.recovery_point == 0
    clock.advance(1)
    log.append_as_leader(make_batch(1), 0)
    assert log.recovery_point == 3


def test_close_flushes_and_closed_log_refuses_work(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 3)
    log.close()
    assert log.recovery_point == 6
    log.close()  # idempotent
    with pytest.raises(KiplingStorageError):
        log.append_as_leader(make_batch(1), 0)
    with pytest.raises(KiplingStorageError):
        log.read(0, 100)


def test_delete_removes_the_directory(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 3)
    log.delete()
    assert not (tmp_path / "topic-0").exists()


# -- timestamps -------------------------------------------------------------------------------------


def test_offset_for_timestamp(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    for i in range(30):  # batch i: offsets 2i, 2i+1 at times 10i, 10i+3
        log.append_as_leader(make_batch(2, 50, BASE_TIME + 10 * i, timestamp_step=3), leader_epoch=i // 10)
    assert log.offset_for_timestamp(BASE_TIME + 41) == (9, BASE_TIME + 43, 0)
    assert log.offset_for_timestamp(BASE_TIME + 43) == (9, BASE_TIME + 43, 0)
    assert log.offset_for_timestamp(BASE_TIME + 44) == (10, BASE_TIME + 50, 0)
    assert log.offset_for_timestamp(BASE_TIME + 150) == (30, BASE_TIME + 150, 1)
    assert log.offset_for_timestamp(BASE_TIME) == (0, BASE_TIME, 0)
    assert log.offset_for_timestamp(BASE_TIME + 1000) is None
    assert log.offset_for_timestamp(-2) == (0, -1, 0)
    assert log.offset_for_timestamp(-1) == (60, -1, 2)
    assert log.offset_for_timestamp(-3) == (59, BASE_TIME + 293, 2)
    assert log.max_timestamp_and_offset() == (BASE_TIME + 293, 59)
    log.update_high_watermark(60)
    log.maybe_increment_log_start_offset(21)
    assert log.offset_for_timestamp(BASE_TIME) == (21, BASE_TIME + 103, 1)


def test_max_timestamp_is_the_first_record_holding_it(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(1, 5, BASE_TIME + 5), 0)
    log.append_as_leader(make_batch(3, 5, BASE_TIME + 9, timestamp_step=0), 0)  # offsets 1..3 at +9
    log.append_as_leader(make_batch(1, 5, BASE_TIME + 9), 0)
    assert log.max_timestamp_and_offset() == (BASE_TIME + 9, 1)


# -- recovery ---------------------------------------------------------------------------------------


def test_clean_reopen_keeps_everything(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40, epoch=2)
    before = read_all(log)
    bases = [s.base_offset for s in log.segments()]
    indexes = [index_entries(s) for s in log.segments()]
    log.close()
    log = open_log(tmp_path, clock, clean_shutdown=True, recovery_point=0)
    assert read_all(log) == before
    assert [s.base_offset for s in log.segments()] == bases
    assert [index_entries(s) for s in log.segments()] == indexes
    assert log.recovery_point == log.log_end_offset == 80
    assert log.leader_epoch_cache.entries() == [EpochEntry(2, 0)]
    fill(log, 1)  # the active segment's indexes have room again
    assert log.log_end_offset == 82


def crash(log: PartitionLog, into: pathlib.Path) -> pathlib.Path:
    """Snapshot the files as a crash would leave them (indexes untrimmed, nothing fsynced), then drop
    the live log. Returns the snapshot directory, named like the original."""
    target = into / log.directory.name
    shutil.copytree(log.directory, target)
    log.close()
    return target


@settings(max_examples=25, deadline=None)
@given(cut_fraction=st.floats(0, 1), seed=st.integers(0, 2**16))
def test_torn_tail_loses_nothing_before_the_cut(
    tmp_path_factory: pytest.TempPathFactory, cut_fraction: float, seed: int
) -> None:
    base = tmp_path_factory.mktemp("torn")
    clock = FakeClock(BASE_TIME)
    log = open_log(base / "live", clock)
    for i in range(25):
        log.append_as_leader(make_batch(1 + (seed + i) % 4, 20 + (seed * i) % 90, BASE_TIME + i), i // 10)
    recovery_point = log.recovery_point
    active = log.segments()[-1]
    active_base, active_size = active.base_offset, active.size
    before = scan_file(active.log_path)
    older = read_all(log)[: sum(s.size for s in log.segments()[:-1])]
    snapshot = crash(log, base / "crashed")
    cut = int(active_size * cut_fraction)
    cut_file(snapshot / segment_file_name(active_base, ".log"), cut)
    log = PartitionLog.open(snapshot, SMALL, clock, recovery_point=recovery_point)
    survivors = [(p, h) for p, h in before if p + h.size <= cut]
    expected_end = survivors[-1][1].next_offset if survivors else active_base
    assert log.log_end_offset == expected_end
    assert log.recovery_point == expected_end
    assert scan_file(log.segments()[-1].log_path) == survivors
    assert read_all(log)[: len(older)] == older
    assert all(e.start_offset < max(expected_end, 1) for e in log.leader_epoch_cache.entries())
    for segment in log.segments():
        assert index_entries(segment) == expected_index_entries(scan_file(segment.log_path), 100)


def test_corrupt_byte_truncates_there_and_drops_later_segments(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path / "live", clock)
    fill(log, 40)
    segments = log.segments()
    victim = segments[1]
    batches = scan_file(victim.log_path)
    later = [s.base_offset for s in segments[2:]]
    snapshot = crash(log, tmp_path / "crashed")
    flip_byte(snapshot / segment_file_name(victim.base_offset, ".log"), batches[4][0] + 80)
    log = PartitionLog.open(snapshot, SMALL, clock, recovery_point=victim.base_offset)
    assert log.log_end_offset == batches[4][1].base_offset
    assert [s.base_offset for s in log.segments()] == [0, victim.base_offset]
    assert later and not any((snapshot / segment_file_name(b, ".log")).exists() for b in later)
    assert [h.base_offset for h in headers_of(read_all(log))] == list(range(0, batches[4][1].base_offset, 2))


def test_corruption_below_the_recovery_point_is_not_scanned(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    """As in Kafka: segments below the recovery point were fsynced and are trusted."""
    log = open_log(tmp_path / "live", clock)
    fill(log, 40)
    first = log.segments()[0]
    end = log.log_end_offset
    snapshot = crash(log, tmp_path / "crashed")
    flip_byte(snapshot / segment_file_name(0, ".log"), 100)
    log = PartitionLog.open(snapshot, SMALL, clock, recovery_point=end)
    assert log.log_end_offset == end and log.segments()[0].size == first.size


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40)
    indexes = [index_entries(s) for s in log.segments()]
    log.close()
    directory = tmp_path / "topic-0"
    (directory / segment_file_name(0, ".index")).unlink()
    second = log.segments()[1].base_offset
    (directory / segment_file_name(second, ".index")).write_bytes(b"\x00\x00\x00\x09\x00\x00\x99\x99" * 3)
    log = open_log(tmp_path, clock, clean_shutdown=True)
    assert [index_entries(s) for s in log.segments()] == indexes
    assert log.log_end_offset == 80


def test_leftover_files_are_cleaned_up(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 5)
    log.close()
    directory = tmp_path / "topic-0"
    (directory / (segment_file_name(3, ".log") + ".deleted")).write_bytes(b"x")
    (directory / (segment_file_name(3, ".index") + ".cleaned")).write_bytes(b"x")
    (directory / segment_file_name(900, ".index")).write_bytes(b"")  # orphan
    (directory / segment_file_name(900, ".timeindex")).write_bytes(b"")
    log = open_log(tmp_path, clock, clean_shutdown=True)
    names = sorted(p.name for p in directory.iterdir() if p.name.startswith("0"))
    assert names == [segment_file_name(0, s) for s in (".index", ".log", ".timeindex")]
    assert log.log_end_offset == 10


def test_swap_file_replaces_the_segments_it_covers(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40)
    bases = [s.base_offset for s in log.segments()]
    log.close()
    directory = tmp_path / "topic-0"
    # a "cleaned" replacement of the first two segments: one batch per original batch range end
    swap = make_batch(1, 5, base_offset=bases[2] - 1)
    (directory / (segment_file_name(0, ".log") + ".swap")).write_bytes(swap)
    log = open_log(tmp_path, clock, clean_shutdown=True)
    assert [s.base_offset for s in log.segments()] == [0, *bases[2:]]
    assert headers_of(read_all(log))[0].base_offset == bases[2] - 1


def test_log_start_checkpoint_above_the_end_empties_the_log(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 5, epoch=1)
    log.close()
    log = open_log(tmp_path, clock, clean_shutdown=True, log_start_offset=100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert [s.base_offset for s in log.segments()] == [100]
    assert log.leader_epoch_cache.entries() == []


def test_log_start_checkpoint_inside_the_log(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 5, epoch=1)
    log.close()
    log = open_log(tmp_path, clock, clean_shutdown=True, log_start_offset=3)
    assert (log.log_start_offset, log.log_end_offset) == (3, 10)
    assert log.leader_epoch_cache.entries() == [EpochEntry(1, 3)]


def test_epoch_cache_is_cut_to_the_recovered_end(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path / "live", clock)
    fill(log, 2, epoch=1)
    log.leader_epoch_cache.assign(7, 4)  # a new leader epoch assigned before its data reached disk
    log.leader_epoch_cache.assign(8, 9)
    snapshot = crash(log, tmp_path / "crashed")
    log = PartitionLog.open(snapshot, SMALL, clock)
    assert log.leader_epoch_cache.entries() == [EpochEntry(1, 0)]


def test_recovery_without_indexes_or_checkpoint(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    """Only .log files: every index is rebuilt and the epoch cache comes back from the batches."""
    log = open_log(tmp_path, clock)
    for epoch in range(3):
        fill(log, 15, epoch=epoch)
    content = read_all(log)
    log.close()
    directory = tmp_path / "topic-0"
    for path in directory.iterdir():
        if not path.name.endswith(".log"):
            path.unlink()
    log = open_log(tmp_path, clock)
    assert read_all(log) == content
    assert log.leader_epoch_cache.entries() == [EpochEntry(0, 0), EpochEntry(1, 30), EpochEntry(2, 60)]
    assert os.path.exists(directory / "leader-epoch-checkpoint")


def test_append_after_crash_recovery_uses_all_the_batches(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path / "live", clock)
    fill(log, 3)
    snapshot = crash(log, tmp_path / "crashed")
    log = PartitionLog.open(snapshot, SMALL, clock)
    info = log.append_as_leader(make_batch(1), 0)
    assert info.first_offset == 6


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_offset_for_timestamp_inside_compressed_batches(
    tmp_path: pathlib.Path, clock: FakeClock, codec: CompressionType
) -> None:
    log = open_log(tmp_path, clock)
    records = [Record(b"v%d" % i, timestamp=BASE_TIME + t) for i, t in enumerate([5, 1, 9, 7, 12])]
    log.append_as_leader(build_batch(records, compression=codec), 3)
    assert log.offset_for_timestamp(BASE_TIME + 6) == (2, BASE_TIME + 9, 3)
    assert log.offset_for_timestamp(BASE_TIME + 10) == (4, BASE_TIME + 12, 3)
    assert log.max_timestamp_and_offset() == (BASE_TIME + 12, 4)


def test_roll_jitter_is_below_segment_jitter_and_segment_ms(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(segment_ms=50, segment_jitter_ms=1000, max_index_size=4096)
    log = open_log(tmp_path, clock, config)
    for i in range(20):
        log.append_as_leader(make_batch(1, 5, BASE_TIME + 100 * i), 0)
    jitters = [segment.roll_jitter_ms for segment in log.segments()]
    assert len(jitters) == 20 and all(0 <= jitter < 50 for jitter in jitters)


def test_a_compact_only_log_has_no_size_or_time_retention(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    """Kafka's LogConfig.delete: without delete in cleanup.policy only the log start offset deletes."""
    config = LogConfig(
        segment_bytes=1000,
        retention_bytes=100,
        retention_ms=1,
        file_delete_delay_ms=0,
        max_index_size=4096,
        cleanup_policy=("compact",),
    )
    log = open_log(tmp_path, clock, config)
    for _ in range(20):
        log.append_as_leader(make_batch(1, 100), 0)
    log.update_high_watermark(log.log_end_offset)
    clock.advance(10_000)
    before = len(log.segments())
    assert log.delete_old_segments() == 0 and len(log.segments()) == before
    log.maybe_increment_log_start_offset(log.segments()[2].base_offset)
    assert log.delete_old_segments() == 2


# -- descriptors ------------------------------------------------------------------------------------


def descriptors_into(directory: pathlib.Path) -> list[str]:
    """The names of the files of ``directory`` this process holds open."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = pathlib.Path(os.readlink(f"/proc/self/fd/{fd}"))
            if target.parent == directory:
                names.append(target.name)
    return sorted(names)


def test_an_inactive_segment_holds_only_its_log_open(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    """The descriptor limit caps a broker's partitions: an inactive segment's indexes are in memory
    and hold no descriptor; they still answer lookups, take a truncation back to active, and a
    reopened log finds them intact."""
    log = open_log(tmp_path, clock)
    fill(log, 40)
    segments = log.segments()
    assert len(segments) > 3
    active = segments[-1]
    log.flush()
    expected = sorted(
        [s.log_path.name for s in segments] + [active.offset_index.path.name, active.time_index.path.name]
    )
    assert descriptors_into(log.directory) == expected
    everything = read_all(log)  # reads walk every segment through its in-memory offset index
    assert [h.base_offset for h in headers_of(everything)] == list(range(0, 80, 2))
    assert log.offset_for_timestamp(BASE_TIME + 3)[0] == 5  # batch 2 (offsets 4, 5 at +2, +3): inactive
    middle = segments[1]
    assert log.truncate_to(middle.base_offset + 2)  # the middle segment is written again
    fill(log, 10, epoch=1)
    assert headers_of(read_all(log))[-1].next_offset == log.log_end_offset
    log.close()
    reopened = open_log(tmp_path, clock)
    assert [(s.base_offset, index_entries(s)) for s in reopened.segments()] == [
        (s.base_offset, expected_index_entries(scan_file(s.log_path), SMALL.index_interval_bytes))
        for s in reopened.segments()
    ]
    reopened.close()


def test_loading_keeps_one_descriptor_per_checked_inactive_segment(
    tmp_path: pathlib.Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart of a log of many segments never holds three descriptors for each of them: those it
    only checks (clean, or below the recovery point) release their indexes at once."""
    log = open_log(tmp_path, clock)
    fill(log, 40)
    count = len(log.segments())
    directory = log.directory
    log.close()
    seen: list[list[str]] = []
    recover = storage.loader._recover_segments

    def spy(*args: object) -> object:
        seen.append(descriptors_into(directory))
        return recover(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(storage.loader, "_recover_segments", spy)
    for clean in (True, False):  # after a crash, with the recovery point in the last segment
        seen.clear()
        reopened = open_log(tmp_path, clock, clean_shutdown=clean, recovery_point=log.log_end_offset)
        assert len(seen) == 1 and len(seen[0]) == count + 2  # every .log, the last segment's indexes
        assert len(descriptors_into(directory)) == count + 2
        reopened.close()
