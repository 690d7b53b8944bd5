"""Decode the records inside v2 batches: for tools, tests and offline readers, not the broker.

The broker's hot paths never come here (they use the header view and the CRC). This module is
the one place that trusts nothing about a batch's contents: every varint is bounded (5 bytes for
a varint, 10 for a varlong), every length is checked against the record that contains it, the
record count must match RecordsCount exactly, and decompression is capped. Malformed input
surfaces as :class:`~protocol.errors.CorruptRecordError` (or
:class:`~protocol.errors.UnsupportedMagicError`), never as ``IndexError``/``struct.error``, and no
allocation is larger than the input or the decompression limit.

Record layout (varints are zigzag-encoded)::

    Length varint | Attributes int8 | TimestampDelta varlong | OffsetDelta varint
    KeyLength varint (-1 null) | Key | ValueLength varint (-1 null) | Value
    HeadersCount varint | Headers[] {KeyLength varint, Key utf8, ValueLength varint (-1 null), Value}
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from protocol.errors import CorruptRecordError
from protocol.records.batch import (
    HEADER_SIZE,
    NO_SEQUENCE,
    RecordBatchHeader,
    TimestampType,
    iter_batches,
    read_header,
    verify_batch,
)
from protocol.records.compression import CompressionType, decompress
from protocol.records.control import ControlRecordKey, parse_control_record_key

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "ControlRecordKey",
    "DecodedRecord",
    "decode_varint",
    "decode_varlong",
    "iter_all_records",
    "iter_records",
    "parse_control_record_key",
]

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]

DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024
"""Decompression limit of :func:`iter_records` unless the caller passes its own."""

_VARINT_MAX_BYTES = 5
_VARINT_BITS = 32
_VARLONG_MAX_BYTES = 10
_VARLONG_BITS = 64
_MIN_RECORD_SIZE = 7
"""Length, attributes, timestamp delta, offset delta, key, value, header count: one byte each."""
_MIN_HEADER_SIZE = 2
_SEQUENCE_MODULUS = 1 << 31


class DecodedRecord(NamedTuple):
    """One record with its absolute offset and timestamp, and the header of its batch."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    batch: RecordBatchHeader

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(self.batch.timestamp_type)

    @property
    def is_control(self) -> bool:
        return self.batch.is_control

    @property
    def is_transactional(self) -> bool:
        return self.batch.is_transactional

    @property
    def producer_id(self) -> int:
        return self.batch.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.batch.producer_epoch

    @property
    def leader_epoch(self) -> int:
        return self.batch.partition_leader_epoch

    @property
    def sequence(self) -> int:
        """The record's producer sequence: base sequence plus offset delta, wrapping at int32."""
        if self.batch.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        delta = self.offset - self.batch.base_offset
        return (self.batch.base_sequence + delta) % _SEQUENCE_MODULUS

    def control_key(self) -> ControlRecordKey:
        """Parse the key as a control record key (only meaningful in a control batch)."""
        return parse_control_record_key(self.key)


# ---------------------------------------------------------------------------------------------
# Varints


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint (int32, at most 5 bytes) at ``pos``; return (value, new position)."""
    return _decode_zigzag(buf, pos, len(buf), _VARINT_MAX_BYTES, _VARINT_BITS)


def decode_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varlong (int64, at most 10 bytes) at ``pos``; return (value, new position)."""
    return _decode_zigzag(buf, pos, len(buf), _VARLONG_MAX_BYTES, _VARLONG_BITS)


def _decode_zigzag(buf: Buffer, pos: int, end: int, max_bytes: int, bits: int) -> tuple[int, int]:
    """Read an unsigned LEB128 value no longer than ``max_bytes`` and no wider than ``bits``, then
    undo the zigzag. ``end`` bounds the read to the enclosing record, not just the buffer."""
    raw = 0
    for index in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError(f"varint runs past the end of its record at position {pos}")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            if raw >> bits:
                raise CorruptRecordError(f"varint value does not fit in {bits} bits")
            return (raw >> 1) ^ -(raw & 1), pos
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


# ---------------------------------------------------------------------------------------------
# Records


def iter_records(
    batch: Buffer,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    *,
    verify_crc: bool = True,
) -> Iterator[DecodedRecord]:
    """Yield the records of exactly one v2 batch (``batch`` must hold that batch and nothing else).

    Decompresses if needed (at most ``max_decompressed_size`` bytes). In a LogAppendTime batch
    every record's timestamp is the batch's MaxTimestamp, as Kafka reports it. Errors are raised
    lazily, when iteration reaches them.
    """
    header = verify_batch(batch) if verify_crc else read_header(batch)
    if len(batch) != header.size:
        raise CorruptRecordError(
            f"record batch declares {header.size} bytes but the buffer holds {len(batch)}"
        )
    stream, pos = _record_stream(batch, header, max_decompressed_size)
    yield from _iter_stream(stream, pos, len(stream), header)


def iter_all_records(
    buf: Buffer,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    *,
    verify_crc: bool = True,
) -> Iterator[DecodedRecord]:
    """Yield the records of every complete batch in a concatenation (a fetched log slice).

    A partial trailing batch is skipped, as a consumer does with a fetch response.
    """
    view = memoryview(buf)
    for pos, header in iter_batches(view):
        yield from iter_records(view[pos : pos + header.size], max_decompressed_size, verify_crc=verify_crc)


def _record_stream(batch: Buffer, header: RecordBatchHeader, max_size: int) -> tuple[Buffer, int]:
    """The uncompressed record bytes and where they start (the batch itself when uncompressed)."""
    codec = header.compression
    if codec == CompressionType.NONE:
        return batch, HEADER_SIZE
    if header.records_count == 0 and header.size == HEADER_SIZE:
        return b"", 0  # compaction leaves empty batches that keep their codec bits
    payload = memoryview(batch)[HEADER_SIZE : header.size]
    return decompress(codec, payload, max_size), 0


def _iter_stream(stream: Buffer, pos: int, end: int, header: RecordBatchHeader) -> Iterator[DecodedRecord]:
    count = header.records_count
    if count > (end - pos) // _MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record batch declares {count} records but holds only {end - pos} bytes of records"
        )
    for index in range(count):
        if pos >= end:
            raise CorruptRecordError(f"record batch declares {count} records but holds only {index}")
        record, pos = _decode_record(stream, pos, end, header)
        yield record
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the {count} records the batch declares")


def _decode_record(buf: Buffer, pos: int, end: int, header: RecordBatchHeader) -> tuple[DecodedRecord, int]:
    """Decode the record at ``pos``; every field must lie inside the record's declared length."""
    length, pos = _decode_zigzag(buf, pos, end, _VARINT_MAX_BYTES, _VARINT_BITS)
    if length < 0 or length > end - pos:
        raise CorruptRecordError(f"record length {length} at position {pos} is out of range")
    record_end = pos + length
    if pos >= record_end:
        raise CorruptRecordError(f"record at position {pos} is empty")
    pos += 1  # record attributes: unused
    timestamp_delta, pos = _decode_zigzag(buf, pos, record_end, _VARLONG_MAX_BYTES, _VARLONG_BITS)
    offset_delta, pos = _decode_zigzag(buf, pos, record_end, _VARINT_MAX_BYTES, _VARINT_BITS)
    key, pos = _decode_nullable_bytes(buf, pos, record_end, "key")
    value, pos = _decode_nullable_bytes(buf, pos, record_end, "value")
    headers, pos = _decode_headers(buf, pos, record_end)
    if pos != record_end:
        raise CorruptRecordError(f"record ends at {pos}, {record_end - pos} bytes before its declared length")
    if header.is_log_append_time:
        timestamp = header.max_timestamp
    else:
        timestamp = header.base_timestamp + timestamp_delta
    record = DecodedRecord(header.base_offset + offset_delta, timestamp, key, value, headers, header)
    return record, pos


def _decode_nullable_bytes(buf: Buffer, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = _decode_zigzag(buf, pos, end, _VARINT_MAX_BYTES, _VARINT_BITS)
    if length == -1:
        return None, pos
    if length < 0 or length > end - pos:
        raise CorruptRecordError(f"record {what} length {length} at position {pos} is out of range")
    return bytes(buf[pos : pos + length]), pos + length


def _decode_headers(buf: Buffer, pos: int, end: int) -> tuple[list[Header], int]:
    count, pos = _decode_zigzag(buf, pos, end, _VARINT_MAX_BYTES, _VARINT_BITS)
    if count < 0 or count > (end - pos) // _MIN_HEADER_SIZE:
        raise CorruptRecordError(f"record header count {count} at position {pos} is out of range")
    headers: list[Header] = []
    for _ in range(count):
        name, pos = _decode_nullable_bytes(buf, pos, end, "header key")
        if name is None:
            raise CorruptRecordError(f"record header key at position {pos} is null")
        value, pos = _decode_nullable_bytes(buf, pos, end, "header value")
        headers.append((_decode_utf8(name), value))
    return headers, pos


def _decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"record header key is not valid UTF-8: {exc}") from exc
