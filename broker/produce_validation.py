"""Checks of the one record batch a Produce v3+ partition carries, with Kafka's error codes.

Header-only, except :func:`verify_crc` for the paths that answer without appending (the log
verifies the CRC while it copies the batch otherwise), and :func:`conform_to_topic_codec`, which
recompresses a batch whose codec is not the topic's ``compression.type`` (Kafka's leader does the
same in ``LogValidator``). With ``compression.type=producer``, the default, or a batch already in
the topic's codec, the batch is appended as it came: the hot path costs one comparison.
"""

from __future__ import annotations

from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import CorruptRecordError, UnsupportedMagicError
from protocol.records.batch import RecordBatchHeader, read_header, verify_batch
from protocol.records.compression import CompressionType
from protocol.records.recompress import InnerOffsetError, recompress_batch
from storage.config import COMPRESSION_PRODUCER, LogConfig

__all__ = ["conform_to_topic_codec", "read_single_batch", "verify_crc"]


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


def conform_to_topic_codec(
    data: bytes | bytearray | memoryview, header: RecordBatchHeader, config: LogConfig
) -> tuple[bytes | bytearray | memoryview, RecordBatchHeader]:
    """The batch as the topic stores it: recompressed when ``compression.type`` names another codec.

    Returns ``(data, header)`` unchanged when nothing is to be done. Otherwise the batch's records
    are recompressed with the topic's codec and ``compression.<codec>.level`` (header fields, record
    bytes, offsets and timestamps unchanged; a new CRC), and the new batch must still fit
    ``max.message.bytes``. A bad CRC or undecodable records are CORRUPT_MESSAGE, records whose
    offset deltas are not 0, 1, 2, ... INVALID_RECORD, as in Kafka.
    """
    target = config.compression_type
    if target == COMPRESSION_PRODUCER:
        return data, header
    codec = CompressionType.from_name(target)
    if header.compression == codec:
        return data, header
    try:
        batch = recompress_batch(data, codec, level=_level(codec, config))
    except InnerOffsetError as exc:
        raise KafkaError(ErrorCode.INVALID_RECORD, str(exc)) from None
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    recompressed = read_header(batch, 0)
    if recompressed.size > config.max_message_bytes:
        raise KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch of {recompressed.size} bytes, recompressed with {target}, is larger "
            f"than max.message.bytes={config.max_message_bytes}",
        )
    return batch, recompressed


def _level(codec: CompressionType, config: LogConfig) -> int | None:
    if codec == CompressionType.GZIP:
        return config.compression_gzip_level
    if codec == CompressionType.LZ4:
        return config.compression_lz4_level
    if codec == CompressionType.ZSTD:
        return config.compression_zstd_level
    return None
