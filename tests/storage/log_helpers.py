"""Builders and independent checks shared by the segment and partition log tests.

The checks here re-derive facts straight from the bytes of the files (a linear walk of the .log),
so the tests compare the log's own bookkeeping against something it did not compute.
"""

from __future__ import annotations

import os
import pathlib
import struct

from protocol.records import Record, RecordBatchHeader, build_batch, iter_batches, verify_batch
from storage.segment import LogSegment

BASE_TIME = 1_700_000_000_000


def make_batch(
    records: int = 1,
    value_size: int = 10,
    timestamp: int = BASE_TIME,
    *,
    base_offset: int = 0,
    epoch: int = -1,
    timestamp_step: int = 1,
) -> bytes:
    """A valid v2 batch of ``records`` records whose timestamps start at ``timestamp``."""
    return build_batch(
        [
            Record(
                value=bytes([i % 251]) * value_size, key=b"k%d" % i, timestamp=timestamp + i * timestamp_step
            )
            for i in range(records)
        ],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def headers_of(data: bytes) -> list[RecordBatchHeader]:
    """Headers of every batch in a concatenation of batches, each CRC-checked."""
    return [verify_batch(data, pos) for pos, _ in iter_batches(data)]


def scan_file(path: pathlib.Path) -> list[tuple[int, RecordBatchHeader]]:
    """(position, header) of every batch in a .log file, by a linear walk."""
    data = path.read_bytes()
    return [(pos, verify_batch(data, pos)) for pos, _ in iter_batches(data)]


def expected_index_entries(
    batches: list[tuple[int, RecordBatchHeader]], interval: int
) -> list[tuple[int, int]]:
    """The sparse offset index Kafka's rule gives for these batches (kafka-behaviour.md 7.3)."""
    entries = []
    since_last = 0
    for position, header in batches:
        if since_last > interval:
            entries.append((header.last_offset, position))
            since_last = 0
        since_last += header.size
    return entries


def index_entries(segment: LogSegment) -> list[tuple[int, int]]:
    return [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]


def time_index_entries(segment: LogSegment) -> list[tuple[int, int]]:
    return [segment.time_index.entry(n) for n in range(segment.time_index.entries)]


def flip_byte(path: pathlib.Path, position: int) -> None:
    """Corrupt one byte of a file in place."""
    with open(path, "r+b") as f:
        f.seek(position)
        original = f.read(1)
        f.seek(position)
        f.write(bytes([original[0] ^ 0xFF]))


def cut_file(path: pathlib.Path, size: int) -> None:
    os.truncate(path, size)


def batch_base_offsets(data: bytes) -> list[int]:
    return [header.base_offset for header in headers_of(data)]


def with_magic(batch: bytes, magic: int) -> bytes:
    return batch[:16] + struct.pack(">b", magic) + batch[17:]
