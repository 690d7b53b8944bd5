"""Record batch v2 (magic 2): a view over the 61-byte fixed header, CRC32C, in-place stamping.

The broker never decodes records on its hot paths: it reads the fixed header (offsets, lengths,
epoch, CRC, attributes, producer fields, count) with one ``struct`` unpack, verifies the CRC over
the bytes as they are, and stamps the base offset and partition leader epoch in place. Neither
stamped field is covered by the CRC, so stamping never re-encodes anything.

Layout (big-endian)::

    0 BaseOffset int64 | 8 BatchLength int32 | 12 PartitionLeaderEpoch int32 | 16 Magic int8
    17 CRC uint32 | 21 Attributes int16 | 23 LastOffsetDelta int32 | 27 BaseTimestamp int64
    35 MaxTimestamp int64 | 43 ProducerId int64 | 51 ProducerEpoch int16 | 53 BaseSequence int32
    57 RecordsCount int32 | 61 records...
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from protocol.errors import CorruptRecordError, UnsupportedMagicError

HEADER_SIZE = 61
"""Bytes of the fixed batch header, records start right after."""
LOG_OVERHEAD = 12
"""BaseOffset + BatchLength: the bytes not counted by BatchLength."""
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LEADER_EPOCH_OFFSET = 12
BATCH_LENGTH_OFFSET = 8
MAX_TIMESTAMP_OFFSET = 35
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CURRENT_MAGIC = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
MAX_COMPRESSION_CODEC = 4
"""zstd; ids 5-7 are unassigned."""


class TimestampType(enum.IntEnum):
    """Attribute bit 3, with Kafka's ``TimestampType`` ids."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class RecordBatchHeader(NamedTuple):
    """The 61 fixed bytes of a v2 batch, decoded; records stay opaque."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (Kafka's ``TimestampType`` ids)."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def has_delete_horizon(self) -> bool:
        """Set by compaction: BaseTimestamp then holds the delete horizon, not a record time."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (sequences wrap at int32 max, as in Kafka)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordBatchHeader:
    """Decode the fixed header of the batch starting at ``pos``.

    Raises :class:`UnsupportedMagicError` for a magic 0/1 message set (the magic byte is read
    before anything else is trusted) and :class:`CorruptRecordError` for a short or impossible
    header.
    """
    available = len(buf) - pos
    if available < MAGIC_OFFSET + 1:
        raise CorruptRecordError(f"record batch header truncated: {available} bytes at {pos}")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        raise UnsupportedMagicError(
            f"message format magic {magic} at position {pos}: only record batch v2 (magic 2) "
            "is supported; upgrade the client or set api.version.request=true"
        )
    if available < HEADER_SIZE:
        raise CorruptRecordError(f"record batch header truncated: {available} bytes at {pos}")
    header = RecordBatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch length {header.batch_length} at {pos} is below the minimum {MIN_BATCH_LENGTH}"
        )
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError(f"record batch at {pos} has a negative offset delta or count")
    return header


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC32C over Attributes..end, the bytes the v2 CRC covers."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def is_crc_valid(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def verify_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordBatchHeader:
    """Read the header at ``pos`` and check that the whole batch is present and its CRC holds."""
    header = read_header(buf, pos)
    if len(buf) - pos < header.size:
        raise CorruptRecordError(
            f"record batch at {pos} declares {header.size} bytes but only {len(buf) - pos} remain"
        )
    if not is_crc_valid(buf, pos, header):
        raise CorruptRecordError(f"record batch at {pos} (base offset {header.base_offset}) fails its CRC32C")
    return header


def stamp_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Set BaseOffset in place; outside the CRC, so nothing else changes."""
    _INT64.pack_into(buf, pos, base_offset)


def stamp_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Set PartitionLeaderEpoch in place; outside the CRC, so nothing else changes."""
    _INT32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, epoch)


def rewrite_crc(buf: bytearray | memoryview, pos: int) -> None:
    """Recompute and store the CRC after a change to CRC-covered bytes (e.g. LogAppendTime)."""
    size = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def stamp_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Turn the batch at ``pos`` into a LogAppendTime batch stamped with ``timestamp``.

    Sets the timestamp-type attribute bit and MaxTimestamp (readers then report MaxTimestamp as
    every record's timestamp) and recomputes the CRC, since both fields are CRC-covered. Like
    Kafka's ``setMaxTimestamp``, nothing is written when the batch already carries that value.
    """
    attributes = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    max_timestamp = _INT64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
    if attributes & TIMESTAMP_TYPE_MASK and max_timestamp == timestamp:
        return
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    rewrite_crc(buf, pos)


def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Yield (position, header) for each complete batch in a concatenation of batches.

    Stops quietly at an incomplete trailing batch (a fetch response may end with a partial
    batch); raises for a header that is impossible (even in a partial tail, its first bytes are
    real) or of a legacy magic. CRCs are not checked.
    """
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        _, batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        if end - pos > MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
            read_header(buf, pos)  # raises UnsupportedMagicError with the explanation
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch length {batch_length} at {pos} is below the minimum {MIN_BATCH_LENGTH}"
            )
        if end - pos < batch_length + LOG_OVERHEAD:
            return
        header = read_header(buf, pos)
        yield pos, header
        pos += header.size


def validate_message_set(buf: bytes | bytearray | memoryview) -> list[RecordBatchHeader]:
    """Check a produce payload: only whole v2 batches, each with a valid CRC and a known codec.

    Returns the headers in order (an empty payload gives an empty list). This is the produce
    path's gate, so it stays on the header view and the CRC and never decodes records; the
    policy checks that depend on the request (one batch per partition, count versus offset range,
    producer fields) are left to the caller, which maps them to its own error codes.
    Raises :class:`UnsupportedMagicError` for magic 0/1 and :class:`CorruptRecordError` otherwise.
    """
    headers: list[RecordBatchHeader] = []
    pos = 0
    end = len(buf)
    while pos < end:
        header = verify_batch(buf, pos)
        if header.compression > MAX_COMPRESSION_CODEC:
            raise CorruptRecordError(
                f"record batch at {pos} names unknown compression codec {header.compression}"
            )
        headers.append(header)
        pos += header.size
    return headers
