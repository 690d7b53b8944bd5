"""A log truncated below its first dirty offset (follower truncation, unclean leader election) has
that offset lowered to the end the truncation left (Kafka's maybeTruncateCheckpoint), for the
broker's checkpoint file and a follower process's in-memory offsets alike, so the records written
again above it are compacted instead of counting as clean forever."""

from __future__ import annotations

import pathlib

import pytest

from cleaner.manager import InMemoryOffsets, LogCleanerManager
from storage.cleaner import CleanerOffsetCheckpoint
from storage.clock import FakeClock
from tests.broker.log_cleaner.test_manager import candidate, fill, make_log
from tests.storage.cleaner.helpers import BASE_TIME

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("owner", ["broker-checkpoint", "follower-memory"])
def test_truncation_below_first_dirty_offset_lowers_it(tmp_path: pathlib.Path, owner: str) -> None:
    clock = FakeClock(BASE_TIME)
    memory = InMemoryOffsets()
    manager = (
        LogCleanerManager([tmp_path], clock)
        if owner == "broker-checkpoint"
        else LogCleanerManager([tmp_path], clock, lambda _: memory)
    )
    log = make_log(tmp_path, "t-0", clock)
    fill(log, 10)  # two inactive segments of 10 records
    logs = [candidate(tmp_path, log)]
    taken = manager.grab_filthiest(tmp_path, logs)
    assert taken is not None
    manager.done_cleaning(taken, 20)  # clean up to 20
    assert manager.first_dirty_offsets(tmp_path) == {("t", 0): 20}
    assert manager.grab_filthiest(tmp_path, logs) is None
    log.truncate_to(15)  # a follower diverged: 15..19 are gone, then written again (other records)
    fill(log, 10, segments=1)
    fill(log, 10, segments=1)
    logs = [candidate(tmp_path, log)]
    taken = manager.grab_filthiest(tmp_path, logs)
    assert manager.first_dirty_offsets(tmp_path) == {("t", 0): 15}
    assert taken is not None and taken.range.first_dirty_offset == 15
    if owner == "broker-checkpoint":
        assert CleanerOffsetCheckpoint(tmp_path).read() == {("t", 0): 15}
    manager.done_cleaning(taken, 35)
    # the truncation is applied once: a later round's offset above it stays
    assert manager.grab_filthiest(tmp_path, logs) is None
    assert manager.first_dirty_offsets(tmp_path) == {("t", 0): 35}
    log.close()


def test_truncation_above_first_dirty_offset_changes_nothing(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    manager = LogCleanerManager([tmp_path], clock)
    log = make_log(tmp_path, "t-0", clock)
    fill(log, 10)
    CleanerOffsetCheckpoint(tmp_path).update("t", 0, 10)
    log.truncate_to(18)
    manager.grab_filthiest(tmp_path, [candidate(tmp_path, log)])
    assert manager.first_dirty_offsets(tmp_path) == {("t", 0): 10}
    log.close()


def test_full_truncation_restarts_the_first_dirty_offset(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    manager = LogCleanerManager([tmp_path], clock, lambda _: InMemoryOffsets())
    log = make_log(tmp_path, "t-0", clock)
    fill(log, 10)
    taken = manager.grab_filthiest(tmp_path, [candidate(tmp_path, log)])
    assert taken is not None
    manager.done_cleaning(taken, 20)
    log.truncate_fully_and_start_at(5)  # below the log start: the replica restarts empty at 5
    fill(log, 10)
    manager.grab_filthiest(tmp_path, [candidate(tmp_path, log)])
    assert manager.first_dirty_offsets(tmp_path) == {("t", 0): 5}
    log.close()
