"""The first dirty offset of a deleted topic must not apply to the topic created again under
its name. Kafka drops a log's cleaner checkpoint entry when it deletes the log; kipling kept it until
a round in the log dir found the directory gone, so a topic deleted and created again in between
started with the old offset: its head counted as clean, never put in an offset map (its duplicates
and tombstones kept for good). Follower processes keep these offsets in memory: same story."""

from __future__ import annotations

import pathlib
import shutil
import uuid

import pytest

from cleaner.manager import CleanableLog, InMemoryOffsets, LogCleanerManager, OffsetStore
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.storage.cleaner.helpers import BASE_TIME, Writer

pytestmark = pytest.mark.timeout(30)

COMPACT = LogConfig(segment_bytes=10_000_000, file_delete_delay_ms=0, cleanup_policy=("compact",))


def dirty(log_dir: pathlib.Path, clock: FakeClock, topic_id: uuid.UUID) -> PartitionLog:
    log = PartitionLog.open(log_dir / "t-0", COMPACT, clock, topic_id=topic_id)
    w = Writer(log)
    for _ in range(3):
        for i in range(20):
            w.put([(b"k%d" % (i % 2), b"v%d" % i)])
        log.roll()
    log.update_high_watermark(log.log_end_offset)
    return log


def candidate(log_dir: pathlib.Path, log: PartitionLog) -> CleanableLog:
    return CleanableLog(("t", 0), log_dir, log, log.high_watermark, lambda: {}, lambda: not log.closed)


@pytest.mark.parametrize("in_memory", [False, True])
def test_a_topic_created_again_is_cleaned_from_its_start(tmp_path: pathlib.Path, in_memory: bool) -> None:
    clock = FakeClock(BASE_TIME)
    offsets: dict[pathlib.Path, OffsetStore] = {}
    manager = (
        LogCleanerManager([tmp_path], clock, lambda d: offsets.setdefault(d, InMemoryOffsets()))
        if in_memory
        else LogCleanerManager([tmp_path], clock)
    )
    old = dirty(tmp_path, clock, uuid.uuid4())
    taken = manager.grab_filthiest(tmp_path, [candidate(tmp_path, old)])
    assert taken is not None
    manager.done_cleaning(taken, 40)  # cleaned up to its third segment
    old.delete()
    shutil.rmtree(tmp_path / "t-0", ignore_errors=True)
    new = dirty(tmp_path, clock, uuid.uuid4())  # created again, as long as the old one
    taken = manager.grab_filthiest(tmp_path, [candidate(tmp_path, new)])
    assert taken is not None
    assert taken.range.first_dirty_offset == 0, "the deleted topic's first dirty offset was used"
    manager.done_cleaning(taken, 40)
    again = manager.grab_filthiest(tmp_path, [candidate(tmp_path, new)])
    assert again is None  # the same incarnation keeps its offset
    new.close()
