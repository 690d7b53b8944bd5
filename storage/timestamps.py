"""Record-level timestamp search inside one batch, for ListOffsets by timestamp.

The append and fetch paths never look inside a batch. ListOffsets does: Kafka answers with the
exact offset of the first record whose timestamp is >= the target, and a batch's MaxTimestamp only
says that such a record is somewhere inside. This module walks just the leading fields of each
record (length, attributes, timestamp delta, offset delta) and skips the rest. It belongs in
``protocol.records`` once that package grows a record iterator; it lives here until then because
only the log needs it.
"""

from __future__ import annotations

from collections.abc import Iterator

from protocol.records import CorruptRecordError
from protocol.records.batch import HEADER_SIZE, RecordBatchHeader
from protocol.records.compression import decompress

_MAX_DECOMPRESSED = 256 * 1024 * 1024
"""Cap on a decompressed record stream, so a hostile batch cannot exhaust memory on a lookup."""


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint (record fields are signed) at ``pos``: (value, position after it)."""
    raw = shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("record varint runs past the end of the batch")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("record varint is longer than 10 bytes")


def iter_record_timestamps(batch: bytes, header: RecordBatchHeader) -> Iterator[tuple[int, int]]:
    """Yield (offset, timestamp) of each record of a whole batch, in order.

    A LogAppendTime batch gives every record the batch's MaxTimestamp, as Kafka's readers do.
    """
    records: bytes | memoryview = memoryview(batch)[HEADER_SIZE : header.size]
    if header.compression:
        records = decompress(header.compression, records, _MAX_DECOMPRESSED)
    log_append_time = header.is_log_append_time
    pos = 0
    for _ in range(header.records_count):
        length, body = _read_varint(records, pos)
        timestamp_delta, after = _read_varint(records, body + 1)  # skip the attributes byte
        offset_delta, _ = _read_varint(records, after)
        timestamp = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        yield header.base_offset + offset_delta, timestamp
        pos = body + length


def first_record_at_or_after(
    batch: bytes, header: RecordBatchHeader, timestamp: int, start_offset: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at/after ``start_offset`` with a timestamp >= ``timestamp``."""
    for offset, record_timestamp in iter_record_timestamps(batch, header):
        if record_timestamp >= timestamp and offset >= start_offset:
            return offset, record_timestamp
    return None
