"""Walk the batches of segment files as stored, for `kipling dump-log` and forensic checks.

Unlike recovery, this never changes a file: it reports each batch (offsets, epoch, CRC
validity, compression, count, position) and where a torn or corrupt tail starts.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from protocol.records import ProtocolError
from protocol.records.batch import HEADER_SIZE, LOG_OVERHEAD, RecordBatchHeader, is_crc_valid, read_header


@dataclass(frozen=True, slots=True)
class BatchInfo:
    position: int
    header: RecordBatchHeader
    crc_valid: bool


@dataclass(frozen=True, slots=True)
class SegmentProblem:
    """The first place a segment stops being a valid concatenation of batches."""

    position: int
    reason: str


@dataclass(slots=True)
class SegmentDump:
    path: Path
    size: int
    batches: list[BatchInfo]
    problem: SegmentProblem | None


def segment_files(path: Path) -> list[Path]:
    """One .log file, or every .log of a partition directory in offset order."""
    if path.is_dir():
        return sorted(path.glob("*.log"))
    return [path]


def _walk(data: bytes | memoryview) -> Iterator[BatchInfo | SegmentProblem]:
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < HEADER_SIZE:
            yield SegmentProblem(pos, f"torn tail: {end - pos} trailing bytes, less than a batch header")
            return
        declared = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD
        if declared > end - pos:
            yield SegmentProblem(pos, f"torn tail: batch declares {declared} bytes, {end - pos} remain")
            return
        try:
            header = read_header(data, pos)
        except ProtocolError as exc:
            yield SegmentProblem(pos, f"corrupt batch header: {exc}")
            return
        yield BatchInfo(pos, header, is_crc_valid(data, pos, header))
        pos += header.size


def dump_segment(path: Path) -> SegmentDump:
    size = path.stat().st_size
    batches: list[BatchInfo] = []
    problem: SegmentProblem | None = None
    if size == 0:
        return SegmentDump(path, 0, batches, None)
    with (
        path.open("rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
        memoryview(mapped) as data,  # released before the mapping closes
    ):
        for item in _walk(data):
            if isinstance(item, SegmentProblem):
                problem = item
            else:
                batches.append(item)
                if not item.crc_valid and problem is None:
                    problem = SegmentProblem(item.position, "CRC32C mismatch")
    return SegmentDump(path, size, batches, problem)


def read_batch_bytes(path: Path, info: BatchInfo) -> bytes:
    with path.open("rb") as f:
        f.seek(info.position)
        return f.read(info.header.size)
