"""The process's pool of segment file descriptors: an LRU that caps them, files that reopen by name.

Unit tests of :mod:`storage.file_pool`, then partition logs sharing a pool far smaller than their
files: appends, reads whose slices are read after every other read (a fetch response), rolls,
truncation, retention's renames and a restart, all with at most ``capacity`` descriptors open.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import pathlib
import resource
from collections.abc import Iterator

import pytest

from storage import file_pool
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import OutOfDescriptorsError
from storage.file_pool import OPEN_FILES, FilePool, PooledFile, size_process_pool
from storage.log import PartitionLog
from tests.storage.log_helpers import BASE_TIME, headers_of, make_batch

RW_CREATE = os.O_RDWR | os.O_CREAT


def open_descriptors_into(directory: pathlib.Path) -> int:
    """How many descriptors of this process point at files under ``directory``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if pathlib.Path(os.readlink(f"/proc/self/fd/{fd}")).is_relative_to(directory):
                count += 1
    return count


def files(tmp_path: pathlib.Path, pool: FilePool, n: int) -> list[PooledFile]:
    out = []
    for i in range(n):
        f = PooledFile(tmp_path / f"f{i}", RW_CREATE, pool=pool)
        os.pwrite(f.fd(), f"file {i}".encode(), 0)
        out.append(f)
    return out


def test_the_pool_keeps_at_most_capacity_descriptors_and_reopens_on_use(tmp_path: pathlib.Path) -> None:
    pool = FilePool(3)
    opened = files(tmp_path, pool, 10)
    assert pool.open_count == 3 == open_descriptors_into(tmp_path)
    assert [f.holds_descriptor for f in opened] == [False] * 7 + [True] * 3
    assert [f.pread(16, 0) for f in opened] == [f"file {i}".encode() for i in range(10)]
    assert pool.open_count == 3 == open_descriptors_into(tmp_path)
    assert (pool.opens, pool.evictions) == (20, 17)
    for f in opened:
        f.close()
    assert pool.open_count == 0 == open_descriptors_into(tmp_path)


def test_the_least_recently_used_descriptor_goes_first(tmp_path: pathlib.Path) -> None:
    pool = FilePool(2)
    a, b = files(tmp_path, pool, 2)
    a.fd()  # a is now the most recently used: b goes
    (c,) = (PooledFile(tmp_path / "c", RW_CREATE, pool=pool),)
    assert (a.holds_descriptor, b.holds_descriptor, c.holds_descriptor) == (True, False, True)
    pool.capacity = 1
    assert (a.holds_descriptor, c.holds_descriptor) == (False, True)
    with pytest.raises(ValueError, match="at least one"):
        pool.capacity = 0


def test_a_renamed_file_reopens_under_its_new_name(tmp_path: pathlib.Path) -> None:
    pool = FilePool(1)
    (f,) = files(tmp_path, pool, 1)
    f.rename(tmp_path / "f0.deleted")
    f.release()
    assert f.pread(6, 0) == b"file 0"
    assert f.path == tmp_path / "f0.deleted" and not (tmp_path / "f0").exists()


def test_a_deleted_file_is_not_recreated_by_a_reopen(tmp_path: pathlib.Path) -> None:
    pool = FilePool(1)
    (f,) = files(tmp_path, pool, 1)
    f.release()
    f.path.unlink()
    with pytest.raises(FileNotFoundError):
        f.fd()
    assert not f.path.exists() and pool.open_count == 0


def test_a_closed_file_refuses_use_and_closing_twice_is_harmless(tmp_path: pathlib.Path) -> None:
    pool = FilePool(4)
    (f,) = files(tmp_path, pool, 1)
    f.close()
    f.close()
    assert f.closed and pool.open_count == 0
    with pytest.raises(ValueError, match="closed file"):
        f.pread(1, 0)


def test_a_file_dropped_without_close_gives_its_descriptor_back(tmp_path: pathlib.Path) -> None:
    pool = FilePool(4)
    opened = files(tmp_path, pool, 2)
    del opened
    gc.collect()
    assert pool.open_count == 0 == open_descriptors_into(tmp_path)


def test_a_full_descriptor_table_closes_pooled_files_instead_of_failing(tmp_path: pathlib.Path) -> None:
    """The pool's capacity is a target; when the process limit is reached first (EMFILE), the pool
    closes its oldest descriptors and the open goes through."""
    pool = FilePool(1000)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 4, hard))
    try:
        opened = files(tmp_path, pool, 12)
        assert 1 <= pool.open_count <= 6  # the limit counted listdir's own descriptor too
        assert pool.evictions >= 6
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [f.pread(16, 0) for f in opened] == [f"file {i}".encode() for i in range(12)]


def test_the_process_pool_takes_the_configured_size_or_half_the_open_files_limit() -> None:
    before = OPEN_FILES.capacity
    try:
        assert size_process_pool(123) == 123 == OPEN_FILES.capacity
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert size_process_pool(0) == soft // 2 == OPEN_FILES.capacity
    finally:
        OPEN_FILES.capacity = before


# -- partition logs sharing a small pool ------------------------------------------------------------

SMALL_SEGMENTS = LogConfig(segment_bytes=1024, index_interval_bytes=256)
CAPACITY = 8


@pytest.fixture
def small_pool() -> Iterator[FilePool]:
    """The process pool shrunk to a handful of descriptors (segments use the process pool)."""
    before = file_pool.OPEN_FILES.capacity
    file_pool.OPEN_FILES.capacity = CAPACITY
    try:
        yield file_pool.OPEN_FILES
    finally:
        file_pool.OPEN_FILES.capacity = before


def test_many_partitions_work_within_a_few_descriptors(tmp_path: pathlib.Path, small_pool: FilePool) -> None:
    """60 partitions of several segments each (about 600 files) under a pool of 8: every operation
    reopens what it needs, and no more than 8 of their descriptors are ever open."""
    clock = FakeClock(BASE_TIME)
    logs = [PartitionLog.open(tmp_path / f"t-{p}", SMALL_SEGMENTS, clock) for p in range(60)]
    for round_ in range(12):
        for p, log in enumerate(logs):
            log.append_as_leader(make_batch(2, 40 + p, BASE_TIME + round_), 0)  # sizes tell partitions apart
        assert open_descriptors_into(tmp_path) <= CAPACITY
    assert all(len(log.segments()) > 1 for log in logs)
    # a fetch response: every partition's slice is taken first and read only once all are taken
    slices = [log.read(0, 1 << 20).slice for log in logs]
    deferred = [s.read_bytes() if s else b"" for s in slices]
    at_once = [log.read(0, 1 << 20).slice.read_bytes() for log in logs]  # type: ignore[union-attr]
    assert deferred == at_once
    sizes = [{h.batch_length for h in headers_of(data)} for data in deferred]
    assert all(len(s) == 1 for s in sizes) and len({min(s) for s in sizes}) == len(logs)
    for log in logs:
        log.truncate_to(10)  # back into an inactive segment, which becomes active again
        log.append_as_leader(make_batch(2, 60, BASE_TIME + 99), 1)
        log.flush()
    assert open_descriptors_into(tmp_path) <= CAPACITY
    for log in logs:
        log.close()
    reopened = [PartitionLog.open(tmp_path / f"t-{p}", SMALL_SEGMENTS, clock) for p in range(60)]
    assert open_descriptors_into(tmp_path) <= CAPACITY
    for log in reopened:
        data = b""
        offset = 0
        while (result := log.read(offset, 1 << 20)).slice is not None:
            data += result.slice.read_bytes()
            offset = headers_of(data)[-1].next_offset
        assert [h.base_offset for h in headers_of(data)] == [*range(0, 10, 2), 10]
        log.close()
    assert open_descriptors_into(tmp_path) == 0


def test_a_name_taken_by_another_file_is_not_reopened(tmp_path: pathlib.Path) -> None:
    """Two segments of the same base renamed to the same .deleted name within file.delete.delay.ms:
    the first one's reopen must not read the second one's bytes."""
    pool = FilePool(1)
    first, second = (PooledFile(tmp_path / f"{n}.log", RW_CREATE, pool=pool) for n in ("a", "b"))
    os.pwrite(first.fd(), b"first", 0)
    os.pwrite(second.fd(), b"second", 0)
    first.rename(tmp_path / "x.log.deleted")
    second.rename(tmp_path / "x.log.deleted")  # replaces the first one's file under that name
    assert not first.holds_descriptor
    with pytest.raises(FileNotFoundError, match="is another file now"):
        first.pread(5, 0)
    assert second.pread(6, 0) == b"second" and pool.open_count == 1


def test_no_descriptor_left_is_a_shortage_not_a_failed_disk(tmp_path: pathlib.Path) -> None:
    """With the process limit reached and nothing of the pool's own to close, the open fails with
    OutOfDescriptorsError (an OSError carrying EMFILE), which the broker answers without taking the
    partition offline."""
    pool = FilePool(4)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 2, hard))
        with contextlib.suppress(OSError):
            while True:
                held.append(os.open(tmp_path, os.O_RDONLY))
        with pytest.raises(OutOfDescriptorsError, match="open-files limit is reached") as failed:
            PooledFile(tmp_path / "f", RW_CREATE, pool=pool)
        assert failed.value.errno == errno.EMFILE
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
