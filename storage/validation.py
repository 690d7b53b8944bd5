"""Validation of appended batches: the one pass over headers that every append makes.

The leader path checks each batch (magic 2, complete, CRC32C, size, record count consistent with
its offset range), then stamps the base offset and partition leader epoch in place (neither is
CRC-covered) and, for ``LogAppendTime`` topics, the timestamp type and MaxTimestamp (which are, so
the CRC is rewritten). The follower path keeps the leader's offsets and epochs: it checks CRCs and
that offsets only go up. Both return per-batch (last offset, max timestamp, size) triples that the
segment uses to maintain its sparse indexes, so headers are unpacked exactly once per append.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol.records import CorruptRecordError
from protocol.records.batch import (
    stamp_base_offset,
    stamp_log_append_time,
    stamp_partition_leader_epoch,
    verify_batch,
)
from protocol.records.compression import CompressionType
from protocol.sentinels import NO_TIMESTAMP, UNKNOWN_OFFSET
from storage.config import LogConfig
from storage.errors import (
    InvalidRecordError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)

_MAX_CODEC = max(CompressionType)


class ValidatedAppend(NamedTuple):
    """What an append will write, summarised from the headers."""

    batches: list[tuple[int, int, int]]
    """(last offset, max timestamp, size) per batch, in order."""
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_records: int
    size: int
    epoch_starts: list[tuple[int, int]]
    """(partition leader epoch, base offset) wherever the epoch changes (follower appends only)."""


def check_append_size(size: int, config: LogConfig) -> None:
    """An append must fit in one segment (Kafka's RecordBatchTooLargeException)."""
    if size > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"append of {size} bytes is larger than the segment size segment.bytes={config.segment_bytes}"
        )


def assign_offsets_as_leader(
    buf: bytearray | memoryview, next_offset: int, leader_epoch: int, config: LogConfig, now_ms: int
) -> ValidatedAppend:
    """Validate every batch of ``buf`` (writable) and stamp offsets from ``next_offset`` (the log end offset).

    Raises CorruptRecordError / UnsupportedMagicError (protocol) for a bad batch, RecordTooLargeError
    for a batch above max.message.bytes and InvalidRecordError for an inconsistent record count.
    Nothing is stamped into a batch before it has been verified, and the caller writes nothing
    unless every batch passes.
    """
    check_append_size(len(buf), config)
    batches: list[tuple[int, int, int]] = []
    first_offset, max_timestamp, offset_of_max, num_records = next_offset, NO_TIMESTAMP, UNKNOWN_OFFSET, 0
    log_append_time = config.log_append_time
    pos, end = 0, len(buf)
    while pos < end:
        header = verify_batch(buf, pos)
        size = header.batch_length + 12
        _check_leader_batch(header.records_count, header.last_offset_delta, header.compression, size, config)
        stamp_base_offset(buf, pos, next_offset)
        stamp_partition_leader_epoch(buf, pos, leader_epoch)
        batch_max = header.max_timestamp
        if log_append_time:
            stamp_log_append_time(buf, pos, now_ms)
            batch_max = now_ms
        last_offset = next_offset + header.last_offset_delta
        if batch_max > max_timestamp:
            max_timestamp, offset_of_max = batch_max, last_offset
        batches.append((last_offset, batch_max, size))
        num_records += header.records_count
        next_offset = last_offset + 1
        pos += size
    return ValidatedAppend(
        batches, first_offset, next_offset - 1, max_timestamp, offset_of_max, num_records, end, []
    )


def _check_leader_batch(count: int, last_offset_delta: int, codec: int, size: int, config: LogConfig) -> None:
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"record batch of {size} bytes is larger than max.message.bytes={config.max_message_bytes}"
        )
    if count != last_offset_delta + 1:
        raise InvalidRecordError(
            f"record batch has {count} records but a last offset delta of {last_offset_delta}"
        )
    if codec > _MAX_CODEC:
        raise CorruptRecordError(f"record batch names unknown compression codec {codec}")


def validate_as_follower(
    data: bytes | bytearray | memoryview, log_end_offset: int, config: LogConfig
) -> ValidatedAppend:
    """Validate batches replicated from the leader, keeping their offsets and epochs.

    The first offset must not be below ``log_end_offset`` (UnexpectedAppendOffsetError) and offsets
    must increase from batch to batch (InvalidRecordError). max.message.bytes is not applied: the
    leader already accepted these batches under its own configuration, as in Kafka.
    """
    check_append_size(len(data), config)
    batches: list[tuple[int, int, int]] = []
    epoch_starts: list[tuple[int, int]] = []
    max_timestamp, offset_of_max, num_records = NO_TIMESTAMP, UNKNOWN_OFFSET, 0
    first_offset = next_offset = UNKNOWN_OFFSET
    pos, end = 0, len(data)
    while pos < end:
        header = verify_batch(data, pos)
        base = header.base_offset
        if pos == 0:
            _check_first_offset(base, log_end_offset)
            first_offset = next_offset = base
        elif base < next_offset:
            raise InvalidRecordError(f"follower append offsets go backwards: {base} < {next_offset}")
        if not epoch_starts or epoch_starts[-1][0] != header.partition_leader_epoch:
            epoch_starts.append((header.partition_leader_epoch, base))
        next_offset = base + header.last_offset_delta + 1
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, next_offset - 1
        size = header.batch_length + 12
        batches.append((next_offset - 1, header.max_timestamp, size))
        num_records += header.records_count
        pos += size
    return ValidatedAppend(
        batches, first_offset, next_offset - 1, max_timestamp, offset_of_max, num_records, end, epoch_starts
    )


def _check_first_offset(first_offset: int, log_end_offset: int) -> None:
    if first_offset < log_end_offset:
        raise UnexpectedAppendOffsetError(
            f"follower append starts at offset {first_offset}, below the log end offset {log_end_offset}"
        )
