"""Checks of the one record batch a Produce v3+ partition carries, with Kafka's error codes.

Header-only, except :func:`verify_crc` for the paths that answer without appending (the log
verifies the CRC while it copies the batch otherwise).
"""

from __future__ import annotations

from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import CorruptRecordError, UnsupportedMagicError
from protocol.records.batch import RecordBatchHeader, read_header, verify_batch

__all__ = ["read_single_batch", "verify_crc"]


def read_single_batch(data: bytes | bytearray | memoryview) -> RecordBatchHeader:
    """The header of the one batch a Produce v3+ partition must carry; no CRC yet."""
    if len(data) == 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Produce requests must have exactly one record batch")
    try:
        header = read_header(data, 0)
    except UnsupportedMagicError as exc:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, str(exc)) from None
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if header.size > len(data):
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE,
            f"record batch declares {header.size} bytes but only {len(data)} were sent",
        )
    if header.size < len(data):
        _refuse_trailing_bytes(data, header.size)
    return header


def _refuse_trailing_bytes(data: bytes | bytearray | memoryview, end: int) -> None:
    """A second batch is an INVALID_RECORD (one batch per partition); anything else is corrupt."""
    try:
        read_header(data, end)
    except (CorruptRecordError, UnsupportedMagicError):
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"{len(data) - end} bytes after the record batch are not a batch"
        ) from None
    raise KafkaError(
        ErrorCode.INVALID_RECORD,
        "Produce requests with version 3 and above must contain exactly one record batch per partition",
    )


def verify_crc(data: bytes | bytearray | memoryview) -> None:
    """CORRUPT_MESSAGE unless the batch at the start of ``data`` has a valid CRC32C."""
    try:
        verify_batch(data, 0)
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
