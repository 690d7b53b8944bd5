"""Exceptions raised by the storage layer.

They are kept in one small module so that every storage module (and the broker, which maps them
to Kafka error codes) can import them without pulling in the heavier log machinery.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn


class StorageError(Exception):
    """Base class of every error raised by ``storage``."""


class CorruptIndexError(StorageError):
    """Raised when an .index/.timeindex file fails its sanity check; the log rebuilds it from the .log."""


class CheckpointError(StorageError):
    """Raised when a checkpoint file has a wrong version, a wrong count or a malformed line."""


class OffsetOutOfRangeError(StorageError):
    """Raised when a read asks for an offset outside [log start offset, log end offset]."""


class RecordTooLargeError(StorageError):
    """Raised when a single record is larger than max.message.bytes allows."""


class RecordBatchTooLargeError(StorageError):
    """Raised when a record batch is larger than max.message.bytes or than a whole segment."""


class InvalidRecordError(StorageError):
    """Raised when an appended batch fails validation (bad CRC, magic, or offsets)."""


class UnexpectedAppendOffsetError(StorageError):
    """Raised when a follower append's first offset is below the log end offset it expects."""


class KiplingStorageError(StorageError):
    """Raised on an unrecoverable log directory problem (I/O failure, directory locked by another broker)."""


class CorruptLogError(KiplingStorageError):
    """A read met bytes that are not a valid batch where the log's own files say one starts.

    Kafka's KafkaStorageException for a damaged segment: nothing was written, but the replica cannot
    serve this log any more. ``damaged_from`` is the base offset of the segment it was found in;
    the log remembers it, so that its next owner re-validates from there (see
    :meth:`storage.log.PartitionLog.mark_damaged`).
    """

    def __init__(self, message: str, damaged_from: int) -> None:
        super().__init__(message)
        self.damaged_from = damaged_from


class OutOfDescriptorsError(OSError):
    """A segment file could not be opened: the process's open-files limit is reached and the file
    pool (storage/file_pool.py) has no descriptor of its own left to close.

    Connections or other files hold the rest: a shortage that passes, not a failed disk, so callers
    answer KAFKA_STORAGE_ERROR (retriable) but keep the partition online. It is an OSError carrying
    EMFILE, so every path that undoes a failed write handles it unchanged.
    """


NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""A full file system or an exhausted quota: the disk is healthy, it only has no room for more."""


class LogDirFullError(KiplingStorageError, OSError):
    """A write found no space left in its log directory; whatever it started was undone.

    Unlike other I/O errors this is not a failed disk: the log is exactly as before the write, reads
    keep working, and the same write succeeds once space returns (a topic deleted, retention, an
    operator freeing space). Callers answer KAFKA_STORAGE_ERROR but keep the partition online. It is
    also an OSError carrying ENOSPC, so code that tolerates any failed write (a producer snapshot, a
    checkpoint) catches it unchanged.
    """

    def __init__(self, what: object, cause: OSError | None = None) -> None:
        code = cause.errno if cause is not None and cause.errno in NO_SPACE_ERRNOS else errno.ENOSPC
        super().__init__(code, f"no space left on device writing {what}")


def is_log_dir_full(exc: BaseException) -> bool:
    """Whether ``exc`` means "no space left" (ENOSPC/EDQUOT) rather than a failed disk."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


LOW_SPACE_BYTES = 1024 * 1024
"""Below this much free space a log dir counts as full: not even a small segment is sure to fit."""


def free_bytes(path: os.PathLike[str] | str) -> int:
    """Bytes an unprivileged writer may still use on the file system holding ``path`` (OSError if
    it cannot be asked)."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def raise_log_dir_full(what: object, exc: OSError) -> NoReturn:
    """Re-raise ``exc`` as :class:`LogDirFullError` when it means a full disk, else unchanged."""
    if is_log_dir_full(exc) and not isinstance(exc, LogDirFullError):
        raise LogDirFullError(what, exc) from exc
    raise exc


@contextmanager
def no_space_is_log_dir_full(what: object) -> Iterator[None]:
    """Turn a full-disk OSError raised inside the block into :class:`LogDirFullError` naming ``what``."""
    try:
        yield
    except OSError as exc:
        raise_log_dir_full(what, exc)
