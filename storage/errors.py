"""Exceptions raised by the storage layer.

They are kept in one small module so that every storage module (and the broker, which maps them
to Kafka error codes) can import them without pulling in the heavier log machinery.
"""

from __future__ import annotations


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
