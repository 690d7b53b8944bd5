"""Encode v2 record batches from columns (numpy buffers), compiled: no Python work per record.

The write-side twin of :mod:`protocol.records.columnar_kernel`. :func:`protocol.records.build_batch`
makes one :class:`~protocol.records.Record` and ~10 ``bytearray`` appends per record, ~1-2 µs each in
CPython; a bulk writer (the Spark sink) holds its rows as Arrow buffers already. Here a numba kernel
writes the whole record stream (length varint, attributes 0, timestamp delta, offset delta, key,
value, header count 0) into one preallocated buffer straight from those buffers; the batch header,
compression and CRC32C are :mod:`protocol.records.builder`'s own, so the output is byte-for-byte
``build_batch``'s for the same records (a hypothesis test checks it, every codec). Records with
headers are not handled here: callers take ``build_batch`` for them (headers are rare).

:func:`murmur2_column` is Kafka's ``Utils.murmur2`` (:func:`client.partitioner.murmur2`) over a key
column, so a keyed row's partition is chosen without a Python ``bytes`` per key.

Inputs are a :class:`BinaryColumn` per field (Arrow's layout: int64 offsets, uint8 data, a validity
mask where False is null) and ``rows``, the row indices to encode in order, so one partition's rows
can be encoded from the whole column without a gather copy. numba's cache handling is the decoder's
(``cache=True`` with a fallback where no cache location is writable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from protocol.errors import EncodeError
from protocol.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, TimestampType
from protocol.records.builder import _attributes, _codec, assemble_batch
from protocol.records.compiled import compiled, compiled_helper
from protocol.records.compression import CompressionType
from protocol.records.compression import compress as compress_with
from protocol.sentinels import NO_LEADER_EPOCH

__all__ = [
    "BinaryColumn",
    "ColumnPiece",
    "build_batch_columns",
    "build_batch_pieces",
    "encode_record_stream",
    "murmur2_column",
]

Int64Array = npt.NDArray[np.int64]

MAX_RECORD_FRAMING = 32
"""Bytes a record takes beyond its key and value at most: length (5), attributes (1), timestamp
delta (10), offset delta (5), key and value lengths (5 each), header count (1)."""


@dataclass(frozen=True, slots=True)
class BinaryColumn:
    """A nullable binary column in Arrow's layout: row ``i`` is ``data[offsets[i]:offsets[i+1]]``,
    null where ``valid[i]`` is False."""

    offsets: Int64Array
    data: npt.NDArray[np.uint8]
    valid: npt.NDArray[np.bool_]

    @classmethod
    def from_values(cls, values: list[bytes | None]) -> BinaryColumn:
        """A column from Python values (tests and the single-task bench)."""
        lengths = np.fromiter((len(v) if v is not None else 0 for v in values), np.int64, len(values))
        offsets = np.zeros(len(values) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.frombuffer(b"".join(v for v in values if v is not None), np.uint8)
        valid = np.fromiter((v is not None for v in values), np.bool_, len(values))
        return cls(offsets, data, valid)

    @classmethod
    def nulls(cls, count: int) -> BinaryColumn:
        """A column of ``count`` nulls (a sink input without a key column)."""
        return cls(np.zeros(count + 1, np.int64), np.zeros(0, np.uint8), np.zeros(count, np.bool_))


@compiled_helper
def _zigzag_size(value: Any) -> Any:
    """Bytes of ``value`` as a zigzag varlong."""
    zigzag = np.uint64((value << 1) ^ (value >> 63))
    size = 1
    while zigzag >= np.uint64(0x80):
        zigzag >>= np.uint64(7)
        size += 1
    return size


@compiled_helper
def _put_zigzag(out: Any, pos: int, value: Any) -> int:
    zigzag = np.uint64((value << 1) ^ (value >> 63))
    while zigzag >= np.uint64(0x80):
        out[pos] = np.uint8((zigzag & np.uint64(0x7F)) | np.uint64(0x80))
        zigzag >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(zigzag)
    return pos + 1


@compiled
def _encode_kernel(
    out: Any,
    rows: Any,
    key_offsets: Any,
    key_data: Any,
    key_valid: Any,
    value_offsets: Any,
    value_data: Any,
    value_valid: Any,
    timestamps: Any,
    base_timestamp: Any,
    first_offset_delta: Any,
) -> Any:
    """Write the records of ``rows`` into ``out``; returns the bytes written."""
    pos: Any = 0
    for index in range(rows.shape[0]):
        row = rows[index]
        timestamp_delta = np.int64(timestamps[index]) - np.int64(base_timestamp)
        offset_delta = np.int64(first_offset_delta + index)
        if key_valid[row]:
            key_start = key_offsets[row]
            key_length = np.int64(key_offsets[row + 1] - key_start)
        else:
            key_start = 0
            key_length = np.int64(-1)
        if value_valid[row]:
            value_start = value_offsets[row]
            value_length = np.int64(value_offsets[row + 1] - value_start)
        else:
            value_start = 0
            value_length = np.int64(-1)
        body = 2 + _zigzag_size(timestamp_delta) + _zigzag_size(offset_delta)
        body += _zigzag_size(key_length) + max(key_length, 0)
        body += _zigzag_size(value_length) + max(value_length, 0)
        pos = _put_zigzag(out, pos, np.int64(body))
        out[pos] = 0  # attributes
        pos += 1
        pos = _put_zigzag(out, pos, timestamp_delta)
        pos = _put_zigzag(out, pos, offset_delta)
        pos = _put_zigzag(out, pos, key_length)
        for i in range(key_length):
            out[pos + i] = key_data[key_start + i]
        if key_length > 0:
            pos += key_length
        pos = _put_zigzag(out, pos, value_length)
        for i in range(value_length):
            out[pos + i] = value_data[value_start + i]
        if value_length > 0:
            pos += value_length
        out[pos] = 0  # header count
        pos += 1
    return pos


@compiled
def _payload_bound(rows: Any, key_offsets: Any, value_offsets: Any) -> Any:
    """An upper bound of the record stream's size: keys, values and the most framing per record."""
    total: Any = 0
    for index in range(rows.shape[0]):
        row = rows[index]
        total += key_offsets[row + 1] - key_offsets[row] + value_offsets[row + 1] - value_offsets[row]
    return total + MAX_RECORD_FRAMING * rows.shape[0]


@compiled
def _murmur2_kernel(offsets: Any, data: Any, valid: Any, rows: Any) -> Any:
    """Kafka's murmur2 of each row's key (uint32 as int64), -1 for a null key."""
    m = np.uint32(0x5BD1E995)
    hashes = np.empty(rows.shape[0], np.int64)
    for index in range(rows.shape[0]):
        row = rows[index]
        if not valid[row]:
            hashes[index] = -1
            continue
        start = offsets[row]
        length = offsets[row + 1] - start
        h = np.uint32(0x9747B28C) ^ np.uint32(length & 0xFFFFFFFF)
        whole = length - length % 4
        for i in range(0, whole, 4):
            p = start + i
            k = (
                np.uint32(data[p])
                | (np.uint32(data[p + 1]) << np.uint32(8))
                | (np.uint32(data[p + 2]) << np.uint32(16))
                | (np.uint32(data[p + 3]) << np.uint32(24))
            )
            k = np.uint32(k * m)
            k ^= k >> np.uint32(24)
            k = np.uint32(k * m)
            h = np.uint32(h * m)
            h ^= k
        rest = length % 4
        tail = start + whole
        if rest == 3:
            h ^= np.uint32(data[tail + 2]) << np.uint32(16)
        if rest >= 2:
            h ^= np.uint32(data[tail + 1]) << np.uint32(8)
        if rest >= 1:
            h ^= np.uint32(data[tail])
            h = np.uint32(h * m)
        h ^= h >> np.uint32(13)
        h = np.uint32(h * m)
        h ^= h >> np.uint32(15)
        hashes[index] = np.int64(h)
    return hashes


def murmur2_column(keys: BinaryColumn, rows: Int64Array | None = None) -> Int64Array:
    """:func:`client.partitioner.murmur2` of each row's key (all rows, or ``rows``); -1 for null.

    A keyed row's partition is then ``(hash & 0x7FFFFFFF) % num_partitions``, as
    ``partition_for_key``."""
    if rows is None:
        rows = np.arange(keys.valid.shape[0], dtype=np.int64)
    return cast(Int64Array, _murmur2_kernel(keys.offsets, keys.data, keys.valid, rows))


def encode_record_stream(
    keys: BinaryColumn,
    values: BinaryColumn,
    rows: Int64Array,
    timestamps: Int64Array,
    base_timestamp: int,
    first_offset_delta: int = 0,
) -> bytes:
    """The uncompressed records of ``rows`` (in order), as ``build_batch`` writes them without
    headers; ``timestamps[i]`` is the timestamp of ``rows[i]``."""
    if timestamps.shape[0] != rows.shape[0]:
        raise EncodeError(f"{timestamps.shape[0]} timestamps for {rows.shape[0]} rows")
    out = np.empty(_payload_bound(rows, keys.offsets, values.offsets), np.uint8)
    used = _encode_kernel(
        out,
        rows,
        keys.offsets,
        keys.data,
        keys.valid,
        values.offsets,
        values.data,
        values.valid,
        timestamps,
        np.int64(base_timestamp),
        np.int64(first_offset_delta),
    )
    return out[: int(used)].tobytes()


@dataclass(frozen=True, slots=True)
class ColumnPiece:
    """Rows of one pair of columns, in the order they go into a batch; ``timestamps[i]`` is the
    timestamp of ``rows[i]``. A batch may be made of several (rows buffered from several inputs)."""

    keys: BinaryColumn
    values: BinaryColumn
    rows: Int64Array
    timestamps: Int64Array


def build_batch_columns(
    keys: BinaryColumn,
    values: BinaryColumn,
    rows: Int64Array,
    timestamps: Int64Array,
    **fields: Any,
) -> bytes:
    """One v2 batch of ``rows`` of one pair of columns: :func:`build_batch_pieces` of one piece."""
    return build_batch_pieces([ColumnPiece(keys, values, rows, timestamps)], **fields)


def build_batch_pieces(
    pieces: Sequence[ColumnPiece],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: CompressionType | int = CompressionType.NONE,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
) -> bytes:
    """One v2 batch of the pieces' rows (at least one), byte-for-byte what ``build_batch`` makes of
    the same records without headers and the same arguments."""
    pieces = [piece for piece in pieces if piece.rows.shape[0]]
    if not pieces:
        raise EncodeError("a columnar batch needs at least one record")
    codec = _codec(compression, 0)
    attributes = _attributes(0, codec, timestamp_type, False, False)
    base_timestamp = int(pieces[0].timestamps[0])
    max_timestamp = max(int(piece.timestamps.max()) for piece in pieces)
    streams = []
    count = 0
    for piece in pieces:
        streams.append(
            encode_record_stream(
                piece.keys, piece.values, piece.rows, piece.timestamps, base_timestamp, count
            )
        )
        count += int(piece.rows.shape[0])
    payload = b"".join(streams)
    if codec != CompressionType.NONE:
        payload = compress_with(codec, payload)
    return assemble_batch(
        payload,
        count=count,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
