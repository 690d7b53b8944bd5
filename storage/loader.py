"""Opening a partition directory: leftovers, segment loading and crash recovery (kafka-behaviour.md 7.9).

Order, as in Kafka's LogLoader:

1. finish or undo an interrupted cleaner swap (:func:`storage.cleaner.recovery.recover_cleaner_files`,
   Kafka's ``removeTempFilesAndCollectSwapFiles``): ``.deleted`` and ``.cleaned`` files go, a
   ``.log.swap`` (with its ``.txnindex.swap``) replaces the segments in its offset range, other
   ``.swap`` files go; then delete indexes whose .log is gone;
2. open every segment; an index that is missing or fails its sanity check is rebuilt from the .log,
   and so is a segment whose .log does not end on a whole batch (it is cut at its last valid one);
3. without a clean shutdown, re-validate every segment from the one holding the recovery point: at
   the first invalid or torn batch the segment is truncated and every later segment deleted;
4. make offsets consistent: an empty directory gets a segment at the log start offset, a log that
   ends below its checkpointed log start offset is emptied and restarted there, and the leader
   epoch cache is cut to [log start offset, log end offset];
5. check every transaction index: a damaged one is dropped, with the producer snapshots above its
   segment's base offset, so that the producer state replay (:mod:`storage.producer_recovery`)
   starts at or before the segment and writes its entries again. (Recovered segments already lost
   the entries whose markers were cut off.)
"""

from __future__ import annotations

import os
import pathlib
from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import NamedTuple

import structlog

from storage.cleaner.recovery import recover_cleaner_files
from storage.config import LogConfig
from storage.epoch import LeaderEpochFileCache
from storage.errors import CorruptIndexError
from storage.producer_snapshot import delete_snapshots_after
from storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    parse_base_offset,
    segment_file_name,
)
from storage.txn_index import TXN_INDEX_SUFFIX

_log = structlog.get_logger(__name__)
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


class LoadedLog(NamedTuple):
    """The state a :class:`~storage.log.PartitionLog` starts from."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovered: bool
    """True when segments were re-validated (their contents are then flushed by the loader)."""


def load_log(
    directory: pathlib.Path,
    config: LogConfig,
    now_ms: int,
    epoch_cache: LeaderEpochFileCache,
    *,
    recovery_point: int,
    log_start_offset: int | None,
    clean_shutdown: bool,
    roll_jitter: Callable[[], int],
) -> LoadedLog:
    """Bring ``directory`` to a consistent state and open its segments (oldest first)."""
    recover_cleaner_files(directory)
    present = set(os.listdir(directory))
    _delete_orphan_indexes(directory, present)
    bases = _segment_bases(present)
    recover_from = len(bases) if clean_shutdown else max(0, bisect_right(bases, recovery_point) - 1)

    def open_segment(base: int, listed: set[str] | None = present) -> LogSegment:
        return LogSegment(
            directory, base, config, created_ms=now_ms, roll_jitter_ms=roll_jitter(), present=listed
        )

    segments: list[LogSegment] = []
    cut_short = False
    for i, base in enumerate(bases):
        if i >= recover_from:
            segments.append(open_segment(base))
            continue
        segment, cut_short = _open_checked(open_segment(base), epoch_cache)
        if i < len(bases) - 1:  # inactive and checked: only its .log stays open while the rest loads
            segment.release_index_descriptors()
        segments.append(segment)
        if cut_short and i < len(bases) - 1:  # as recovery does: no offsets missing in the middle
            _log.warning("deleting the segments after a segment cut short", deleted_segments=bases[i + 1 :])
            for later in bases[i + 1 :]:
                open_segment(later).delete()
            bases = bases[: i + 1]
            break
    segments = _recover_segments(segments, recover_from, epoch_cache)
    start = log_start_offset if log_start_offset is not None else (bases[0] if bases else 0)
    if not segments or segments[-1].next_offset < start:
        _discard(segments, directory, start, epoch_cache)
        segments = [open_segment(start, None)]  # files were deleted since the listing
    for segment in segments[:-1]:
        segment.on_becoming_inactive()
    log_end_offset = segments[-1].next_offset
    start = max(start, segments[0].base_offset)
    _align_epoch_cache(epoch_cache, start, log_end_offset)
    _check_txn_indexes(directory, segments)
    return LoadedLog(segments, start, log_end_offset, recover_from < len(bases) or cut_short)


def _align_epoch_cache(epoch_cache: LeaderEpochFileCache, start: int, end: int) -> None:
    """Entries may not start at or past the log end offset, nor before the log start offset.

    The checkpoint is written before the data it describes, so after a crash it can name epochs
    whose batches never reached the disk. Cutting the start is skipped when it would change nothing,
    because it rewrites (and fsyncs) the checkpoint file.
    """
    epoch_cache.truncate_from_end(end)
    first = next(iter(epoch_cache.entries()), None)
    if first is not None and first.start_offset < start:
        epoch_cache.truncate_from_start(start)


def _check_txn_indexes(directory: pathlib.Path, segments: list[LogSegment]) -> None:
    """Drop a damaged transaction index and the producer snapshots that would skip its rebuild."""
    for segment in segments:
        try:
            segment.txn_index.sanity_check(segment.next_offset)
        except CorruptIndexError as exc:
            _log.warning(
                "dropping corrupt transaction index; the producer state replay rebuilds it",
                segment=str(segment.log_path),
                reason=str(exc),
            )
            segment.txn_index.reset()
            delete_snapshots_after(directory, segment.base_offset)


def _open_checked(segment: LogSegment, epoch_cache: LeaderEpochFileCache) -> tuple[LogSegment, bool]:
    """A trusted segment still gets its indexes checked; a broken or missing one is rebuilt.

    Opening a segment also scans its .log from the last index entry to the end; a file that does
    not end on a whole batch there (cut inside its last batch) is recovered like a broken index,
    which cuts it at its last valid batch, so nothing is ever appended after garbage. Returns the
    segment and whether it was cut.
    """
    if not segment.needs_recovery:
        try:
            segment.sanity_check()
        except CorruptIndexError as exc:
            _log.warning("rebuilding corrupt index", segment=str(segment.log_path), reason=str(exc))
            segment.needs_recovery = True
    truncated = 0
    if segment.needs_recovery:
        truncated = segment.recover(epoch_cache)
        segment.needs_recovery = False
        if truncated:
            _log.warning(
                "truncated invalid bytes at the end of a trusted segment",
                segment=str(segment.log_path),
                bytes=truncated,
            )
            segment.flush()
    return segment, truncated > 0


def _recover_segments(
    segments: list[LogSegment], recover_from: int, epoch_cache: LeaderEpochFileCache
) -> list[LogSegment]:
    """Re-validate ``segments[recover_from:]``; after the first truncation, delete every later segment."""
    for i in range(recover_from, len(segments)):
        segment = segments[i]
        truncated = segment.recover(epoch_cache)
        segment.needs_recovery = False
        if truncated:
            _log.warning(
                "truncated invalid bytes at the end of a segment",
                segment=str(segment.log_path),
                bytes=truncated,
                deleted_segments=len(segments) - i - 1,
            )
            for later in segments[i + 1 :]:
                later.delete()
            del segments[i + 1 :]
            break
    for segment in segments[recover_from:]:
        segment.flush()
    return segments


def _discard(
    segments: list[LogSegment], directory: pathlib.Path, start: int, epoch_cache: LeaderEpochFileCache
) -> None:
    """The log ends below its log start offset (data was lost): start over, empty, at that offset."""
    if segments:
        _log.warning(
            "log ends below its log start offset; deleting all segments",
            directory=str(directory),
            log_end_offset=segments[-1].next_offset,
            log_start_offset=start,
        )
        epoch_cache.clear()
    for segment in segments:
        segment.delete()


def _segment_bases(present: Iterable[str]) -> list[int]:
    bases = (parse_base_offset(name) for name in present if name.endswith(LOG_SUFFIX))
    return sorted(base for base in bases if base is not None)


def _delete_orphan_indexes(directory: pathlib.Path, present: set[str]) -> None:
    """An index without its .log is useless and would confuse a later segment at that offset.
    ``present`` (the directory's names) loses the names deleted."""
    for name in [n for n in present if n.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))]:
        base = parse_base_offset(name)
        if base is not None and segment_file_name(base, LOG_SUFFIX) not in present:
            (directory / name).unlink()
            present.discard(name)
