"""Read-only access to a partition's segment files, for the offline ``kipling-segments`` reader.

The files may belong to a broker that is running right now, so nothing here may ever write, lock,
recover or truncate: ``storage``'s :class:`~storage.log.PartitionLog` and :class:`~storage.segment.LogSegment`
open their files for appending and may cut a torn tail or resize an index, so they are not used. Files
are opened ``O_RDONLY`` and read with ``os.pread`` only. Memory maps are avoided on purpose: the broker
trims a segment's preallocated index when it rolls and truncates a follower's log on divergence, and
touching a mapped page past the new end of a file kills the reading process with SIGBUS, whereas
``pread`` just returns fewer bytes.

What the bytes of a live or crashed log may hold, and what is made of it:

* the active segment growing while it is read: every byte below the file size a read observes is
  already written (the kernel extends the size after copying the data), so a batch that fits inside
  the file is complete; a batch that does not yet fit is a *torn tail*: the end of the data, not an
  error. The same holds for the tail a crash leaves before recovery cuts it;
* zeros where a batch header should be (space a crash left allocated but unwritten): also a tail;
* an impossible header or a CRC mismatch anywhere else: corruption, reported as
  :class:`SegmentCorruptError` (the caller decides whether that fails the read, as ``failOnDataLoss``);
* the sparse ``.index`` of the active segment is preallocated with zero entries after the real ones;
  its valid prefix is found as the broker's own loader finds it (storage/index.py). An index entry is
  only a hint: the batch it points at is checked, and a stale or unusable index means scanning the
  segment from its first byte instead.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import structlog

from pipeline.arrow import DEFAULT_MAX_ROWS_PER_BATCH, RecordBatchBuilder
from pipeline.offsets import DataLossReporter
from protocol.records import DecodedRecord, ProtocolError, RecordBatchHeader, iter_records, read_header
from protocol.records.batch import HEADER_SIZE, MAGIC_OFFSET
from storage.segment import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX

_log = structlog.get_logger("kipling.pipeline.segment_files")

READ_CHUNK = 1024 * 1024
"""Bytes per ``pread`` when walking a segment: many batches per system call; a larger batch is read whole."""
_INDEX_ENTRY = struct.Struct(">ii")
_ZERO_ENTRY = bytes(_INDEX_ENTRY.size)


class SegmentCorruptError(RuntimeError):
    """A segment holds bytes that are not a valid record batch where one must be (not a torn tail)."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"segment {path} is corrupt at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One complete batch of a segment file: where it is, its header and its bytes."""

    position: int
    header: RecordBatchHeader
    data: memoryview


def log_file_name(base_offset: int) -> str:
    """Kafka's ``<20-digit base offset>.log``."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_path_of(log_path: str) -> str:
    """The ``.index`` beside a ``.log``."""
    return log_path.removesuffix(LOG_SUFFIX) + INDEX_SUFFIX


# -- the offset index, read with pread ---------------------------------------------------------------


class IndexReader:
    """The valid entries of one ``.index`` file, looked up by binary search over ``pread`` reads.

    The file is read entry by entry (a lookup costs about 2 log2(n) small reads) rather than whole:
    an active segment's index is preallocated to ``segment.index.bytes`` (10 MiB by default).
    """

    def __init__(self, fd: int, base_offset: int) -> None:
        self._fd = fd
        self.base_offset = base_offset
        self.entries = self._valid_entries(os.fstat(fd).st_size // _INDEX_ENTRY.size)

    def _slot(self, n: int) -> bytes:
        data = os.pread(self._fd, _INDEX_ENTRY.size, n * _INDEX_ENTRY.size)
        return data if len(data) == _INDEX_ENTRY.size else _ZERO_ENTRY  # shrunk meanwhile: no entry

    def _valid_entries(self, slots: int) -> int:
        """All slots of a trimmed index; the non-zero prefix of a preallocated one (storage/index.py)."""
        if slots <= 1 or self._slot(slots - 1) != _ZERO_ENTRY:
            return slots
        low, high = 1, slots - 1  # entries after the first are never all-zero: find the first zero slot
        while low < high:
            mid = (low + high) // 2
            if self._slot(mid) == _ZERO_ENTRY:
                high = mid
            else:
                low = mid + 1
        return 0 if low == 1 and self._slot(0) == _ZERO_ENTRY else low

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (absolute offset, position in the .log)."""
        relative, position = _INDEX_ENTRY.unpack(self._slot(n))
        return self.base_offset + relative, position

    def floor(self, offset: int) -> tuple[int, int] | None:
        """The last entry whose offset is at most ``offset``, or None."""
        low, high = 0, self.entries
        while low < high:
            mid = (low + high) // 2
            if self.entry(mid)[0] <= offset:
                low = mid + 1
            else:
                high = mid
        return self.entry(low - 1) if low else None

    def last(self) -> tuple[int, int] | None:
        return self.entry(self.entries - 1) if self.entries else None


def _index_hint(log_path: str, base_offset: int, offset: int | None) -> tuple[int, int] | None:
    """The index entry at or below ``offset`` (the last entry when None); None without a usable index."""
    try:
        fd = os.open(index_path_of(log_path), os.O_RDONLY)
    except OSError:
        return None
    try:
        index = IndexReader(fd, base_offset)
        return index.last() if offset is None else index.floor(offset)
    except OSError:
        return None
    finally:
        os.close(fd)


def start_position(fd: int, log_path: str, base_offset: int, offset: int | None) -> int:
    """Where a forward scan for ``offset`` (the segment's last batches when None) may begin.

    The index says "the batch at position P ends at offset O". The batch found there must agree (an
    index left stale by a truncation, or one being trimmed, must not make a read skip records);
    otherwise the scan starts at the beginning of the segment, which is always correct, only slower.
    """
    if offset is not None and offset <= base_offset:
        return 0
    hint = _index_hint(log_path, base_offset, offset)
    if hint is None:
        return 0
    entry_offset, position = hint
    header_bytes = os.pread(fd, HEADER_SIZE, position) if position >= 0 else b""
    try:
        header = read_header(header_bytes)
    except ProtocolError:
        header = None
    if header is None or not base_offset <= header.base_offset <= entry_offset <= header.last_offset:
        _log.info("ignoring a stale offset index", log=log_path, entry=hint)
        return 0
    return position


# -- walking the batches of a .log -------------------------------------------------------------------


def iter_stored_batches(
    fd: int, path: str, position: int = 0, *, tail_ok: bool = True
) -> Iterator[StoredBatch]:
    """Every complete batch from ``position`` (a batch boundary) to the end of the data.

    Stops quietly at a torn tail (an incomplete batch, or zeros, at the end of the file) when
    ``tail_ok``: the active segment has one while a batch is being appended, and so may any segment a
    crash left unrecovered. An older segment of a consistent log is complete, so without ``tail_ok``
    a torn tail is corruption. An impossible header is always :class:`SegmentCorruptError`. CRCs are
    not checked here: decoding the records does (``protocol.records.iter_records``).
    """
    buf = memoryview(b"")
    buf_start = position
    at_eof = False  # the last pread ended at the end of the file
    while True:
        rel = position - buf_start
        available = len(buf) - rel
        if available < HEADER_SIZE and not at_eof:
            buf, buf_start, rel = _read(fd, READ_CHUNK, position), position, 0
            available = len(buf)
            at_eof = available < READ_CHUNK
        if available == 0:
            return
        if available < HEADER_SIZE:
            _tail(path, position, tail_ok, f"{available} bytes, less than a batch header")
            return
        try:
            header = read_header(buf, rel)
        except ProtocolError as exc:
            if not any(buf[rel : rel + MAGIC_OFFSET + 1]):
                _tail(path, position, tail_ok, "zeros where a batch should start")
                return
            raise SegmentCorruptError(path, position, str(exc)) from exc
        if header.size > available:
            remaining = os.fstat(fd).st_size - position  # never read past the file for a bogus length
            if at_eof or header.size > remaining:
                _tail(path, position, tail_ok, f"a batch of {header.size} bytes with {remaining} left")
                return
            buf, buf_start, rel = _read(fd, max(READ_CHUNK, header.size), position), position, 0
            available = len(buf)
            at_eof = available < max(READ_CHUNK, header.size)
            if header.size > available:
                _tail(path, position, tail_ok, f"a batch of {header.size} bytes with {available} left")
                return
        yield StoredBatch(position, header, buf[rel : rel + header.size])
        position += header.size


def log_end_offset(path: str, base_offset: int) -> int:
    """The offset after the last complete batch of a segment (its base offset when it holds none).

    Walks only the batches after the last index entry, a few KiB for the index's default interval.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return base_offset  # deleted since it was listed: it holds nothing any more
    try:
        end = base_offset
        try:
            for batch in iter_stored_batches(fd, path, start_position(fd, path, base_offset, None)):
                end = batch.header.next_offset
        except SegmentCorruptError as exc:
            _log.warning("log end offset taken before a corrupt batch", log=path, detail=str(exc))
        return end
    finally:
        os.close(fd)


# -- one Spark task: the records [start, end) of one segment -------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentTask:
    """Everything one ``kipling-segments`` task needs: small, picklable, no open file.

    The task reads the records [start, end) of the segment file at ``log_path``; the planner made the
    range lie inside the segment's offsets (from its base offset to the next segment's).
    """

    topic: str
    partition: int
    log_path: str
    base_offset: int
    start: int
    end: int
    last_segment: bool
    """The partition's newest segment at planning. Its range ends at most at the log end offset seen
    then, so data ending earlier means the log was truncated since; an older segment may legitimately
    end before the next segment's base offset (a gap), so only this one is checked."""
    include_headers: bool = False
    fail_on_data_loss: bool = True

    @property
    def size(self) -> int:
        """Offsets in the range (records may be fewer: control records, compaction)."""
        return self.end - self.start

    def describe(self) -> str:
        return f"[{self.start}, {self.end}) of {self.topic}-{self.partition} in {self.log_path}"


def iter_task_records(task: SegmentTask) -> Iterator[DecodedRecord]:
    """The data records of ``task``'s range, in offset order; control batches are skipped.

    A batch may start before ``start`` (a compressed batch is one unit on disk): its earlier records
    are dropped, as a consumer drops them from a fetch. A segment deleted by retention since planning
    is still read under its ``.deleted`` name while the broker keeps it (``file.delete.delay.ms``).
    """
    report = DataLossReporter(task.fail_on_data_loss)
    opened = _open_log(task.log_path)
    if opened is None:
        report(
            f"Could not read records in offset {task.describe()}: the segment file was deleted after the "
            "read was planned (retention or truncation)"
        )
        return
    fd, path = opened
    reached = task.start
    try:
        position = start_position(fd, path, task.base_offset, task.start) if path == task.log_path else 0
        try:
            for batch in iter_stored_batches(fd, path, position, tail_ok=task.last_segment):
                header = batch.header
                if header.base_offset >= task.end:
                    return
                if header.last_offset >= task.start and not header.is_control:
                    for record in _decode(batch, path):
                        if record.offset >= task.end:
                            return
                        if record.offset >= task.start:
                            yield record
                reached = header.next_offset
                if reached >= task.end:
                    return
        except SegmentCorruptError as exc:
            if task.fail_on_data_loss:
                raise SegmentCorruptError(
                    exc.path,
                    exc.position,
                    f"{exc.reason}. Records of {task.topic}-{task.partition} from offset {reached} to "
                    f'{task.end} in this segment cannot be read; set the source option "failOnDataLoss" to '
                    '"false" to skip them and read the rest',
                ) from exc
            _log.warning("skipping the rest of a corrupt segment", detail=str(exc), task=task.describe())
            return
        if task.last_segment and reached < task.end:
            report(
                f"Could not read records in offset {task.describe()}: the log ends at {reached} now, so it "
                "was truncated after the read was planned"
            )
    finally:
        os.close(fd)


def read_segment_batches(
    task: SegmentTask, max_rows_per_batch: int = DEFAULT_MAX_ROWS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    """``task``'s records as Arrow batches of the ``kipling`` source schema."""
    if task.size <= 0:
        return
    builder = RecordBatchBuilder(task.topic, task.partition, task.include_headers)
    count = 0
    for record in iter_task_records(task):
        builder.append(record)
        count += 1
        if len(builder) >= max_rows_per_batch:
            batch = builder.flush()
            if batch is not None:
                yield batch
    batch = builder.flush()
    if batch is not None:
        yield batch
    _log.debug("segment read", task=task.describe(), records=count)


def _open_log(log_path: str) -> tuple[int, str] | None:
    """(descriptor, path) of the segment, under its ``.deleted`` name if retention renamed it."""
    for path in (log_path, log_path + DELETED_SUFFIX):
        try:
            return os.open(path, os.O_RDONLY), path
        except FileNotFoundError:
            continue
    return None


def _decode(batch: StoredBatch, path: str) -> list[DecodedRecord]:
    """All records of one batch (CRC checked, decompressed), or :class:`SegmentCorruptError`."""
    try:
        return list(iter_records(batch.data))
    except ProtocolError as exc:
        raise SegmentCorruptError(
            path, batch.position, f"the batch at offset {batch.header.base_offset} is invalid: {exc}"
        ) from exc


def _read(fd: int, size: int, position: int) -> memoryview:
    return memoryview(os.pread(fd, size, position))


def _tail(path: str, position: int, tail_ok: bool, what: str) -> None:
    if not tail_ok:
        raise SegmentCorruptError(path, position, f"an incomplete batch ({what}) in an inactive segment")
    _log.debug("segment data ends in a torn tail", log=path, position=position, holds=what)


__all__ = [
    "READ_CHUNK",
    "IndexReader",
    "SegmentCorruptError",
    "SegmentTask",
    "StoredBatch",
    "index_path_of",
    "iter_stored_batches",
    "iter_task_records",
    "log_end_offset",
    "log_file_name",
    "read_segment_batches",
    "start_position",
]
