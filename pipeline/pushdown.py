"""Filter pushdown for batch reads: ``partition`` and ``offset`` predicates narrow the planned ranges.

Spark (4.1+) hands a Python data source's reader the WHERE clause's conjuncts that it could translate
(``DataSourceReader.pushFilters``); the reader keeps what it applies and returns the rest for Spark to
evaluate after the scan. Here, on the columns whose values the plan itself decides:

* ``partition`` with ``=`` or ``IN``: partitions not named get no task at all (exact: applied);
* ``offset`` with ``=``, ``>``, ``>=``, ``<``, ``<=``: every range is cut to the bound (exact: every
  offset of a range is read, so cutting the range is the filter; applied);
* ``offset IN (...)``: the range is cut to [min, max] of the list, and Spark still applies the IN.

Only plain integer literals are used (``type(value) is int``); anything else (other columns, other
filter kinds, ``NOT``, string or float literals) is left to Spark untouched. Filters can only narrow a
range, never widen it, so a query's answer is the same with or without them.

* ``timestamp`` with ``>``, ``>=`` or ``=`` (a timezone-aware datetime, as Spark sends a TIMESTAMP
  literal): each range starts at the first offset whose timestamp is at least the bound, the answer of
  ListOffsets by timestamp that ``startingTimestamp`` uses (:func:`narrow_to_timestamp`); no record
  before that offset can match. The filter stays with Spark (records after it may still not match:
  CreateTime timestamps are not ordered by offset). Upper bounds (``<``, ``<=``) are not pushed for the
  same reason: no offset is known past which every timestamp is too late.

Spark refuses a reader that implements ``pushFilters`` unless ``spark.sql.python.filterPushdown.enabled``
is true (``DATA_SOURCE_PUSHDOWN_DISABLED``; it is false by default), and the data source cannot read
that setting from its Python worker: so pushdown is opt-in with the ``pushFilters`` read option, which
the user sets together with that configuration (:class:`pipeline.source.KiplingFilteringBatchReader`).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from pipeline.offsets import OffsetLookup, OffsetRange
from protocol.sentinels import UNKNOWN_OFFSET

PARTITION_COLUMN = ("partition",)
OFFSET_COLUMN = ("offset",)
TIMESTAMP_COLUMN = ("timestamp",)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True)
class PushedBounds:
    """What the pushed filters allow: a set of partitions and an offset interval [start, end)."""

    partitions: frozenset[int] | None = None
    """Only these partitions (None: all)."""
    start: int | None = None
    """The lowest offset wanted (None: no bound)."""
    end: int | None = None
    """The first offset not wanted (None: no bound)."""
    since_ms: int | None = None
    """The lowest record timestamp (ms) that can match (None: no bound); :func:`narrow_to_timestamp`."""

    def narrow(self, ranges: Iterable[OffsetRange]) -> list[OffsetRange]:
        """``ranges`` cut to these bounds; ranges left empty are dropped. Without bounds (nothing
        pushed) the plan is left exactly as it was, empty ranges included."""
        if replace(self, since_ms=None) == PushedBounds():
            return list(ranges)
        out = []
        for r in ranges:
            if self.partitions is not None and r.partition not in self.partitions:
                continue
            start = r.start if self.start is None else max(r.start, self.start)
            end = r.end if self.end is None else min(r.end, self.end)
            if start < end:
                out.append(replace(r, start=start, end=end))
        return out


def push_filters(filters: Sequence[Filter]) -> tuple[PushedBounds, list[Filter]]:
    """The bounds ``filters`` (an AND) set on the plan, and those Spark must still apply (the same
    objects, as ``pushFilters`` requires)."""
    bounds = PushedBounds()
    left: list[Filter] = []
    for f in filters:
        narrowed, applied = _push_one(bounds, f)
        if narrowed is None:
            left.append(f)
            continue
        bounds = narrowed
        if not applied:
            left.append(f)
    return bounds, left


def narrow_to_timestamp(
    ranges: Sequence[OffsetRange], since_ms: int | None, lookup: OffsetLookup
) -> list[OffsetRange]:
    """Start each range (one per partition) at its first offset with a timestamp at or after
    ``since_ms``; where no record has one yet, at the log end offset (nothing below it can match).
    Ranges left empty are dropped; without a bound the ranges are returned as they are."""
    if since_ms is None or not ranges:
        return list(ranges)
    tps = list(dict.fromkeys(r.tp for r in ranges))
    found = lookup.offsets_for_times(dict.fromkeys(tps, since_ms))
    unmatched = [tp for tp in tps if found.get(tp, UNKNOWN_OFFSET) == UNKNOWN_OFFSET]
    first = {tp: offset for tp, offset in found.items() if offset != UNKNOWN_OFFSET}
    if unmatched:
        first.update(lookup.latest(unmatched))
    out = []
    for r in ranges:
        start = max(r.start, first.get(r.tp, r.start))
        if start < r.end:
            out.append(replace(r, start=start))
    return out


def _push_one(bounds: PushedBounds, f: Filter) -> tuple[PushedBounds | None, bool]:
    """``bounds`` narrowed by ``f`` and whether that applies ``f`` exactly; (None, False): not pushable."""
    attribute = getattr(f, "attribute", None)
    if attribute == TIMESTAMP_COLUMN:
        since = _epoch_ms_floor(getattr(f, "value", None))
        if since is None or not isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual)):
            return None, False
        if bounds.since_ms is not None:
            since = max(since, bounds.since_ms)
        return replace(bounds, since_ms=since), False
    if attribute == PARTITION_COLUMN:
        if isinstance(f, EqualTo) and _is_int(f.value):
            return _with_partitions(bounds, {f.value}), True
        if isinstance(f, In) and f.value and all(_is_int(v) for v in f.value):
            return _with_partitions(bounds, set(f.value)), True
        return None, False
    if attribute != OFFSET_COLUMN:
        return None, False
    if isinstance(f, In):
        if not f.value or not all(_is_int(v) for v in f.value):
            return None, False
        return _with_offsets(bounds, min(f.value), max(f.value) + 1), False
    value = getattr(f, "value", None)
    if not _is_int(value):
        return None, False
    assert isinstance(value, int)
    if isinstance(f, EqualTo):
        return _with_offsets(bounds, value, value + 1), True
    if isinstance(f, GreaterThan):
        return _with_offsets(bounds, value + 1, None), True
    if isinstance(f, GreaterThanOrEqual):
        return _with_offsets(bounds, value, None), True
    if isinstance(f, LessThan):
        return _with_offsets(bounds, None, value), True
    if isinstance(f, LessThanOrEqual):
        return _with_offsets(bounds, None, value + 1), True
    return None, False


def _is_int(value: object) -> bool:
    return type(value) is int


def _epoch_ms_floor(value: object) -> int | None:
    """Milliseconds since the epoch of an aware datetime, rounded down (a record's timestamp is whole
    milliseconds: one below the bound cannot match ``>=``); None for anything else."""
    if not isinstance(value, datetime.datetime) or value.tzinfo is None:
        return None
    return ((value - _EPOCH) // datetime.timedelta(microseconds=1)) // 1000


def _with_partitions(bounds: PushedBounds, wanted: set[int]) -> PushedBounds:
    partitions = frozenset(wanted) if bounds.partitions is None else bounds.partitions & wanted
    return replace(bounds, partitions=partitions)


def _with_offsets(bounds: PushedBounds, start: int | None, end: int | None) -> PushedBounds:
    if start is not None and bounds.start is not None:
        start = max(start, bounds.start)
    elif start is None:
        start = bounds.start
    if end is not None and bounds.end is not None:
        end = min(end, bounds.end)
    elif end is None:
        end = bounds.end
    return replace(bounds, start=start, end=end)


__all__ = ["PushedBounds", "narrow_to_timestamp", "push_filters"]
