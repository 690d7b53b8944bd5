"""Which part of a compacted log may be cleaned now, and how dirty it is (Kafka's LogCleanerManager).

- first dirty offset: the checkpointed one, reset to the log start offset when it is below it or
  above the log end offset (``cleanableOffsets``);
- first uncleanable offset: the smallest of the last stable offset (callers pass the LSO, which is
  at most the high watermark), the active segment's base offset, and the base of the first dirty
  inactive segment whose largest timestamp is newer than ``now - min.compaction.lag.ms``; then
  rounded down to the base of the segment holding it (``calculateCleanableBytes``), so cleaning
  always stops at a segment boundary;
- dirty ratio: bytes of the segments in [first dirty, first uncleanable) over the bytes of every
  segment below the first uncleanable offset (``LogToClean.cleanableRatio``);
- ``max.compaction.lag.ms``: when the first batch of some dirty inactive segment is older than
  ``now - max.compaction.lag.ms`` the log must be cleaned now whatever its ratio
  (``maxCompactionDelay``; timestamps <= 0 are ignored);
- a log is picked when (must clean now and cleanable bytes > 0) or ratio > ``min.cleanable.dirty.ratio``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.log import PartitionLog
    from storage.segment import LogSegment

DEFAULT_MIN_CLEANABLE_RATIO = 0.5
DEFAULT_MIN_COMPACTION_LAG_MS = 0
DEFAULT_MAX_COMPACTION_LAG_MS = 2**63 - 1


@dataclass(frozen=True, slots=True)
class CleanableRange:
    first_dirty_offset: int
    first_uncleanable_offset: int
    cleanable_bytes: int
    total_bytes: int
    dirty_ratio: float
    max_compaction_delay_ms: int
    checkpoint_reset: bool
    """The checkpointed offset was invalid and was replaced by the log start offset."""
    should_clean: bool


def cleanable_range(
    log: PartitionLog,
    now_ms: int,
    *,
    last_clean_offset: int | None,
    last_stable_offset: int,
    min_compaction_lag_ms: int = DEFAULT_MIN_COMPACTION_LAG_MS,
    max_compaction_lag_ms: int = DEFAULT_MAX_COMPACTION_LAG_MS,
    min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO,
) -> CleanableRange:
    """The cleanable range of ``log`` and whether the cleaner should take it now."""
    segments = log.segments()
    first_dirty = log.log_start_offset if last_clean_offset is None else last_clean_offset
    reset = False
    if first_dirty < log.log_start_offset or first_dirty > log.log_end_offset:
        first_dirty, reset = log.log_start_offset, True
    dirty_inactive = [s for s in segments[:-1] if s.next_offset > first_dirty or s.base_offset >= first_dirty]
    candidates = [last_stable_offset, segments[-1].base_offset]
    lag = max(min_compaction_lag_ms, 0)
    if lag > 0:
        recent = next((s for s in dirty_inactive if s.largest_timestamp > now_ms - lag), None)
        if recent is not None:
            candidates.append(recent.base_offset)
    uncleanable = max(first_dirty, min(candidates))
    uncleanable = _segment_floor(segments, uncleanable)
    cleanable_bytes = sum(
        s.size
        for s in segments
        if s.base_offset < uncleanable and s.next_offset > min(first_dirty, uncleanable)
    )
    clean_bytes = sum(
        s.size for s in segments if s.base_offset < first_dirty and s.next_offset <= first_dirty
    )
    total = clean_bytes + cleanable_bytes
    ratio = cleanable_bytes / total if total else 0.0
    delay = _max_compaction_delay(dirty_inactive, now_ms, max_compaction_lag_ms)
    should = (delay > 0 and cleanable_bytes > 0) or ratio > min_cleanable_ratio
    return CleanableRange(first_dirty, uncleanable, cleanable_bytes, total, ratio, delay, reset, should)


def _segment_floor(segments: list[LogSegment], offset: int) -> int:
    """Base offset of the segment holding ``offset`` (the active one when it is past every other)."""
    base = segments[0].base_offset
    for segment in segments:
        if segment.base_offset > offset:
            break
        base = segment.base_offset
    return base


def _first_batch_timestamp(segment: LogSegment) -> int:
    first = next(segment.iter_batches(0), None)
    return -1 if first is None else first.max_timestamp


def _max_compaction_delay(dirty_inactive: list[LogSegment], now_ms: int, max_lag_ms: int) -> int:
    clean_until = now_ms - max(max_lag_ms, 0)
    if clean_until <= 1:
        # no positive timestamp is older (the default lag, Long.MAX_VALUE): spare the owner's loop
        # a read of every dirty segment's first batch for each compacted log at every pass
        return 0
    stamps = [t for t in (_first_batch_timestamp(s) for s in dirty_inactive) if t > 0]
    if not stamps:
        return 0
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0
