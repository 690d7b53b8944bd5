"""Which segments retention may delete (kafka-behaviour.md 7.8); the log does the deleting.

Only a prefix of the log is ever deleted: the walk stops at the first segment that fails its
predicate. A segment qualifies only when every offset in it is below the high watermark (its upper
bound, the next segment's base offset or the log end offset, is <= HW), so the log start offset can
never pass the high watermark, and an empty active segment is never deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from storage.segment import LogSegment

SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]
"""(segment, the segment after it or None for the last) -> may this segment go?"""


def deletable_prefix(
    segments: Sequence[LogSegment], log_end_offset: int, high_watermark: int, predicate: SegmentPredicate
) -> int:
    """How many leading segments may be deleted under ``predicate``."""
    count = 0
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = following.base_offset if following is not None else log_end_offset
        if following is None and segment.size == 0:
            break
        if high_watermark < upper_bound or not predicate(segment, following):
            break
        count += 1
    return count


def log_start_offset_breached(log_start_offset: int) -> SegmentPredicate:
    """A segment is wholly below the log start offset when the next one starts at or before it."""

    def predicate(segment: LogSegment, following: LogSegment | None) -> bool:
        return following is not None and following.base_offset <= log_start_offset

    return predicate


def retention_size_breached(total_size: int, retention_bytes: int) -> SegmentPredicate | None:
    """Delete the oldest segments while what is left stays at or above retention.bytes.

    None when retention.bytes is unlimited (< 0) or not exceeded.
    """
    if retention_bytes < 0 or total_size < retention_bytes:
        return None
    excess = total_size - retention_bytes

    def predicate(segment: LogSegment, following: LogSegment | None) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False

    return predicate


def retention_time_breached(now_ms: int, retention_ms: int) -> SegmentPredicate | None:
    """A segment whose newest record is older than retention.ms; None when retention.ms < 0."""
    if retention_ms < 0:
        return None

    def predicate(segment: LogSegment, following: LogSegment | None) -> bool:
        return now_ms - segment.largest_timestamp > retention_ms

    return predicate
