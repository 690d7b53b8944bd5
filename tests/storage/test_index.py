"""OffsetIndex and TimeIndex: Kafka's entry formats, lookups, truncation, crash tails and corruption."""

from __future__ import annotations

import gc
import itertools
import os
import pathlib
import struct
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.errors import CorruptIndexError, StorageError
from storage.index import OffsetIndex, TimeIndex

BASE = 1000


def offset_index(tmp_path: pathlib.Path, max_size: int = 4096, base: int = BASE) -> OffsetIndex:
    return OffsetIndex(tmp_path / f"{base:020d}.index", base, max_index_size=max_size)


def time_index(tmp_path: pathlib.Path, max_size: int = 4096, base: int = BASE) -> TimeIndex:
    return TimeIndex(tmp_path / f"{base:020d}.timeindex", base, max_index_size=max_size)


def fill(index: OffsetIndex, pairs: list[tuple[int, int]]) -> None:
    for offset, position in pairs:
        index.append(offset, position)


# -- offset index: format and basic operations -------------------------------------------------


def test_new_offset_index_is_empty_and_capped_at_a_multiple_of_8(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path, max_size=1003)
    assert index.path.stat().st_size == 0  # nothing preallocated: a full disk can refuse nothing later
    assert index.max_entries == 125
    assert index.entries == 0
    assert index.last_offset == BASE
    assert index.lookup(BASE + 50) == (BASE, 0)
    index.close()


def test_entries_are_big_endian_relative_offset_and_position(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    index.append(BASE + 3, 4100)
    index.append(BASE + 70000, 9000)
    index.close()
    raw = index.path.read_bytes()
    assert raw == struct.pack(">iiii", 3, 4100, 70000, 9000)


def test_lookup_returns_largest_entry_at_or_below_target(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    fill(index, [(BASE + 10, 100), (BASE + 20, 200), (BASE + 30, 300)])
    assert index.lookup(BASE + 9) == (BASE, 0)
    assert index.lookup(BASE + 10) == (BASE + 10, 100)
    assert index.lookup(BASE + 25) == (BASE + 20, 200)
    assert index.lookup(BASE + 10**6) == (BASE + 30, 300)
    assert index.lookup(0) == (BASE, 0)
    assert index.entry(1) == (BASE + 20, 200)
    assert index.last_offset == BASE + 30
    with pytest.raises(IndexError):
        index.entry(3)


def test_append_rejects_non_increasing_and_out_of_range_offsets(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    index.append(BASE + 5, 10)
    with pytest.raises(ValueError):
        index.append(BASE + 5, 20)
    with pytest.raises(ValueError):
        index.append(BASE + 4, 20)
    with pytest.raises(ValueError):
        index.append(BASE + 2**31, 20)
    with pytest.raises(ValueError):
        index.append(BASE + 6, 2**31)
    with pytest.raises(ValueError):
        index.append(BASE + 6, -1)
    assert index.entries == 1


def test_full_index_refuses_appends(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path, max_size=24)
    fill(index, [(BASE + 1, 1), (BASE + 2, 2), (BASE + 3, 3)])
    assert index.is_full
    with pytest.raises(ValueError):
        index.append(BASE + 4, 4)


def test_truncate_to_drops_entries_at_or_above_offset(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    fill(index, [(BASE + 10, 100), (BASE + 20, 200), (BASE + 30, 300)])
    index.truncate_to(BASE + 25)
    assert index.entries == 2
    assert index.last_offset == BASE + 20
    index.truncate_to(BASE + 20)
    assert index.entries == 1
    assert index.lookup(BASE + 25) == (BASE + 10, 100)
    index.truncate_to(BASE + 10**6)
    assert index.entries == 1
    index.append(BASE + 11, 110)  # appends resume after the cut
    index.truncate()
    assert index.entries == 0
    assert index.last_offset == BASE
    assert index.lookup(BASE + 30) == (BASE, 0)


def test_close_trims_and_reopen_restores_entries(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    fill(index, [(BASE + 10, 100), (BASE + 20, 200)])
    index.close()
    assert index.path.stat().st_size == 16
    readonly = OffsetIndex(index.path, BASE, writable=False)
    assert readonly.entries == 2
    assert readonly.lookup(BASE + 15) == (BASE + 10, 100)
    with pytest.raises(StorageError):
        readonly.append(BASE + 30, 300)
    readonly.close()
    assert index.path.stat().st_size == 16
    reopened = offset_index(tmp_path)
    assert reopened.entries == 2
    assert reopened.path.stat().st_size == 16  # never preallocated
    assert reopened.max_entries == 4096 // 8
    reopened.append(BASE + 30, 300)
    assert reopened.last_offset == BASE + 30
    reopened.close()


def test_trim_to_valid_size_and_reopen_empty(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    index.trim_to_valid_size()
    assert index.path.stat().st_size == 0
    assert index.is_full
    index.resize(80)
    index.append(BASE + 1, 1)
    index.close()
    reopened = OffsetIndex(index.path, BASE, writable=False)
    assert reopened.entries == 1
    reopened.sanity_check()


def test_resize_cannot_drop_entries(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    fill(index, [(BASE + 1, 1), (BASE + 2, 2)])
    with pytest.raises(ValueError):
        index.resize(8)
    index.resize(23)
    assert index.max_entries == 2
    assert index.is_full


def test_crash_leaves_a_zero_tail_that_is_not_read_as_entries(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    fill(index, [(BASE + 10, 100), (BASE + 20, 200), (BASE + 35, 300)])
    index.flush()  # simulate a crash: never closed, so never trimmed
    reopened = offset_index(tmp_path)
    assert reopened.entries == 3
    assert reopened.last_offset == BASE + 35
    reopened.sanity_check()
    index.close()


def test_crash_with_first_entry_at_base_offset(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    fill(index, [(BASE, 0), (BASE + 1, 50)])
    index.flush()
    reopened = offset_index(tmp_path)
    assert reopened.entries == 2
    assert reopened.entry(0) == (BASE, 0)


def test_all_zero_preallocated_file_has_no_entries(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(bytes(4096))
    index = OffsetIndex(path, BASE)
    assert index.entries == 0
    index.sanity_check()


def test_truncation_zeroes_dropped_entries_so_a_crash_cannot_resurrect_them(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    fill(index, [(BASE + 10, 100), (BASE + 20, 200), (BASE + 30, 300)])
    index.truncate_to(BASE + 15)
    index.flush()
    reopened = offset_index(tmp_path)
    assert reopened.entries == 1
    assert reopened.last_offset == BASE + 10


def test_odd_sized_file_fails_sanity_check(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x01\x02")
    index = OffsetIndex(path, BASE, writable=False)
    assert index.entries == 1
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    writable = OffsetIndex(path, BASE)  # preallocating must not hide the damage
    with pytest.raises(CorruptIndexError):
        writable.sanity_check()


@pytest.mark.parametrize(
    "entries",
    [
        [(5, 10), (3, 20)],  # offsets go backwards
        [(5, 10), (5, 20)],  # duplicate offset
        [(5, 10), (6, 5)],  # positions go backwards
        [(-1, 0)],  # negative relative offset
    ],
)
def test_out_of_order_entries_fail_sanity_check(
    tmp_path: pathlib.Path, entries: list[tuple[int, int]]
) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(b"".join(struct.pack(">ii", *entry) for entry in entries))
    index = OffsetIndex(path, BASE, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()


def test_rename_and_delete(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    index.append(BASE + 1, 1)
    target = tmp_path / "00000000000000001000.index.deleted"
    index.rename(target)
    assert target.exists() and not (tmp_path / "00000000000000001000.index").exists()
    index.append(BASE + 2, 2)
    assert index.lookup(BASE + 2) == (BASE + 2, 2)
    index.delete()
    assert not target.exists()


def test_closed_index_refuses_writes_and_close_is_idempotent(tmp_path: pathlib.Path) -> None:
    index = offset_index(tmp_path)
    index.close()
    index.close()
    with pytest.raises(StorageError):
        index.append(BASE + 1, 1)


def test_read_only_index_of_missing_file_raises(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError):
        OffsetIndex(tmp_path / "missing.index", 0, writable=False)


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=1, max_value=1000), max_size=200),
    targets=st.lists(st.integers(min_value=BASE - 10, max_value=BASE + 200_000), max_size=30),
    crash=st.booleans(),
)
def test_lookup_agrees_with_a_linear_scan(gaps: list[int], targets: list[int], crash: bool) -> None:
    with tempfile.TemporaryDirectory() as directory:
        index = offset_index(pathlib.Path(directory))
        offsets = [BASE + sum(gaps[: i + 1]) for i in range(len(gaps))]
        pairs = [(offset, 7 * i) for i, offset in enumerate(offsets)]
        fill(index, pairs)
        if crash:
            index.flush()
        else:
            index.close()
        reopened = offset_index(pathlib.Path(directory))
        assert reopened.entries == len(pairs)
        reopened.sanity_check()
        for target in targets + offsets:
            expected = max((p for p in pairs if p[0] <= target), default=(BASE, 0))
            assert reopened.lookup(target) == expected
        if targets:
            cut = targets[0]
            reopened.truncate_to(cut)
            assert [reopened.entry(i) for i in range(reopened.entries)] == [p for p in pairs if p[0] < cut]
        reopened.close()
        index.close()


# -- time index ----------------------------------------------------------------------------------


def test_time_index_preallocation_and_entry_format(tmp_path: pathlib.Path) -> None:
    index = time_index(tmp_path, max_size=10485760)
    assert index.max_entries == 873813
    assert index.last_entry == (-1, BASE)
    index.maybe_append(1_700_000_000_000, BASE + 4)
    index.close()
    assert index.path.read_bytes() == struct.pack(">qi", 1_700_000_000_000, 4)


def test_time_index_appends_only_larger_timestamps(tmp_path: pathlib.Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(-1, BASE)  # no timestamp: nothing to index
    assert index.entries == 0
    index.maybe_append(100, BASE + 1)
    index.maybe_append(100, BASE + 2)  # same timestamp: skipped
    index.maybe_append(90, BASE + 3)  # smaller: skipped
    index.maybe_append(150, BASE + 3)
    assert [index.entry(i) for i in range(index.entries)] == [(100, BASE + 1), (150, BASE + 3)]
    assert index.last_entry == (150, BASE + 3)
    with pytest.raises(ValueError):
        index.maybe_append(200, BASE + 2)  # offsets never go backwards
    index.maybe_append(200, BASE + 3)  # the same offset is allowed
    assert index.last_entry == (200, BASE + 3)


def test_time_index_lookup(tmp_path: pathlib.Path) -> None:
    index = time_index(tmp_path)
    for timestamp, offset in [(100, BASE + 1), (200, BASE + 5), (300, BASE + 9)]:
        index.maybe_append(timestamp, offset)
    assert index.lookup(99) == (-1, BASE)
    assert index.lookup(100) == (100, BASE + 1)
    assert index.lookup(250) == (200, BASE + 5)
    assert index.lookup(10**15) == (300, BASE + 9)


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path: pathlib.Path) -> None:
    index = time_index(tmp_path, max_size=36)
    index.maybe_append(10, BASE + 1)
    index.maybe_append(20, BASE + 2)
    assert index.is_full
    with pytest.raises(ValueError):
        index.maybe_append(30, BASE + 3)
    index.maybe_append(30, BASE + 3, skip_full_check=True)
    assert index.entries == 3
    index.maybe_append(40, BASE + 4, skip_full_check=True)  # even past the file: it grows
    assert index.last_entry == (40, BASE + 4)
    index.close()
    assert index.path.stat().st_size == 48


def test_time_index_truncate_to(tmp_path: pathlib.Path) -> None:
    index = time_index(tmp_path)
    for timestamp, offset in [(100, BASE + 1), (200, BASE + 5), (300, BASE + 5), (400, BASE + 9)]:
        index.maybe_append(timestamp, offset)
    index.truncate_to(BASE + 6)
    assert index.last_entry == (300, BASE + 5)
    index.truncate_to(BASE + 5)
    assert index.last_entry == (100, BASE + 1)
    index.truncate()
    assert index.last_entry == (-1, BASE)
    index.maybe_append(50, BASE)
    assert index.entries == 1


def test_time_index_crash_tail_and_reopen(tmp_path: pathlib.Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(0, BASE)  # timestamp 0 at relative offset 0 is a real first entry
    index.maybe_append(5, BASE + 3)
    index.flush()
    reopened = time_index(tmp_path)
    assert reopened.entries == 2
    reopened.sanity_check()
    assert reopened.lookup(4) == (0, BASE)
    index.close()


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">qi", 100, 1) + b"\x00" * 5,  # odd size
        struct.pack(">qiqi", 100, 1, 90, 2),  # timestamps decrease
        struct.pack(">qiqi", 100, 5, 200, 2),  # offsets decrease
    ],
)
def test_time_index_sanity_check(tmp_path: pathlib.Path, raw: bytes) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    path.write_bytes(raw)
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, BASE, writable=False).sanity_check()


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(min_value=-5, max_value=50), st.integers(min_value=0, max_value=20)),
        max_size=150,
    ),
    targets=st.lists(st.integers(min_value=-10, max_value=3000), max_size=20),
)
def test_time_index_is_monotonic_and_lookup_agrees_with_scan(
    steps: list[tuple[int, int]], targets: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        index = time_index(pathlib.Path(directory))
        timestamp, offset, kept = 0, BASE, []
        for dt, doff in steps:
            timestamp, offset = timestamp + dt, offset + doff
            if timestamp > (kept[-1][0] if kept else -1):
                kept.append((timestamp, offset))
            index.maybe_append(timestamp, offset)
        entries = [index.entry(i) for i in range(index.entries)]
        assert entries == kept
        assert all(a[0] < b[0] and a[1] <= b[1] for a, b in itertools.pairwise(entries))
        index.sanity_check()
        for target in targets:
            expected = max((e for e in kept if e[0] <= target), default=(-1, BASE))
            assert index.lookup(target) == expected
        index.close()


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_an_index_dropped_without_close_releases_its_descriptors(tmp_path: pathlib.Path) -> None:
    """A raw descriptor has no finalizer of its own: dropped indexes (an error path, a test) must not
    pile up descriptors until the process runs out (a test worker did, past select()'s 1024)."""
    before = _open_descriptors()
    for base in range(0, 2000, 10):
        OffsetIndex(tmp_path / f"{base:020d}.index", base)
        TimeIndex(tmp_path / f"{base:020d}.timeindex", base)
    gc.collect()
    assert _open_descriptors() <= before + 2
    index = OffsetIndex(tmp_path / "closed.index", 0)
    index.close()
    index.close()  # closing twice is harmless, and the finalizer does not close a reused number
    kept = os.open(tmp_path / "kept", os.O_CREAT | os.O_RDWR)
    try:
        del index
        gc.collect()
        os.fstat(kept)  # still open
    finally:
        os.close(kept)
