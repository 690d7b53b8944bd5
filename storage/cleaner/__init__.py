"""Log compaction (Kafka's log cleaner) as a synchronous library over :class:`storage.log.PartitionLog`.

Not wired into the broker yet: a cleaner process will pick logs with :func:`cleanable_range`, run
:func:`clean_log` on them and store the returned end offset with :class:`CleanerOffsetCheckpoint`;
the log loader will call :func:`recover_cleaner_files` on open.
"""

from storage.cleaner.checkpoint import CLEANER_OFFSET_CHECKPOINT, CleanerOffsetCheckpoint
from storage.cleaner.cleanable import CleanableRange, cleanable_range
from storage.cleaner.cleaner import (
    CleanResult,
    CrashPoint,
    LastRecord,
    build_offset_map,
    clean_log,
    group_segments_by_size,
    last_records_of_active_producers,
)
from storage.cleaner.offset_map import OffsetMap
from storage.cleaner.recovery import recover_cleaner_files

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanResult",
    "CleanableRange",
    "CleanerOffsetCheckpoint",
    "CrashPoint",
    "LastRecord",
    "OffsetMap",
    "build_offset_map",
    "clean_log",
    "cleanable_range",
    "group_segments_by_size",
    "last_records_of_active_producers",
    "recover_cleaner_files",
]
