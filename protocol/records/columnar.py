"""Decode the records of a v2 batch into columns: no object per record, for bulk readers (Spark).

:mod:`protocol.records.reader` builds one :class:`~protocol.records.reader.DecodedRecord` per record
and checks every field with a general varint decoder: about 5 µs per record, far too slow to feed a
columnar engine. This module walks the same record layout in one tight loop and writes plain ints
into one flat list, ``FIELDS_PER_RECORD`` per record: offset delta, timestamp delta, and the key and
value as (start, length) spans into the record buffer, length -1 for null. Keys and values are
never copied here: the caller gathers them straight into its own column buffers (Arrow, in
``pipeline.arrow``). One flat list instead of six is deliberate: one ``extend`` of a small tuple per
record is the cheapest way found to store them, and ``struct.pack`` plus strided memoryview slices
turn it into per-column ``array``s at C speed (:meth:`RecordColumns.columns`).

Why the loop looks the way it does (measured on 10,000-record batches of 100-byte values, CPython
3.11 on the 2-core benchmark machine; :mod:`protocol.records.reader` takes 4-5 µs per record there):

* varints of one to three bytes (every length and delta of ordinary records) are decoded inline,
  the one- and two-byte ones through zigzag lookup tables; anything longer goes to the general,
  bounds-checked decoder. Inline decoding with arithmetic zigzag took ~680 ns per record, with the
  tables ~540 ns; three-byte offset deltas (from the 8,192nd record of a batch on) sent to the
  general decoder added ~130 ns per record over a whole batch, inline they cost next to nothing;
* no bounds check per field, nor per record against the stream's end. Every field advances the
  position (a null adds nothing, a negative length other than -1 is rejected), so the position only
  grows; a record is accepted only if its fields end exactly at its declared length, and the batch
  only if the last record ends exactly at the end of the stream. A field that ran past its record,
  or a record past the stream, fails one of those two checks. Reads past the end of the buffer
  surface as ``IndexError`` and become :class:`~protocol.errors.CorruptRecordError` in one handler
  (a ``try`` costs nothing in CPython 3.11);
* one ``extend`` of a 6-tuple per record: six ``append`` calls, an ``array('q')`` filled with
  ``extend``, and a preallocated list filled by index were 10-30 % slower.

The loop now takes ~450-600 ns per record; the rest of the way to Arrow adds ~150-200 ns
(``pipeline.arrow``). What remains is CPython's cost per bytecode: ~25 varint steps per record.

The result is the same verdict as the reader's on every input: the same records, or a
:class:`~protocol.errors.CorruptRecordError` for anything the reader rejects (a test checks both
against the reader with hypothesis). Headers are rare in bulk data; they take a slower path that
validates them exactly as the reader does (including UTF-8 keys) and records their spans separately.

Bulk readers no longer run this loop: :mod:`protocol.records.columnar_kernel` is the same walk
compiled by numba (~30-55 ns per record), with :mod:`protocol.records.columnar_arrays` giving its
columns as numpy arrays. This module stays dependency-free (the broker's produce validation uses it)
and is the kernel's reference in tests and its fallback where numba is not installed.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass

from protocol.errors import CorruptRecordError
from protocol.records.batch import HEADER_SIZE, RecordBatchHeader, read_header, verify_batch
from protocol.records.compression import CompressionType, decompress
from protocol.records.reader import (
    _VARINT_BITS,
    _VARINT_MAX_BYTES,
    _VARLONG_BITS,
    _VARLONG_MAX_BYTES,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    _decode_zigzag,
)

__all__ = [
    "FIELDS_PER_HEADER",
    "FIELDS_PER_RECORD",
    "KEY_LENGTH",
    "KEY_START",
    "OFFSET_DELTA",
    "TIMESTAMP_DELTA",
    "VALUE_LENGTH",
    "VALUE_START",
    "RecordColumns",
    "batch_record_stream",
    "decode_batch_columns",
    "decode_record_columns",
]

Buffer = bytes | bytearray | memoryview

FIELDS_PER_RECORD = 6
"""Ints per record in :attr:`RecordColumns.fields`, at these positions:"""
OFFSET_DELTA = 0
TIMESTAMP_DELTA = 1
KEY_START = 2
KEY_LENGTH = 3
"""-1 for a null key (its start is then where the key would have been)."""
VALUE_START = 4
VALUE_LENGTH = 5
"""-1 for a null value."""

FIELDS_PER_HEADER = 4
"""Ints per header in :attr:`RecordColumns.header_fields`: key start, key length, value start, value
length (-1 for a null value; a header key is never null)."""

_MIN_RECORD_SIZE = 7
_MIN_HEADER_SIZE = 2

_ZIGZAG_1 = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))
"""Zigzag value of a one-byte varint, by its byte."""
_ZIGZAG_2 = [0] * (0x80 << 8)
"""Zigzag value of a two-byte varint, indexed by ``second << 8 | first`` (first byte has bit 7 set)."""
for _first in range(0x80, 0x100):
    for _second in range(0x80):
        _raw = (_first & 0x7F) | (_second << 7)
        _ZIGZAG_2[_second << 8 | _first] = (_raw >> 1) ^ -(_raw & 1)
del _first, _second, _raw


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """The records of one batch as columns of ints; spans index :attr:`buffer`.

    ``fields`` holds :data:`FIELDS_PER_RECORD` ints per record, in record order (see the index
    constants). Offsets and timestamps are deltas: the batch header supplies the bases (and in a
    LogAppendTime batch every timestamp is the header's MaxTimestamp, whatever the deltas say).
    Headers are sparse, since most records have none: ``header_rows`` lists the records (indexes into
    this batch, ascending) that have at least one, ``header_counts`` how many each has, and
    ``header_fields`` their spans, :data:`FIELDS_PER_HEADER` ints per header, in order.
    """

    buffer: Buffer
    start: int
    """Where the records begin in :attr:`buffer`; every span lies in [start, end)."""
    end: int
    count: int
    fields: list[int]
    header_rows: list[int]
    header_counts: list[int]
    header_fields: list[int]

    def columns(self) -> tuple[array[int], ...]:
        """``fields`` split into one ``array('q')`` per field, in the order of the index constants."""
        if not self.count:
            return tuple(array("q") for _ in range(FIELDS_PER_RECORD))
        packed = memoryview(struct.pack(f"{len(self.fields)}q", *self.fields)).cast("q")
        out = []
        for field in range(FIELDS_PER_RECORD):
            column = array("q")
            column.frombytes(packed[field::FIELDS_PER_RECORD].tobytes())
            out.append(column)
        return tuple(out)

    def span_bytes(self, start: int, length: int) -> bytes | None:
        """The bytes of one span (None for length -1): for tests and tools, not for bulk reads."""
        return None if length < 0 else bytes(self.buffer[start : start + length])


def decode_batch_columns(
    buf: Buffer,
    pos: int = 0,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    *,
    verify_crc: bool = True,
) -> tuple[RecordBatchHeader, RecordColumns]:
    """Decode the batch at ``pos`` of ``buf`` (more batches may follow it) into columns.

    An uncompressed batch is decoded in place: its spans index ``buf`` itself, so the batches of a
    fetched slice share one buffer and nothing is copied. A compressed one is decompressed (at most
    ``max_decompressed_size`` bytes) and its spans index the decompressed stream. The CRC is checked
    unless ``verify_crc`` is false; malformed input raises :class:`CorruptRecordError` (or
    :class:`~protocol.errors.UnsupportedMagicError`), as :func:`~protocol.records.iter_records` does.
    """
    header, stream, start, end = batch_record_stream(buf, pos, max_decompressed_size, verify_crc=verify_crc)
    return header, decode_record_columns(stream, start, end, header.records_count)


def batch_record_stream(
    buf: Buffer, pos: int, max_decompressed_size: int, *, verify_crc: bool
) -> tuple[RecordBatchHeader, Buffer, int, int]:
    """The batch at ``pos``: its header and where its records lie, ``(header, stream, start, end)``.

    An uncompressed batch's records are ``buf[start:end]`` itself; a compressed one's are its
    decompressed stream (at most ``max_decompressed_size`` bytes); an empty batch (compaction
    leaves them) has none. The CRC is checked unless ``verify_crc`` is false. Shared by every
    columnar decoder, so each gets the same checks and errors.
    """
    header = verify_batch(buf, pos) if verify_crc else read_header(buf, pos)
    size = header.size
    if len(buf) - pos < size:
        raise CorruptRecordError(
            f"record batch at {pos} declares {size} bytes but only {len(buf) - pos} remain"
        )
    codec = header.compression
    if codec == CompressionType.NONE:
        return header, buf, pos + HEADER_SIZE, pos + size
    if header.records_count == 0 and size == HEADER_SIZE:
        return header, b"", 0, 0
    stream = decompress(codec, memoryview(buf)[pos + HEADER_SIZE : pos + size], max_decompressed_size)
    return header, stream, 0, len(stream)


def decode_record_columns(buf: Buffer, pos: int, end: int, count: int) -> RecordColumns:
    """Decode exactly ``count`` records filling ``buf[pos:end]``; spans index ``buf``.

    ``bytes``, ``bytearray`` and ``memoryview`` decode at the same speed (within 5 %).
    Raises :class:`CorruptRecordError` for anything :mod:`protocol.records.reader` rejects: a wrong
    record count, a record whose fields do not end exactly at its length, a length or varint out of
    range, bytes left over, or a bad header.
    """
    if count < 0 or count > (end - pos) // _MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record batch declares {count} records but holds only {end - pos} bytes of records"
        )
    start = pos
    fields: list[int] = []
    header_rows: list[int] = []
    header_counts: list[int] = []
    header_fields: list[int] = []
    extend = fields.extend
    zz1 = _ZIGZAG_1
    zz2 = _ZIGZAG_2
    slow = _decode_zigzag
    index = 0
    try:
        for index in range(count):
            # Length, then the attributes byte (unused) is skipped with it.
            b = buf[pos]
            if b < 0x80:
                record_end = pos + 1 + zz1[b]
                pos += 2
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    record_end = pos + 2 + zz2[b2 << 8 | b]
                    pos += 3
                else:
                    length, pos = slow(buf, pos, end, _VARINT_MAX_BYTES, _VARINT_BITS)
                    record_end = pos + length
                    pos += 1
            b = buf[pos]
            if b < 0x80:
                timestamp_delta = zz1[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    timestamp_delta = zz2[b2 << 8 | b]
                    pos += 2
                else:
                    b3 = buf[pos + 2]
                    if b3 < 0x80:
                        raw = (b & 0x7F) | (b2 & 0x7F) << 7 | b3 << 14
                        timestamp_delta = (raw >> 1) ^ -(raw & 1)
                        pos += 3
                    else:
                        timestamp_delta, pos = slow(buf, pos, record_end, _VARLONG_MAX_BYTES, _VARLONG_BITS)
            b = buf[pos]
            if b < 0x80:
                offset_delta = zz1[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    offset_delta = zz2[b2 << 8 | b]
                    pos += 2
                else:
                    b3 = buf[pos + 2]
                    if b3 < 0x80:
                        raw = (b & 0x7F) | (b2 & 0x7F) << 7 | b3 << 14
                        offset_delta = (raw >> 1) ^ -(raw & 1)
                        pos += 3
                    else:
                        offset_delta, pos = slow(buf, pos, record_end, _VARINT_MAX_BYTES, _VARINT_BITS)
            b = buf[pos]
            if b < 0x80:
                key_length = zz1[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    key_length = zz2[b2 << 8 | b]
                    pos += 2
                else:
                    b3 = buf[pos + 2]
                    if b3 < 0x80:
                        raw = (b & 0x7F) | (b2 & 0x7F) << 7 | b3 << 14
                        key_length = (raw >> 1) ^ -(raw & 1)
                        pos += 3
                    else:
                        key_length, pos = slow(buf, pos, record_end, _VARINT_MAX_BYTES, _VARINT_BITS)
            key_start = pos
            if key_length > 0:
                pos += key_length
            elif key_length < -1:
                raise CorruptRecordError(f"record key length {key_length} at position {pos} is out of range")
            b = buf[pos]
            if b < 0x80:
                value_length = zz1[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    value_length = zz2[b2 << 8 | b]
                    pos += 2
                else:
                    b3 = buf[pos + 2]
                    if b3 < 0x80:
                        raw = (b & 0x7F) | (b2 & 0x7F) << 7 | b3 << 14
                        value_length = (raw >> 1) ^ -(raw & 1)
                        pos += 3
                    else:
                        value_length, pos = slow(buf, pos, record_end, _VARINT_MAX_BYTES, _VARINT_BITS)
            value_start = pos
            if value_length > 0:
                pos += value_length
            elif value_length < -1:
                raise CorruptRecordError(
                    f"record value length {value_length} at position {pos} is out of range"
                )
            if buf[pos]:  # a header count other than zero
                pos = _decode_headers(buf, pos, record_end, index, header_rows, header_counts, header_fields)
            else:
                pos += 1
            if pos != record_end:
                raise CorruptRecordError(
                    f"record {index} ends at {pos}, not at {record_end} as its length declares"
                )
            extend((offset_delta, timestamp_delta, key_start, key_length, value_start, value_length))
    except IndexError:
        raise CorruptRecordError(
            f"record batch declares {count} records but its data ends inside record {index}"
        ) from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the {count} records the batch declares")
    return RecordColumns(buf, start, end, count, fields, header_rows, header_counts, header_fields)


def _decode_headers(
    buf: Buffer,
    pos: int,
    end: int,
    row: int,
    rows: list[int],
    counts: list[int],
    spans: list[int],
) -> int:
    """Decode one record's headers at ``pos`` (its header count) with the reader's checks; record
    their spans; return the position after them. ``end`` is the record's end."""
    count, pos = _decode_zigzag(buf, pos, end, _VARINT_MAX_BYTES, _VARINT_BITS)
    if count < 0 or count > (end - pos) // _MIN_HEADER_SIZE:
        raise CorruptRecordError(f"record header count {count} at position {pos} is out of range")
    rows.append(row)
    counts.append(count)
    for _ in range(count):
        key_length, pos = _decode_zigzag(buf, pos, end, _VARINT_MAX_BYTES, _VARINT_BITS)
        if key_length == -1:
            raise CorruptRecordError(f"record header key at position {pos} is null")
        if key_length < 0 or key_length > end - pos:
            raise CorruptRecordError(
                f"record header key length {key_length} at position {pos} is out of range"
            )
        key_start = pos
        pos += key_length
        try:
            bytes(buf[key_start:pos]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record header key is not valid UTF-8: {exc}") from exc
        value_length, pos = _decode_zigzag(buf, pos, end, _VARINT_MAX_BYTES, _VARINT_BITS)
        value_start = pos
        if value_length != -1:
            if value_length < 0 or value_length > end - pos:
                raise CorruptRecordError(
                    f"record header value length {value_length} at position {pos} is out of range"
                )
            pos += value_length
        spans.extend((key_start, key_length, value_start, value_length))
    return pos
