"""Open descriptors of segment files, shared by every partition of a process: an LRU with a cap.

A broker's partitions are capped by its open-files limit (``RLIMIT_NOFILE``), not by its disks:
Kafka keeps every segment's FileChannel open and asks operators for a limit of 100,000 and more.
Kipling keeps at most :attr:`FilePool.capacity` descriptors open for segment files and their
indexes, whatever the number of partitions; the least recently used is closed when another must
open, and a :class:`PooledFile` whose descriptor was closed opens its file again (by its current
name) the next time it is used. A partition nobody reads or writes costs no descriptor.

Nothing outside a :class:`PooledFile` ever keeps its descriptor number: every read and write asks
:meth:`PooledFile.fd` again, so a descriptor closed by an eviction is never used afterwards (the
number may already belong to another file). A read of many partitions (a fetch response of
100,000 of them) therefore works with any capacity: each slice opens its file when it is read.

Reopening drops ``O_CREAT``: a file that was deleted meanwhile raises FileNotFoundError rather
than coming back empty, and so does a name that now belongs to another file (the reopened
descriptor's device and inode must be the first open's). Data written through a descriptor that
was closed since is still made durable by an ``fsync`` through the reopened one (the kernel syncs
the file, not the descriptor). What a reopened descriptor may not see is a write-back error that
an earlier one already reported; that matters only where every append is fsynced
(``flush.messages=1``), and there the file is used too often to be the least recently used.

One pool per process (:data:`OPEN_FILES`), because the limit is per process; the broker sizes it
from its configuration at start (``kipling.log.open.files.max``), a follower process from what the
broker passes it. Single-threaded, like the logs that use it.
"""

from __future__ import annotations

import errno
import os
import pathlib
import resource
import weakref
from collections import OrderedDict

from storage.errors import OutOfDescriptorsError

DEFAULT_CAPACITY = 1024
"""Until the process sets its own: a quarter of the usual soft limit of 4,096 descriptors."""

_NOT_OPEN = -1


class _Descriptor:
    """One open (or closed, ``fd == -1``) descriptor; the pool orders these, not the files, so a
    file dropped without close() can still be collected (its finalizer closes the descriptor)."""

    __slots__ = ("fd",)

    def __init__(self) -> None:
        self.fd = _NOT_OPEN


class FilePool:
    """At most ``capacity`` descriptors open at once among the pool's files; least recently used first out."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._lru: OrderedDict[_Descriptor, None] = OrderedDict()
        self._capacity = _checked_capacity(capacity)
        self.opens = 0
        """Files opened (first opens and reopens): with :attr:`evictions`, how hot the pool runs."""
        self.evictions = 0
        """Descriptors closed to make room for another."""

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, capacity: int) -> None:
        self._capacity = _checked_capacity(capacity)
        self._evict_down_to(self._capacity)

    @property
    def open_count(self) -> int:
        """Descriptors open now."""
        return len(self._lru)

    def _open(self, descriptor: _Descriptor, path: pathlib.Path, flags: int, mode: int) -> None:
        """Open ``path`` into ``descriptor`` after making room; on EMFILE, close more and retry."""
        self._evict_down_to(self._capacity - 1)
        while True:
            try:
                descriptor.fd = os.open(path, flags, mode)
                break
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                if not self._lru:
                    raise OutOfDescriptorsError(
                        exc.errno,
                        f"cannot open {path}: the open-files limit is reached and no segment file is "
                        "left to close (raise the limit, or lower kipling.log.open.files.max)",
                    ) from exc
                self._evict_oldest()
        self._lru[descriptor] = None
        self.opens += 1

    def _touch(self, descriptor: _Descriptor) -> None:
        self._lru.move_to_end(descriptor)

    def _close(self, descriptor: _Descriptor) -> None:
        """Close ``descriptor`` if it is open (idempotent: also the finalizer of a dropped file)."""
        fd = descriptor.fd
        if fd == _NOT_OPEN:
            return
        descriptor.fd = _NOT_OPEN
        del self._lru[descriptor]
        os.close(fd)

    def _evict_down_to(self, count: int) -> None:
        while len(self._lru) > max(count, 0):
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        oldest = next(iter(self._lru))
        self._close(oldest)
        self.evictions += 1


def _checked_capacity(capacity: int) -> int:
    if capacity < 1:
        raise ValueError(f"a file pool needs room for at least one descriptor, not {capacity}")
    return capacity


def _identity(fd: int) -> tuple[int, int]:
    """Which file a descriptor is: a name may meanwhile belong to another one (two segments of the
    same base renamed to the same ``.deleted`` name), and a reopen must not read that one."""
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


OPEN_FILES = FilePool()
"""The process's pool: every segment file and index opened without an explicit pool is in it."""


def size_process_pool(configured: int) -> int:
    """Set :data:`OPEN_FILES`' capacity from ``kipling.log.open.files.max`` and return it.

    0 (the default) takes half the process's open-files limit, as it stands when called (the
    broker raises the soft limit to the hard one first): the other half is for connections,
    sockets to other processes and files opened briefly (checkpoints, snapshots).
    """
    if configured > 0:
        capacity = configured
    else:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        capacity = _UNLIMITED_CAPACITY if soft == resource.RLIM_INFINITY else max(soft // 2, 1)
    OPEN_FILES.capacity = capacity
    return capacity


_UNLIMITED_CAPACITY = 1 << 20
"""What an unlimited open-files limit allows: the kernel's own default cap (fs.nr_open)."""


class PooledFile:
    """A file whose descriptor comes from a :class:`FilePool`: opened when used, closed when the
    pool needs room (or :meth:`release` is called), reopened by name on the next use."""

    __slots__ = (
        "__weakref__",
        "_closed",
        "_descriptor",
        "_finalizer",
        "_identity",
        "_pool",
        "_reopen_flags",
        "path",
    )

    def __init__(
        self, path: pathlib.Path, flags: int, *, mode: int = 0o644, pool: FilePool | None = None
    ) -> None:
        """Open ``path`` now with ``flags`` (``O_CREAT`` creates it now, never on a reopen), so a
        missing file or a bad permission is reported here rather than by a later read."""
        self.path = pathlib.Path(path)
        self._pool = OPEN_FILES if pool is None else pool
        self._reopen_flags = (flags & ~(os.O_CREAT | os.O_EXCL | os.O_TRUNC)) | os.O_CLOEXEC
        self._descriptor = _Descriptor()
        self._closed = False
        self._pool._open(self._descriptor, self.path, flags | os.O_CLOEXEC, mode)
        self._finalizer = weakref.finalize(self, self._pool._close, self._descriptor)
        self._identity = _identity(self._descriptor.fd)

    def fd(self) -> int:
        """The open descriptor, for one system call now: never keep it across another pool use."""
        descriptor = self._descriptor
        if descriptor.fd == _NOT_OPEN:
            if self._closed:
                raise ValueError(f"I/O on closed file {self.path}")
            self._pool._open(descriptor, self.path, self._reopen_flags, 0)
            if _identity(descriptor.fd) != self._identity:
                self._pool._close(descriptor)
                raise FileNotFoundError(
                    errno.ENOENT, f"{self.path} is another file now (this one was replaced meanwhile)"
                )
        else:
            self._pool._touch(descriptor)
        return descriptor.fd

    @property
    def identity(self) -> tuple[int, int]:
        """(device, inode) of the file first opened: whether a name still names it."""
        return self._identity

    @property
    def holds_descriptor(self) -> bool:
        return self._descriptor.fd != _NOT_OPEN

    def pread(self, length: int, position: int) -> bytes:
        return os.pread(self.fd(), length, position)

    def size(self) -> int:
        return os.fstat(self.fd()).st_size

    def release(self) -> None:
        """Close the descriptor now (it reopens when next used): the file is not expected to be used soon."""
        self._pool._close(self._descriptor)

    def rename(self, new_path: pathlib.Path) -> None:
        """Rename the file; an open descriptor stays valid and a reopen uses the new name."""
        new_path = pathlib.Path(new_path)
        os.replace(self.path, new_path)
        self.path = new_path

    def close(self) -> None:
        """Close for good: a later use raises ValueError. Closing twice is harmless."""
        self._closed = True
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"fd={self._descriptor.fd}"
        return f"PooledFile({self.path}, {state})"
