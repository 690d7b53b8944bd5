"""Planning with pushed filters: which ranges are cut, and which filters Spark must still apply."""

from __future__ import annotations

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

from pipeline.errors import KiplingOptionError
from pipeline.offsets import OffsetRange
from pipeline.options import parse_read_options
from pipeline.pushdown import PushedBounds, push_filters

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
