"""Transactions in a partition: the producer state's ongoing/unreplicated transactions, the one
applier (storage.transactions.apply_batch), the replay that rebuilds both after a crash, and a
property test of random interleavings against a small model."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.records import Record, RecordBatchHeader, build_batch, read_header
from protocol.records.control import ControlRecordType, build_end_txn_marker_batch
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.producer_recovery import rebuild_producer_state
from storage.producer_state import (
    CompletedTxn,
    InvalidProducerEpochError,
    OngoingTxn,
    OutOfOrderSequenceError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    TxnMarker,
)
from storage.transactions import apply_batch, marker_of, read_end_txn_marker
from storage.txn_index import AbortedTxn, TransactionIndex

BASE_TIME = 1_700_000_000_000
ABORT = TxnMarker(ControlRecordType.ABORT, 0)
COMMIT = TxnMarker(ControlRecordType.COMMIT, 0)


def data_batch(
    producer_id: int, count: int = 1, *, seq: int = 0, epoch: int = 0, transactional: bool = True
) -> bytes:
    records = [Record(value=b"v", timestamp=BASE_TIME + i) for i in range(count)]
    return build_batch(
        records,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq if producer_id >= 0 else -1,
        is_transactional=transactional,
    )


def marker_batch(producer_id: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker_batch(
        commit=commit,
        producer_id=producer_id,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=BASE_TIME,
    )


def header_of(data: bytes) -> RecordBatchHeader:
    return read_header(data)


def feed(
    state: ProducerStateManager, data: bytes, marker: TxnMarker | None = None
) -> tuple[int, int, CompletedTxn | None]:
    """Apply ``data`` at the state's end; complete what it completes. Returns (first, last, completed)."""
    header = header_of(data)
    first = state.map_end_offset
    last = first + header.last_offset_delta
    completed = state.update(header, first, last, marker=marker)
    if completed is not None:
        state.complete_txn(completed)
    return first, last, completed


# -- producer state ------------------------------------------------------------------------------------


def test_ongoing_completed_and_unreplicated(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path)
    feed(state, data_batch(-1, 3))  # 0-2: no producer
    feed(state, data_batch(1, 2))  # 3-4: txn of 1 starts at 3
    feed(state, data_batch(2, 1))  # 5: txn of 2 starts at 5
    feed(state, data_batch(1, 1, seq=2))  # 6: same txn
    assert state.first_unstable_offset() == 3
    assert [(t.producer_id, t.first_offset) for t in state.ongoing_transactions()] == [(1, 3), (2, 5)]
    header = header_of(marker_batch(1, commit=True))
    completed = state.update(header, 7, 7, marker=COMMIT)
    assert completed == CompletedTxn(1, 3, 7, is_aborted=False)
    assert state.last_stable_offset_of(completed) == 5  # 2's txn still open
    state.complete_txn(completed)
    assert state.first_unstable_offset() == 3  # decided, but its marker is not replicated yet
    state.on_high_watermark_updated(7)
    assert state.first_unstable_offset() == 3
    state.on_high_watermark_updated(8)
    assert state.first_unstable_offset() == 5
    _, _, aborted = feed(state, marker_batch(2, commit=False), ABORT)
    assert aborted == CompletedTxn(2, 5, 8, is_aborted=True)
    assert state.ongoing_transactions() == []
    state.on_high_watermark_updated(9)
    assert state.first_unstable_offset() is None


def test_last_stable_offset_of_the_only_txn_is_after_its_marker(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path)
    feed(state, data_batch(1, 3))
    completed = state.update(header_of(marker_batch(1, commit=False)), 3, 3, marker=ABORT)
    assert completed is not None and state.last_stable_offset_of(completed) == 4


def test_marker_without_data_completes_nothing(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path)
    feed(state, data_batch(1, 1, transactional=False))
    _, _, completed = feed(
        state, marker_batch(1, commit=False, coordinator_epoch=4), ABORT._replace(coordinator_epoch=4)
    )
    assert completed is None and state.first_unstable_offset() is None
    entry = state.last_entry(1)
    assert entry is not None and entry.coordinator_epoch == 4


def test_marker_without_its_record_ends_the_txn_unreported(tmp_path: pathlib.Path) -> None:
    """A caller that passes no marker (the type is unknown) still leaves nothing open."""
    state = ProducerStateManager(tmp_path)
    feed(state, data_batch(1, 1))
    _, _, completed = feed(state, marker_batch(1, commit=False))
    assert completed is None
    assert state.ongoing_transactions() == [] and state.first_unstable_offset() is None


def test_complete_txn_refuses_what_is_not_open(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path)
    with pytest.raises(ValueError):
        state.complete_txn(CompletedTxn(1, 0, 1, True))


def test_ongoing_transactions_describe_the_producer(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path)
    feed(
        state,
        marker_batch(1, commit=True, epoch=3, coordinator_epoch=7),
        COMMIT._replace(coordinator_epoch=7),
    )
    feed(state, data_batch(1, 4, seq=10, epoch=3))
    assert state.ongoing_transactions() == [
        OngoingTxn(
            producer_id=1,
            producer_epoch=3,
            coordinator_epoch=7,
            first_offset=1,
            last_timestamp=BASE_TIME + 3,
            last_sequence=13,
        )
    ]


def test_coordinator_fencing(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path)
    feed(state, data_batch(1, 1, epoch=2))
    feed(
        state,
        marker_batch(1, commit=True, epoch=2, coordinator_epoch=5),
        COMMIT._replace(coordinator_epoch=5),
    )
    feed(state, data_batch(1, 1, epoch=2, seq=1))
    zombie = header_of(marker_batch(1, commit=False, epoch=2, coordinator_epoch=4))
    zombie_marker = ABORT._replace(coordinator_epoch=4)
    with pytest.raises(TransactionCoordinatorFencedError):
        state.check_and_prepare(zombie, origin="coordinator", marker=zombie_marker)
    # a follower records what its leader wrote
    assert state.check_and_prepare(zombie, origin="replication", marker=zombie_marker) is None
    current = header_of(marker_batch(1, commit=False, epoch=2, coordinator_epoch=5))
    assert (
        state.check_and_prepare(current, origin="coordinator", marker=ABORT._replace(coordinator_epoch=5))
        is None
    )
    old_epoch = header_of(marker_batch(1, commit=False, epoch=1, coordinator_epoch=6))
    with pytest.raises(InvalidProducerEpochError):
        state.check_and_prepare(old_epoch, origin="coordinator", marker=ABORT._replace(coordinator_epoch=6))


def test_coordinator_batches_carry_no_sequence_and_only_their_epoch_is_checked(
    tmp_path: pathlib.Path,
) -> None:
    """TxnOffsetCommit's batches in __consumer_offsets: no sequence numbers, transaction after
    transaction under one epoch (transactions v1), never answered as duplicates."""
    state = ProducerStateManager(tmp_path)
    offsets = data_batch(1, 1, seq=-1, epoch=3)
    for _ in range(3):
        assert state.check_and_prepare(header_of(offsets), origin="coordinator") is None
        feed(state, offsets)
        feed(state, marker_batch(1, commit=True, epoch=3), COMMIT)
    with pytest.raises(OutOfOrderSequenceError):  # a client's batch must follow its sequence
        state.check_and_prepare(header_of(data_batch(1, 1, seq=7, epoch=3)), origin="leader")
    with pytest.raises(InvalidProducerEpochError):
        state.check_and_prepare(header_of(data_batch(1, 1, seq=-1, epoch=2)), origin="coordinator")


def test_snapshot_reload_rebuilds_ongoing_transactions(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path)
    feed(state, data_batch(2, 2))  # 0-1: txn of 2
    feed(state, data_batch(1, 1))  # 2: txn of 1
    feed(state, data_batch(3, 1))  # 3: txn of 3
    feed(state, marker_batch(3, commit=True), COMMIT)  # 4
    state.take_snapshot()
    reloaded = ProducerStateManager(tmp_path)
    assert reloaded.truncate_and_reload(0, 5) == 5
    assert [(t.producer_id, t.first_offset) for t in reloaded.ongoing_transactions()] == [(2, 0), (1, 2)]
    assert reloaded.first_unstable_offset() == 0
    _, _, completed = feed(reloaded, marker_batch(2, commit=False), ABORT)
    assert completed == CompletedTxn(2, 0, 5, True)
    reloaded.truncate_fully_and_start_at(100)
    assert reloaded.ongoing_transactions() == [] and reloaded.first_unstable_offset() is None


def test_truncate_and_reload_resets_transactions_past_the_snapshot(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path)
    feed(state, data_batch(1, 1))
    state.take_snapshot()  # at 1: txn of 1 open
    feed(state, data_batch(2, 1))
    feed(state, marker_batch(1, commit=False), ABORT)
    state.truncate_and_reload(0, 1)
    assert [(t.producer_id, t.first_offset) for t in state.ongoing_transactions()] == [(1, 0)]
    state.truncate_and_reload(0, 0)  # no snapshot at or below 0
    assert state.ongoing_transactions() == [] and state.first_unstable_offset() is None


def test_producers_in_a_transaction_never_expire(tmp_path: pathlib.Path) -> None:
    state = ProducerStateManager(tmp_path, max_producer_id_expiration_ms=1000)
    feed(state, data_batch(1, 1))
    feed(state, data_batch(2, 1, transactional=False))
    assert state.remove_expired_producers(BASE_TIME + 10_000) == [2]
    assert [t.producer_id for t in state.ongoing_transactions()] == [1]


# -- reading markers -----------------------------------------------------------------------------------


def test_read_end_txn_marker() -> None:
    assert read_end_txn_marker(marker_batch(1, commit=False, coordinator_epoch=9)) == TxnMarker(
        ControlRecordType.ABORT, 9
    )
    assert read_end_txn_marker(marker_batch(1, commit=True)) == TxnMarker(ControlRecordType.COMMIT, 0)
    assert read_end_txn_marker(data_batch(1)) is None
    both = marker_batch(1, commit=True) + data_batch(1)
    assert marker_of(both, read_header(both)) == COMMIT  # a batch followed by others


# -- the log side ----------------------------------------------------------------------------------------


def open_log(path: pathlib.Path, *, segment_bytes: int = 10_000_000, **kwargs: object) -> PartitionLog:
    return PartitionLog.open(
        path / "t-0",
        LogConfig(segment_bytes=segment_bytes, file_delete_delay_ms=0),
        FakeClock(BASE_TIME),
        **kwargs,  # type: ignore[arg-type]
    )


def append(log: PartitionLog, state: ProducerStateManager, data: bytes) -> CompletedTxn | None:
    """Append as the leader would, then apply (the wiring broker/replication/partition.py needs)."""
    info = log.append_as_leader(data, 0)
    header = read_header(data)._replace(base_offset=info.first_offset)
    return apply_batch(log, state, header, info.first_offset, info.last_offset, read_end_txn_marker(data))


def all_entries(log: PartitionLog) -> list[AbortedTxn]:
    return [entry for segment in log.segments() for entry in segment.txn_index.all_entries()]


def test_apply_batch_indexes_aborted_txns_with_their_lso(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    state = ProducerStateManager(log.directory)
    append(log, state, data_batch(1, 2))  # 0-1
    append(log, state, data_batch(2, 1))  # 2
    append(log, state, marker_batch(1, commit=False))  # 3
    log.roll()
    append(log, state, data_batch(1, 1, seq=2))  # 4
    append(log, state, marker_batch(2, commit=True))  # 5
    append(log, state, marker_batch(1, commit=False))  # 6
    assert all_entries(log) == [AbortedTxn(1, 0, 3, 2), AbortedTxn(1, 4, 6, 7)]
    assert log.segment_for(6).txn_index.entries == 1
    assert log.collect_aborted_transactions(0, 7) == [AbortedTxn(1, 0, 3, 2), AbortedTxn(1, 4, 6, 7)]
    assert log.collect_aborted_transactions(4, 5) == [AbortedTxn(1, 4, 6, 7)]
    log.close()


def test_recovery_rebuilds_the_index_without_duplicates(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    state = ProducerStateManager(log.directory)
    append(log, state, data_batch(1, 2))  # 0-1
    append(log, state, marker_batch(1, commit=False))  # 2
    append(log, state, data_batch(2, 1))  # 3
    state.take_snapshot()  # at 4: txn of 2 open
    append(log, state, data_batch(1, 1, seq=2))  # 4
    append(log, state, marker_batch(2, commit=False))  # 5
    append(log, state, marker_batch(1, commit=False))  # 6
    expected = [AbortedTxn(1, 0, 2, 3), AbortedTxn(2, 3, 5, 4), AbortedTxn(1, 4, 6, 7)]
    assert all_entries(log) == expected
    # a crash that kept every entry: the replay from 4 must not write them twice
    fresh = ProducerStateManager(log.directory)
    assert rebuild_producer_state(log, fresh, BASE_TIME) == 3
    assert all_entries(log) == expected
    # a crash that lost the index's tail (never fsynced)
    log.active_segment.txn_index.truncate_to(5)
    fresh = ProducerStateManager(log.directory)
    rebuild_producer_state(log, fresh, BASE_TIME)
    assert all_entries(log) == expected
    assert fresh.ongoing_transactions() == []
    log.close()
    reopened = open_log(tmp_path, clean_shutdown=False, recovery_point=0)
    again = ProducerStateManager(reopened.directory)
    rebuild_producer_state(reopened, again, BASE_TIME)
    assert all_entries(reopened) == expected
    reopened.close()


def test_replay_without_snapshot_keeps_entries_of_txns_before_the_log_start(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    state = ProducerStateManager(log.directory)
    append(log, state, data_batch(1, 1))  # 0
    log.roll()
    append(log, state, data_batch(1, 1, seq=1))  # 1
    append(log, state, marker_batch(1, commit=False))  # 2
    log.update_high_watermark(3)
    log.maybe_increment_log_start_offset(1)
    log.delete_old_segments()
    assert all_entries(log) == [AbortedTxn(1, 0, 2, 3)]
    fresh = ProducerStateManager(log.directory)  # no snapshot: the txn's start is unknown
    rebuild_producer_state(log, fresh, BASE_TIME)
    assert all_entries(log) == [AbortedTxn(1, 0, 2, 3)]
    log.close()


def test_truncation_drops_entries_and_replay_follows(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    state = ProducerStateManager(log.directory)
    append(log, state, data_batch(1, 1))  # 0
    append(log, state, data_batch(2, 1))  # 1
    append(log, state, marker_batch(1, commit=False))  # 2
    append(log, state, marker_batch(2, commit=False))  # 3
    log.truncate_to(3)
    rebuild_producer_state(log, state, BASE_TIME)
    assert all_entries(log) == [AbortedTxn(1, 0, 2, 1)]
    assert [(t.producer_id, t.first_offset) for t in state.ongoing_transactions()] == [(2, 1)]
    log.close()


# -- property: random interleavings against a model ---------------------------------------------------------


@dataclass
class Model:
    ongoing: dict[int, int] = field(default_factory=dict)  # producer -> first offset
    completed: list[tuple[int, int]] = field(default_factory=list)  # (first offset, marker offset)
    aborted: list[AbortedTxn] = field(default_factory=list)
    hw: int = 0

    def first_unstable(self) -> int | None:
        firsts = list(self.ongoing.values()) + [f for f, marker in self.completed if marker >= self.hw]
        return min(firsts) if firsts else None


PRODUCERS = (1, 2, 3)
operation = st.one_of(
    st.tuples(st.just("data"), st.sampled_from(PRODUCERS), st.integers(1, 3)),
    st.tuples(st.just("commit"), st.sampled_from(PRODUCERS), st.just(0)),
    st.tuples(st.just("abort"), st.sampled_from(PRODUCERS), st.just(0)),
    st.tuples(st.just("plain"), st.sampled_from((-1, 9)), st.integers(1, 2)),
    st.tuples(st.just("roll"), st.just(0), st.just(0)),
    st.tuples(st.just("hw"), st.just(0), st.integers(0, 100)),
    st.tuples(st.just("snapshot"), st.just(0), st.just(0)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(operation, max_size=40), lose_tail=st.booleans())
def test_random_interleavings_match_the_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]], lose_tail: bool
) -> None:
    root = tmp_path_factory.mktemp("txn")
    log = open_log(root)
    state = ProducerStateManager(log.directory)
    model = Model()
    seqs = dict.fromkeys((*PRODUCERS, 9, -1), 0)
    for kind, producer, n in ops:
        end = log.log_end_offset
        if kind == "data":
            append(log, state, data_batch(producer, n, seq=seqs[producer]))
            seqs[producer] += n
            model.ongoing.setdefault(producer, end)
        elif kind in ("commit", "abort"):
            append(log, state, marker_batch(producer, commit=kind == "commit"))
            first = model.ongoing.pop(producer, None)
            if first is not None:
                model.completed.append((first, end))
                if kind == "abort":
                    others = [f for p, f in model.ongoing.items() if p != producer]
                    model.aborted.append(AbortedTxn(producer, first, end, min(others, default=end + 1)))
        elif kind == "plain":
            append(log, state, data_batch(producer, n, seq=seqs[producer], transactional=False))
            seqs[producer] += n
        elif kind == "roll":
            log.roll()
        elif kind == "hw":
            hw = log.update_high_watermark(model.hw + n * (log.log_end_offset - model.hw) // 100)
            state.on_high_watermark_updated(hw)
            model.hw = hw
        else:
            state.take_snapshot()
        assert state.first_unstable_offset() == model.first_unstable()
        assert all_entries(log) == model.aborted
        assert {t.producer_id: t.first_offset for t in state.ongoing_transactions()} == model.ongoing

    # crash: the state is lost; maybe the index entries since the last snapshot too
    snapshot = state.latest_snapshot_offset()
    log.close()
    if lose_tail:
        for path in (root / "t-0").glob("*.txnindex"):
            kept = [e for e in _entries_in(path) if snapshot is not None and e.last_offset < snapshot]
            path.write_bytes(b"".join(e.pack() for e in kept))
    log = open_log(root, clean_shutdown=False, recovery_point=0)
    recovered = ProducerStateManager(log.directory)
    rebuild_producer_state(log, recovered, BASE_TIME)
    assert all_entries(log) == model.aborted  # nothing lost, nothing twice
    assert {t.producer_id: t.first_offset for t in recovered.ongoing_transactions()} == model.ongoing
    recovered.on_high_watermark_updated(log.log_end_offset)
    log.update_high_watermark(log.log_end_offset)
    model.hw = log.log_end_offset
    assert recovered.first_unstable_offset() == model.first_unstable()
    log.close()


def _entries_in(path: pathlib.Path) -> list[AbortedTxn]:
    return TransactionIndex(path, 0).all_entries()
