"""Producer state snapshots: the file layout, reloading, corruption, truncation and retention.

The property test at the end is the recovery contract PartitionLog relies on: the state loaded from
a snapshot plus the headers of the batches after it equals the state built from every batch.
"""

from __future__ import annotations

import pathlib
import struct
import tempfile

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.records import RecordBatchHeader
from storage.producer_snapshot import (
    ENTRY_SIZE,
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_offsets,
    parse_snapshot_offset,
    read_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from storage.producer_state import DuplicateBatch, ProducerStateManager
from tests.storage.test_producer_state import BASE_TIME, apply, batch_header, produce

PID = 1000


@pytest.fixture
def partition_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    return directory


def state_of(manager: ProducerStateManager) -> tuple[int, dict[int, tuple[object, ...]]]:
    """Everything the manager knows, as plain values that compare by content."""
    return manager.map_end_offset, {
        pid: (
            e.producer_epoch,
            list(e.batch_metadata),
            e.last_timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for pid, e in manager.producers.items()
    }


def busy_manager(directory: pathlib.Path) -> ProducerStateManager:
    """Producers in every shape a snapshot must carry."""
    manager = ProducerStateManager(directory)
    for i in range(7):  # more than five batches: all of the last five must survive
        apply(manager, batch_header(producer_id=1, seq=3 * i, count=3, timestamp=BASE_TIME + i))
    apply(manager, batch_header(producer_id=2, epoch=3, seq=0, transactional=True, timestamp=BASE_TIME + 9))
    apply(manager, batch_header(producer_id=3, epoch=0, seq=0, timestamp=BASE_TIME + 20))
    apply(manager, batch_header(producer_id=3, epoch=0, seq=-1, control=True, timestamp=BASE_TIME + 30))
    apply(manager, batch_header(producer_id=4, epoch=0, seq=0))
    apply(manager, batch_header(producer_id=4, epoch=1, seq=-1, control=True, timestamp=BASE_TIME + 40))
    apply(manager, batch_header(producer_id=-1, seq=-1, count=2))
    return manager


# -- the file format -----------------------------------------------------------------------------


def test_file_names_are_twenty_digit_offsets() -> None:
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"
    assert parse_snapshot_offset("00000000000000001234.snapshot") == 1234
    assert parse_snapshot_offset("00000000000000001234.snapshot.tmp") is None
    assert parse_snapshot_offset("00000000000000001234.log") is None
    assert parse_snapshot_offset("1234.snapshot") is None


def test_layout_is_kafkas_version_1_with_a_crc32c_over_the_entries() -> None:
    entry = SnapshotEntry(7, 2, 41, 900, 3, BASE_TIME, -1, -1)
    data = encode_snapshot([entry])
    assert ENTRY_SIZE == 46
    assert len(data) == 2 + 4 + 4 + 46
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == tuple(entry)
    assert decode_snapshot(data) == [entry]
    assert decode_snapshot(encode_snapshot([])) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],  # truncated
        lambda d: d[:5],  # shorter than the preamble
        lambda d: b"\x00\x02" + d[2:],  # unknown version
        lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:],  # flipped bit in an entry
        lambda d: d + b"\x00",  # trailing byte
    ],
)
def test_damaged_files_are_corrupt(damage) -> None:  # type: ignore[no-untyped-def]
    data = encode_snapshot([SnapshotEntry(7, 2, 41, 900, 3, BASE_TIME, -1, -1)])
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(damage(data))


def test_write_is_atomic_and_leaves_no_temporary_file(partition_dir: pathlib.Path) -> None:
    path = partition_dir / snapshot_file_name(5)
    write_snapshot(path, [SnapshotEntry(7, 2, 41, 900, 3, BASE_TIME, -1, -1)])
    assert sorted(p.name for p in partition_dir.iterdir()) == [path.name]
    assert read_snapshot(path)[0].producer_id == 7


def test_leftover_temporary_files_are_removed_and_never_listed(partition_dir: pathlib.Path) -> None:
    (partition_dir / (snapshot_file_name(9) + ".tmp")).write_bytes(b"torn")
    write_snapshot(partition_dir / snapshot_file_name(3), [])
    manager = ProducerStateManager(partition_dir)
    assert manager.snapshot_offsets() == [3]
    assert list_snapshot_offsets(partition_dir) == [3]
    assert not (partition_dir / (snapshot_file_name(9) + ".tmp")).exists()


# -- take and load -------------------------------------------------------------------------------


def test_snapshot_round_trip_keeps_every_producer_and_the_last_five_batches(
    partition_dir: pathlib.Path,
) -> None:
    manager = busy_manager(partition_dir)
    path = manager.take_snapshot(manager.map_end_offset)
    assert path.name == snapshot_file_name(manager.map_end_offset)
    assert manager.latest_snapshot_offset() == manager.map_end_offset

    reloaded = ProducerStateManager(partition_dir)
    assert reloaded.load_snapshot(10**9) == manager.map_end_offset
    assert state_of(reloaded) == state_of(manager)
    entry = reloaded.last_entry(1)
    assert entry is not None and len(entry.batch_metadata) == 5


def test_reloaded_state_answers_duplicates_of_all_five_batches(partition_dir: pathlib.Path) -> None:
    manager = ProducerStateManager(partition_dir)
    headers = [batch_header(seq=2 * i, count=2, timestamp=BASE_TIME + i) for i in range(6)]
    offsets = [produce(manager, header) for header in headers]
    manager.take_snapshot()
    reloaded = ProducerStateManager(partition_dir)
    reloaded.load_snapshot(manager.map_end_offset)
    for i, (header, (first, last)) in enumerate(zip(headers, offsets)):
        if i == 0:
            continue  # older than the last five
        assert produce(reloaded, header) == DuplicateBatch(first, last, BASE_TIME + i)


def test_last_row_of_each_producer_is_the_row_kafka_writes(partition_dir: pathlib.Path) -> None:
    """Kafka keeps the last row per producer id: it must be Kafka's own one-row view of the entry."""
    manager = busy_manager(partition_dir)
    rows = read_snapshot(manager.take_snapshot())
    last_rows = {row.producer_id: row for row in rows}
    for pid, entry in manager.producers.items():
        row = last_rows[pid]
        assert row.producer_epoch == entry.producer_epoch
        assert row.last_sequence == entry.last_seq
        assert row.last_offset == entry.last_data_offset
        assert row.offset_delta == (entry.batch_metadata[-1].offset_delta if entry.batch_metadata else 0)
        assert row.timestamp == entry.last_timestamp
        assert row.current_txn_first_offset == (
            -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        )


def test_a_kafka_written_snapshot_loads(partition_dir: pathlib.Path) -> None:
    write_snapshot(
        partition_dir / snapshot_file_name(500),
        [
            SnapshotEntry(11, 4, 99, 480, 9, BASE_TIME, 7, -1),
            SnapshotEntry(12, 0, -1, -1, 0, BASE_TIME + 1, -1, 470),
        ],
    )
    manager = ProducerStateManager(partition_dir)
    assert manager.load_snapshot(500) == 500
    entry = manager.last_entry(11)
    assert entry is not None
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq, entry.last_data_offset) == (4, 90, 99, 480)
    assert (entry.last_timestamp, entry.coordinator_epoch, entry.current_txn_first_offset) == (
        BASE_TIME,
        7,
        None,
    )
    empty = manager.last_entry(12)
    assert empty is not None and empty.is_empty and empty.current_txn_first_offset == 470
    assert produce(manager, batch_header(producer_id=11, epoch=4, seq=90, count=10)) == DuplicateBatch(
        471, 480, BASE_TIME
    )


def test_load_picks_the_newest_snapshot_at_or_below_the_offset(partition_dir: pathlib.Path) -> None:
    manager = ProducerStateManager(partition_dir)
    for seq in range(3):
        apply(manager, batch_header(seq=seq))
        manager.take_snapshot()
    assert manager.snapshot_offsets() == [1, 2, 3]
    assert manager.load_snapshot(2) == 2
    entry = manager.last_entry(PID)
    assert manager.map_end_offset == 2 and entry is not None and entry.last_seq == 1
    assert manager.load_snapshot(0) is None
    assert (manager.map_end_offset, dict(manager.producers)) == (0, {})


def test_load_filters_producers_expired_at_now(partition_dir: pathlib.Path) -> None:
    manager = ProducerStateManager(partition_dir, max_producer_id_expiration_ms=1000)
    apply(manager, batch_header(producer_id=1, timestamp=BASE_TIME))
    apply(manager, batch_header(producer_id=2, timestamp=BASE_TIME + 5000))
    manager.take_snapshot()
    assert manager.load_snapshot(10, now_ms=BASE_TIME + 5500) == 2
    assert list(manager.producers) == [2]


def test_corrupt_snapshot_is_deleted_and_an_older_one_used(partition_dir: pathlib.Path) -> None:
    manager = ProducerStateManager(partition_dir)
    apply(manager, batch_header(seq=0))
    manager.take_snapshot()
    apply(manager, batch_header(seq=1))
    newest = manager.take_snapshot()
    data = bytearray(newest.read_bytes())
    data[-3] ^= 0xFF  # the CRC no longer matches
    newest.write_bytes(bytes(data))

    reloaded = ProducerStateManager(partition_dir)
    assert reloaded.load_snapshot(100) == 1
    assert not newest.exists()
    assert reloaded.snapshot_offsets() == [1]
    entry = reloaded.last_entry(PID)
    assert entry is not None and entry.last_seq == 0


def test_take_snapshot_below_the_state_is_refused(partition_dir: pathlib.Path) -> None:
    manager = ProducerStateManager(partition_dir)
    apply(manager, batch_header(seq=0, count=4))
    with pytest.raises(ValueError):
        manager.take_snapshot(3)
    assert manager.take_snapshot(10).name == snapshot_file_name(10)  # a roll past empty offsets


# -- truncation and retention --------------------------------------------------------------------


def snapshots_at(directory: pathlib.Path, *ends: int) -> ProducerStateManager:
    """One batch per offset of producer PID, with a snapshot whenever the state reaches an end."""
    manager = ProducerStateManager(directory)
    seq = 0
    for end in ends:
        while manager.map_end_offset < end:
            apply(manager, batch_header(seq=seq))
            seq += 1
        manager.take_snapshot()
    return manager


def test_truncate_and_reload_deletes_snapshots_past_the_end_and_reloads(partition_dir: pathlib.Path) -> None:
    manager = snapshots_at(partition_dir, 10, 20, 30)
    assert manager.truncate_and_reload(0, 25) == 20
    assert manager.snapshot_offsets() == [10, 20]
    assert list_snapshot_offsets(partition_dir) == [10, 20]
    entry = manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 19
    for seq in range(20, 25):  # the replay PartitionLog then does
        apply(manager, batch_header(seq=seq))
    assert manager.map_end_offset == 25


def test_truncate_and_reload_at_the_current_end_keeps_the_state(partition_dir: pathlib.Path) -> None:
    manager = snapshots_at(partition_dir, 10, 20)
    apply(manager, batch_header(seq=20))
    before = state_of(manager)
    assert manager.truncate_and_reload(0, 21) == 21
    assert state_of(manager) == before


def test_truncate_and_reload_without_snapshots_starts_at_the_log_start(partition_dir: pathlib.Path) -> None:
    manager = snapshots_at(partition_dir, 10, 20)
    assert manager.truncate_and_reload(5, 8) == 5
    assert manager.snapshot_offsets() == []
    assert dict(manager.producers) == {}


def test_truncate_and_reload_deletes_snapshots_below_the_log_start(partition_dir: pathlib.Path) -> None:
    manager = snapshots_at(partition_dir, 10, 20, 30)
    assert manager.truncate_and_reload(20, 25) == 20
    assert manager.snapshot_offsets() == [20]


def test_recovery_of_a_fresh_manager_from_disk(partition_dir: pathlib.Path) -> None:
    """What PartitionLog.open does: reload up to the recovered log end, then replay the headers."""
    original = snapshots_at(partition_dir, 10, 20)
    headers = [batch_header(seq=seq) for seq in range(20, 27)]
    for header in headers:
        apply(original, header)

    recovered = ProducerStateManager(partition_dir)
    replay_from = recovered.truncate_and_reload(0, 27)
    assert replay_from == 20
    for offset, header in enumerate(headers, start=20):
        if offset >= replay_from:
            recovered.update(header, offset, offset)
    assert state_of(recovered) == state_of(original)


def test_truncate_fully_and_start_at_forgets_everything(partition_dir: pathlib.Path) -> None:
    manager = snapshots_at(partition_dir, 10, 20)
    manager.truncate_fully_and_start_at(50)
    assert (manager.map_end_offset, dict(manager.producers), manager.snapshot_offsets()) == (50, {}, [])
    assert list_snapshot_offsets(partition_dir) == []


def test_delete_snapshots_before_keeps_the_one_at_the_offset_and_the_state(
    partition_dir: pathlib.Path,
) -> None:
    manager = snapshots_at(partition_dir, 10, 20, 30)
    before = state_of(manager)
    manager.delete_snapshots_before(20)
    assert manager.snapshot_offsets() == [20, 30]
    assert list_snapshot_offsets(partition_dir) == [20, 30]
    assert manager.oldest_snapshot_offset() == 20
    assert state_of(manager) == before


# -- the recovery contract -----------------------------------------------------------------------

_batches = st.lists(
    st.builds(
        lambda pid, epoch, seq, count, ts, kind: batch_header(
            producer_id=pid,
            epoch=epoch,
            seq=-1 if kind == "control" else seq,
            count=count if kind != "control" else min(count, 1),
            timestamp=BASE_TIME + ts,
            transactional=kind == "txn",
            control=kind == "control",
        ),
        pid=st.sampled_from([-1, 1, 2, 3]),
        epoch=st.integers(0, 2),
        seq=st.integers(0, 40),
        count=st.integers(0, 4),
        ts=st.integers(-5, 50),
        kind=st.sampled_from(["data", "data", "data", "txn", "control"]),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(headers=_batches, cut=st.integers(0, 30), gap=st.integers(0, 3))
def test_snapshot_plus_replay_equals_applying_every_batch(
    headers: list[RecordBatchHeader], cut: int, gap: int
) -> None:
    cut = min(cut, len(headers))
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        full = ProducerStateManager(directory / "full")
        placed = []
        offset = 0
        for header in headers:  # offsets with holes, as compaction leaves them
            offset += gap
            placed.append((header, offset, offset + header.last_offset_delta))
            offset += header.last_offset_delta + 1
        for header, first, last in placed:
            full.update(header, first, last)

        (directory / "p").mkdir()
        partial = ProducerStateManager(directory / "p")
        for header, first, last in placed[:cut]:
            partial.update(header, first, last)
        snapshot_offset = partial.map_end_offset
        partial.take_snapshot()

        rebuilt = ProducerStateManager(directory / "p")
        replay_from = rebuilt.truncate_and_reload(0, offset)
        assert replay_from == snapshot_offset
        for header, first, last in placed:
            if last >= replay_from:
                rebuilt.update(header, first, last)
        assert state_of(rebuilt) == state_of(full)
