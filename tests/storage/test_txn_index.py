"""The aborted transaction index (storage.txn_index) and how segments and logs carry it."""

from __future__ import annotations

import gc
import os
import pathlib
import struct

import pytest

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import CorruptIndexError
from storage.log import PartitionLog
from storage.producer_snapshot import list_snapshot_offsets
from storage.producer_state import ProducerStateManager
from storage.segment import LogSegment
from storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from tests.storage.log_helpers import BASE_TIME, make_batch


def index_at(tmp_path: pathlib.Path, base: int = 0) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{base:020d}.txnindex", base)


def test_entry_layout_is_kafkas_34_bytes_big_endian(tmp_path: pathlib.Path) -> None:
    index = index_at(tmp_path)
    index.append(AbortedTxn(producer_id=7, first_offset=3, last_offset=10, last_stable_offset=11))
    index.append(AbortedTxn(-2, 2**40, 2**40 + 5, 2**40 + 1))
    index.flush()
    data = index.path.read_bytes()
    assert ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 7, 3, 10, 11) + struct.pack(
        ">hqqqq", 0, -2, 2**40, 2**40 + 5, 2**40 + 1
    )
    index.close()
    reopened = index_at(tmp_path)
    assert reopened.all_entries() == [AbortedTxn(7, 3, 10, 11), AbortedTxn(-2, 2**40, 2**40 + 5, 2**40 + 1)]
    reopened.sanity_check()


def test_file_is_created_with_the_first_entry(tmp_path: pathlib.Path) -> None:
    index = index_at(tmp_path)
    assert not index.exists and not index.path.exists()
    index.flush()
    index.truncate_to(0)
    index.close()
    assert not index.path.exists()
    index = index_at(tmp_path)
    index.append(AbortedTxn(1, 0, 4, 5))
    assert index.path.exists() and index.path.stat().st_size == ENTRY_SIZE


def test_last_offsets_must_increase(tmp_path: pathlib.Path) -> None:
    index = index_at(tmp_path)
    index.append(AbortedTxn(1, 0, 4, 5))
    with pytest.raises(ValueError, match="strictly increase"):
        index.append(AbortedTxn(2, 1, 4, 5))
    with pytest.raises(ValueError, match="strictly increase"):
        index.append(AbortedTxn(2, 1, 3, 5))
    assert index.entries == 1 and index.path.stat().st_size == ENTRY_SIZE


def test_truncate_drops_entries_at_or_after_the_offset(tmp_path: pathlib.Path) -> None:
    index = index_at(tmp_path)
    for last in (5, 9, 14):
        index.append(AbortedTxn(last, last - 2, last, last + 1))
    index.truncate_to(10)
    assert [e.last_offset for e in index.all_entries()] == [5, 9]
    index.truncate_to(9)
    assert [e.last_offset for e in index.all_entries()] == [5]
    assert index.path.stat().st_size == ENTRY_SIZE
    index.append(AbortedTxn(3, 6, 7, 8))  # appends go after the cut
    assert index.path.stat().st_size == 2 * ENTRY_SIZE


def test_collect_overlapping_entries_and_completion(tmp_path: pathlib.Path) -> None:
    index = index_at(tmp_path)
    index.append(AbortedTxn(1, 0, 5, 3))  # another txn opened at 3 was still running
    index.append(AbortedTxn(2, 3, 9, 10))
    index.append(AbortedTxn(3, 12, 20, 21))
    found = index.collect_aborted(6, 30)
    assert found.aborted == [AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 20, 21)]
    assert not found.is_complete  # no entry's LSO reaches 30: a later segment may hold more
    found = index.collect_aborted(6, 12)
    assert found.aborted == [AbortedTxn(2, 3, 9, 10)]
    assert found.is_complete  # the entry at 20 has LSO 21 >= 12: nothing later starts below 12
    found = index.collect_aborted(0, 4)
    assert found.aborted == [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10)]
    assert found.is_complete  # LSO 10 >= 4
    found = index.collect_aborted(0, 3)
    assert found.aborted == [AbortedTxn(1, 0, 5, 3)] and found.is_complete


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (struct.pack(">hqqqq", 0, 1, 0, 5, 6) + b"\0" * 3, "multiple of 34"),
        (struct.pack(">hqqqq", 1, 1, 0, 5, 6), "version"),
        (struct.pack(">hqqqq", 0, 1, 0, 5, 6) + struct.pack(">hqqqq", 0, 1, 0, 5, 6), "go back"),
        (struct.pack(">hqqqq", 0, 1, 6, 5, 6), "does not end in the segment"),
        (struct.pack(">hqqqq", 0, 1, 0, 99, 100), "past the segment"),
    ],
)
def test_sanity_check_reports_damage(tmp_path: pathlib.Path, payload: bytes, reason: str) -> None:
    (tmp_path / f"{0:020d}.txnindex").write_bytes(payload)
    with pytest.raises(CorruptIndexError, match=reason):
        index_at(tmp_path).sanity_check(next_offset=50)


def test_rename_and_delete_follow_the_file(tmp_path: pathlib.Path) -> None:
    index = index_at(tmp_path)
    index.rename(tmp_path / "x.txnindex.deleted")  # no file yet: only the name changes
    assert not (tmp_path / "x.txnindex.deleted").exists()
    index.append(AbortedTxn(1, 0, 1, 2))
    assert (tmp_path / "x.txnindex.deleted").exists()
    index.rename(tmp_path / "y.txnindex")
    assert (tmp_path / "y.txnindex").exists() and not (tmp_path / "x.txnindex.deleted").exists()
    index.delete()
    assert list(tmp_path.iterdir()) == []


# -- segments and logs -------------------------------------------------------------------------------


def config(file_delete_delay_ms: int = 0) -> LogConfig:
    return LogConfig(segment_bytes=10_000_000, file_delete_delay_ms=file_delete_delay_ms)


def open_log(
    tmp_path: pathlib.Path, *, clean_shutdown: bool = False, recovery_point: int = 0
) -> PartitionLog:
    return PartitionLog.open(
        tmp_path / "t-0",
        config(),
        FakeClock(BASE_TIME),
        clean_shutdown=clean_shutdown,
        recovery_point=recovery_point,
    )


def fill(log: PartitionLog, batches: int, epoch: int = 0) -> None:
    for _ in range(batches):
        log.append_as_leader(make_batch(1), epoch)


def txn_files(log: PartitionLog) -> list[str]:
    return sorted(p.name for p in log.directory.iterdir() if ".txnindex" in p.name)


def test_segment_truncation_and_recovery_cut_the_index(tmp_path: pathlib.Path) -> None:
    segment = LogSegment(tmp_path, 0, config(), created_ms=BASE_TIME)
    for offset in range(10):
        segment.append(make_batch(1, base_offset=offset), [(offset, BASE_TIME, len(make_batch(1)))])
    segment.txn_index.append(AbortedTxn(1, 0, 3, 4))
    segment.txn_index.append(AbortedTxn(2, 1, 7, 8))
    segment.truncate_to(7, BASE_TIME)
    assert segment.txn_index.all_entries() == [AbortedTxn(1, 0, 3, 4)]
    with open(segment.log_path, "r+b") as f:  # a torn tail: recovery cuts batches 3.. away
        f.truncate(3 * len(make_batch(1)) + 5)
    segment.recover()
    assert segment.next_offset == 3 and segment.txn_index.entries == 0
    segment.close()


def test_log_routes_entries_to_the_marker_segment_and_collects_across(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    log.append_aborted_txn(AbortedTxn(1, 2, 9, 3))  # txn 2 opened at 3 still running
    log.roll()
    fill(log, 10)
    log.append_aborted_txn(AbortedTxn(2, 3, 14, 20))
    log.roll()
    fill(log, 10)
    log.append_aborted_txn(AbortedTxn(3, 21, 25, 26))
    assert txn_files(log) == [f"{b:020d}.txnindex" for b in (0, 10, 20)]
    assert log.segment_for(10).txn_index.all_entries() == [AbortedTxn(2, 3, 14, 20)]
    # from 5: segment 0's entry has LSO 3 < 12, go on; segment 10's has 20 >= 12: complete
    assert log.collect_aborted_transactions(5, 12) == [AbortedTxn(1, 2, 9, 3), AbortedTxn(2, 3, 14, 20)]
    assert log.collect_aborted_transactions(15, 30) == [AbortedTxn(3, 21, 25, 26)]
    assert log.collect_aborted_transactions(26, 30) == []
    with pytest.raises(ValueError):
        log.append_aborted_txn(AbortedTxn(4, 0, 30, 31))  # beyond the log end
    log.close()


def test_log_truncation_retention_and_full_truncation_keep_indexes_consistent(
    tmp_path: pathlib.Path,
) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    log.append_aborted_txn(AbortedTxn(1, 0, 5, 6))
    log.roll()
    fill(log, 10)
    log.append_aborted_txn(AbortedTxn(1, 10, 12, 13))
    log.append_aborted_txn(AbortedTxn(1, 14, 16, 17))
    log.roll()
    fill(log, 10)
    log.append_aborted_txn(AbortedTxn(1, 21, 22, 23))
    log.truncate_to(15)
    assert txn_files(log) == [f"{0:020d}.txnindex", f"{10:020d}.txnindex"]
    assert log.segment_for(10).txn_index.all_entries() == [AbortedTxn(1, 10, 12, 13)]
    log.update_high_watermark(15)
    log.maybe_increment_log_start_offset(12)
    log.delete_old_segments()
    assert txn_files(log) == [f"{10:020d}.txnindex"]
    log.truncate_fully_and_start_at(100)
    assert txn_files(log) == []
    assert log.collect_aborted_transactions(100, 200) == []
    log.close()


def test_delayed_deletion_renames_the_index(tmp_path: pathlib.Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(file_delete_delay_ms=60_000), FakeClock(BASE_TIME))
    fill(log, 5)
    log.append_aborted_txn(AbortedTxn(1, 0, 4, 5))
    log.roll()
    fill(log, 1)
    log.update_high_watermark(6)
    log.maybe_increment_log_start_offset(5)
    log.delete_old_segments()
    assert txn_files(log) == [f"{0:020d}.txnindex.deleted"]
    log.close()
    assert txn_files(log) == []


def test_reopen_keeps_entries_and_flush_makes_them_durable(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    log.append_aborted_txn(AbortedTxn(1, 0, 4, 5))
    log.roll()
    fill(log, 5)
    log.close()
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=10)
    assert log.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 4, 5)]
    log.close()


def test_corrupt_index_is_dropped_with_later_snapshots(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    log.roll()
    fill(log, 5)
    log.append_aborted_txn(AbortedTxn(1, 5, 9, 10))
    log.close()
    state = ProducerStateManager(tmp_path / "t-0")
    for offset in (0, 5, 10):
        state.update_map_end_offset(offset)
        state.take_snapshot(offset)
    assert list_snapshot_offsets(tmp_path / "t-0") == [0, 5, 10]
    path = tmp_path / "t-0" / f"{5:020d}.txnindex"
    path.write_bytes(path.read_bytes() + b"\x01")
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=10)
    assert not path.exists()
    assert log.collect_aborted_transactions(0, 10) == []
    assert list_snapshot_offsets(tmp_path / "t-0") == [0, 5]  # the replay starts at or before 5
    log.close()


def test_orphan_and_stale_index_files_are_removed(tmp_path: pathlib.Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / f"{50:020d}.txnindex").write_bytes(struct.pack(">hqqqq", 0, 1, 50, 51, 52))
    log = open_log(tmp_path)
    assert txn_files(log) == []
    fill(log, 3)
    (directory / f"{3:020d}.txnindex").write_bytes(struct.pack(">hqqqq", 0, 1, 3, 4, 5))  # stale
    log.roll()
    assert log.segment_for(3).txn_index.entries == 0 and txn_files(log) == []
    log.close()


def test_a_transaction_index_dropped_without_close_releases_its_descriptor(tmp_path: pathlib.Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for base in range(200):
        index = TransactionIndex(tmp_path / f"{base:020d}.txnindex", base)
        index.append(
            AbortedTxn(producer_id=7, first_offset=base, last_offset=base + 1, last_stable_offset=base + 2)
        )
    del index
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before + 2
