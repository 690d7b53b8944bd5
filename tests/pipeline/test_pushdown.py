"""Planning with pushed filters: which ranges are cut, and which filters Spark must still apply."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
)

from client.fetch_session import TopicPartition
from pipeline.errors import KiplingOptionError
from pipeline.offsets import OffsetRange
from pipeline.options import parse_read_options
from pipeline.pushdown import PushedBounds, narrow_to_timestamp, push_filters

RANGES = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 50, 60), OffsetRange("t", 2, 0, 0)]


def test_partition_and_offset_comparisons_are_applied_exactly() -> None:
    filters = [
        EqualTo(("partition",), 1),
        GreaterThanOrEqual(("offset",), 10),
        LessThan(("offset",), 55),
    ]
    bounds, left = push_filters(filters)
    assert left == []
    assert bounds == PushedBounds(frozenset({1}), 10, 55)
    assert bounds.narrow(RANGES) == [OffsetRange("t", 1, 50, 55)]


@pytest.mark.parametrize(
    ("f", "start", "end"),
    [
        (EqualTo(("offset",), 7), 7, 8),
        (GreaterThan(("offset",), 7), 8, None),
        (GreaterThanOrEqual(("offset",), 7), 7, None),
        (LessThan(("offset",), 7), None, 7),
        (LessThanOrEqual(("offset",), 7), None, 8),
    ],
)
def test_each_offset_comparison_is_a_half_open_bound(f: EqualTo, start: int | None, end: int | None) -> None:
    bounds, left = push_filters([f])
    assert (bounds.start, bounds.end, left) == (start, end, [])


def test_bounds_only_narrow_and_empty_ranges_are_dropped() -> None:
    bounds, left = push_filters(
        [GreaterThan(("offset",), 5), GreaterThan(("offset",), 2), LessThanOrEqual(("offset",), 58)]
    )
    assert (bounds.start, bounds.end, left) == (6, 59, [])
    assert bounds.narrow(RANGES) == [OffsetRange("t", 0, 6, 59), OffsetRange("t", 1, 50, 59)]
    contradiction, _ = push_filters([EqualTo(("partition",), 0), In(("partition",), (1, 2))])
    assert contradiction.partitions == frozenset() and contradiction.narrow(RANGES) == []
    assert push_filters([GreaterThan(("offset",), 200)])[0].narrow(RANGES) == []


def test_offset_in_narrows_but_spark_still_applies_it() -> None:
    f = In(("offset",), (52, 3, 57))
    bounds, left = push_filters([f, In(("partition",), (0, 1))])
    assert left == [f] and left[0] is f
    assert bounds == PushedBounds(frozenset({0, 1}), 3, 58)
    assert bounds.narrow(RANGES) == [OffsetRange("t", 0, 3, 58), OffsetRange("t", 1, 50, 58)]


def test_other_filters_are_left_to_spark_untouched() -> None:
    others = [
        EqualTo(("timestamp",), 5),
        EqualTo(("key",), b"k"),
        EqualNullSafe(("partition",), 1),
        Not(EqualTo(("partition",), 1)),
        IsNotNull(("offset",)),
        EqualTo(("offset",), 2.0),
        EqualTo(("partition",), True),
        GreaterThan(("offset",), "3"),
        In(("offset",), ()),
        In(("partition",), (1, "2")),
        EqualTo(("offset", "x"), 1),
    ]
    bounds, left = push_filters(others)
    assert bounds == PushedBounds()
    assert len(left) == len(others) and all(a is b for a, b in zip(left, others, strict=True))
    assert bounds.narrow(RANGES) == RANGES  # nothing pushed: the plan as it was, empty ranges too


def test_push_filters_is_an_opt_in_read_option() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_read_options(base, "batch").push_filters is False
    assert parse_read_options({**base, "pushFilters": "true"}, "batch").push_filters is True
    with pytest.raises(KiplingOptionError):
        parse_read_options({**base, "pushFilters": "maybe"}, "batch")


class FakeLookup:
    """ListOffsets answers: the first offset at or after each timestamp (-1 when none), and log ends."""

    def __init__(self, first: dict[int, int], ends: dict[int, int]) -> None:
        self.first, self.ends = first, ends
        self.asked: list[dict[TopicPartition, int]] = []

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        raise AssertionError("not needed")

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp.partition] for tp in partitions}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        self.asked.append(dict(timestamps))
        return {tp: self.first[tp.partition] for tp in timestamps}


def test_timestamp_lower_bounds_are_pushed_and_still_applied_by_spark() -> None:
    at = datetime.datetime(2024, 1, 1, 0, 0, 1, 500, tzinfo=datetime.UTC)  # 1 704 067 201 000.5 ms
    ms = 1_704_067_201_000
    for f in (
        GreaterThan(("timestamp",), at),
        GreaterThanOrEqual(("timestamp",), at),
        EqualTo(("timestamp",), at),
    ):
        bounds, left = push_filters([f])
        assert bounds == PushedBounds(since_ms=ms) and left == [f]  # rounded down: never too late
    later = at.astimezone(datetime.timezone(datetime.timedelta(hours=2))) + datetime.timedelta(seconds=2)
    bounds, _ = push_filters([GreaterThan(("timestamp",), at), GreaterThan(("timestamp",), later)])
    assert bounds.since_ms == ms + 2000
    untouched = [
        LessThan(("timestamp",), at),
        GreaterThan(("timestamp",), at.replace(tzinfo=None)),  # no zone: not this column's instant
        In(("timestamp",), (at,)),
    ]
    bounds, left = push_filters(untouched)
    assert bounds == PushedBounds() and left == untouched


def test_narrow_to_timestamp_starts_each_range_at_the_first_matching_offset() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 50, 60), OffsetRange("t", 2, 10, 20)]
    # p0: first match at 30; p1: at 40, below the range's start; p2: no record that late, log end 25.
    lookup = FakeLookup(first={0: 30, 1: 40, 2: -1}, ends={2: 25})
    assert narrow_to_timestamp(ranges, 123, lookup) == [
        OffsetRange("t", 0, 30, 100),
        OffsetRange("t", 1, 50, 60),
    ]
    assert lookup.asked == [{TopicPartition("t", p): 123 for p in (0, 1, 2)}]
    lookup = FakeLookup(first={}, ends={})
    assert narrow_to_timestamp(ranges, None, lookup) == ranges and lookup.asked == []
