"""The follower's adapter over PartitionLog: partial batches, HW and log start from the leader."""

from __future__ import annotations

import pytest

from follower.replica_log import ReplicaLog, initial_fetch_offset
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import UnexpectedAppendOffsetError
from storage.log import PartitionLog
from tests.follower.fake_leader import make_batch


@pytest.fixture
def log(tmp_path) -> ReplicaLog:
    return ReplicaLog(PartitionLog.open(tmp_path / "topic-0", LogConfig(), FakeClock(1_700_000_000_000)))


def test_a_trailing_partial_batch_is_dropped(log) -> None:
    data = make_batch(0, 1, 2) + make_batch(2, 1, 3)
    assert log.append_as_follower(data[:-5]) == 2
    assert log.append_as_follower(b"") == 2
    assert log.append_as_follower(make_batch(2, 1, 3)) == 5
    assert log.latest_epoch == 1


def test_batches_below_the_log_end_offset_are_refused(log) -> None:
    log.append_as_follower(make_batch(0, 0, 2))
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(make_batch(1, 0, 2))


def test_high_watermark_follows_the_leader_within_the_log(log) -> None:
    log.append_as_follower(make_batch(0, 0, 4))
    assert log.update_high_watermark(10)
    assert log.high_watermark == 4
    assert log.update_high_watermark(2)
    assert log.high_watermark == 2, "the HW follows the leader down too"
    assert not log.update_high_watermark(2)


def test_log_start_offset_only_moves_up_to_the_leaders(log) -> None:
    log.append_as_follower(make_batch(0, 0, 2) + make_batch(2, 1, 2))
    log.update_high_watermark(4)
    assert not log.maybe_increment_log_start_offset(0)
    assert log.maybe_increment_log_start_offset(2)
    assert log.log_start_offset == 2
    assert not log.maybe_increment_log_start_offset(1)
    assert log.log.leader_epoch_cache.entries() == [(1, 2)]


def test_end_offset_for_epoch_and_truncation(log) -> None:
    log.append_as_follower(make_batch(0, 1, 2) + make_batch(2, 3, 2))
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 4)
    assert log.end_offset_for_epoch(4) is None
    assert log.truncate_to(3) == 2, "the whole batch holding the offset goes"
    assert log.latest_epoch == 1
    log.truncate_fully_and_start_at(10)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (10, 10, None)


def test_initial_fetch_offset(log) -> None:
    assert initial_fetch_offset(log, truncation_on_fetch=True) == 0
    log.append_as_follower(make_batch(0, 1, 3))
    log.update_high_watermark(1)
    assert initial_fetch_offset(log, truncation_on_fetch=True) == 3
    assert initial_fetch_offset(log, truncation_on_fetch=False) == 1
