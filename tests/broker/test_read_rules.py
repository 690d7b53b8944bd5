"""The shared Fetch rules: how far a reader may read, and when a follower's log diverges."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.fetch.read_rules import Divergence, diverging_epoch, visible_end_offset
from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET, IsolationLevel


class Offsets(NamedTuple):
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int


class Epochs:
    """An epoch cache that answers one fixed (epoch, end offset) and records what it was asked."""

    def __init__(self, answer: tuple[int, int]) -> None:
        self.answer = answer
        self.asked: list[int] = []

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        self.asked.append(epoch)
        return self.answer


OFFSETS = Offsets(log_end_offset=10, high_watermark=7, last_stable_offset=5)


@pytest.mark.parametrize(
    ("isolation", "is_follower", "expected"),
    [
        (IsolationLevel.READ_UNCOMMITTED, True, 10),
        (IsolationLevel.READ_COMMITTED, True, 10),
        (IsolationLevel.READ_UNCOMMITTED, False, 7),
        (IsolationLevel.READ_COMMITTED, False, 5),
    ],
)
def test_visible_end_offset(isolation: IsolationLevel, is_follower: bool, expected: int) -> None:
    assert visible_end_offset(OFFSETS, isolation, is_follower) == expected


def test_no_last_fetched_epoch_never_diverges_and_asks_nothing() -> None:
    epochs = Epochs((NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET))
    assert diverging_epoch(epochs, NO_LEADER_EPOCH, 3) is None
    assert epochs.asked == []


@pytest.mark.parametrize(
    ("answer", "fetch_offset", "expected"),
    [
        ((4, 20), 12, None),  # the epoch is known and ends past the fetch offset
        ((4, 12), 12, None),  # ... or exactly at it
        ((4, 11), 12, Divergence(4, 11)),  # it ended below the fetch offset
        ((3, 20), 12, Divergence(3, 20)),  # only an older epoch is known
        ((NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET), 12, Divergence(NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET)),
    ],
)
def test_diverging_epoch(answer: tuple[int, int], fetch_offset: int, expected: Divergence | None) -> None:
    assert diverging_epoch(Epochs(answer), 4, fetch_offset) == expected


@given(st.integers(-1, 5), st.integers(-1, 50))
def test_undefined_is_either_half_unknown(epoch: int, end_offset: int) -> None:
    assert Divergence(epoch, end_offset).undefined == (epoch == -1 or end_offset == -1)
