"""The aborted transaction index: ``<base offset>.txnindex`` beside each segment.

Kafka's layout, one fixed-size big-endian entry per aborted transaction whose ABORT marker lies in
the segment, in marker order (no header, no checksum)::

    entry (34 bytes): version int16 (0) | producer_id int64 | first_offset int64 |
                      last_offset int64 | last_stable_offset int64

``last_offset`` is the marker's offset, so last offsets strictly increase within a file;
``first_offset`` (the transaction's first batch) may lie in an earlier segment.
``last_stable_offset`` is the partition's LSO just after the marker: the first offset of the
oldest transaction of another producer still open then, else the marker's offset + 1. A
read_committed fetch collects the entries overlapping what it returns, segment after segment,
until an entry's LSO reaches the fetch's upper bound: every aborted transaction starting below
that bound was decided by then, so its entry is at or before that one
(:meth:`TransactionIndex.collect_aborted`).

As in Kafka the file is created lazily, with the first entry: most segments never get one. The
entries are also kept in memory (34 bytes each) and the file is only opened for appends, so an
index without appends holds no descriptor. A file whose length is not a multiple of 34 bytes, or
whose entries are impossible, fails :meth:`TransactionIndex.sanity_check` with
:class:`~storage.errors.CorruptIndexError`; the loader then drops it and has the producer state
replayed from before the segment, which writes the entries again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import struct
import weakref
from typing import NamedTuple

import structlog

from storage.errors import CorruptIndexError, StorageError, raise_log_dir_full

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_LAST_OFFSET = struct.Struct(">q")
_LAST_OFFSET_AT = 2 + 8 + 8

_log = structlog.get_logger(__name__)


class AbortedTxn(NamedTuple):
    """One entry: an aborted transaction of ``producer_id`` spanning [first_offset, last_offset]."""

    producer_id: int
    first_offset: int
    last_offset: int
    """The offset of the ABORT marker."""
    last_stable_offset: int
    """The partition's last stable offset right after the marker."""

    def pack(self) -> bytes:
        return _ENTRY.pack(
            ABORTED_TXN_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class TxnIndexSearchResult(NamedTuple):
    """Entries found in one index; ``is_complete`` when no later segment can hold more."""

    aborted: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """The aborted transactions whose markers are in one segment (see the module docstring)."""

    def __init__(self, path: pathlib.Path, base_offset: int, *, exists: bool | None = None) -> None:
        """Read ``path`` if it exists (nothing is created: the first :meth:`append` does that).

        ``exists``: whether the caller knows the file to be there (False spares the attempt to read
        it; most segments have no aborted transaction); None when it does not know."""
        self.path = pathlib.Path(path)
        self.base_offset = base_offset
        self._fd: int | None = None
        self._dirty = False
        self._closed = False
        data = b""
        if exists is not False:
            with contextlib.suppress(FileNotFoundError):
                data = self.path.read_bytes()
        self._size_is_corrupt = len(data) % ENTRY_SIZE != 0
        self._data = bytearray(data[: len(data) - len(data) % ENTRY_SIZE])

    # -- state -------------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._data) // ENTRY_SIZE

    @property
    def exists(self) -> bool:
        """Whether the file is there (an index without entries may never have been created)."""
        return self._fd is not None or self.path.exists()

    @property
    def last_offset(self) -> int | None:
        """The last entry's last offset (its marker), None when empty."""
        if not self._data:
            return None
        return self._last_offset_of(self.entries - 1)

    def _last_offset_of(self, n: int) -> int:
        return int(_LAST_OFFSET.unpack_from(self._data, n * ENTRY_SIZE + _LAST_OFFSET_AT)[0])

    def entry(self, n: int) -> AbortedTxn:
        _, producer_id, first, last, lso = _ENTRY.unpack_from(self._data, n * ENTRY_SIZE)
        return AbortedTxn(producer_id, first, last, lso)

    def all_entries(self) -> list[AbortedTxn]:
        return [AbortedTxn(*fields[1:]) for fields in _ENTRY.iter_unpack(self._data)]

    # -- appends -----------------------------------------------------------------------------------

    def append(self, aborted: AbortedTxn) -> None:
        """Write one entry after the last (creating the file); last offsets must strictly increase.

        A failed write leaves no torn entry and counts nothing; a full disk raises LogDirFullError.
        Durable only after :meth:`flush`.
        """
        if self._closed:
            raise StorageError(f"transaction index {self.path} is closed")
        last = self.last_offset
        if last is not None and aborted.last_offset <= last:
            raise ValueError(
                f"aborted transaction {aborted} cannot follow the last entry of {self.path}, whose last "
                f"offset is {last}: last offsets must strictly increase"
            )
        if aborted.last_offset < self.base_offset:
            raise ValueError(f"aborted transaction {aborted} ends below the base offset of {self.path}")
        entry = aborted.pack()
        position = len(self._data)
        try:
            fd = self._open_for_append()
            written = os.pwrite(fd, entry, position)
            if written != len(entry):
                raise OSError(errno.ENOSPC, f"short write of a transaction index entry ({written} bytes)")
        except OSError as exc:
            if self._fd is not None:
                try:
                    os.ftruncate(self._fd, position)
                except OSError:
                    _log.warning("could not cut a torn transaction index entry", path=str(self.path))
            raise_log_dir_full(self.path, exc)
        self._data += entry
        self._dirty = True

    def _open_for_append(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            # closed with this index if it is dropped unclosed (a raw fd has no finalizer of its own)
            self._release_fd = weakref.finalize(self, os.close, self._fd)
        return self._fd

    # -- searches ----------------------------------------------------------------------------------

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The entries overlapping [``fetch_offset``, ``upper_bound_offset``), in marker order.

        The search is complete at the first entry whose last stable offset is >= the upper bound
        (Kafka's TransactionIndex.collectAbortedTxns): any aborted transaction that starts below the
        bound was decided no later than that entry's marker.
        """
        return collect_aborted_in(self._data, fetch_offset, upper_bound_offset)

    # -- truncation --------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose last offset is >= ``offset`` (their markers are gone)."""
        low, high = 0, self.entries
        while low < high:  # first entry whose last offset is >= offset
            mid = (low + high) // 2
            if self._last_offset_of(mid) < offset:
                low = mid + 1
            else:
                high = mid
        self._truncate_to_entries(low)

    def _truncate_to_entries(self, count: int) -> None:
        if count >= self.entries and not self._size_is_corrupt:
            return
        if self._fd is not None:
            os.ftruncate(self._fd, count * ENTRY_SIZE)
        elif self.path.exists():
            os.truncate(self.path, count * ENTRY_SIZE)
        del self._data[count * ENTRY_SIZE :]
        self._size_is_corrupt = False
        self._dirty = True

    def reset(self) -> None:
        """Forget every entry and remove the file (a damaged index, rebuilt by a replay)."""
        self._close_fd()
        self.path.unlink(missing_ok=True)
        self._data.clear()
        self._size_is_corrupt = False
        self._dirty = False

    # -- checks ------------------------------------------------------------------------------------

    def sanity_check(self, next_offset: int | None = None) -> None:
        """Raise CorruptIndexError for a torn file or an impossible entry.

        Checked: the length is a whole number of entries, every entry has version 0, its first
        offset is not after its last, its last offset lies in the segment (at or above the base
        offset, below ``next_offset`` when given) and last offsets strictly increase.
        """
        if self._size_is_corrupt:
            raise CorruptIndexError(
                f"transaction index {self.path} has a size that is not a multiple of {ENTRY_SIZE} bytes"
            )
        previous = None
        for version, producer_id, first, last, lso in _ENTRY.iter_unpack(self._data):
            entry = AbortedTxn(producer_id, first, last, lso)
            if version != ABORTED_TXN_VERSION:
                raise CorruptIndexError(f"{self.path}: entry {entry} has version {version}, expected 0")
            if last < self.base_offset or first > last:
                raise CorruptIndexError(
                    f"{self.path}: entry {entry} does not end in the segment (base {self.base_offset})"
                )
            if next_offset is not None and last >= next_offset:
                raise CorruptIndexError(
                    f"{self.path}: entry {entry} ends past the segment's end {next_offset}"
                )
            if previous is not None and last <= previous:
                raise CorruptIndexError(f"{self.path}: last offsets go back from {previous} to {last}")
            previous = last

    # -- file management ---------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the entries written since the last flush."""
        if self._dirty:
            if self._fd is not None:
                os.fsync(self._fd)
            elif self.path.exists():  # cut without a descriptor (an inactive segment's index)
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self._dirty = False

    def release(self) -> None:
        """fsync and close the descriptor (an inactive segment); a later append reopens it."""
        self.flush()
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            self._release_fd()
            self._fd = None

    def close(self) -> None:
        """Release the file; closing twice is harmless. Nothing is written (the file is exact)."""
        self._close_fd()
        self._closed = True

    def delete(self) -> None:
        """Close and remove the file, if there is one."""
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, new_path: pathlib.Path) -> None:
        """Rename the file (e.g. to ``.txnindex.deleted``); without a file only the name changes."""
        new_path = pathlib.Path(new_path)
        try:
            os.replace(self.path, new_path)
        except FileNotFoundError:
            if self._fd is not None:
                raise
        self.path = new_path

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path}, base_offset={self.base_offset}, entries={self.entries})"


def collect_aborted_in(
    data: bytes | bytearray, fetch_offset: int, upper_bound_offset: int
) -> TxnIndexSearchResult:
    """:meth:`TransactionIndex.collect_aborted` on an index's bytes (whole entries), for a reader
    that reads the file itself (storage/read_view.py)."""
    found: list[AbortedTxn] = []
    for _, producer_id, first, last, lso in _ENTRY.iter_unpack(data):
        if last >= fetch_offset and first < upper_bound_offset:
            found.append(AbortedTxn(producer_id, first, last, lso))
        if lso >= upper_bound_offset:
            return TxnIndexSearchResult(found, True)
    return TxnIndexSearchResult(found, False)
