"""Build v2 record batches: for clients, tools and tests (the broker never re-encodes batches)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crc32c import crc32c

from protocol.errors import EncodeError
from protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    TimestampType,
)
from protocol.records.compression import CompressionType
from protocol.records.compression import compress as compress_with
from protocol.sentinels import NO_LEADER_EPOCH, NO_TIMESTAMP

_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")
_BASE = struct.Struct(">qiib")
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a producer sees it."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)
    timestamp: int = 0


def encode_varint(value: int, out: bytearray) -> None:
    """Append a zigzag varint/varlong (record fields are signed, unlike protocol varints)."""
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag & ~0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _encode_nullable(data: bytes | None, out: bytearray) -> None:
    if data is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(data), out)
        out += data


def encode_record(record: Record, offset_delta: int, base_timestamp: int) -> bytes:
    """One record with its length prefix, deltas relative to the batch's base offset and time."""
    body = bytearray(b"\x00")  # attributes, unused
    encode_varint(record.timestamp - base_timestamp, body)
    encode_varint(offset_delta, body)
    _encode_nullable(record.key, body)
    _encode_nullable(record.value, body)
    encode_varint(len(record.headers), body)
    for name, value in record.headers:
        _encode_nullable(name.encode(), body)
        _encode_nullable(value, body)
    out = bytearray()
    encode_varint(len(body), out)
    out += body
    return bytes(out)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_LEADER_EPOCH,
    attributes: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compress: Callable[[bytes], bytes] | None = None,
    compression: CompressionType | int = CompressionType.NONE,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """Encode ``records`` as one v2 batch with a valid CRC32C.

    The codec comes from ``compression`` or from bits 0-2 of ``attributes`` (both may be given
    if they agree); the record stream after RecordsCount is compressed with it, through
    ``compress`` when a custom compressor is supplied. ``timestamp_type``, ``is_transactional``
    and ``is_control`` set their attribute bits on top of ``attributes``. With LogAppendTime the
    broker normally stamps MaxTimestamp afterwards (``stamp_log_append_time``).
    """
    codec = _codec(compression, attributes)
    attributes = _attributes(attributes, codec, timestamp_type, is_transactional, is_control)
    if records:
        base_timestamp = records[0].timestamp
        max_timestamp = max(r.timestamp for r in records)
    else:
        base_timestamp = max_timestamp = NO_TIMESTAMP
    payload = _record_stream(records, base_timestamp, codec, compress)
    return assemble_batch(
        payload,
        count=len(records),
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def assemble_batch(
    payload: bytes,
    *,
    count: int,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    """A v2 batch of ``count`` records whose (compressed) record stream is ``payload``: the header
    fields in their order, the CRC; a field out of its range is EncodeError. Shared by every
    encoder, the per-record :func:`build_batch` and the compiled columnar one."""
    try:
        return _assemble(
            payload,
            base_offset=base_offset,
            partition_leader_epoch=partition_leader_epoch,
            fields_after_crc=(
                attributes,
                max(count - 1, 0),
                base_timestamp,
                max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                count,
            ),
        )
    except struct.error as exc:
        raise EncodeError(f"record batch field out of range: {exc}") from exc


def _assemble(
    payload: bytes, *, base_offset: int, partition_leader_epoch: int, fields_after_crc: tuple[int, ...]
) -> bytes:
    """Header plus payload, with the CRC over everything from Attributes on."""
    after_crc = _HEADER_AFTER_CRC.pack(*fields_after_crc) + payload
    batch_length = len(after_crc) + (ATTRIBUTES_OFFSET - LOG_OVERHEAD)
    return (
        _BASE.pack(base_offset, batch_length, partition_leader_epoch, CURRENT_MAGIC)
        + _UINT32.pack(crc32c(after_crc))
        + after_crc
    )


def _record_stream(
    records: Sequence[Record],
    base_timestamp: int,
    codec: CompressionType,
    compress: Callable[[bytes], bytes] | None,
) -> bytes:
    """The bytes after RecordsCount. An empty batch has none at all, whatever its codec, as
    compaction writes it (Kafka never produces one otherwise)."""
    if not records:
        return b""
    payload = b"".join(encode_record(r, i, base_timestamp) for i, r in enumerate(records))
    if compress is not None:
        return compress(payload)
    if codec != CompressionType.NONE:
        return compress_with(codec, payload)
    return payload


def _codec(compression: CompressionType | int, attributes: int) -> CompressionType:
    """Reconcile the two ways of naming the codec; a contradiction is a caller bug."""
    from_attributes = attributes & COMPRESSION_MASK
    if compression and from_attributes and compression != from_attributes:
        raise EncodeError(f"compression {compression} contradicts attributes codec {from_attributes}")
    try:
        return CompressionType(compression or from_attributes)
    except ValueError:
        raise EncodeError(f"unknown compression codec id {compression or from_attributes}") from None


def _attributes(
    attributes: int,
    codec: CompressionType,
    timestamp_type: TimestampType | int,
    is_transactional: bool,
    is_control: bool,
) -> int:
    if timestamp_type not in (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME):
        raise EncodeError(f"unknown timestamp type {timestamp_type}")
    attributes |= codec
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    return attributes
