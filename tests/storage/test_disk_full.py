"""A full disk (ENOSPC) is not corruption: every write that finds no space is undone whole.

Each test makes one kind of write fail with ENOSPC (the index's ``pwrite``, the .log's write, a
checkpoint or snapshot file), checks that the log is exactly as before and still readable, then lets
the fault clear and checks that the same append simply succeeds.
"""

from __future__ import annotations

import builtins
import errno
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from storage import checkpoint, index, segment
from storage.checkpoint import LEADER_EPOCH_CHECKPOINT, write_atomically
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import KiplingStorageError, LogDirFullError, is_log_dir_full
from storage.index import OffsetIndex, TimeIndex
from storage.log import PartitionLog
from storage.log_manager import LogManager
from storage.producer_snapshot import write_snapshot
from storage.segment import LogSegment
from tests.storage.log_helpers import BASE_TIME, headers_of, make_batch

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=100, max_index_size=4096, file_delete_delay_ms=0)


class DiskFull:
    """Switchable ENOSPC for one function (or builtin) as one module sees it: a full file system."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
        self.full = False
        self.failures = 0
        real: Callable[..., Any] = getattr(module, name, None) or getattr(builtins, name)

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.full:
                self.failures += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, guarded, raising=False)  # a builtin is shadowed


class _FakeOs:
    """``os`` as one storage module sees it, with ``pwrite`` switchable to ENOSPC."""

    def __init__(self, fault: list[bool]) -> None:
        self._fault = fault

    def pwrite(self, fd: int, data: bytes, position: int) -> int:
        if self._fault[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.pwrite(fd, data, position)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


@pytest.fixture
def index_full(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Set ``[0] = True`` to make every index entry write fail with ENOSPC."""
    fault = [False]
    monkeypatch.setattr(index, "os", _FakeOs(fault))
    yield fault


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(BASE_TIME)


def open_log(tmp_path: pathlib.Path, clock: FakeClock, config: LogConfig = SMALL) -> PartitionLog:
    return PartitionLog.open(tmp_path / "topic-0", config, clock)


def read_all(log: PartitionLog) -> bytes:
    out, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result.slice is not None
        data = result.slice.read_bytes()
        out += data
        offset = headers_of(data)[-1].next_offset
    return out


def state(log: PartitionLog) -> tuple[object, ...]:
    """Everything an append may change, as files and offsets."""
    files = sorted((path.name, path.stat().st_size) for path in log.directory.iterdir())
    segments = [(s.base_offset, s.size, s.offset_index.entries, s.time_index.entries) for s in log.segments()]
    return log.log_end_offset, files, segments, log.leader_epoch_cache.entries(), read_all(log)


def fill(log: PartitionLog, batches: int, epoch: int = 0, value_size: int = 50) -> None:
    for i in range(batches):
        log.append_as_leader(make_batch(2, value_size, BASE_TIME + i), epoch)


# -- errors ------------------------------------------------------------------------------------------


def test_log_dir_full_is_a_storage_error_and_an_enospc_oserror() -> None:
    error = LogDirFullError("somewhere", OSError(errno.EDQUOT, "quota"))
    assert isinstance(error, KiplingStorageError)
    assert isinstance(error, OSError)
    assert error.errno == errno.EDQUOT
    assert "no space left" in str(error)
    assert is_log_dir_full(error)
    assert is_log_dir_full(OSError(errno.ENOSPC, "full"))
    assert not is_log_dir_full(OSError(errno.EIO, "bad disk"))


# -- indexes -----------------------------------------------------------------------------------------


def test_index_append_on_a_full_disk_adds_nothing_and_works_once_space_returns(
    tmp_path: pathlib.Path, index_full: list[bool]
) -> None:
    offsets = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=4096)
    times = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=4096)
    offsets.append(5, 100)
    times.maybe_append(BASE_TIME, 5)
    index_full[0] = True
    with pytest.raises(LogDirFullError):
        offsets.append(9, 200)
    with pytest.raises(LogDirFullError):
        times.maybe_append(BASE_TIME + 1, 9)
    assert (offsets.entries, offsets.last_offset, offsets.path.stat().st_size) == (1, 5, 8)
    assert (times.entries, times.last_entry, times.path.stat().st_size) == (1, (BASE_TIME, 5), 12)
    index_full[0] = False
    offsets.append(9, 200)
    times.maybe_append(BASE_TIME + 1, 9)
    offsets.close()
    times.close()
    assert OffsetIndex(offsets.path, 0, writable=False).lookup(10) == (9, 200)
    assert TimeIndex(times.path, 0, writable=False).entries == 2


def test_a_sparse_preallocated_index_is_read_without_mapping_and_cut_to_its_entries(
    tmp_path: pathlib.Path,
) -> None:
    """An older version's file: entries, then a hole up to its preallocated size (no blocks)."""
    path = tmp_path / "00000000000000000000.index"
    with open(path, "wb") as out:
        out.write(bytes.fromhex("0000000300000040"))
        out.truncate(10 * 1024 * 1024)
    opened = OffsetIndex(path, 0)
    assert opened.entries == 1
    assert path.stat().st_size == 8
    opened.append(7, 90)
    opened.close()
    assert path.read_bytes() == bytes.fromhex("00000003000000400000000700000" + "05a")


# -- segment and log appends -------------------------------------------------------------------------


def test_a_torn_log_write_is_cut_back_and_the_append_retried(
    tmp_path: pathlib.Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 3)
    before = state(log)
    real = LogSegment._write_all

    def half_then_full(self: LogSegment, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        real(self, view[: len(view) // 2])  # part of the batch reaches the file...
        raise OSError(errno.ENOSPC, "No space left on device")  # ...then the disk is full

    monkeypatch.setattr(LogSegment, "_write_all", half_then_full)
    with pytest.raises(LogDirFullError):
        fill(log, 1)
    assert state(log) == before
    monkeypatch.setattr(LogSegment, "_write_all", real)
    fill(log, 1)
    assert log.log_end_offset == before[0] + 2  # type: ignore[operator]
    log.close()
    reopened = open_log(tmp_path, clock)
    assert reopened.log_end_offset == log.log_end_offset
    reopened.close()


def test_an_index_entry_that_finds_no_space_undoes_the_whole_append(
    tmp_path: pathlib.Path, clock: FakeClock, index_full: list[bool]
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 3)  # past index.interval.bytes: the next batch gets an index entry
    before = state(log)
    index_full[0] = True
    for _ in range(3):
        with pytest.raises(LogDirFullError):
            fill(log, 1)
        assert state(log) == before
    index_full[0] = False
    fill(log, 5)
    assert log.log_end_offset == before[0] + 10  # type: ignore[operator]
    assert log.active_segment.offset_index.entries > before[2][-1][2]  # type: ignore[index]
    data = read_all(log)
    assert [h.base_offset for h in headers_of(data)] == list(range(0, log.log_end_offset, 2))
    log.close()
    reopened = open_log(tmp_path, clock)
    assert read_all(reopened) == data
    reopened.close()


def test_a_roll_whose_first_append_finds_no_space_is_undone(
    tmp_path: pathlib.Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, clock)
    while len(log.segments()) == 1:
        fill(log, 1)
    while log.active_segment.size + 200 < SMALL.segment_bytes:  # the next batch rolls
        fill(log, 1)
    before = state(log)
    disk = DiskFull(monkeypatch, segment.LogSegment, "_write_all")
    disk.full = True
    with pytest.raises(LogDirFullError):
        fill(log, 1, value_size=150)
    assert disk.failures == 1
    assert state(log) == before
    disk.full = False
    fill(log, 1, value_size=150)
    assert len(log.segments()) == len(before[2]) + 1  # type: ignore[arg-type]
    assert log.active_segment.base_offset == before[0]
    log.close()


def test_a_new_epoch_that_cannot_be_checkpointed_fails_the_append_before_any_data(
    tmp_path: pathlib.Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 2, epoch=1)
    before = state(log)
    checkpoint_text = (log.directory / LEADER_EPOCH_CHECKPOINT).read_text()
    disk = DiskFull(monkeypatch, checkpoint, "open")
    disk.full = True
    with pytest.raises(LogDirFullError):
        fill(log, 1, epoch=2)
    assert state(log) == before
    assert (log.directory / LEADER_EPOCH_CHECKPOINT).read_text() == checkpoint_text
    assert not list(log.directory.glob("*.tmp"))
    disk.full = False
    fill(log, 1, epoch=2)
    assert log.leader_epoch_cache.latest_epoch == 2
    log.close()


def test_an_epoch_assigned_for_an_append_that_failed_is_forgotten(
    tmp_path: pathlib.Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 2, epoch=1)
    disk = DiskFull(monkeypatch, segment.LogSegment, "_write_all")
    disk.full = True
    with pytest.raises(LogDirFullError):
        fill(log, 1, epoch=2)
    assert log.leader_epoch_cache.latest_epoch == 1
    disk.full = False
    log.close()
    reopened = open_log(tmp_path, clock)
    assert reopened.leader_epoch_cache.latest_epoch == 1
    reopened.close()


def test_a_follower_append_on_a_full_disk_is_undone_and_retried(
    tmp_path: pathlib.Path, clock: FakeClock, index_full: list[bool]
) -> None:
    leader = PartitionLog.open(tmp_path / "leader" / "topic-0", SMALL, clock)
    fill(leader, 6, epoch=3)
    follower = PartitionLog.open(tmp_path / "follower" / "topic-0", SMALL, clock)
    data = read_all(leader)
    index_full[0] = True
    with pytest.raises(LogDirFullError):
        follower.append_as_follower(data)
    assert follower.log_end_offset == follower.size_in_bytes == 0
    assert follower.leader_epoch_cache.entries() == []
    index_full[0] = False
    follower.append_as_follower(data)
    assert read_all(follower) == data
    leader.close()
    follower.close()


# -- files written atomically ------------------------------------------------------------------------


def test_a_checkpoint_or_snapshot_that_finds_no_space_leaves_the_old_file_and_no_tmp(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "recovery-point-offset-checkpoint"
    write_atomically(target, "old\n")
    disk = DiskFull(monkeypatch, os, "fsync")  # delayed allocation reports a full disk this late
    disk.full = True
    with pytest.raises(LogDirFullError):
        write_atomically(target, "new\n")
    with pytest.raises(LogDirFullError):
        write_snapshot(tmp_path / "00000000000000000010.snapshot", [])
    disk.full = False
    assert target.read_text() == "old\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [target.name]


# -- startup, recovery and shutdown ------------------------------------------------------------------


def test_recovery_on_a_full_disk_keeps_the_log_and_rolls_at_the_next_append(
    tmp_path: pathlib.Path, clock: FakeClock, index_full: list[bool]
) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 5)
    data, end = read_all(log), log.log_end_offset
    log.flush()
    for path in log.directory.glob("*.index"):  # the indexes must be rebuilt from the .log
        path.unlink()
    index_full[0] = True
    reopened = PartitionLog.open(log.directory, SMALL, clock, recovery_point=0)
    assert (reopened.log_end_offset, read_all(reopened)) == (end, data)
    assert reopened.offset_for_timestamp(BASE_TIME + 3) is not None
    index_full[0] = False
    fill(reopened, 1)  # the segment with an incomplete index counts as full: a new one starts
    assert reopened.active_segment.base_offset == end
    reopened.close()
    log.close()


def test_log_manager_shuts_down_and_starts_again_while_checkpoints_find_no_space(
    tmp_path: pathlib.Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([tmp_path], SMALL, clock)
    log = manager.get_or_create_log("topic", 0, None)
    fill(log, 4)
    end = log.log_end_offset
    disk = DiskFull(monkeypatch, checkpoint, "open")
    disk.full = True
    manager.checkpoint_recovery_points()  # a periodic task: logged, not raised
    manager.shutdown()
    assert disk.failures >= 3  # every checkpoint file was refused
    assert (tmp_path / checkpoint.CLEAN_SHUTDOWN_MARKER).exists()
    assert not list(tmp_path.glob("*.tmp"))
    disk.full = False
    restarted = LogManager([tmp_path], SMALL, clock)
    reopened = restarted.get_log("topic", 0)
    assert reopened is not None and reopened.log_end_offset == end
    restarted.shutdown()


def test_a_failed_first_append_keeps_the_epoch_a_new_leader_recorded(
    tmp_path: pathlib.Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new leader records its epoch at the log end before any append (Kafka's makeLeader); its
    first append failing on a full disk must not take that entry away."""
    log = open_log(tmp_path, clock)
    fill(log, 2, epoch=1)
    log.leader_epoch_cache.assign(2, log.log_end_offset)
    entries = log.leader_epoch_cache.entries()
    disk = DiskFull(monkeypatch, segment.LogSegment, "_write_all")
    disk.full = True
    with pytest.raises(LogDirFullError):
        fill(log, 1, epoch=2)
    assert log.leader_epoch_cache.entries() == entries
    with pytest.raises(LogDirFullError):
        fill(log, 1, epoch=3)  # an epoch the append itself assigned is still forgotten
    assert log.leader_epoch_cache.entries() == entries
    disk.full = False
    log.close()
