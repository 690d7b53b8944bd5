"""A log damaged while it was closed: a read that finds a corrupt batch marks the log damaged, the
next owner re-validates it from the damaged segment and cuts it at its last valid batch, and a
segment cut inside its last batch is noticed (and cut back) even at a load after a clean shutdown.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import CorruptLogError
from storage.handover import close_for_handover, open_handed_over_log
from storage.log import PartitionLog
from storage.segment import segment_file_name
from tests.storage.log_helpers import BASE_TIME, headers_of, make_batch, scan_file

pytestmark = pytest.mark.timeout(30)

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=100, max_index_size=4096, file_delete_delay_ms=0)
LAST_OFFSET_DELTA_AT = 23
"""Where a batch header's LastOffsetDelta starts (after BaseOffset, Length, epoch, magic, CRC, attributes)."""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(BASE_TIME)


def open_log(tmp_path: pathlib.Path, clock: FakeClock, **kwargs: object) -> PartitionLog:
    return PartitionLog.open(tmp_path / "topic-0", SMALL, clock, **kwargs)  # type: ignore[arg-type]


def fill(log: PartitionLog, batches: int) -> None:
    for i in range(batches):
        log.append_as_leader(make_batch(2, 50, BASE_TIME + i), 0)


def flip_header(path: pathlib.Path, position: int, count: int = 16) -> None:
    """Invert ``count`` bytes from the LastOffsetDelta of the batch at ``position`` (it turns negative)."""
    with open(path, "r+b") as f:
        f.seek(position + LAST_OFFSET_DELTA_AT)
        data = f.read(count)
        f.seek(position + LAST_OFFSET_DELTA_AT)
        f.write(bytes(b ^ 0xFF for b in data))


def read_all(log: PartitionLog) -> bytes:
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1)  # one batch per read: every header is looked at
        assert result.slice is not None
        data = result.slice.read_bytes()
        out += data
        offset = headers_of(data)[-1].next_offset
    return out


def test_a_read_meeting_a_corrupt_header_marks_the_damaged_segment(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40)
    second = log.segments()[1]
    batches = scan_file(second.log_path)
    position, victim = batches[len(batches) // 2]
    log.close()
    flip_header(second.log_path, position)
    log = open_log(tmp_path, clock, clean_shutdown=True)  # trusted: the damage is not looked for
    assert log.log_end_offset == 80
    assert log.damaged_from is None
    assert log.read(0, 1 << 20).slice is not None  # the first segment is intact
    with pytest.raises(CorruptLogError) as caught:
        log.read(victim.base_offset, 1)
    assert caught.value.damaged_from == second.base_offset
    assert log.damaged_from == second.base_offset
    assert log.recovery_start_offset == second.base_offset
    log.close()


def test_a_damaged_log_is_handed_over_for_recovery_and_cut_at_its_last_valid_batch(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 40)
    segments = log.segments()
    assert len(segments) >= 3
    second = segments[1]
    batches = scan_file(second.log_path)
    position, victim = batches[len(batches) // 2]
    intact = read_all(log)[: sum(s.size for s in segments[:1]) + position]
    log.close()
    flip_header(second.log_path, position)
    log = open_log(tmp_path, clock, clean_shutdown=True)
    with pytest.raises(CorruptLogError):
        log.read(victim.base_offset, 1)

    handover = close_for_handover(log)
    assert not handover.clean
    assert handover.recovery_point == second.base_offset
    repaired = open_handed_over_log(handover, SMALL, clock)
    assert repaired.log_end_offset == victim.base_offset  # the last valid batch ends right before it
    assert [s.base_offset for s in repaired.segments()] == [s.base_offset for s in segments[:2]]
    assert not (tmp_path / "topic-0" / segment_file_name(segments[2].base_offset, ".log")).exists()
    assert repaired.damaged_from is None
    assert read_all(repaired) == intact
    assert os.path.getsize(second.log_path) == position
    assert repaired.high_watermark <= repaired.log_end_offset
    # a follower fetches the rest again from its leader
    repaired.append_as_follower(make_batch(2, 50, base_offset=victim.base_offset, epoch=0))
    assert repaired.log_end_offset == victim.base_offset + 2
    repaired.close()


def test_an_undamaged_log_is_still_handed_over_clean(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 5)
    handover = close_for_handover(log)
    assert handover.clean
    assert handover.recovery_point == handover.log_end_offset == 10


def test_a_damaged_batch_found_by_an_offset_for_timestamp_lookup(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 3)
    position, _ = scan_file(log.active_segment.log_path)[1]
    path = log.active_segment.log_path
    log.close()
    flip_header(path, position)
    log = open_log(tmp_path, clock, clean_shutdown=True)
    with pytest.raises(CorruptLogError):
        log.offset_for_timestamp(BASE_TIME + 2)  # batch 0 ends at +1: the lookup reaches batch 1
    assert log.damaged_from == 0
    log.close()


# -- a segment cut inside its last batch, loaded after a clean shutdown -------------------------------


@pytest.mark.parametrize("cut", [10, 70])
def test_a_clean_load_cuts_an_active_segment_that_ends_inside_a_batch(
    tmp_path: pathlib.Path, clock: FakeClock, cut: int
) -> None:
    """``cut`` bytes short: inside the last batch's records (70 leaves its whole header) or its CRC'd tail."""
    log = open_log(tmp_path, clock)
    fill(log, 3)
    path = log.active_segment.log_path
    batches = scan_file(path)
    last_position, last = batches[-1]
    log.close()
    with open(path, "r+b") as f:
        f.truncate(last_position + last.size - cut)
    log = open_log(tmp_path, clock, clean_shutdown=True)
    assert log.log_end_offset == last.base_offset
    assert os.path.getsize(path) == last_position
    log.append_as_leader(make_batch(2, 50), 0)  # appended right after the last whole batch
    assert [h.base_offset for _, h in scan_file(path)] == [0, 2, 4]
    log.close()


def test_a_clean_load_cuts_garbage_after_the_last_batch(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 2)
    path = log.active_segment.log_path
    size = os.path.getsize(path)
    log.close()
    first_batch = path.read_bytes()[: scan_file(path)[0][1].size]
    with open(path, "ab") as f:
        f.write(first_batch[:-5])  # a header that looks whole, a body that is not
    log = open_log(tmp_path, clock, clean_shutdown=True)
    assert log.log_end_offset == 4
    assert os.path.getsize(path) == size
    log.close()


def test_a_clean_load_of_a_whole_active_segment_changes_nothing(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 3)
    path = log.active_segment.log_path
    before = path.read_bytes()
    log.close()
    log = open_log(tmp_path, clock, clean_shutdown=True)
    assert log.log_end_offset == 6
    assert path.read_bytes() == before
    log.close()


def test_a_clean_load_of_a_middle_segment_cut_short_deletes_the_later_ones(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    """A segment before the active one that ends inside a batch is cut back, and the segments after
    it go, as crash recovery does: the log never has offsets missing in its middle (a follower then
    fetches the rest again)."""
    log = open_log(tmp_path, clock)
    fill(log, 40)
    segments = log.segments()
    assert len(segments) >= 3
    second = segments[1]
    last_position, last = scan_file(second.log_path)[-1]
    log.close()
    with open(second.log_path, "r+b") as f:
        f.truncate(last_position + last.size - 10)
    log = open_log(tmp_path, clock, clean_shutdown=True)
    assert [s.base_offset for s in log.segments()] == [s.base_offset for s in segments[:2]]
    assert log.log_end_offset == last.base_offset
    headers = headers_of(read_all(log))
    ends = [h.last_offset + 1 for h in headers]
    assert [h.base_offset for h in headers] == [0, *ends[:-1]], "no offsets missing in the middle"
    assert ends[-1] == log.log_end_offset
