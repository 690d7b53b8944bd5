"""Segment indexes: the sparse offset index (.index) and the time index (.timeindex).

Both follow Kafka's on-disk formats (kafka-behaviour.md 7.3/7.4): fixed-size big-endian entries, no
header and no checksum. Unlike Kafka, kipling never maps an index into memory: a store into a
mapping of a sparse or preallocated file needs a block the moment the page is first touched, and on
a full disk (or a failing one) the kernel can only answer with SIGBUS, which kills the whole broker
without a log line. So the entries live in a ``bytearray`` (lookups read it, as they read the
mapping before) and every append is one ``pwrite`` at the end of the file, where a full disk is an
ordinary ENOSPC: the entry is not added and :class:`~storage.errors.LogDirFullError` is raised.
The in-memory copy costs 8 + 12 bytes per ``index.interval.bytes`` (4 KiB) of log, about 0.5%.

Lookups never touch the file: only writes need a descriptor, and it comes from the process's
file pool (storage/file_pool.py), which closes the least recently used when it needs room. An
inactive segment's index releases its descriptor at once (:meth:`_FileIndex.release`); the rare
write (a truncation that makes the segment active again, the fsync of a later flush) opens the
file again, as Kafka's lazily opened indexes cost nothing until used.

The file holds exactly the entries (nothing is preallocated); ``max_index_size`` only caps how many
entries an index takes before its segment must roll. Files written by an older version, or left by
a crash, may still end in zero entries: on open the valid prefix is found by binary search (entries
after the first are never all-zero) and a writable index cuts the file back to it. Anything else
that looks wrong is reported by :meth:`sanity_check` as :class:`CorruptIndexError`, and the log
rebuilds the index from the .log.
"""

from __future__ import annotations

import errno
import os
import pathlib
import struct
from array import array
from operator import le, lt
from sys import byteorder

import structlog

from protocol.sentinels import NO_TIMESTAMP
from storage.errors import CorruptIndexError, StorageError, is_log_dir_full, raise_log_dir_full
from storage.file_pool import PooledFile

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
_MAX_INT32 = 2**31 - 1

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")

_log = structlog.get_logger(__name__)


def _column(data: bytes, entry_size: int, start: int, width: int, typecode: str) -> array[int]:
    """One big-endian field of every entry as an array, gathered with C-speed extended slices.

    Sanity checks scan whole indexes at log load; unpacking entry by entry would dominate start-up.
    """
    count = len(data) // entry_size
    packed = bytearray(width * count)
    for byte in range(width):
        packed[byte::width] = data[start + byte :: entry_size]
    values = array(typecode, packed)
    if byteorder == "little":
        values.byteswap()
    return values


def _is_increasing(values: array[int], strictly: bool) -> bool:
    following = iter(values)
    next(following, None)
    return all(map(lt if strictly else le, values, following))


class _FileIndex:
    """Shared machinery of both indexes: the file, the entries in memory, appends and truncation.

    Subclasses give the entry size and where the relative offset sits in an entry; both search by a
    big-endian field that never decreases (the offset, or the timestamp for time lookups).
    """

    ENTRY_SIZE: int = 0
    _OFFSET_FIELD_START: int = 0

    def __init__(self, path: pathlib.Path, base_offset: int, max_index_size: int, writable: bool) -> None:
        self.base_offset = base_offset
        self._writable = writable
        self._closed = False
        self._idle = not writable
        """No descriptor kept between uses (released, or read-only: the entries are all in memory)."""
        self._dirty = writable
        """Written (or cut) since the last fsync; a writable file may have been cut on open."""
        self._file = self._open(pathlib.Path(path))
        fd = self._descriptor()
        try:
            data = _read_all(fd)
            self._size_is_corrupt = len(data) % self.ENTRY_SIZE != 0
            self._data = bytearray(data[: self._round(len(data))])
            self._entries = self._valid_entries_on_open()
            del self._data[self._entries * self.ENTRY_SIZE :]
            self._capacity = self._entries
            if writable:
                self._cut_file_to_entries(len(data))
                self.resize(max(self._round(max_index_size), self.size_in_bytes))
        except BaseException:
            self._close_descriptor()
            raise
        if self._idle:
            self._close_descriptor()

    @property
    def path(self) -> pathlib.Path:
        """The file's current name (it changes with :meth:`rename`)."""
        return self._file.path

    def _descriptor(self) -> int:
        """The descriptor for one system call now (the pool opens the file again if it closed it)."""
        return self._file.fd()

    def _close_descriptor(self) -> None:
        self._file.release()

    def _open(self, path: pathlib.Path) -> PooledFile:
        """The index's file, created empty when writable (a read-only index must exist)."""
        return PooledFile(path, os.O_RDWR | os.O_CREAT if self._writable else os.O_RDONLY)

    def _cut_file_to_entries(self, file_size: int) -> None:
        """Drop a preallocated zero tail (an older version's file, or a crash): appends go at the end.

        Shrinking a file frees blocks, but a copy-on-write file system may still refuse it on a full
        disk; the tail is then left, and appends overwrite it in place (``pwrite`` at the entry's slot)
        while the next open finds the valid prefix again.
        """
        if file_size == self.size_in_bytes:
            return
        try:
            os.ftruncate(self._descriptor(), self.size_in_bytes)
        except OSError as exc:
            if not is_log_dir_full(exc):
                raise
            _log.warning("index tail not cut: no space left on device", path=str(self.path))

    def _round(self, size: int) -> int:
        return size - size % self.ENTRY_SIZE

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"index {self.path} is closed")

    def _require_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise StorageError(f"index {self.path} was opened read-only")

    def _slot_is_zero(self, n: int) -> bool:
        start = n * self.ENTRY_SIZE
        return not any(self._data[start : start + self.ENTRY_SIZE])

    def _valid_entries_on_open(self) -> int:
        """Entries of an existing file: all of a trimmed file, the non-zero prefix of a preallocated one.

        A file whose last slot holds data was trimmed (clean close). Otherwise it was left preallocated
        by a crash: entries after the first are never all-zero, so the first all-zero slot at n >= 1 ends
        the valid prefix (binary search: the prefix is non-zero, the tail is zero). A lone all-zero first
        slot in such a file means nothing was ever written.
        """
        count = len(self._data) // self.ENTRY_SIZE
        if count <= 1 or not self._slot_is_zero(count - 1):
            return count
        low, high = 1, count - 1  # the first zero slot is in [low, high]
        while low < high:
            mid = (low + high) // 2
            if self._slot_is_zero(mid):
                high = mid
            else:
                low = mid + 1
        return 0 if low == 1 and self._slot_is_zero(0) else low

    # -- state -----------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """Number of valid entries."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """How many entries the index may hold before its segment must roll."""
        return self._capacity

    @property
    def is_full(self) -> bool:
        """True when no entry can be appended; the segment must roll."""
        return self._entries >= self._capacity

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by valid entries (the file size)."""
        return self._entries * self.ENTRY_SIZE

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= _MAX_INT32:
            raise ValueError(f"offset {offset} does not fit in index {self.path} (base {self.base_offset})")
        return relative

    # -- appends ---------------------------------------------------------------------------------

    def _write_entry(self, entry: bytes) -> None:
        """Write one packed entry after the last and count it; on any error nothing is counted.

        A short or failed write may have left part of the entry in the file: it is cut off again, so
        the file never holds a torn entry that the next open would take for a corrupt index.
        """
        position = self.size_in_bytes
        fd = self._writing()
        try:
            written = os.pwrite(fd, entry, position)
            if written != len(entry):
                raise OSError(
                    errno.ENOSPC, f"short write of an index entry ({written} of {len(entry)} bytes)"
                )
        except OSError as exc:
            try:
                os.ftruncate(fd, position)
            except OSError:
                _log.warning("could not cut a torn index entry", path=str(self.path))
            raise_log_dir_full(self.path, exc)
        self._data += entry
        self._entries += 1

    # -- binary search ---------------------------------------------------------------------------

    def _last_slot_at_most(self, field: struct.Struct, field_start: int, target: int) -> int:
        """Index of the last entry whose ``field`` is <= target, or -1 (the field never decreases).

        The loop reads the buffer directly (no per-step method call): lookups are on the fetch path.
        """
        buffer, unpack_from, size = self._data, field.unpack_from, self.ENTRY_SIZE
        low, high = 0, self._entries
        while low < high:
            mid = (low + high) // 2
            if unpack_from(buffer, mid * size + field_start)[0] <= target:
                low = mid + 1
            else:
                high = mid
        return low - 1

    def _first_slot_with_offset_at_least(self, offset: int) -> int:
        """Index of the first entry whose offset is >= offset (``entries`` when there is none)."""
        target = offset - self.base_offset
        return self._last_slot_at_most(_INT32, self._OFFSET_FIELD_START, target - 1) + 1

    # -- truncation ------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= ``offset`` (the log was truncated to ``offset``)."""
        self.truncate_to_entries(self._first_slot_with_offset_at_least(offset))

    def truncate(self) -> None:
        """Drop all entries."""
        self.truncate_to_entries(0)

    def truncate_to_entries(self, count: int) -> None:
        """Keep the first ``count`` entries: the file is cut first, so a failure drops nothing."""
        if count >= self._entries:
            return
        self._require_writable()
        os.ftruncate(self._writing(), count * self.ENTRY_SIZE)
        del self._data[count * self.ENTRY_SIZE :]
        self._entries = count

    # -- file management -------------------------------------------------------------------------

    def trim_to_valid_size(self) -> None:
        """No more entries: done when the segment becomes inactive (the file already holds just them)."""
        self.resize(self.size_in_bytes)

    def resize(self, new_size: int) -> None:
        """Set how many bytes of entries the index may hold, rounded down; never below the used size.

        Only the cap changes: the file is never grown ahead of its entries, so nothing is allocated
        that a full disk could refuse later.
        """
        self._require_writable()
        rounded = self._round(new_size)
        if rounded < self.size_in_bytes:
            raise ValueError(f"cannot resize {self.path} to {new_size} bytes: {self._entries} entries in use")
        self._capacity = rounded // self.ENTRY_SIZE

    def flush(self) -> None:
        """fsync the entries written so far (a released index opens its file just for that)."""
        if not (self._writable and self._dirty) or self._closed:
            return
        os.fsync(self._descriptor())
        self._dirty = False
        if self._idle:
            self._close_descriptor()

    def release(self) -> None:
        """Hold no descriptor until the next write: the segment became inactive (its entries stay in
        memory for lookups; unsynced ones are fsynced by the next :meth:`flush`, which reopens)."""
        self._idle = True
        self._close_descriptor()

    def _writing(self) -> int:
        """The descriptor for a write: the segment is written again, so the index keeps it."""
        self._idle = False
        self._dirty = True
        return self._descriptor()

    def close(self) -> None:
        """Release the file; closing twice is harmless. Nothing is written: the file is already exact."""
        if self._closed:
            return
        self._closed = True
        self._file.close()

    def delete(self) -> None:
        """Close and remove the file."""
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, new_path: pathlib.Path) -> None:
        """Rename the file (e.g. to a .deleted or .swap name); an open descriptor stays valid, a released
        index opens the new name when it is next written."""
        self._file.rename(new_path)

    def _check_size(self) -> None:
        if self._size_is_corrupt:
            raise CorruptIndexError(
                f"index file {self.path} has a size that is not a multiple of {self.ENTRY_SIZE} bytes"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path}, base_offset={self.base_offset}, entries={self._entries})"


def _read_all(fd: int) -> bytes:
    """The whole file with ``pread``: reading a hole of a sparse file allocates nothing, never faults."""
    size = os.fstat(fd).st_size
    chunks, position = [], 0
    while position < size:
        chunk = os.pread(fd, size - position, position)
        if not chunk:
            break
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)


class OffsetIndex(_FileIndex):
    """Sparse offset index of one segment.

    8-byte big-endian entries: int32 offset - base_offset, int32 position in the .log.

    A lookup gives the log position from which a forward scan of the .log finds a given offset.
    """

    ENTRY_SIZE = 8

    def __init__(
        self,
        path: pathlib.Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_offset = self._compute_last_offset()

    def _compute_last_offset(self) -> int:
        return self.entry(self._entries - 1)[0] if self._entries else self.base_offset

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when the index is empty."""
        return self._last_offset

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (absolute offset, position)."""
        if not 0 <= n < self._entries:
            raise IndexError(f"entry {n} out of range: {self.path} has {self._entries} entries")
        relative, position = _OFFSET_ENTRY.unpack_from(self._data, n * 8)
        return self.base_offset + relative, position

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must be strictly increasing (Kafka's InvalidOffsetException)."""
        self._require_writable()
        if self._entries and offset <= self._last_offset:
            raise ValueError(f"index {self.path}: offset {offset} is not above {self._last_offset}")
        relative = self._relative(offset)
        if not 0 <= position <= _MAX_INT32:
            raise ValueError(f"index {self.path}: position {position} does not fit in an int32")
        if self.is_full:
            raise ValueError(f"index {self.path} is full ({self._entries} entries)")
        self._write_entry(_OFFSET_ENTRY.pack(relative, position))
        self._last_offset = offset

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= target_offset, or (base_offset, 0) if there is none."""
        slot = self._last_slot_at_most(_INT32, 0, target_offset - self.base_offset)
        return (self.base_offset, 0) if slot < 0 else self.entry(slot)

    def truncate_to_entries(self, count: int) -> None:
        super().truncate_to_entries(count)
        self._last_offset = self._compute_last_offset()

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the size is not whole entries or entries are out of order."""
        self._check_size()
        if not self._entries:
            return
        data = bytes(self._data)
        offsets, positions = _column(data, 8, 0, 4, "i"), _column(data, 8, 4, 4, "i")
        if offsets[0] < 0 or positions[0] < 0:
            raise CorruptIndexError(f"index {self.path}: first entry is negative")
        if not _is_increasing(offsets, strictly=True):
            raise CorruptIndexError(f"index {self.path}: entry offsets are not strictly increasing")
        if not _is_increasing(positions, strictly=False):
            raise CorruptIndexError(f"index {self.path}: entry positions go backwards")


class TimeIndex(_FileIndex):
    """12-byte entries: int64 timestamp, int32 offset - base_offset; timestamps never decrease.

    Entry (T, O) means "the largest timestamp seen up to offset O is T"; it serves ListOffsets by
    timestamp and time-based retention.
    """

    ENTRY_SIZE = 12
    _OFFSET_FIELD_START = 8

    def __init__(
        self,
        path: pathlib.Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_entry = self._compute_last_entry()

    def _compute_last_entry(self) -> tuple[int, int]:
        return self.entry(self._entries - 1) if self._entries else (NO_TIMESTAMP, self.base_offset)

    @property
    def is_full(self) -> bool:
        """One slot is kept free for the final entry written when the segment rolls (as Kafka does)."""
        return self._entries >= self._capacity - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base_offset) when empty."""
        return self._last_entry

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (timestamp, absolute offset)."""
        if not 0 <= n < self._entries:
            raise IndexError(f"entry {n} out of range: {self.path} has {self._entries} entries")
        timestamp, relative = _TIME_ENTRY.unpack_from(self._data, n * 12)
        return timestamp, self.base_offset + relative

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if timestamp is above the last entry's; offsets never go backwards.

        ``skip_full_check`` is for the final entry on roll/close, which may use the reserved slot; if even
        that is gone (a trimmed index), the cap grows by one entry. Raises LogDirFullError (nothing
        added) when the disk is full.
        """
        self._require_writable()
        if self._entries and offset < self._last_entry[1]:
            raise ValueError(f"time index {self.path}: offset {offset} is below {self._last_entry[1]}")
        relative = self._relative(offset)
        if timestamp <= self._last_entry[0]:
            return
        if self.is_full and not skip_full_check:
            raise ValueError(f"time index {self.path} is full ({self._entries} entries)")
        self._write_entry(_TIME_ENTRY.pack(timestamp, relative))
        self._capacity = max(self._capacity, self._entries)
        self._last_entry = (timestamp, offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, or (-1, base_offset)."""
        slot = self._last_slot_at_most(_INT64, 0, target_timestamp)
        return (NO_TIMESTAMP, self.base_offset) if slot < 0 else self.entry(slot)

    def truncate_to_entries(self, count: int) -> None:
        super().truncate_to_entries(count)
        self._last_entry = self._compute_last_entry()

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the size is not whole entries or timestamps/offsets are out of order."""
        self._check_size()
        if not self._entries:
            return
        data = bytes(self._data)
        timestamps, offsets = _column(data, 12, 0, 8, "q"), _column(data, 12, 8, 4, "i")
        if offsets[0] < 0:
            raise CorruptIndexError(f"time index {self.path}: first entry has a negative offset")
        if not _is_increasing(timestamps, strictly=True):
            raise CorruptIndexError(f"time index {self.path}: timestamps are not strictly increasing")
        if not _is_increasing(offsets, strictly=False):
            raise CorruptIndexError(f"time index {self.path}: offsets go backwards")
