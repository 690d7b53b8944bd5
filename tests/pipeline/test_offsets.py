"""Offset planning (pure): resolving specs, Spark's rate limit and range splitting, stream ranges."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.fetch_session import TopicPartition
from pipeline.errors import KiplingDataLossError, KiplingOptionError
from pipeline.offsets import (
    DataLossReporter,
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    plan_batch,
    plan_stream_ranges,
    rate_limit,
    resolve,
    split_ranges,
)
from pipeline.options import (
    Earliest,
    GlobalTimestamp,
    Latest,
    NoMatchStrategy,
    SpecificOffsets,
    SpecificTimestamps,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


class FakeLookup:
    """Partitions with a log [earliest, latest) and record timestamps ``ts_base + offset``."""

    def __init__(self, logs: Mapping[TopicPartition, tuple[int, int]], ts_base: int = 1000) -> None:
        self.logs = dict(logs)
        self.ts_base = ts_base

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.logs[tp][0] for tp in partitions}

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.logs[tp][1] for tp in partitions}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        out = {}
        for tp, ts in timestamps.items():
            earliest, latest = self.logs[tp]
            offset = max(ts - self.ts_base, earliest)
            out[tp] = offset if offset < latest else -1
        return out


LOOKUP = FakeLookup({A0: (5, 50), A1: (0, 10), B0: (0, 0)})


def test_resolve_sentinels_and_specific_offsets() -> None:
    parts = [A0, A1]
    assert resolve(Earliest(), parts, LOOKUP, starting=True) == {A0: 5, A1: 0}
    assert resolve(Latest(), parts, LOOKUP, starting=True) == {A0: 50, A1: 10}
    assert resolve(SpecificOffsets({A0: -2, A1: -1}), parts, LOOKUP, starting=True) == {A0: 5, A1: 10}
    assert resolve(SpecificOffsets({A0: 7, A1: 3}), parts, LOOKUP, starting=True) == {A0: 7, A1: 3}
    with pytest.raises(KiplingOptionError, match="you must specify all TopicPartitions"):
        resolve(SpecificOffsets({A0: 7}), parts, LOOKUP, starting=True)


def test_resolve_timestamps() -> None:
    parts = [A0, A1]
    assert resolve(GlobalTimestamp(1008), parts, LOOKUP, starting=True) == {A0: 8, A1: 8}
    assert resolve(SpecificTimestamps({A0: 1000, A1: 1002}), parts, LOOKUP, starting=True) == {A0: 5, A1: 2}
    with pytest.raises(KiplingOptionError, match="No offset matched from request of topic-partition a-1"):
        resolve(GlobalTimestamp(1020), parts, LOOKUP, starting=True)
    latest = GlobalTimestamp(1020, NoMatchStrategy.LATEST)
    assert resolve(latest, parts, LOOKUP, starting=True) == {A0: 20, A1: 10}
    assert resolve(GlobalTimestamp(1020), parts, LOOKUP, starting=False) == {A0: 20, A1: 10}  # ending: latest
    with pytest.raises(KiplingOptionError, match="must specify all topics"):
        resolve(SpecificTimestamps({A0: 1}), parts, LOOKUP, starting=True)


def test_plan_batch() -> None:
    ranges = plan_batch([A0, A1], Earliest(), Latest(), LOOKUP)
    assert ranges == [OffsetRange("a", 0, 5, 50), OffsetRange("a", 1, 0, 10)]
    with pytest.raises(KiplingOptionError, match="resolved starting offset 20 of a-1 is greater"):
        plan_batch([A1], SpecificOffsets({A1: 20}), Latest(), LOOKUP)


def test_offsets_json_round_trip_is_sorted_and_stringly_keyed() -> None:
    offsets = {TopicPartition("b", 10): 1, TopicPartition("b", 2): 3, TopicPartition("a", 0): 4}
    data = offsets_to_json(offsets)
    assert list(data) == ["a", "b"] and list(data["b"]) == ["2", "10"]
    assert offsets_from_json(data) == offsets
    with pytest.raises(ValueError):
        offsets_from_json({"a": 3})  # type: ignore[dict-item]


def test_rate_limit_matches_sparks_examples() -> None:
    # 30 over backlogs of 50 and 25: 20 and 10.
    assert rate_limit(30, {A0: 0, A1: 0}, {A0: 50, A1: 25}, {}) == {A0: 20, A1: 10}
    # A tiny backlog is not starved: its share 0.3 rounds up to one offset.
    assert rate_limit(10, {A0: 0, A1: 0}, {A0: 100, A1: 3}, {}) == {A0: 9, A1: 1}
    # A new partition starts from its earliest offset.
    assert rate_limit(10, {A0: 0}, {A0: 10, B0: 10}, {B0: 0}) == {A0: 5, B0: 5}
    # Nothing to read: the until offsets as they are.
    assert rate_limit(10, {A0: 10}, {A0: 10}, {}) == {A0: 10}


backlogs = st.dictionaries(
    st.sampled_from([A0, A1, B0, TopicPartition("c", 3)]),
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)),
    min_size=1,
)


@given(backlogs, st.integers(1, 10**6))
def test_rate_limit_properties(backlog: dict[TopicPartition, tuple[int, int]], limit: int) -> None:
    start = {tp: begin for tp, (begin, _) in backlog.items()}
    until = {tp: begin + size for tp, (begin, size) in backlog.items()}
    capped = rate_limit(limit, start, until, {})
    assert set(capped) == set(until)
    for tp in until:
        assert start[tp] <= capped[tp] <= until[tp]
        if until[tp] > start[tp]:
            assert capped[tp] > start[tp]  # no partition with a backlog starves
    read = sum(capped[tp] - start[tp] for tp in until)
    total = sum(until[tp] - start[tp] for tp in until)
    assert read <= max(limit, 0) + len(until)  # rounding up small shares adds at most one each
    if total <= limit:
        assert capped == until


ranges_strategy = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 10**6), st.integers(0, 10**4)), min_size=0, max_size=6
).map(
    lambda items: [OffsetRange("t", p, s, s + n) for p, s, n in {p: (p, s, n) for p, s, n in items}.values()]
)


@given(ranges_strategy, st.none() | st.integers(1, 40), st.none() | st.integers(1, 5000))
def test_split_ranges_cover_exactly_the_input(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None
) -> None:
    parts = split_ranges(ranges, min_partitions, max_records)
    assert all(p.size > 0 for p in parts)
    if max_records is not None:
        assert all(p.size <= max_records for p in parts)
    for r in ranges:
        mine = [p for p in parts if p.partition == r.partition]
        covered = [o for p in mine for o in (p.start, p.end)]
        if r.size == 0:
            assert mine == []
        else:
            assert mine[0].start == r.start and mine[-1].end == r.end
            assert all(a.end == b.start for a, b in itertools.pairwise(mine))
            assert len(covered) == 2 * len(mine)
    if min_partitions is None and max_records is None:
        assert parts == [r for r in ranges if r.size > 0]


def test_split_ranges_like_sparks_calculator() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10)]
    assert split_ranges(ranges, 1, None) == ranges
    parts = split_ranges(ranges, 4, None)
    assert [p.size for p in parts] == [333, 333, 334, 10]  # the small range stays whole
    assert [p.size for p in split_ranges(ranges, None, 400)] == [333, 333, 334, 10]


def test_plan_stream_ranges_and_data_loss() -> None:
    lossy = DataLossReporter(False)
    assert plan_stream_ranges({A0: 5}, {A0: 9, A1: 4}, {A1: 0}, lossy) == [
        OffsetRange("a", 0, 5, 9),
        OffsetRange("a", 1, 0, 4),
    ]
    strict = DataLossReporter(True)
    with pytest.raises(KiplingDataLossError, match="Added partition a-1 starts from 2 instead of 0"):
        plan_stream_ranges({A0: 5}, {A0: 9, A1: 4}, {A1: 2}, strict)
    with pytest.raises(KiplingDataLossError, match=r"\[a-1\] are gone"):
        plan_stream_ranges({A0: 5, A1: 1}, {A0: 9}, {}, strict)
    with pytest.raises(KiplingDataLossError, match="offset was changed from 5 to 3"):
        plan_stream_ranges({A0: 5}, {A0: 3}, {}, strict)
    with pytest.raises(KiplingDataLossError, match="Cannot find earliest offsets of"):
        plan_stream_ranges({}, {A0: 3}, {}, strict)
    assert plan_stream_ranges({A0: 5}, {A0: 3}, {}, lossy) == []
