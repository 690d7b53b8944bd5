"""Rewrite a v2 record batch with another codec: what a topic's ``compression.type`` asks of the leader.

Only the record stream after RecordsCount is compressed, and its bytes do not depend on the codec, so
a recompressed batch keeps every record byte for byte (offset and timestamp deltas, keys, values,
headers) and every header field (base offset, leader epoch, base and max timestamps, producer id and
epoch, base sequence, the timestamp-type, transactional and control bits) except the codec bits,
BatchLength and the CRC, which are recomputed. Idempotent and transactional batches therefore keep
their identity, and the broker's later stamping (offsets, leader epoch, LogAppendTime) is unchanged.

The CRC of the batch given is checked first, so a corrupt batch is never laundered into one with a
valid CRC, and the record stream must hold exactly RecordsCount well-formed records whose offset
deltas run 0, 1, 2, ... (Kafka's check on the records of a batch it recompresses).
"""

from __future__ import annotations

import struct

from protocol.errors import CorruptRecordError
from protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    RecordBatchHeader,
    rewrite_crc,
    verify_batch,
)
from protocol.records.compression import Buffer, CompressionType, compress, decompress
from protocol.records.reader import DEFAULT_MAX_DECOMPRESSED_SIZE, _iter_stream

__all__ = ["InnerOffsetError", "recompress_batch"]

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


class InnerOffsetError(CorruptRecordError):
    """Records whose offset deltas do not run 0, 1, 2, ...: Kafka's INVALID_RECORD, not CORRUPT_MESSAGE."""


def recompress_batch(
    batch: Buffer,
    codec: CompressionType | int,
    *,
    level: int | None = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """The batch at the start of ``batch`` with its records compressed by ``codec`` (at ``level``).

    ``batch`` may hold bytes after the batch; they are ignored. Raises CorruptRecordError for a bad
    CRC, undecodable compressed data or malformed records, and its subclass InnerOffsetError for
    records whose offset deltas are not consecutive from 0.
    """
    codec = CompressionType(codec)
    header = verify_batch(batch, 0)
    view = memoryview(batch)[: header.size]
    payload = view[HEADER_SIZE:]
    if header.compression == CompressionType.NONE:
        stream: Buffer = payload
    elif header.records_count == 0 and not payload:
        stream = b""
    else:
        stream = decompress(header.compression, payload, max_decompressed_size)
    _check_records(stream, header)
    if not stream:
        compressed: Buffer = b""  # an empty batch has no record stream at all, whatever its codec
    elif codec == CompressionType.NONE:
        compressed = stream
    else:
        compressed = compress(codec, stream, level)
    out = bytearray(view[:HEADER_SIZE])
    out += compressed
    _INT32.pack_into(out, BATCH_LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    attributes = _INT16.unpack_from(out, ATTRIBUTES_OFFSET)[0]
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, (attributes & ~COMPRESSION_MASK) | codec)
    rewrite_crc(out, 0)
    return bytes(out)


def _check_records(stream: Buffer, header: RecordBatchHeader) -> None:
    """RecordsCount well-formed records with consecutive offset deltas, and nothing after them."""
    for index, record in enumerate(_iter_stream(stream, 0, len(stream), header)):
        delta = record.offset - header.base_offset
        if delta != index:
            raise InnerOffsetError(
                f"record {index} of the batch has offset delta {delta}; the deltas must run 0, 1, 2, ..."
            )
