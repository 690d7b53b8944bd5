"""Cleanable range and dirtiness (Kafka's LogCleanerManager.cleanableOffsets / calculateCleanableBytes)."""

from __future__ import annotations

import pathlib

from storage.cleaner import cleanable_range
from tests.storage.cleaner.helpers import BASE_TIME, Writer, open_log

HOUR = 3_600_000


def three_segments(tmp_path: pathlib.Path) -> Writer:
    """Segments [0, 1] [2, 3] and the active [4], record timestamps BASE_TIME + hours."""
    w = Writer(open_log(tmp_path))
    for i in range(5):
        w.put([(b"k%d" % i, b"v" * 50)], timestamp=BASE_TIME + i * HOUR)
        if i in (1, 3):
            w.log.roll()
    return w


def test_bounds_active_segment_and_lso(tmp_path: pathlib.Path) -> None:
    log = three_segments(tmp_path).log
    now = BASE_TIME + 10 * HOUR
    r = cleanable_range(log, now, last_clean_offset=None, last_stable_offset=log.log_end_offset)
    assert (r.first_dirty_offset, r.first_uncleanable_offset) == (0, 4)
    sizes = [s.size for s in log.segments()]
    assert (
        r.cleanable_bytes == sizes[0] + sizes[1] == r.total_bytes and r.dirty_ratio == 1.0 and r.should_clean
    )
    # an LSO inside segment [2, 3] stops cleaning at that segment's base
    r = cleanable_range(log, now, last_clean_offset=None, last_stable_offset=3)
    assert r.first_uncleanable_offset == 2 and r.cleanable_bytes == sizes[0]


def test_checkpoint_reset_and_ratio(tmp_path: pathlib.Path) -> None:
    log = three_segments(tmp_path).log
    now = BASE_TIME + 10 * HOUR
    sizes = [s.size for s in log.segments()]
    r = cleanable_range(log, now, last_clean_offset=2, last_stable_offset=log.log_end_offset)
    assert r.first_dirty_offset == 2 and not r.checkpoint_reset
    assert r.cleanable_bytes == sizes[1] and r.total_bytes == sizes[0] + sizes[1]
    assert r.dirty_ratio == sizes[1] / (sizes[0] + sizes[1])
    assert (
        cleanable_range(
            log, now, last_clean_offset=2, last_stable_offset=5, min_cleanable_ratio=0.9
        ).should_clean
        is False
    )
    r = cleanable_range(log, now, last_clean_offset=99, last_stable_offset=log.log_end_offset)
    assert r.first_dirty_offset == 0 and r.checkpoint_reset
    r = cleanable_range(log, now, last_clean_offset=4, last_stable_offset=log.log_end_offset)
    assert r.cleanable_bytes == 0 and not r.should_clean


def test_min_compaction_lag_holds_back_recent_segments(tmp_path: pathlib.Path) -> None:
    log = three_segments(tmp_path).log
    now = BASE_TIME + 4 * HOUR  # segment [2, 3] holds a record 1 hour old
    r = cleanable_range(
        log,
        now,
        last_clean_offset=None,
        last_stable_offset=log.log_end_offset,
        min_compaction_lag_ms=2 * HOUR,
    )
    assert r.first_uncleanable_offset == 2
    r = cleanable_range(
        log,
        now,
        last_clean_offset=None,
        last_stable_offset=log.log_end_offset,
        min_compaction_lag_ms=5 * HOUR,
    )
    assert r.first_uncleanable_offset == 0 and r.cleanable_bytes == 0 and not r.should_clean


def test_max_compaction_lag_forces_cleaning(tmp_path: pathlib.Path) -> None:
    log = three_segments(tmp_path).log
    now = BASE_TIME + 10 * HOUR
    lazy = dict(last_clean_offset=2, last_stable_offset=log.log_end_offset, min_cleanable_ratio=0.99)
    assert not cleanable_range(log, now, **lazy).should_clean  # type: ignore[arg-type]
    r = cleanable_range(log, now, max_compaction_lag_ms=7 * HOUR, **lazy)  # type: ignore[arg-type]
    # the first batch of dirty segment [2, 3] is 8 hours old: 1 hour overdue
    assert r.max_compaction_delay_ms == HOUR and r.should_clean
