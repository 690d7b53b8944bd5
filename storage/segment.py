"""One log segment: a .log file of record batches plus its sparse .index and .timeindex, and the
aborted transaction index (.txnindex, :mod:`storage.txn_index`) of the markers it holds.

A segment is named by its base offset (20 digits). Its .log is a plain concatenation of v2 batches
exactly as on the wire. The indexes are sparse (kafka-behaviour.md 7.3/7.4): whenever more than
``index.interval.bytes`` were appended since the last entry, the batch being appended gets an
offset index entry (its last offset, its start position) and the time index gets (max timestamp so
far, last offset of the earliest batch holding it). Kipling applies the rule per batch, the way
recovery rebuilds indexes, so an index built by appends is identical to one rebuilt from the .log,
and one follower append carrying many batches still gets dense enough entries.

Everything here is synchronous file I/O. Reads scan batch headers only (``os.pread`` of the fixed
61 bytes, a chunk at a time) and hand out :class:`~storage.slices.FileSlice` ranges; record bytes
are never decoded.
"""

from __future__ import annotations

import errno
import os
import pathlib
import struct
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import structlog

from protocol.records import CorruptRecordError, ProtocolError
from protocol.records.batch import HEADER_SIZE, LOG_OVERHEAD, RecordBatchHeader, read_header, verify_batch
from protocol.sentinels import NO_TIMESTAMP
from storage.config import LogConfig
from storage.epoch import LeaderEpochFileCache
from storage.errors import CorruptIndexError, KiplingStorageError, LogDirFullError, raise_log_dir_full
from storage.file_pool import PooledFile
from storage.index import OffsetIndex, TimeIndex
from storage.slices import FileSlice
from storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
MAX_RELATIVE_OFFSET = 2**31 - 1

_log = structlog.get_logger(__name__)

_SCAN_CHUNK = 16 * 1024
"""Bytes read per pread when walking headers: several small batches' headers per system call."""
_RECOVERY_CHUNK = 4 * 1024 * 1024
_LENGTH = struct.Struct(">i")


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's name: the base offset zero-padded to 20 digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


def parse_base_offset(name: str) -> int | None:
    """The base offset in a segment file name, or None if the name is not a segment file's."""
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class BatchPosition(NamedTuple):
    """Where a batch sits in a segment, with the header fields lookups need."""

    position: int
    base_offset: int
    last_offset: int
    size: int
    max_timestamp: int
    partition_leader_epoch: int


def _batch_position(position: int, header: RecordBatchHeader) -> BatchPosition:
    return BatchPosition(
        position,
        header.base_offset,
        header.base_offset + header.last_offset_delta,
        header.batch_length + LOG_OVERHEAD,
        header.max_timestamp,
        header.partition_leader_epoch,
    )


def walk_batches(fd: int | PooledFile, position: int, end: int) -> Iterator[BatchPosition]:
    """Yield the batches of an open .log from ``position`` (a batch boundary) up to ``end``.

    Reads ``_SCAN_CHUNK`` bytes per pread so several small batches cost one system call; only the
    fixed headers are decoded. Raises a protocol error when a header is impossible.
    """
    for batch_position, header in walk_headers(fd, position, end):
        yield _batch_position(batch_position, header)


def walk_headers(
    fd: int | PooledFile, position: int, end: int, *, chunk_size: int = _SCAN_CHUNK
) -> Iterator[tuple[int, RecordBatchHeader]]:
    """(position, full header) of each batch of an open .log from ``position`` up to ``end``.

    Reads ``chunk_size`` bytes per pread; raises a protocol error when a header is impossible. A
    pooled file is asked for its descriptor at every pread: the walk may be interleaved with other
    files' uses, which can close it (storage/file_pool.py).
    """
    pread = fd.pread if isinstance(fd, PooledFile) else lambda length, at: os.pread(fd, length, at)
    buf = b""
    buf_start = position
    while position < end:
        relative = position - buf_start
        if relative + HEADER_SIZE > len(buf):
            buf = pread(chunk_size, position)
            buf_start, relative = position, 0
        header = read_header(buf, relative)
        yield position, header
        position += header.batch_length + LOG_OVERHEAD


@dataclass(frozen=True, slots=True)
class _SegmentTail:
    """A segment's end before an append: what a failed append is undone to."""

    size: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    bytes_since_last_index_entry: int
    rolling_timestamp: int | None
    indexes_full: bool
    offset_index_entries: int
    time_index_entries: int


class LogSegment:
    """A .log file and its indexes; all offsets are absolute, positions are bytes in the .log.

    The transaction index goes along with every file operation (flush, close, delete, rename,
    truncation); its file exists only once an aborted transaction was recorded in the segment.
    """

    def __init__(
        self,
        directory: pathlib.Path,
        base_offset: int,
        config: LogConfig,
        *,
        created_ms: int,
        roll_jitter_ms: int = 0,
        present: Container[str] | None = None,
    ) -> None:
        """Open (creating when missing) the three files of the segment at ``base_offset``.

        ``needs_recovery`` tells the loader that an index file was missing or that the tail of the
        .log could not be walked from the last index entry: the segment must be recovered (rebuilt).
        ``present``: the names in ``directory``, when the caller just listed it (the loader, once per
        log), so that finding which files exist costs no system call per file.
        """
        self.directory = pathlib.Path(directory)
        self.base_offset = base_offset
        self._index_interval_bytes = config.index_interval_bytes
        self._max_index_size = config.max_index_size
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        index_path = self.directory / segment_file_name(base_offset, INDEX_SUFFIX)
        time_index_path = self.directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        if present is None:
            self.needs_recovery = not (index_path.exists() and time_index_path.exists())
        else:
            self.needs_recovery = not (index_path.name in present and time_index_path.name in present)
        self._file = PooledFile(self._path(LOG_SUFFIX), os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            self.offset_index = OffsetIndex(index_path, base_offset, config.max_index_size)
            try:
                self.time_index = TimeIndex(time_index_path, base_offset, config.max_index_size)
            except BaseException:
                self.offset_index.close()
                raise
        except BaseException:
            self._file.close()
            raise
        try:
            txn_path = self._path(TXN_INDEX_SUFFIX)
            self.txn_index = TransactionIndex(
                txn_path, base_offset, exists=None if present is None else txn_path.name in present
            )
        except BaseException:
            self.offset_index.close()
            self.time_index.close()
            self._file.close()
            raise
        self._rebuilding_indexes = False
        self._indexes_incomplete = False
        self._size = self._file.size()
        self._closed = False
        self._refresh_indexes_full()
        try:
            self._load_tail_state()
        except (ProtocolError, CorruptIndexError, IndexError, ValueError):
            self.needs_recovery = True

    # -- state -------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the .log."""
        return self._size

    @property
    def file(self) -> PooledFile:
        """The .log file (what read slices point into); its descriptor comes from the file pool."""
        return self._file

    @property
    def log_path(self) -> pathlib.Path:
        """The .log's current name (it changes with :meth:`change_file_suffix`)."""
        return self._file.path

    @property
    def next_offset(self) -> int:
        """Offset after the last batch, or the base offset when the segment is empty."""
        return self._next_offset

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch MaxTimestamp in the segment, -1 when none carries a timestamp."""
        return self._max_timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        """Last offset of the earliest batch holding :attr:`max_timestamp_so_far`."""
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """Time retention's clock for this segment: the max record timestamp, else the file's mtime."""
        if self._max_timestamp >= 0:
            return self._max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    def _load_tail_state(self) -> None:
        """Rebuild the in-memory counters from the indexes and a scan of the batches after the last entry.

        The last offset index entry marks the last indexed batch; scanning from its position gives the
        next offset, the exact max timestamp (together with the time index's last entry) and the
        bytes since the last entry, so appends after a reopen index exactly as a rebuild would.

        The scan must end exactly at the end of the .log. A file cut inside its last batch (or with
        bytes after it that are no batch) raises CorruptRecordError, so that the segment is recovered
        (cut at its last valid batch) even after a clean shutdown, whose segments are otherwise
        trusted: an append after such garbage would put readable batches behind unreadable bytes.
        It costs nothing more than the scan itself.
        """
        ts, ts_offset = self.time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = ts, ts_offset
        entries = self.offset_index.entries
        start = self.offset_index.entry(entries - 1)[1] if entries else 0
        self._next_offset = self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_timestamp: int | None = None
        end = min(start, self._size)
        for batch in self.iter_batches(end):
            self._next_offset = batch.last_offset + 1
            self._track_max_timestamp(batch.max_timestamp, batch.last_offset)
            end = batch.position + batch.size
        if end != self._size:
            raise CorruptRecordError(
                f"{self.log_path} does not end on a whole batch: scanned from position {start}, "
                f"the batches end at {end}, the file at {self._size}"
            )
        self._bytes_since_last_index_entry = self._size - start
        if self._size > 0:
            first = next(self.iter_batches(0))
            self._rolling_timestamp = first.max_timestamp

    def _track_max_timestamp(self, max_timestamp: int, last_offset: int) -> None:
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = last_offset

    # -- append ------------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: Iterable[tuple[int, int, int]]) -> None:
        """Write ``data`` (whole batches, already validated and stamped) at the end of the .log.

        ``batches`` gives (last offset, max timestamp, size) for each batch of ``data`` in order; it
        drives the sparse index rule. The data goes to the file before the index entries that point
        into it, so a crash in between leaves nothing that recovery cannot rebuild.

        All or nothing: when a write fails (the disk is full, most often) the .log is cut back to its
        size before the append and the entries it added are dropped, so the segment is exactly as it
        was and the same append can be retried. A full disk raises LogDirFullError; another I/O error
        is raised as is; a failed undo raises KiplingStorageError (the segment can no longer be trusted).
        """
        before = self._tail()
        try:
            self._write_all(data)
            self._index_batches(batches)
        except OSError as exc:
            self._undo_append(before, exc)
            raise_log_dir_full(self.log_path, exc)

    def _tail(self) -> _SegmentTail:
        return _SegmentTail(
            size=self._size,
            next_offset=self._next_offset,
            max_timestamp=self._max_timestamp,
            offset_of_max_timestamp=self._offset_of_max_timestamp,
            bytes_since_last_index_entry=self._bytes_since_last_index_entry,
            rolling_timestamp=self._rolling_timestamp,
            indexes_full=self._indexes_full,
            offset_index_entries=self.offset_index.entries,
            time_index_entries=self.time_index.entries,
        )

    def _undo_append(self, before: _SegmentTail, cause: OSError) -> None:
        """Put the files and the counters back as they were before a failed append."""
        try:
            os.ftruncate(self._file.fd(), before.size)
            self.offset_index.truncate_to_entries(before.offset_index_entries)
            self.time_index.truncate_to_entries(before.time_index_entries)
        except OSError as exc:
            raise KiplingStorageError(
                f"could not undo a failed append to {self.log_path} ({cause}): {exc}"
            ) from cause
        self._size = before.size
        self._next_offset = before.next_offset
        self._max_timestamp = before.max_timestamp
        self._offset_of_max_timestamp = before.offset_of_max_timestamp
        self._bytes_since_last_index_entry = before.bytes_since_last_index_entry
        self._rolling_timestamp = before.rolling_timestamp
        self._indexes_full = before.indexes_full

    def _index_batches(self, batches: Iterable[tuple[int, int, int]]) -> None:
        """Account for batches just written at the end of the .log: index entries, timestamps, size.

        A batch gets an offset index entry (its last offset, its start position) when more than
        ``index.interval.bytes`` were appended since the last entry, counted before its own bytes.
        A full index takes no more entries (the next roll check starts a new segment); lookups
        then just scan a little further.
        """
        position = self._size
        last_offset = self._next_offset - 1
        for last_offset, max_timestamp, size in batches:
            if max_timestamp > self._max_timestamp:
                self._max_timestamp = max_timestamp
                self._offset_of_max_timestamp = last_offset
            if self._bytes_since_last_index_entry > self._index_interval_bytes and not self._indexes_full:
                if self._add_index_entries(last_offset, position):
                    self._bytes_since_last_index_entry = 0
                self._refresh_indexes_full()
            if position == 0:
                self._rolling_timestamp = max_timestamp
            position += size
            self._bytes_since_last_index_entry += size
        self._size = position
        self._next_offset = last_offset + 1

    def _add_index_entries(self, last_offset: int, position: int) -> bool:
        """One entry in each index; False when a rebuild had to stop indexing for want of space.

        An append lets LogDirFullError through (it is undone whole). A rebuild (recovery, perhaps on
        a full disk at startup) keeps the log instead: the index is only a hint, so the segment
        keeps the entries it got, lookups in it scan further, and it counts as full so that the
        next append rolls to a new segment.
        """
        try:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
        except LogDirFullError:
            if not self._rebuilding_indexes:
                raise
            _log.warning(
                "index rebuild stopped: no space left on device; lookups in this segment scan further",
                segment=str(self.log_path),
                entries=self.offset_index.entries,
            )
            self._indexes_incomplete = True
            return False
        return True

    def _write_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        written = os.write(self._file.fd(), view)
        while written < len(view):  # a short write only happens when the disk fills up
            more = os.write(self._file.fd(), view[written:])
            if not more:
                raise OSError(errno.ENOSPC, f"short write to {self.log_path}")
            written += more

    # -- roll rules --------------------------------------------------------------------------------

    def should_roll(
        self,
        config: LogConfig,
        append_size: int,
        max_timestamp: int,
        last_offset: int,
        now_ms: int,
    ) -> bool:
        """Kafka's shouldRoll (kafka-behaviour.md 7.5), checked before an append of ``append_size`` bytes."""
        if self._size > config.segment_bytes - append_size:
            return True
        if self._size > 0 and self._time_waited_for_roll(now_ms, max_timestamp) > (
            config.segment_ms - self.roll_jitter_ms
        ):
            return True
        if self._indexes_full:
            return True
        return not 0 <= last_offset - self.base_offset <= MAX_RELATIVE_OFFSET

    def _time_waited_for_roll(self, now_ms: int, max_timestamp: int) -> int:
        """Record time since the first batch when it has a timestamp, else wall time since creation."""
        if self._rolling_timestamp is not None and self._rolling_timestamp >= 0:
            return max_timestamp - self._rolling_timestamp
        return now_ms - self.created_ms

    # -- reads -------------------------------------------------------------------------------------

    def iter_batches(self, position: int = 0, end: int | None = None) -> Iterator[BatchPosition]:
        """Walk batch headers from ``position`` (a batch boundary) up to ``end`` (default: the end)."""
        return walk_batches(self._file, position, self._size if end is None else end)

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset``, or None if every batch ends before it."""
        position = max(self.offset_index.lookup(offset)[1], start_position)
        for batch in self.iter_batches(position):
            if batch.last_offset >= offset:
                return batch
        return None

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> tuple[FileSlice, int] | None:
        """Whole batches from the one holding ``start_offset``: (slice, base offset of its first batch).

        Only batches lying wholly below ``max_offset`` (exclusive, e.g. the high watermark) are
        returned, at most ``max_bytes`` of them, except that with ``min_one_batch`` the first batch
        comes whole even when larger. The slice is empty when a bound stops the read before the first
        batch; None means no batch of this segment reaches ``start_offset`` (try the next segment).
        """
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        bound = self._size
        if max_offset is not None and max_offset < self._next_offset:
            limit = self.translate_offset(max_offset, first.position)
            bound = self._size if limit is None else limit.position
        end = min(bound, first.position + max_bytes)
        if end < bound:
            end = self._last_boundary_at_most(end, first.position)
        if end == first.position and min_one_batch and first.position < bound:
            end = first.position + first.size
        return FileSlice(self._file, first.position, end - first.position), first.base_offset

    def _last_boundary_at_most(self, limit: int, start: int) -> int:
        """The largest batch boundary <= ``limit`` at or after ``start``: index by position, then scan."""
        index = self.offset_index
        low, high = 0, index.entries
        while low < high:  # first entry whose position is above the limit
            mid = (low + high) // 2
            if index.entry(mid)[1] <= limit:
                low = mid + 1
            else:
                high = mid
        position = max(start, index.entry(low - 1)[1]) if low else start
        for batch in self.iter_batches(position, limit):
            if batch.position + batch.size > limit:
                break
            position = batch.position + batch.size
        return position

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> BatchPosition | None:
        """The first batch at/after ``start_offset`` whose MaxTimestamp is >= ``timestamp``.

        Starts from the time index entry just below ``timestamp`` (no batch before it can qualify).
        """
        _, indexed_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(indexed_offset, start_offset))[1]
        for batch in self.iter_batches(position):
            if batch.max_timestamp >= timestamp and batch.last_offset >= start_offset:
                return batch
        return None

    # -- truncation and recovery -------------------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Drop the batch holding ``offset`` and everything after it; return the bytes removed.

        The indexes are grown back to their full size: the segment may become the active one.
        Aborted transactions whose markers are no longer in the segment leave its transaction index.
        """
        batch = self.translate_offset(offset)
        if batch is None:
            self.txn_index.truncate_to(offset)
            return 0
        self.offset_index.truncate_to(batch.base_offset)
        self.time_index.truncate_to(batch.base_offset)
        removed = self._size - batch.position
        os.ftruncate(self._file.fd(), batch.position)
        self._size = batch.position
        self.resize_indexes(self._max_index_size)
        self._load_tail_state()
        self.txn_index.truncate_to(self._next_offset)
        if self._size == 0:
            self.created_ms = now_ms
        return removed

    def recover(self, epoch_cache: LeaderEpochFileCache | None = None) -> int:
        """Re-validate every batch, rebuild both indexes, cut at the first invalid batch.

        A batch is valid when its header is sane, it lies wholly in the file, its CRC32C holds, its
        offsets are above the previous batch's and fit the segment's relative offsets. Returns the
        number of bytes truncated (0 when the whole file is valid). Epochs newer than the cache's
        latest are assigned to the cache as batches are found.
        """
        self.offset_index.truncate()
        self.time_index.truncate()
        self._indexes_incomplete = False
        self.resize_indexes(self._max_index_size)
        self._size = 0
        self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_timestamp = None
        self._next_offset = self.base_offset
        self._rebuilding_indexes = True
        try:
            for _position, header in self._iter_valid_batches():
                out_of_order = header.base_offset < self._next_offset
                if out_of_order or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    break
                self._index_batches(((header.last_offset, header.max_timestamp, header.size),))
                if epoch_cache is not None:
                    _assign_newer_epoch(epoch_cache, header)
        finally:
            self._rebuilding_indexes = False
        file_size = self._file.size()
        if self._size < file_size:
            os.ftruncate(self._file.fd(), self._size)
        self.txn_index.truncate_to(self._next_offset)  # markers cut off with the tail
        return file_size - self._size

    def _iter_valid_batches(self) -> Iterator[tuple[int, RecordBatchHeader]]:
        """Yield (position, header) of CRC-valid batches read in large chunks; stop at the first bad one."""
        file_size = self._file.size()
        buf = b""
        buf_start = position = 0
        while position + LOG_OVERHEAD <= file_size:
            relative = position - buf_start
            if relative + HEADER_SIZE > len(buf):
                buf, buf_start, relative = self._file.pread(_RECOVERY_CHUNK, position), position, 0
            size = _LENGTH.unpack_from(buf, relative + 8)[0] + LOG_OVERHEAD
            if size < HEADER_SIZE or position + size > file_size:
                return
            if relative + size > len(buf):
                buf = self._file.pread(max(_RECOVERY_CHUNK, size), position)
                buf_start, relative = position, 0
            try:
                header = verify_batch(buf, relative)
            except ProtocolError:
                return
            yield position, header
            position += size

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when an index is inconsistent in itself or with the .log."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        entries = self.offset_index.entries
        if entries and self.offset_index.entry(entries - 1)[1] >= self._size:
            raise CorruptIndexError(f"{self.offset_index.path}: last entry points past the end of the .log")
        if self.time_index.last_entry[1] >= max(self._next_offset, self.base_offset + 1):
            raise CorruptIndexError(f"{self.time_index.path}: last entry is past the end of the .log")

    # -- file management ---------------------------------------------------------------------------

    def resize_indexes(self, size: int) -> None:
        """Give the indexes room for appends again (an inactive segment's are trimmed)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)
        self._refresh_indexes_full()

    def _refresh_indexes_full(self) -> None:
        """Cache "an index is full" (a roll condition) so the per-append roll check stays cheap."""
        self._indexes_full = self._indexes_incomplete or self.offset_index.is_full or self.time_index.is_full

    def on_becoming_inactive(self) -> None:
        """After a roll (or a load, or an install): write the final time index entry, trim both
        indexes to their entries, flush the transaction index, and release the three indexes'
        descriptors: an inactive segment holds only its .log open (storage/index.py)."""
        self._append_final_time_entry()
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.release_index_descriptors()
        self.txn_index.release()
        self._refresh_indexes_full()

    def release_index_descriptors(self) -> None:
        """Close the offset and time indexes' descriptors until their next write (storage/index.py)."""
        self.offset_index.release()
        self.time_index.release()

    def _append_final_time_entry(self) -> None:
        """The segment's max timestamp as a last time index entry, when there is space for it.

        It only spares a scan: a lookup past the last entry walks the .log from there, and a reopen
        rescans the batches after the last offset index entry anyway. So a full disk skips it
        rather than failing a roll (which retention needs in order to free space) or a shutdown.
        """
        if self._max_timestamp < 0:
            return
        try:
            self.time_index.maybe_append(
                self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
            )
        except LogDirFullError:
            _log.warning(
                "final time index entry skipped: no space left on device", segment=str(self.log_path)
            )

    def flush(self) -> None:
        """fsync the .log and the indexes (a file whose descriptor the pool closed is opened again)."""
        os.fsync(self._file.fd())
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Final time index entry, trimmed indexes, files closed (no fsync: the log flushes first)."""
        if self._closed:
            return
        self._append_final_time_entry()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self._file.close()
        self._closed = True

    def delete(self) -> None:
        """Close and remove the files (whatever their current suffix)."""
        if not self._closed:
            self._file.close()
            self._closed = True
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def change_file_suffix(self, suffix: str) -> None:
        """Rename the files to ``<name><suffix>`` (e.g. ".deleted"); open handles stay valid."""
        self._file.rename(self._path(LOG_SUFFIX + suffix))
        self.offset_index.rename(self._path(INDEX_SUFFIX + suffix))
        self.time_index.rename(self._path(TIME_INDEX_SUFFIX + suffix))
        self.txn_index.rename(self._path(TXN_INDEX_SUFFIX + suffix))

    def _path(self, suffix: str) -> pathlib.Path:
        return self.directory / segment_file_name(self.base_offset, suffix)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self._size}, next_offset={self._next_offset})"


def _assign_newer_epoch(cache: LeaderEpochFileCache, header: RecordBatchHeader) -> None:
    """Recovery only moves the epoch cache forward: assign an epoch newer than the latest known."""
    epoch = header.partition_leader_epoch
    latest = cache.latest_epoch
    if epoch >= 0 and (latest is None or epoch > latest):
        cache.assign(epoch, header.base_offset)
