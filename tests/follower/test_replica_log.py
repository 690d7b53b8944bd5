"""The follower's adapter over PartitionLog: partial batches, HW and log start from the leader,
and the idempotent-producer state it keeps (and snapshots) from the batches it replicates."""

from __future__ import annotations

import os
import pathlib

import pytest

from follower.replica_log import ReplicaLog, initial_fetch_offset
from protocol.records import Record, build_batch
from protocol.records.control import build_end_txn_marker_batch
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import UnexpectedAppendOffsetError
from storage.handover import open_handed_over_log
from storage.log import PartitionLog
from storage.producer_recovery import iter_log_headers, rebuild_producer_state
from storage.producer_snapshot import list_snapshot_offsets
from storage.producer_state import ProducerStateManager
from storage.segment import walk_batches
from storage.txn_index import AbortedTxn
from tests.follower.fake_leader import BASE_TIME, make_batch
from tests.storage.test_producer_state_snapshot import state_of


@pytest.fixture
def log(tmp_path) -> ReplicaLog:
    return ReplicaLog(PartitionLog.open(tmp_path / "topic-0", LogConfig(), FakeClock(1_700_000_000_000)))


def test_a_trailing_partial_batch_is_dropped(log) -> None:
    data = make_batch(0, 1, 2) + make_batch(2, 1, 3)
    assert log.append_as_follower(data[:-5]) == 2
    assert log.append_as_follower(b"") == 2
    assert log.append_as_follower(make_batch(2, 1, 3)) == 5
    assert log.latest_epoch == 1


def test_batches_below_the_log_end_offset_are_refused(log) -> None:
    log.append_as_follower(make_batch(0, 0, 2))
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(make_batch(1, 0, 2))


def test_high_watermark_follows_the_leader_within_the_log(log) -> None:
    log.append_as_follower(make_batch(0, 0, 4))
    assert log.update_high_watermark(10)
    assert log.high_watermark == 4
    assert log.update_high_watermark(2)
    assert log.high_watermark == 2, "the HW follows the leader down too"
    assert not log.update_high_watermark(2)


def test_log_start_offset_only_moves_up_to_the_leaders(log) -> None:
    log.append_as_follower(make_batch(0, 0, 2) + make_batch(2, 1, 2))
    log.update_high_watermark(4)
    assert not log.maybe_increment_log_start_offset(0)
    assert log.maybe_increment_log_start_offset(2)
    assert log.log_start_offset == 2
    assert not log.maybe_increment_log_start_offset(1)
    assert log.log.leader_epoch_cache.entries() == [(1, 2)]


def test_end_offset_for_epoch_and_truncation(log) -> None:
    log.append_as_follower(make_batch(0, 1, 2) + make_batch(2, 3, 2))
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 4)
    assert log.end_offset_for_epoch(4) is None
    assert log.truncate_to(3) == 2, "the whole batch holding the offset goes"
    assert log.latest_epoch == 1
    log.truncate_fully_and_start_at(10)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (10, 10, None)


def test_initial_fetch_offset(log) -> None:
    assert initial_fetch_offset(log, truncation_on_fetch=True) == 0
    log.append_as_follower(make_batch(0, 1, 3))
    log.update_high_watermark(1)
    assert initial_fetch_offset(log, truncation_on_fetch=True) == 3
    assert initial_fetch_offset(log, truncation_on_fetch=False) == 1


# -- idempotent-producer state -------------------------------------------------------------------

SPACING_MS = 1000
ROLL_EVERY_APPEND = LogConfig(segment_ms=1)
"""Every append into a non-empty segment rolls (its records are stamped SPACING_MS after the
segment's first ones): one fetch, one segment."""


def idempotent_batch(
    base_offset: int, producer_id: int, seq: int, records: int = 1, *, producer_epoch: int = 0
) -> bytes:
    """A batch of ``records`` records from an idempotent producer, as the leader wrote it."""
    return build_batch(
        [
            Record(value=b"v", key=None, timestamp=BASE_TIME + SPACING_MS * (base_offset + i))
            for i in range(records)
        ],
        base_offset=base_offset,
        partition_leader_epoch=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=seq,
    )


def open_replica(
    directory: pathlib.Path, config: LogConfig = ROLL_EVERY_APPEND, clock: FakeClock | None = None
) -> ReplicaLog:
    clock = clock if clock is not None else FakeClock(BASE_TIME)
    return ReplicaLog(PartitionLog.open(directory, config, clock), clock=clock)


def replayed_from_scratch(directory: pathlib.Path, log: PartitionLog) -> ProducerStateManager:
    """The state a new leader would build with no snapshot at all (every header replayed)."""
    state = ProducerStateManager(directory)
    state.truncate_fully_and_start_at(log.log_start_offset)
    for header in iter_log_headers(log, log.log_start_offset):
        state.update(header, header.base_offset, header.last_offset)
    state.update_map_end_offset(log.log_end_offset)
    return state


def loaded_snapshot(directory: pathlib.Path, offset: int) -> ProducerStateManager:
    state = ProducerStateManager(directory)
    assert state.load_snapshot(offset) == offset
    return state


@pytest.fixture
def partition_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "topic-0"


def test_appended_batches_update_the_producer_state(partition_dir) -> None:
    log = open_replica(partition_dir, LogConfig())
    fetch = idempotent_batch(0, 7, 0, 2) + make_batch(2, 0, 1) + idempotent_batch(3, 7, 2, 3)
    log.append_as_follower(fetch + idempotent_batch(6, 8, 0)[:-3])  # a partial batch is not applied

    state = log.producer_state
    assert state.map_end_offset == log.log_end_offset == 6
    assert set(state.producers) == {7}
    entry = state.last_entry(7)
    assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (0, 4, 5)
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batch_metadata] == [
        (0, 1, 0, 1),
        (2, 4, 3, 5),
    ]
    assert state.snapshot_offsets() == [], "no roll, no snapshot"


def test_a_roll_snapshots_the_state_before_the_new_segments_batches(partition_dir) -> None:
    log = open_replica(partition_dir)
    log.append_as_follower(idempotent_batch(0, 1, 0, 2))
    before_roll = state_of(log.producer_state)

    # One fetch of several batches: the roll happens once, before all of them.
    log.append_as_follower(idempotent_batch(2, 1, 2) + idempotent_batch(3, 2, 0, 2) + make_batch(5, 0))

    assert [s.base_offset for s in log.log.segments()] == [0, 2]
    assert log.producer_state.snapshot_offsets() == [2]
    assert state_of(loaded_snapshot(partition_dir, 2)) == before_roll
    assert state_of(log.producer_state) == state_of(replayed_from_scratch(partition_dir, log.log))


def test_snapshot_failures_never_fail_the_append_nor_the_handover(partition_dir, monkeypatch) -> None:
    log = open_replica(partition_dir)

    def disk_full(offset: int | None = None) -> pathlib.Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log.producer_state, "take_snapshot", disk_full)
    log.append_as_follower(idempotent_batch(0, 1, 0))
    assert log.append_as_follower(idempotent_batch(1, 1, 1)) == 2
    assert log.producer_state.last_entry(1).last_seq == 1
    assert log.close_for_handover().log_end_offset == 2
    assert list_snapshot_offsets(partition_dir) == []


def fill(log: ReplicaLog) -> None:
    """Four segments (one per fetch), two producers; snapshots at 3, 6 and 9."""
    log.append_as_follower(idempotent_batch(0, 1, 0, 3))
    log.append_as_follower(idempotent_batch(3, 1, 3, 3))
    log.append_as_follower(idempotent_batch(6, 2, 0, 2) + idempotent_batch(8, 1, 6))
    log.append_as_follower(idempotent_batch(9, 2, 2, 2) + idempotent_batch(11, 3, 0))


def test_truncation_forgets_what_was_cut_and_the_snapshots_above_it(partition_dir) -> None:
    log = open_replica(partition_dir)
    fill(log)
    assert log.producer_state.snapshot_offsets() == [3, 6, 9]

    assert log.truncate_to(7) == 6, "the batch holding 7 goes whole"

    state = log.producer_state
    assert state.map_end_offset == 6
    assert set(state.producers) == {1}, "producer 2 wrote only above the cut, producer 3 too"
    assert (state.last_entry(1).last_seq, state.last_entry(1).last_data_offset) == (5, 5)
    assert state.snapshot_offsets() == [3, 6]
    assert list_snapshot_offsets(partition_dir) == [3, 6]
    assert state_of(state) == state_of(replayed_from_scratch(partition_dir, log.log))

    log.append_as_follower(idempotent_batch(6, 4, 0))  # the state goes on from the cut
    assert set(log.producer_state.producers) == {1, 4}


def test_truncating_fully_forgets_every_producer_and_snapshot(partition_dir) -> None:
    log = open_replica(partition_dir)
    fill(log)
    log.truncate_fully_and_start_at(20)
    assert log.producer_state.map_end_offset == 20
    assert not log.producer_state.producers
    assert list_snapshot_offsets(partition_dir) == log.producer_state.snapshot_offsets() == []
    log.append_as_follower(idempotent_batch(20, 5, 9))
    assert log.producer_state.last_entry(5).last_seq == 9


def test_a_reopened_log_recovers_the_state_after_a_crash(partition_dir) -> None:
    log = open_replica(partition_dir)
    fill(log)
    # No close: the process died. The next owner recovers the log, then the state from the
    # newest snapshot (9) and the one batch pair after it.
    reopened = open_replica(partition_dir)
    assert reopened.log_end_offset == 12
    assert state_of(reopened.producer_state) == state_of(log.producer_state)
    assert rebuild_producer_state(reopened.log, ProducerStateManager(partition_dir), BASE_TIME) == 2


def test_the_log_start_offset_takes_older_snapshots_along(partition_dir) -> None:
    log = open_replica(partition_dir)
    fill(log)
    log.update_high_watermark(12)
    assert log.maybe_increment_log_start_offset(7)
    assert list_snapshot_offsets(partition_dir) == log.producer_state.snapshot_offsets() == [9]
    assert set(log.producer_state.producers) == {1, 2, 3}, "the state itself stays"


def test_retention_takes_the_snapshots_of_deleted_segments_along(tmp_path) -> None:
    clock = FakeClock(BASE_TIME)
    config = LogConfig(segment_ms=1, retention_ms=1000, file_delete_delay_ms=0)
    log = open_replica(tmp_path / "topic-0", config, clock)
    fill(log)
    log.update_high_watermark(12)
    clock.advance(100 * SPACING_MS)  # every segment is past retention.ms: the log rolls to keep one

    assert log.delete_old_segments() == 4
    assert log.log_start_offset == 12
    assert log.producer_state.snapshot_offsets() == [12], "the roll's snapshot, at the log start"
    assert state_of(loaded_snapshot(log.log.directory, 12)) == state_of(log.producer_state)


def test_idle_producers_expire(partition_dir) -> None:
    clock = FakeClock(BASE_TIME)
    log = ReplicaLog(
        PartitionLog.open(partition_dir, LogConfig(), clock), clock=clock, producer_id_expiration_ms=1000
    )
    log.append_as_follower(idempotent_batch(0, 1, 0) + idempotent_batch(1, 2, 0))
    clock.set(BASE_TIME + 1000)
    assert log.remove_expired_producers() == [1], "producer 2 wrote a second later"


def test_after_a_handover_the_new_leader_replays_nothing(partition_dir) -> None:
    log = open_replica(partition_dir)
    fill(log)
    expected = state_of(log.producer_state)

    handover = log.close_for_handover()

    assert handover.log_end_offset == 12
    assert list_snapshot_offsets(partition_dir)[-1] == 12
    clock = FakeClock(BASE_TIME)
    leader_log = open_handed_over_log(handover, ROLL_EVERY_APPEND, clock)
    leader_state = ProducerStateManager(partition_dir)
    assert rebuild_producer_state(leader_log, leader_state, BASE_TIME) == 0
    assert state_of(leader_state) == expected
    leader_log.close()


def test_a_damaged_local_log_met_while_truncating_is_cut_back_to_its_last_valid_batch(tmp_path) -> None:
    """A follower whose own segment was damaged while it was stopped (issue 15) meets the damage
    when it truncates by leader epoch: it repairs the log (crash recovery from the log start cuts
    it at the last valid batch) instead of giving the partition up, and fetches on from there."""
    directory = tmp_path / "topic-0"
    clock = FakeClock(BASE_TIME)
    log = ReplicaLog(PartitionLog.open(directory, LogConfig(), clock), clock=clock)
    for offset in range(10):
        log.append_as_follower(make_batch(offset, 0))
    segment = next(directory.glob("*.log"))
    fd = os.open(segment, os.O_RDWR)
    try:
        damaged = list(walk_batches(fd, 0, os.fstat(fd).st_size))[4]
        at = damaged.position + 23  # LastOffsetDelta onwards: a negative record count
        os.pwrite(fd, bytes(b ^ 0xFF for b in os.pread(fd, 16, at)), at)
    finally:
        os.close(fd)

    assert log.truncate_to(9) == 4, "cut at the damaged batch: offsets 0-3 kept"
    assert log.producer_state.map_end_offset == 4
    assert log.append_as_follower(make_batch(4, 1, 6)) == 10, "fetching on from the cut"
    assert [h.base_offset for h in iter_log_headers(log.log, 0)] == [0, 1, 2, 3, 4]


def test_a_damaged_local_log_met_by_the_producer_state_replay_is_repaired_at_open(tmp_path) -> None:
    """Damage done while the replica was stopped, in the batches its producer state is replayed
    from (no snapshot at the log end): opening it repairs it instead of failing the partition."""
    directory = tmp_path / "topic-0"
    clock = FakeClock(BASE_TIME)
    config = LogConfig(index_interval_bytes=1)  # a clean load then reads only the last batch
    log = PartitionLog.open(directory, config, clock)
    for offset in range(10):
        log.append_as_follower(make_batch(offset, 0))
    log.close()
    segment = next(directory.glob("*.log"))
    fd = os.open(segment, os.O_RDWR)
    try:
        damaged = list(walk_batches(fd, 0, os.fstat(fd).st_size))[4]
        at = damaged.position + 8  # BatchLength, PartitionLeaderEpoch, Magic...: no batch starts there
        os.pwrite(fd, bytes(b ^ 0xFF for b in os.pread(fd, 16, at)), at)
    finally:
        os.close(fd)

    reopened = ReplicaLog(PartitionLog.open(directory, config, clock, clean_shutdown=True), clock=clock)
    assert reopened.log_end_offset == 4, "cut at the damaged batch: offsets 0-3 kept"
    assert reopened.producer_state.map_end_offset == 4
    assert reopened.append_as_follower(make_batch(4, 1, 6)) == 10


def _txn_batch(base_offset: int, producer_id: int, *, seq: int = 0) -> bytes:
    return build_batch(
        [Record(value=b"t", timestamp=BASE_TIME)],
        base_offset=base_offset,
        partition_leader_epoch=1,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )


def _marker(base_offset: int, producer_id: int, *, commit: bool) -> bytes:
    return build_end_txn_marker_batch(
        commit=commit,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=3,
        timestamp=BASE_TIME,
        base_offset=base_offset,
        partition_leader_epoch=1,
    )


def test_an_abort_marker_appended_as_follower_writes_the_txn_index(log) -> None:
    # one fetch response: two transactions, the first aborted while the second is open, then committed
    log.append_as_follower(_txn_batch(0, 7) + _txn_batch(1, 8) + _marker(2, 7, commit=False))
    assert log.log.collect_aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 1)]
    assert log.producer_state.first_unstable_offset() == 0  # the marker is not below the HW yet
    log.update_high_watermark(3)
    assert log.producer_state.first_unstable_offset() == 1
    log.append_as_follower(_marker(3, 8, commit=True) + _txn_batch(4, 7, seq=1))
    log.append_as_follower(_marker(5, 7, commit=False))
    assert log.log.collect_aborted_transactions(0, 6) == [AbortedTxn(7, 0, 2, 1), AbortedTxn(7, 4, 5, 6)]
    assert (log.log.log_end_offset, log.producer_state.first_unstable_offset()) == (6, 1)
    log.update_high_watermark(6)
    assert log.producer_state.first_unstable_offset() is None
    # a truncation below the second marker drops its entry and reopens its transaction
    log.truncate_to(5)
    assert log.log.collect_aborted_transactions(0, 6) == [AbortedTxn(7, 0, 2, 1)]
    assert [(t.producer_id, t.first_offset) for t in log.producer_state.ongoing_transactions()] == [(7, 4)]
