"""Log compaction (Kafka's log cleaner) as a synchronous library over :class:`storage.log.PartitionLog`.

The owner of a log picks it with :func:`cleanable_range`, builds a :class:`CleanTask` with
:func:`plan_clean`; the cleaner process (``cleaner/``) runs :func:`write_cleaned_segments` on it; the
owner installs each :class:`CleanedGroup` with ``PartitionLog.replace_segments`` and stores the
round's end offset with :class:`CleanerOffsetCheckpoint`. The log loader calls
:func:`recover_cleaner_files` before loading segments. :func:`clean_log` does a whole round in one
process.
"""

from storage.cleaner.checkpoint import CLEANER_OFFSET_CHECKPOINT, CleanerOffsetCheckpoint
from storage.cleaner.cleanable import CleanableRange, cleanable_range
from storage.cleaner.cleaner import (
    CleanedGroup,
    CleaningAborted,
    CleanResult,
    CleanTask,
    CrashPoint,
    LastRecord,
    SegmentInfo,
    build_offset_map,
    clean_log,
    group_segments_by_size,
    last_records_of_active_producers,
    plan_clean,
    remove_cleaned_files,
    write_cleaned_segments,
)
from storage.cleaner.offset_map import OffsetMap
from storage.cleaner.recovery import recover_cleaner_files
from storage.cleaner.throttler import Throttler

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanResult",
    "CleanTask",
    "CleanableRange",
    "CleanedGroup",
    "CleanerOffsetCheckpoint",
    "CleaningAborted",
    "CrashPoint",
    "LastRecord",
    "OffsetMap",
    "SegmentInfo",
    "Throttler",
    "build_offset_map",
    "clean_log",
    "cleanable_range",
    "group_segments_by_size",
    "last_records_of_active_producers",
    "plan_clean",
    "recover_cleaner_files",
    "remove_cleaned_files",
    "write_cleaned_segments",
]
