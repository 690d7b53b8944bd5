"""The truncation rules of kafka-behaviour.md 5.4 and the out-of-range reset of 5.5, as pure functions."""

from __future__ import annotations

import pytest

from follower.leader_endpoint import EpochEndOffset
from follower.truncation import (
    OffsetTruncationState,
    ResetDecision,
    needs_leader_start,
    out_of_range_reset,
    truncation_offset,
)
from storage.epoch import LeaderEpochFileCache


class _Local:
    """A local log: its LEO and an in-memory epoch cache."""

    def __init__(self, entries: list[tuple[int, int]], log_end_offset: int) -> None:
        self.cache = LeaderEpochFileCache(None)
        for epoch, start in entries:
            self.cache.assign(epoch, start)
        self.log_end_offset = log_end_offset

    def end_offset_for_epoch(self, epoch: int):
        found = self.cache.end_offset_for(epoch, self.log_end_offset)
        return None if found[1] < 0 else found


LOCAL = _Local([(1, 0), (3, 10), (5, 20)], log_end_offset=30)


@pytest.mark.parametrize(
    ("leader", "fallback", "expected"),
    [
        # the leader cannot say where the epoch ends: back to the fallback (HW), done
        ((3, -1), 7, (7, True)),
        ((-1, -1), 40, (30, True)),
        # old protocol: no epoch in the answer, just an offset
        ((-1, 25), 0, (25, True)),
        ((-1, 50), 0, (30, True)),
        # same epoch on both sides: the smaller end wins
        ((3, 15), 0, (15, True)),
        ((3, 25), 0, (20, True)),
        ((5, 40), 0, (30, True)),
        # the leader's epoch 4 is unknown here: cut where local epoch 3 ends, then ask again
        ((4, 25), 0, (20, False)),
        # below every local epoch: the local first entry bounds it
        ((0, 5), 0, (0, True)),
        # above every local epoch (no local entry): the leader's end, bounded by the LEO
        ((9, 27), 0, (27, True)),
    ],
)
def test_truncation_offset(leader, fallback, expected) -> None:
    result = truncation_offset(EpochEndOffset(leader_epoch=leader[0], end_offset=leader[1]), fallback, LOCAL)
    assert result == OffsetTruncationState(*expected)


def test_truncation_offset_with_an_empty_local_cache() -> None:
    assert truncation_offset(EpochEndOffset(leader_epoch=2, end_offset=4), 0, _Local([], 10)) == (4, True)


def test_out_of_range_high_truncates_to_the_leaders_end() -> None:
    """Unclean election: the leader's log ends below ours."""
    assert not needs_leader_start(10, 4)
    assert out_of_range_reset(10, 4) == ResetDecision(4, None, 4, 0)


def test_out_of_range_low_restarts_at_the_leaders_start() -> None:
    assert needs_leader_start(10, 50)
    assert out_of_range_reset(10, 50, 20) == ResetDecision(None, 20, 20, 30)


def test_out_of_range_inside_the_leaders_range_fetches_on() -> None:
    assert out_of_range_reset(10, 50, 5) == ResetDecision(None, None, 10, 40)
    with pytest.raises(ValueError):
        out_of_range_reset(10, 50)
