"""LogCleanerManager on a fake clock: the filthiest dirty compacted log is taken, in progress until
reported back, checkpointed when done; min/max compaction lag; uncleanable partitions are skipped."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from cleaner.manager import CleanableLog, LogCleanerManager
from storage.cleaner import CleanerOffsetCheckpoint
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.storage.cleaner.helpers import BASE_TIME, Writer

COMPACT = LogConfig(segment_bytes=10_000_000, file_delete_delay_ms=0, cleanup_policy=("compact",))


def make_log(log_dir: pathlib.Path, name: str, clock: FakeClock, config: LogConfig = COMPACT) -> PartitionLog:
    return PartitionLog.open(log_dir / name, config, clock)


def fill(log: PartitionLog, updates: int, keys: int = 2, segments: int = 2) -> None:
    w = Writer(log)
    for _ in range(segments):
        for i in range(updates):
            w.put([(b"k%d" % (i % keys), b"v%d" % i)])
        log.roll()
    log.update_high_watermark(log.log_end_offset)


def candidate(log_dir: pathlib.Path, log: PartitionLog) -> CleanableLog:
    return CleanableLog(
        (log.topic, log.partition), log_dir, log, log.high_watermark, lambda: {}, lambda: not log.closed
    )


def test_takes_the_filthiest_dirty_log_and_checkpoints_it(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    manager = LogCleanerManager([tmp_path], clock)
    busy, quiet, plain = (make_log(tmp_path, f"{n}-0", clock) for n in ("busy", "quiet", "plain"))
    fill(busy, 20)
    fill(quiet, 20)
    plain.config = LogConfig(segment_bytes=10_000_000)  # delete policy: never a candidate
    fill(plain, 20)
    # quiet was cleaned up to its second segment: only that one is dirty (ratio 1/2, not above 0.5);
    # gone-0 was deleted since its last cleaning
    CleanerOffsetCheckpoint(tmp_path).update("quiet", 0, quiet.segments()[1].base_offset)
    CleanerOffsetCheckpoint(tmp_path).update("gone", 0, 7)
    logs = [candidate(tmp_path, log) for log in (busy, quiet, plain)]
    taken = manager.grab_filthiest(tmp_path, logs)
    assert taken is not None and taken.candidate.log is busy
    assert taken.range.first_dirty_offset == 0 and taken.range.dirty_ratio == 1.0
    assert manager.max_dirty_percent == 100 and manager.in_progress(("busy", 0))
    assert manager.grab_filthiest(tmp_path, logs) is None  # busy in progress; quiet not dirty enough
    manager.done_cleaning(taken, 40)
    assert manager.first_dirty_offsets(tmp_path) == {("busy", 0): 40, ("quiet", 0): 20}
    assert not manager.in_progress(("busy", 0))
    assert manager.grab_filthiest(tmp_path, logs) is None  # everything below the active segment is clean
    for log in (busy, quiet, plain):
        log.close()


def test_min_ratio_and_lags(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    manager = LogCleanerManager([tmp_path], clock)
    log = make_log(tmp_path, "t-0", clock)
    fill(log, 10)
    CleanerOffsetCheckpoint(tmp_path).update("t", 0, log.segments()[1].base_offset)
    logs = [candidate(tmp_path, log)]
    assert manager.grab_filthiest(tmp_path, logs) is None  # ratio 0.5 is not above 0.5
    log.config = dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.4)
    taken = manager.grab_filthiest(tmp_path, logs)
    assert taken is not None
    manager.abort_cleaning(taken)
    # min.compaction.lag.ms holds back segments with records younger than the lag
    log.config = dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.4, min_compaction_lag_ms=60_000)
    assert manager.grab_filthiest(tmp_path, logs) is None
    clock.advance(60_001)
    taken = manager.grab_filthiest(tmp_path, logs)
    assert taken is not None
    manager.abort_cleaning(taken)
    # max.compaction.lag.ms forces a log whose ratio is too low
    log.config = dataclasses.replace(COMPACT, max_compaction_lag_ms=1000)
    taken = manager.grab_filthiest(tmp_path, logs)
    assert taken is not None and taken.range.dirty_ratio == 0.5 and taken.range.max_compaction_delay_ms > 0
    assert manager.max_compaction_delay_ms > 0
    log.close()


def test_uncleanable_partitions_are_skipped_and_counted(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    manager = LogCleanerManager([tmp_path], clock)
    log = make_log(tmp_path, "t-0", clock)
    fill(log, 10)
    logs = [candidate(tmp_path, log)]
    taken = manager.grab_filthiest(tmp_path, logs)
    assert taken is not None
    manager.mark_uncleanable(taken)
    assert manager.uncleanable_partitions_count(tmp_path) == 1
    assert manager.uncleanable_bytes(tmp_path) == log.size_in_bytes
    assert manager.grab_filthiest(tmp_path, logs) is None
    clock.advance(500)
    assert clock.time_ms() - manager.last_run_ms == 500
    log.close()


def test_a_log_dir_spelled_differently_is_the_same_log_dir(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower process gets the log dirs from the broker's configuration (maybe relative) and
    finds its logs' directories through the handovers: both spellings name one log dir."""
    monkeypatch.chdir(tmp_path)
    clock = FakeClock(BASE_TIME)
    manager = LogCleanerManager([pathlib.Path("logs")], clock)
    log = make_log(tmp_path / "logs", "t-0", clock)
    fill(log, 10)
    spelled = CleanableLog(("t", 0), tmp_path / "logs" / ".", log, log.high_watermark, dict, lambda: True)
    assert manager.grab_filthiest(tmp_path / "logs", [spelled]) is not None
    log.close()
