"""LeaderEpochFileCache: every rule of kafka-behaviour.md 7.7, and persistence."""

from __future__ import annotations

import itertools
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.checkpoint import LeaderEpochCheckpointFile
from storage.epoch import EpochEntry, LeaderEpochFileCache


def cache_with(*entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(None)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


@pytest.fixture
def checkpoint(tmp_path: pathlib.Path) -> LeaderEpochCheckpointFile:
    return LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")


def test_empty_cache() -> None:
    cache = LeaderEpochFileCache(None)
    assert cache.latest_epoch is None
    assert cache.latest_entry is None
    assert cache.entries() == []
    assert cache.previous_epoch() is None
    assert cache.epoch_for_offset(0) is None
    assert cache.end_offset_for(0, 10) == (-1, -1)


def test_assign_appends_increasing_entries() -> None:
    cache = cache_with((0, 0), (2, 10), (5, 30))
    assert cache.entries() == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(5, 30)]
    assert cache.latest_epoch == 5
    assert cache.latest_entry == EpochEntry(5, 30)
    assert cache.previous_epoch() == 2


def test_assign_of_the_latest_epoch_at_or_after_its_start_is_ignored(checkpoint) -> None:
    cache = LeaderEpochFileCache(checkpoint)
    cache.assign(3, 10)
    checkpoint.path.unlink()  # any flush would recreate it
    cache.assign(3, 10)
    cache.assign(3, 25)
    assert cache.entries() == [EpochEntry(3, 10)]
    assert not checkpoint.path.exists()


def test_assign_of_the_latest_epoch_at_an_earlier_offset_moves_its_start() -> None:
    cache = cache_with((1, 0), (3, 10))
    cache.assign(3, 5)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 5)]


def test_assign_removes_tail_entries_with_higher_or_equal_epoch() -> None:
    cache = cache_with((1, 0), (3, 10), (5, 20))
    cache.assign(2, 30)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 30)]


def test_assign_removes_tail_entries_with_higher_or_equal_start_offset() -> None:
    cache = cache_with((1, 0), (3, 10), (5, 20))
    cache.assign(6, 10)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(6, 10)]


def test_assign_ignores_batches_without_a_leader_epoch_and_rejects_negative_offsets() -> None:
    cache = cache_with((1, 0))
    cache.assign(-1, 50)
    assert cache.entries() == [EpochEntry(1, 0)]
    with pytest.raises(ValueError):
        cache.assign(2, -1)


def test_assign_flushes_synchronously_and_reload_restores(checkpoint) -> None:
    cache = LeaderEpochFileCache(checkpoint)
    cache.assign(0, 0)
    cache.assign(4, 17)
    assert checkpoint.read() == [EpochEntry(0, 0), EpochEntry(4, 17)]
    reloaded = LeaderEpochFileCache(LeaderEpochCheckpointFile(checkpoint.path))
    assert reloaded.entries() == [EpochEntry(0, 0), EpochEntry(4, 17)]


def test_reload_drops_non_monotonic_entries_of_the_file(checkpoint) -> None:
    checkpoint.path.write_text("0\n3\n1 0\n4 50\n3 60\n")
    cache = LeaderEpochFileCache(checkpoint)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 60)]


def test_epoch_for_offset() -> None:
    cache = cache_with((1, 5), (3, 10), (5, 20))
    assert cache.epoch_for_offset(4) is None
    assert cache.epoch_for_offset(5) == 1
    assert cache.epoch_for_offset(9) == 1
    assert cache.epoch_for_offset(10) == 3
    assert cache.epoch_for_offset(10**9) == 5


class TestEndOffsetFor:
    cache = cache_with((2, 5), (4, 10), (7, 20))

    def test_undefined_epoch(self) -> None:
        assert self.cache.end_offset_for(-1, 100) == (-1, -1)

    def test_latest_epoch_ends_at_the_log_end_offset(self) -> None:
        assert self.cache.end_offset_for(7, 100) == (7, 100)

    def test_epoch_above_every_known_epoch(self) -> None:
        assert self.cache.end_offset_for(8, 100) == (-1, -1)

    def test_epoch_below_every_known_epoch(self) -> None:
        assert self.cache.end_offset_for(1, 100) == (1, 5)

    def test_known_epoch_ends_where_the_next_starts(self) -> None:
        assert self.cache.end_offset_for(2, 100) == (2, 10)
        assert self.cache.end_offset_for(4, 100) == (4, 20)

    def test_unknown_epoch_between_known_ones_answers_the_largest_lower_one(self) -> None:
        assert self.cache.end_offset_for(3, 100) == (2, 10)
        assert self.cache.end_offset_for(6, 100) == (4, 20)


def test_truncate_from_end(checkpoint) -> None:
    cache = LeaderEpochFileCache(checkpoint)
    for epoch, start in [(1, 0), (3, 10), (5, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(25)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(5, 20)]
    cache.truncate_from_end(20)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 10)]
    cache.truncate_from_end(9)
    assert cache.entries() == [EpochEntry(1, 0)]
    assert LeaderEpochFileCache(checkpoint).entries() == [EpochEntry(1, 0)]
    cache.truncate_from_end(-1)  # undefined offset: nothing happens
    assert cache.entries() == [EpochEntry(1, 0)]
    cache.truncate_from_end(0)
    assert cache.entries() == []


def test_truncate_from_start(checkpoint) -> None:
    cache = LeaderEpochFileCache(checkpoint)
    for epoch, start in [(1, 0), (3, 10), (5, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_start(0)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(5, 20)]
    cache.truncate_from_start(15)
    assert cache.entries() == [EpochEntry(3, 15), EpochEntry(5, 20)]
    cache.truncate_from_start(20)
    assert cache.entries() == [EpochEntry(5, 20)]
    cache.truncate_from_start(50)
    assert cache.entries() == [EpochEntry(5, 50)]
    assert LeaderEpochFileCache(checkpoint).entries() == [EpochEntry(5, 50)]


def test_truncate_from_start_before_every_entry_is_a_no_op() -> None:
    cache = cache_with((1, 10), (2, 20))
    cache.truncate_from_start(5)
    assert cache.entries() == [EpochEntry(1, 10), EpochEntry(2, 20)]


def test_clear_empties_the_file_too(checkpoint) -> None:
    cache = LeaderEpochFileCache(checkpoint)
    cache.assign(1, 0)
    cache.clear()
    assert cache.entries() == []
    assert LeaderEpochFileCache(checkpoint).entries() == []


def model_assign(entries: list[EpochEntry], epoch: int, start: int) -> list[EpochEntry]:
    """The rule of 7.7 written as plainly as possible, to check the cache against."""
    if entries and entries[-1].epoch == epoch and start >= entries[-1].start_offset:
        return entries
    kept = list(entries)
    while kept and (kept[-1].epoch >= epoch or kept[-1].start_offset >= start):
        kept.pop()
    return [*kept, EpochEntry(epoch, start)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10), st.integers(0, 100)), max_size=40))
def test_assign_matches_the_rule_and_keeps_both_columns_strictly_increasing(
    assigns: list[tuple[int, int]],
) -> None:
    cache, model = LeaderEpochFileCache(None), []
    for epoch, start in assigns:
        cache.assign(epoch, start)
        model = model_assign(model, epoch, start)
        entries = cache.entries()
        assert entries == model
        assert all(
            a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in itertools.pairwise(entries)
        )
