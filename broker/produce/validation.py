"""Checks of the one record batch a Produce v3+ partition carries, with Kafka's error codes.

Header-only, except :func:`verify_crc` for the paths that answer without appending (the log
verifies the CRC while it copies the batch otherwise), :func:`conform_to_topic_codec`, which
recompresses a batch whose codec is not the topic's ``compression.type`` (Kafka's leader does the
same in ``LogValidator``), and :func:`check_records` on a compacted topic or when a topic bounds
how old a record may be. With ``compression.type=producer``, the default, or a batch already in the
topic's codec, the batch is appended as it came: the hot path costs one comparison.

Timestamp bounds (Kafka's ``LogValidator.validateTimestamp``, KIP-937): on a CreateTime topic a
record whose timestamp is more than ``message.timestamp.after.max.ms`` ahead of the broker's clock,
or more than ``message.timestamp.before.max.ms`` behind it, makes the whole batch INVALID_TIMESTAMP,
with Kafka's partition message and one record error per offending record (batch index and
``Timestamp T of message with offset O is out of range. The timestamp should be within [L, U]``).
A record without a timestamp (-1) is not checked. LogAppendTime topics check nothing about the
values (the broker stamps its own time), but, as in Kafka, refuse a batch whose producer set the
LogAppendTime attribute. The batch header's MaxTimestamp decides the "after" bound, so the hot path
decodes nothing; only a topic whose ``before.max.ms`` is not the default (Long.MAX, no bound) has
its records' timestamps decoded, with the columnar decoder, to find the oldest. A refused batch is
decoded once more to name its records.

Keys on compacted topics (Kafka's ``LogValidator.validateKey``): a ``cleanup.policy`` with
``compact`` refuses a batch with a null-key record as a whole, INVALID_RECORD, with one record error
per keyless record (``Compacted topic cannot accept message without key in topic partition T-P``)
and Kafka's partition message naming the first three. Finding them takes a walk of the records
that reads each key's length and steps over keys and values without copying them, paid only by
compacted topics (after decompression, for a compressed batch). A keyless record is not also
checked for its timestamp, as in Kafka; a batch with both kinds of error is INVALID_TIMESTAMP.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import CorruptRecordError, UnsupportedMagicError
from protocol.records.batch import RecordBatchHeader, read_header, verify_batch
from protocol.records.columnar import (
    FIELDS_PER_RECORD,
    KEY_LENGTH,
    OFFSET_DELTA,
    TIMESTAMP_DELTA,
    VALUE_LENGTH,
    RecordColumns,
    decode_batch_columns,
)
from protocol.records.compression import CompressionType
from protocol.records.recompress import InnerOffsetError, recompress_batch
from protocol.sentinels import NO_TIMESTAMP
from storage.config import COMPRESSION_PRODUCER, LONG_MAX, LogConfig

__all__ = [
    "INVALID_TIMESTAMP_MESSAGE",
    "NO_KEY_MESSAGE",
    "RecordError",
    "RecordValidationError",
    "check_records",
    "check_timestamps",
    "conform_to_topic_codec",
    "invalid_record_message",
    "read_single_batch",
    "verify_crc",
]

NO_KEY_MESSAGE = "Compacted topic cannot accept message without key in topic partition"
"""Kafka's record error for a keyless record on a compacted topic, followed by ``topic-partition``."""

INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"
"""The partition's error message for INVALID_TIMESTAMP, Kafka's ``InvalidTimestampException`` text."""


class RecordError(NamedTuple):
    """One refused record: its index in the batch and why (ProduceResponse ``record_errors``, v8+)."""

    batch_index: int
    message: str | None


class RecordValidationError(KafkaError):
    """A batch refused because of some of its records, named in ``record_errors`` (Kafka's
    ``RecordValidationException``)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: Sequence[RecordError]) -> None:
        super().__init__(code, message)
        self.record_errors = tuple(record_errors)


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


# -- record checks: keys on compacted topics, timestamp bounds ------------------------------------


def check_records(
    data: bytes | bytearray | memoryview,
    header: RecordBatchHeader,
    config: LogConfig,
    now_ms: int,
    *,
    topic: str,
    partition: int,
) -> None:
    """Kafka's ``LogValidator.validateRecord`` for what it checks of v2 records: a key on every record
    of a compacted topic (INVALID_RECORD), then the timestamp bounds (INVALID_TIMESTAMP).

    ``now_ms`` is the produce path's clock; ``topic`` and ``partition`` name the partition in the
    messages. A topic that is not compacted decodes nothing here unless its timestamp bounds need
    it (see the module docstring). A compacted topic's records are walked with the columnar decoder,
    which reads each key's length and skips values without copying them; only a batch with a null
    key is then checked record by record. A batch whose records cannot be decoded is CORRUPT_MESSAGE.
    """
    columns = None
    if config.compact:
        columns = _columns(data)
        if -1 in columns.fields[KEY_LENGTH::FIELDS_PER_RECORD]:
            _check_each_record(data, header, config, now_ms, f"{topic}-{partition}", columns)
    check_timestamps(data, header, config, now_ms, columns, topic=topic, partition=partition)


def check_timestamps(
    data: bytes | bytearray | memoryview,
    header: RecordBatchHeader,
    config: LogConfig,
    now_ms: int,
    columns: RecordColumns | None = None,
    *,
    topic: str = "",
    partition: int = 0,
) -> None:
    """INVALID_TIMESTAMP unless every record's timestamp is within the topic's bounds of ``now_ms``.

    ``now_ms`` is the produce path's clock; ``columns`` the batch's records if already decoded. See
    the module docstring for the rules; a batch whose records cannot be decoded (only looked at when
    the bounds need them) is CORRUPT_MESSAGE.
    """
    if header.is_log_append_time:
        # Every record's timestamp is MaxTimestamp; Kafka refuses the batch on a LogAppendTime topic
        # and, on a CreateTime one, if that is -1 or out of bounds. Producers never send these.
        _check_each_record(data, header, config, now_ms, f"{topic}-{partition}", columns)
        return
    if config.log_append_time:
        return
    if header.max_timestamp - now_ms > config.message_timestamp_after_max_ms:
        _check_each_record(data, header, config, now_ms, f"{topic}-{partition}", columns)
    before = config.message_timestamp_before_max_ms
    if before == LONG_MAX:
        return
    if columns is None:
        columns = _columns(data)
    base = header.base_timestamp
    deltas = columns.fields[TIMESTAMP_DELTA::FIELDS_PER_RECORD]
    # records without a timestamp are not checked
    timestamps = [base + delta for delta in deltas if base + delta != NO_TIMESTAMP]
    if timestamps and (
        now_ms - min(timestamps) > before or max(timestamps) - now_ms > config.message_timestamp_after_max_ms
    ):
        _check_each_record(data, header, config, now_ms, f"{topic}-{partition}", columns)


def _columns(data: bytes | bytearray | memoryview) -> RecordColumns:
    """The batch's records as columns; the CRC is left to the log (or to :func:`_check_each_record`)."""
    try:
        return decode_batch_columns(data, 0, verify_crc=False)[1]
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None


def _check_each_record(
    data: bytes | bytearray | memoryview,
    header: RecordBatchHeader,
    config: LogConfig,
    now_ms: int,
    topic_partition: str,
    columns: RecordColumns | None = None,
) -> None:
    """Kafka's check record by record (the CRC is checked first, so a corrupt batch stays
    CORRUPT_MESSAGE); returns if no record is refused.

    As in Kafka, a record's missing key (compacted topics) is its error, else its timestamp is
    checked. The batch is INVALID_TIMESTAMP if any record's timestamp is refused, else INVALID_RECORD
    with Kafka's message naming the first three record errors.
    """
    verify_crc(data)
    if columns is None:
        columns = _columns(data)
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    bounds = f"[{_java_long(now_ms - before)}, {_java_long(now_ms + after)}]"
    create_time = not config.log_append_time
    compacted = config.compact
    producer_log_append_time = header.is_log_append_time
    fields = columns.fields
    errors: list[RecordError] = []
    timestamp_refused = False
    for index in range(columns.count):
        row = index * FIELDS_PER_RECORD
        if compacted and fields[row + KEY_LENGTH] < 0:
            errors.append(RecordError(index, f"{NO_KEY_MESSAGE} {topic_partition}"))
            continue
        offset = header.base_offset + fields[row + OFFSET_DELTA]
        if producer_log_append_time:
            timestamp = header.max_timestamp  # what Kafka's readers report for such a batch
        else:
            timestamp = header.base_timestamp + fields[row + TIMESTAMP_DELTA]
        if create_time and timestamp != NO_TIMESTAMP:
            if now_ms - timestamp > before or timestamp - now_ms > after:
                timestamp_refused = True
                errors.append(
                    RecordError(
                        index,
                        f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                        f"The timestamp should be within {bounds}",
                    )
                )
        elif producer_log_append_time:
            record = (
                f"DefaultRecord(offset={offset}, timestamp={timestamp}, "
                f"key={max(fields[row + KEY_LENGTH], 0)} bytes, "
                f"value={max(fields[row + VALUE_LENGTH], 0)} bytes)"
            )
            timestamp_refused = True
            errors.append(
                RecordError(
                    index,
                    f"Invalid timestamp type in message {record}. Producer should not set timestamp "
                    "type to LogAppendTime.",
                )
            )
    if timestamp_refused:
        raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE, errors)
    if errors:
        raise RecordValidationError(ErrorCode.INVALID_RECORD, invalid_record_message(errors), errors)
    if header.max_timestamp - now_ms > after:
        # No record is beyond the bound but the header says one is: Kafka would rewrite MaxTimestamp,
        # kipling stores headers as they come, so it refuses the batch rather than keep a wrong one.
        raise KafkaError(
            ErrorCode.INVALID_TIMESTAMP,
            f"MaxTimestamp {header.max_timestamp} of the record batch is out of range. The timestamp "
            f"should be within {bounds}",
        )


def invalid_record_message(errors: Sequence[RecordError]) -> str:
    """The partition's message for INVALID_RECORD record errors: Kafka's, with its Java
    ``List<RecordError>.toString()`` of the first three."""
    shown = ", ".join(
        f"RecordError(batchIndex={e.batch_index}, message="
        + ("null" if e.message is None else f"'{e.message}'")
        + ")"
        for e in errors[:3]
    )
    return (
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"
    )


def _java_long(value: int) -> int:
    """``value`` as Java's long arithmetic gives it (a bound of now + Long.MAX wraps, as in Kafka)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)
