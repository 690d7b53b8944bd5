"""A read-only view of a partition log another process owns: whole batches below a given bound.

A broker serves consumer fetches of the partitions it follows (KIP-392), but their files belong to a
follower process, which appends, rolls, truncates, applies retention and compacts them
(DESIGN.md section 1: never two writers). :class:`LogReadView` reads those files without writing
anything and without any state shared with the writer but the files themselves. It is safe because
of what it reads, and of what it is told:

- **Only below a bound.** Every read is bounded by an offset the caller passes, the follower's high
  watermark (or last stable offset) as the follower process last announced it. The batches below it
  were written by a completed ``write`` before the announcement, and the writer never changes a byte
  of them in place, except by a truncation below the high watermark (an unclean election, a damaged
  log): the follower process asks its broker to lower the bound, and waits for the answer, before
  any such truncation (follower/read_offsets.py). So the bytes a read returns never change under
  it. A read never decodes a header past the bound either: walks stop at the batch that reaches it.
- **Files, not positions, move.** Rolls add segment files; retention, truncation and the follower's
  start-over rename whole files to ``.deleted`` (removed after ``file.delete.delay.ms``); the
  cleaner installs a cleaned segment under the name of the one it replaces. An open descriptor keeps
  reading the file it opened (whose bytes below the bound are still valid records), and a reopen by
  name that finds another file, or none, raises FileNotFoundError (storage/file_pool.py): the view
  then lists the directory again, drops what it knew of the vanished segment and retries once.
  Every listing also drops a held descriptor whose name now names another file (a cleaned segment
  may have merged the segments after it: the old file does not cover their range) and lists the
  base of a replacement in progress (``.log.swap``), whose range must not look like a gap.
  An offset below the first segment left is out of range (the log start offset moved). A
  segment opened after a listing must be the file listed: one replaced since (whose neighbours held
  here may be of the older layout) makes the view list again and retry.
- **Records and their aborted transactions from the same files.** A read_committed read
  (``read(..., with_aborted=True)``) takes the aborted transactions of its range in the same attempt
  as its records, from the ``.txnindex`` of its segment and of the later ones, each taken with that
  segment's held file: an index read by name counts only if the segment's ``.log`` still names the
  held file afterwards (the owner renames a removed segment's ``.log`` before its index, and a
  cleaned segment's index gets its name only after the old ``.log`` lost it); else the view lists
  again and retries. Records from a file
  the cleaner replaced meanwhile thus never go out with the new file's index (the second cleaning
  drops the entries of aborted transactions whose records the first removed), nor with none during
  the replacement. An inactive segment's index is read once per held file; the last segment's again
  only once the bound passed the one it was read under (a bound's entries are indexed before the
  owner announces it). The owner announces a new segment generation whenever it removes, replaces
  or cuts segment files (not for a roll or an append): the caller then has the view :meth:`forget`
  what it holds, so deleted files are not kept allocated and the next read sees the new layout.
- **Copies, not slices.** A read returns the bytes themselves (one ``pread`` of exactly the batches
  found), not a :class:`~storage.slices.FileSlice`: the response then holds what was checked, and a
  short read (the file shrank meanwhile) is detected here (:class:`LogChangedError`) instead of
  corrupting a response on the wire.

Positions: the batch holding an offset is found from a small per-segment cache of batch boundaries
(a consumer's next fetch offset is where its last read ended, which the read remembers), else from
the segment's ``.index`` file (a binary search over its entries by ``pread``, trusting only entries
below the bound, which describe immutable batches), then a walk of batch headers. The segment list
is the directory's ``*.log`` files, listed at the first read; the caller tells the view the active
segment's base offset with every offset announcement (:meth:`note_active_segment`), so a roll is seen
without listing the directory on every read.

Synchronous, like the rest of storage; single-threaded (the broker's event loop).
"""

from __future__ import annotations

import errno
import os
import pathlib
import struct
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

from protocol.records import ProtocolError
from protocol.records.batch import HEADER_SIZE, LOG_OVERHEAD
from storage.checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from storage.epoch import LeaderEpochFileCache
from storage.errors import OffsetOutOfRangeError, StorageError
from storage.file_pool import FilePool, PooledFile
from storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    BatchPosition,
    parse_base_offset,
    walk_batches,
)
from storage.txn_index import ENTRY_SIZE, TXN_INDEX_SUFFIX, AbortedTxn, collect_aborted_in

__all__ = ["LogChangedError", "LogReadView", "ViewRead"]

_T = TypeVar("_T")
_INDEX_ENTRY = struct.Struct(">ii")
_POSITION_CACHE_LIMIT = 256
_LOG_SWAP_SUFFIX = LOG_SUFFIX + SWAP_SUFFIX


class LogChangedError(StorageError):
    """The files changed under a read in a way a retry cannot absorb (a segment shrank, vanished
    twice): the caller answers with nothing for now and the reader asks again."""


class ViewRead(NamedTuple):
    """Whole batches from the one holding the fetch offset, all below the read's bound."""

    records: bytes
    first_offset: int | None
    """Base offset of the first batch returned (None when nothing was returned)."""
    aborted: tuple[AbortedTxn, ...] = ()
    """With ``with_aborted``: the aborted transactions overlapping the read, from the same files."""


_NOTHING = ViewRead(b"", None)


class _Mismatch:
    """An index entry that does not match the file held (see ``LogReadView._scan``)."""


_MISMATCH = _Mismatch()


class _Segment:
    """What the view knows of one segment file: its descriptor (pooled), some batch boundaries, and
    its aborted transactions (the ``.txnindex`` that goes with that file)."""

    __slots__ = ("aborted", "aborted_bound", "aborted_final", "base_offset", "file", "positions")

    def __init__(self, base_offset: int, file: PooledFile) -> None:
        self.base_offset = base_offset
        self.file = file
        self.positions: dict[int, int] = {}
        """offset -> start of the first batch whose last offset is >= offset (batch boundaries)."""
        self.aborted: bytes | None = None
        """The whole entries of this file's ``.txnindex`` (empty: none), None until read."""
        self.aborted_bound = -1
        """The bound ``aborted`` was read under: it holds every entry a read below it needs."""
        self.aborted_final = False
        """Read while a later segment existed: the file's index no longer changes."""

    def remember(self, offset: int, position: int) -> None:
        if len(self.positions) >= _POSITION_CACHE_LIMIT:
            self.positions.clear()
        self.positions[offset] = position


class LogReadView:
    """Reads a partition directory another process writes (see the module docstring)."""

    def __init__(self, directory: pathlib.Path, *, pool: FilePool | None = None) -> None:
        self.directory = pathlib.Path(directory)
        self._pool = pool
        self._bases: list[int] = []
        self._inodes: dict[int, int] = {}
        """base -> inode of its ``.log`` when listed (none for a ``.log.swap``)."""
        self._segments: dict[int, _Segment] = {}
        self._active_base: int | None = None
        self._listed = False
        """Whether ``_bases`` reflects the files (listing waits for the first read: a broker may
        follow many partitions no consumer ever reads from it)."""
        self._closed = False

    # -- the segment list --------------------------------------------------------------------------

    def refresh(self) -> None:
        """List the segment files again; forget the segments that are gone or replaced.

        A segment whose name now belongs to another file (the cleaner installed a cleaned segment
        there, which may also hold the records of the segments after it that it merged) is dropped,
        so its range is read from the new file: the old descriptor covers only the old segment's
        offsets, and the merged segments' bases are listed no more. A ``.log.swap`` file is a
        replacement in progress (its old segments already renamed away, the new one not yet under
        its name): its base is listed, so its range is not mistaken for a gap and skipped, and the
        read there finds no file and retries (then answers nothing, to be asked again).
        """
        bases: set[int] = set()
        inodes: dict[int, int] = {}
        with os.scandir(self.directory) as entries:
            for entry in entries:
                name = entry.name
                if name.endswith(LOG_SUFFIX) and name.count(".") == 1:
                    base = parse_base_offset(name)
                    if base is not None:
                        bases.add(base)
                        inodes[base] = entry.inode()
                elif name.endswith(_LOG_SWAP_SUFFIX) and name.count(".") == 2:
                    base = parse_base_offset(name)
                    if base is not None:
                        bases.add(base)
        self._bases = sorted(bases)
        self._inodes = inodes
        self._listed = True
        for base, segment in list(self._segments.items()):
            if inodes.get(base) != segment.file.identity[1]:
                self._drop(base)

    def note_active_segment(self, base_offset: int) -> None:
        """The writer's active segment starts at ``base_offset``: the files are listed again before
        the next read if that is new."""
        if base_offset != self._active_base:
            self._active_base = base_offset
            if not self._bases or self._bases[-1] != base_offset:
                self._listed = False

    def forget(self) -> None:
        """Drop every descriptor, remembered position and index read, and list the files again
        before the next read: the owner is about to cut the log below what was read (a fenced
        truncation), which rewrites the active segment from the cut and replaces the segments above
        it, possibly under the same names; or it announced that it removed, replaced or cut segment
        files (a new segment generation), whose descriptors held here would keep deleted files
        allocated and whose layout the next read should see."""
        for base in list(self._segments):
            self._drop(base)
        self._listed = False

    def _ensure_listed(self) -> None:
        if not self._listed:
            self.refresh()

    @property
    def segment_bases(self) -> list[int]:
        self._ensure_listed()
        return list(self._bases)

    def _floor(self, offset: int) -> int:
        """Index in the segment list of the segment that would hold ``offset`` (-1: below all)."""
        return bisect_right(self._bases, offset) - 1

    def _segment(self, base: int) -> _Segment:
        """The segment listed at ``base``, opened if not held. FileNotFoundError when its name
        names no file, or another file than the one listed: the segments changed since the listing,
        and the ones held may be of the older layout (the caller lists again and retries)."""
        segment = self._segments.get(base)
        if segment is None:
            path = self.directory / f"{base:020d}{LOG_SUFFIX}"
            file = PooledFile(path, os.O_RDONLY, pool=self._pool)
            if file.identity[1] != self._inodes.get(base):
                file.close()
                raise FileNotFoundError(errno.ENOENT, f"{path} is not the file listed (the segments changed)")
            segment = self._segments[base] = _Segment(base, file)
        return segment

    def _drop(self, base: int) -> None:
        segment = self._segments.pop(base, None)
        if segment is not None:
            segment.file.close()

    # -- reads -------------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        bound: int,
        *,
        min_one_batch: bool,
        with_aborted: bool = False,
    ) -> ViewRead:
        """Whole batches from the one holding ``fetch_offset``, all wholly below ``bound``.

        At most ``max_bytes``, except that with ``min_one_batch`` a first batch larger than that comes
        whole (KIP-74). Empty when nothing below ``bound`` is at or after ``fetch_offset``, or when
        the first batch does not fit and ``min_one_batch`` is false. Raises OffsetOutOfRangeError when
        ``fetch_offset`` is below every segment left, LogChangedError when the files changed under it.

        ``with_aborted`` (read_committed, ``bound`` the announced last stable offset): the aborted
        transactions overlapping [``fetch_offset``, ``bound``) come with the records, from the
        indexes of the same segment files (see the module docstring).
        """
        self._check_open()
        if fetch_offset >= bound:
            return _NOTHING
        self._ensure_listed()
        return self._retrying(lambda: self._read(fetch_offset, max_bytes, bound, min_one_batch, with_aborted))

    def _read(
        self, fetch_offset: int, max_bytes: int, bound: int, min_one_batch: bool, with_aborted: bool
    ) -> ViewRead:
        located = self._locate(fetch_offset, bound)
        if located is None:
            return _NOTHING
        segment, first = located
        if first.last_offset >= bound:
            return _NOTHING
        if first.size > max_bytes and not min_one_batch:
            return _NOTHING
        start = first.position
        end = start
        next_offset = first.base_offset
        for batch in self._walk(segment, start):
            if batch.last_offset >= bound:
                break
            if end > start and batch.position + batch.size - start > max_bytes:
                break
            end = batch.position + batch.size
            next_offset = batch.last_offset + 1
            if next_offset >= bound or end - start >= max_bytes:
                break
        if end == start:
            return _NOTHING
        data = segment.file.pread(end - start, start)
        if len(data) != end - start:
            raise LogChangedError(
                f"{segment.file.path}: read {len(data)} of {end - start} bytes at {start}: the file shrank"
            )
        aborted = tuple(self._collect_aborted(fetch_offset, bound)) if with_aborted else ()
        segment.remember(next_offset, end)
        return ViewRead(data, first.base_offset, aborted)

    def bytes_available(self, fetch_offset: int, end_offset: int, max_bytes: int) -> int:
        """Bytes of whole batches from the one holding ``fetch_offset`` up to ``end_offset`` (the
        bound), counted from batch headers and at most ``max_bytes``; 0 when none (or on any doubt:
        the parked fetch's re-read decides)."""
        self._check_open()
        if fetch_offset >= end_offset:
            return 0
        self._ensure_listed()
        try:
            return self._retrying(lambda: self._bytes_available(fetch_offset, end_offset, max_bytes))
        except (OffsetOutOfRangeError, LogChangedError):
            return 0

    def _bytes_available(self, fetch_offset: int, end_offset: int, max_bytes: int) -> int:
        located = self._locate(fetch_offset, end_offset)
        if located is None:
            return 0
        segment, first = located
        total = 0
        for batch in self._walk(segment, first.position):
            if batch.last_offset >= end_offset:
                break
            total = batch.position + batch.size - first.position
            if batch.last_offset + 1 >= end_offset:
                segment.remember(end_offset, batch.position + batch.size)
                break
            if total >= max_bytes:
                break
        return min(total, max_bytes)

    def on_older_segment(self, offset: int, end_offset: int) -> bool:
        """True if ``offset`` lies on an older segment than ``end_offset`` (from the segment list)."""
        self._ensure_listed()
        return self._floor(offset) < self._floor(end_offset)

    # -- locating batches ------------------------------------------------------------------------------

    def _retrying(self, attempt: Callable[[], _T]) -> _T:
        """Run ``attempt``; a file that vanished or was replaced makes the view forget its files,
        list them again and run it once more (the second failure is LogChangedError)."""
        try:
            return attempt()
        except FileNotFoundError:
            self._forget_files()
        try:
            return attempt()
        except FileNotFoundError as exc:
            self._forget_files()
            raise LogChangedError(f"{self.directory}: segment files keep changing ({exc})") from exc

    def _forget_files(self) -> None:
        for base in list(self._segments):
            self._drop(base)
        self.refresh()

    def _locate(self, offset: int, bound: int) -> tuple[_Segment, BatchPosition] | None:
        """The segment and batch holding ``offset`` (or the first batch after it); None when no batch
        at or after it starts below ``bound``. Raises OffsetOutOfRangeError below every segment."""
        index = self._floor(offset)
        if index < 0:
            self.refresh()  # a segment may have been added below (the writer started over)
            index = self._floor(offset)
            if index < 0:
                raise OffsetOutOfRangeError(
                    f"{self.directory}: offset {offset} is below the first segment "
                    f"({self._bases[0] if self._bases else 'none'})"
                )
        listed_again = False
        while True:
            while index < len(self._bases):
                base = self._bases[index]
                if base >= bound:
                    return None
                segment = self._segment(base)
                found = self._find_in_segment(segment, offset, bound)
                if found is not None:
                    return segment, found
                index += 1  # every batch of this segment ends before ``offset``: the next one
            if listed_again:
                return None
            listed_again = True
            known = len(self._bases)
            self.refresh()
            if len(self._bases) <= known:
                return None

    def _find_in_segment(self, segment: _Segment, offset: int, bound: int) -> BatchPosition | None:
        """The first batch of ``segment`` whose last offset is >= ``offset``; None past its end."""
        cached = segment.positions.get(offset)
        found: BatchPosition | _Mismatch | None = _MISMATCH
        if cached is not None:
            found = self._scan(segment, cached, offset, bound)
        else:
            entry = self._index_entry(segment.base_offset, min(offset, bound - 1))
            if entry is not None:
                entry_offset, position = entry
                found = self._scan(segment, position, offset, bound, expect_last_offset=entry_offset)
        if isinstance(found, _Mismatch):  # no index entry, or one for another file than the one held
            found = self._scan(segment, 0, offset, bound)
        return None if isinstance(found, _Mismatch) else found

    def _scan(
        self,
        segment: _Segment,
        position: int,
        offset: int,
        bound: int,
        *,
        expect_last_offset: int | None = None,
    ) -> BatchPosition | _Mismatch | None:
        """Walk from ``position`` to the first batch whose last offset is >= ``offset``.

        ``expect_last_offset``: the index entry's offset, which the batch at ``position`` must end
        at; otherwise the index describes another file than the descriptor held (a cleaned segment
        was installed meanwhile) and the answer is ``_MISMATCH``.
        """
        for batch in self._walk(segment, position):
            if expect_last_offset is not None:
                if batch.position != position or batch.last_offset != expect_last_offset:
                    return _MISMATCH
                expect_last_offset = None
            if batch.last_offset >= offset:
                segment.remember(offset, batch.position)
                return batch
            if batch.last_offset + 1 >= bound:
                return None  # the next header is at the bound: not ours to read
        return _MISMATCH if expect_last_offset is not None else None

    def _index_entry(self, base: int, target: int) -> tuple[int, int] | None:
        """(offset, position) of the ``.index`` entry with the largest offset <= ``target``: a batch
        ending there starts at that position (entries below the bound describe batches that never
        change); None when there is none, or no index."""
        path = self.directory / f"{base:020d}{INDEX_SUFFIX}"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            count = os.fstat(fd).st_size // _INDEX_ENTRY.size
            low, high = 0, count
            found: tuple[int, int] | None = None
            relative_target = target - base
            while low < high:
                mid = (low + high) // 2
                raw = os.pread(fd, _INDEX_ENTRY.size, mid * _INDEX_ENTRY.size)
                if len(raw) < _INDEX_ENTRY.size:
                    high = mid
                    continue
                relative, position = _INDEX_ENTRY.unpack(raw)
                if 0 <= relative <= relative_target and position >= 0:
                    found, low = (base + relative, position), mid + 1
                else:
                    high = mid
            return found
        finally:
            os.close(fd)

    def _walk(self, segment: _Segment, position: int) -> Iterator[BatchPosition]:
        """The batches of ``segment`` from ``position`` (a batch boundary) to its end as it is now.

        A header that does not decode ends the walk: past the caller's bound it may be a write in
        progress, and below it the caller stops before reaching it.
        """
        size = segment.file.size()
        walker = walk_batches(segment.file, position, size)
        while True:
            try:
                batch = next(walker)
            except StopIteration:
                return
            except ProtocolError:
                return
            if batch.position + batch.size > size or batch.size < HEADER_SIZE - LOG_OVERHEAD:
                return
            yield batch

    # -- transactions and epochs -----------------------------------------------------------------------

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [``start_offset``, ``upper_bound_offset``), from the
        segments' ``.txnindex`` files, as :meth:`storage.log.PartitionLog.collect_aborted_transactions`
        walks them. ``upper_bound_offset`` is a bound the owner announced. On its own, this may
        describe other files than a read before it: records and their aborted transactions are read
        together with ``read(..., with_aborted=True)``."""
        self._check_open()
        self._ensure_listed()
        return self._retrying(lambda: self._collect_aborted(start_offset, upper_bound_offset))

    def _collect_aborted(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The walk of :meth:`collect_aborted_transactions` over the listed segments, each index
        taken with its segment's file (:meth:`_index_of`)."""
        found: list[AbortedTxn] = []
        last = len(self._bases) - 1
        for i in range(max(self._floor(start_offset), 0), last + 1):
            segment = self._segment(self._bases[i])
            data = self._index_of(segment, upper_bound_offset, final=i < last)
            result = collect_aborted_in(data, start_offset, upper_bound_offset)
            found.extend(result.aborted)
            if result.is_complete:
                break
        return found

    def _index_of(self, segment: _Segment, bound: int, *, final: bool) -> bytes:
        """The whole entries of the ``.txnindex`` that goes with ``segment``'s held file.

        Read again only when not read yet, or when read under a lower bound while the segment was
        the last one (still appended to: a read below ``bound`` needs the entries indexed before the
        owner announced it, which a read under a lower bound may have missed). The index read by
        name is the held file's only if the ``.log`` still has that file's name afterwards (the
        owner renames a removed segment's ``.log`` before its index; a cleaned segment's index takes
        the name after the old ``.log`` left it); else FileNotFoundError, and the caller lists again.
        ``final``: a later segment is listed, so this file's index no longer changes.
        """
        cached = segment.aborted
        if cached is not None and (segment.aborted_final or segment.aborted_bound >= bound):
            return cached
        path = self.directory / f"{segment.base_offset:020d}{TXN_INDEX_SUFFIX}"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""  # most segments never get one (created with the first entry)
        log_path = segment.file.path
        try:
            named = os.stat(log_path)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, f"{log_path} went while its index was read") from None
        if (named.st_dev, named.st_ino) != segment.file.identity:
            raise FileNotFoundError(errno.ENOENT, f"{log_path} was replaced while its index was read")
        data = data[: len(data) - len(data) % ENTRY_SIZE]  # an entry still being written is not one
        segment.aborted, segment.aborted_bound, segment.aborted_final = data, bound, final
        return data

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the writer's ``leader-epoch-checkpoint`` (replaced atomically by
        the writer, so always whole): (largest epoch <= ``epoch``, its end offset), or (-1, -1)."""
        self._check_open()
        path = self.directory / LEADER_EPOCH_CHECKPOINT
        try:
            cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
        except FileNotFoundError:
            cache = LeaderEpochFileCache(None)
        return cache.end_offset_for(epoch, log_end_offset)

    # -- lifecycle -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Release every descriptor; later reads raise StorageError."""
        self._closed = True
        for base in list(self._segments):
            self._drop(base)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"the read view of {self.directory} is closed")

    def __repr__(self) -> str:
        return f"LogReadView({self.directory}, segments={len(self._bases)})"
