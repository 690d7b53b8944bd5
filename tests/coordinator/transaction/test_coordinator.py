"""The transaction coordinator's answers, request by request, as Kafka's TransactionCoordinator gives them."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.transaction import (
    MarkerRequest,
    TransactionConfig,
    TransactionState,
    error_for_version,
    partition_for,
)
from coordinator.transaction.metadata import MAX_PRODUCER_EPOCH
from protocol import transaction_log as tl
from protocol.error_codes import ErrorCode
from tests.coordinator.transaction.helpers import PARTITIONS, T0, TIMEOUT_MS, Harness

E = ErrorCode
S = TransactionState


# -- partition_for ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transactional_id", "expected"),
    [
        ("", 0),
        ("a", 97 % 50),  # "a".hashCode() == 97
        ("txn-1", 110_810_510 % 50),  # 116·31⁴ + 120·31³ + 110·31² + 45·31 + 49
        ("polygenelubricants", 0),  # hashCode is Integer.MIN_VALUE: Utils.abs makes it 0
    ],
)
def test_partition_for_is_javas_hash_code(transactional_id: str, expected: int) -> None:
    assert partition_for(transactional_id, 50) == expected


# -- InitProducerId ---------------------------------------------------------------------------------


async def test_init_without_transactional_id_hands_out_a_fresh_producer_id() -> None:
    h = Harness()
    first = await h.coordinator.init_producer_id(None, TIMEOUT_MS)
    second = await h.coordinator.init_producer_id(None, 10**9)  # no timeout check without an id
    assert (first.error, first.producer_id, first.producer_epoch) == (E.NONE, 1000, 0)
    assert (second.error, second.producer_id) == (E.NONE, 1001)
    assert h.records() == []


async def test_init_with_an_empty_transactional_id_is_invalid() -> None:
    h = Harness()
    assert (await h.coordinator.init_producer_id("", TIMEOUT_MS)).error is E.INVALID_REQUEST


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
async def test_init_with_a_timeout_out_of_range_is_refused(timeout_ms: int) -> None:
    h = Harness()
    result = await h.coordinator.init_producer_id("t", timeout_ms)
    assert result.error is E.INVALID_TRANSACTION_TIMEOUT


async def test_init_with_half_a_producer_identity_is_invalid() -> None:
    h = Harness()
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS, 5, -1)).error is E.INVALID_REQUEST
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS, -1, 0)).error is E.INVALID_REQUEST


async def test_init_for_a_partition_not_owned_or_loading() -> None:
    h = Harness(load=False)
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.NOT_COORDINATOR
    h.coordinator.begin_loading(h.coordinator.partition_for("t"), 1)
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.COORDINATOR_LOAD_IN_PROGRESS
    h.load_all()
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.NONE


async def test_init_writes_empty_at_epoch_0_and_bumps_the_epoch_on_each_re_init() -> None:
    h = Harness()
    assert await h.init("t") == (1000, 0)
    assert await h.init("t") == (1000, 1)
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (S.EMPTY, 1, -1)
    [*_, last] = h.log.records(h.coordinator.partition_for("t"))
    assert tl.decode_key(last.key) == tl.TransactionLogKey("t")
    value = tl.decode_value(last.value)
    assert value is not None
    assert (value.producer_id, value.producer_epoch, value.transaction_status, value.partitions) == (
        1000,
        1,
        0,
        None,
    )


async def test_init_with_no_producer_id_available_is_load_in_progress() -> None:
    h = Harness()
    h.producer_ids.unavailable = True
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert (await h.coordinator.init_producer_id(None, TIMEOUT_MS)).error is E.COORDINATOR_LOAD_IN_PROGRESS


async def test_an_exhausted_epoch_moves_to_a_new_producer_id() -> None:
    h = Harness()
    await h.init("t")
    md = h.coordinator.transaction("t")
    assert md is not None
    md.producer_epoch = MAX_PRODUCER_EPOCH - 2  # 32765: one bump left
    assert await h.init("t") == (1000, MAX_PRODUCER_EPOCH - 1)
    assert await h.init("t") == (1001, 0)
    assert (md.previous_producer_id, md.last_producer_epoch) == (1000, -1)


async def test_init_on_an_ongoing_transaction_aborts_it_first() -> None:
    h = Harness()
    pid, epoch = await h.begin("t", ("a", 0), ("b", 1))
    result = await h.coordinator.init_producer_id("t", TIMEOUT_MS)
    assert result.error is E.CONCURRENT_TRANSACTIONS
    await h.settle()
    # The fenced epoch aborts the transaction: markers carry it, it is never handed out.
    assert h.markers.requests == [
        MarkerRequest("t", pid, epoch + 1, 1, False, frozenset({("a", 0), ("b", 1)}))
    ]
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    # The client's retry gets the next epoch.
    assert await h.init("t") == (pid, epoch + 2)
    # The old producer is fenced.
    errors = await h.coordinator.add_partitions("t", pid, epoch, [("a", 0)])
    assert errors == {("a", 0): E.PRODUCER_FENCED}


async def test_init_while_markers_are_written_is_concurrent() -> None:
    h = Harness()
    h.markers.hold = True
    pid, epoch = await h.begin("t")
    assert (await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)).error is E.NONE
    await h.settle()
    assert h.markers.held == 1
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.CONCURRENT_TRANSACTIONS
    assert (await h.coordinator.add_partitions("t", pid, epoch, [("x", 1)])) == {
        ("x", 1): E.CONCURRENT_TRANSACTIONS
    }
    h.markers.release_all()
    await h.settle()
    assert h.coordinator.transaction("t").state is S.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert await h.init("t") == (pid, epoch + 1)


# -- KIP-360: InitProducerId with the producer's id and epoch ----------------------------------------


async def test_kip_360_the_current_producer_bumps_its_epoch() -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    result = await h.coordinator.init_producer_id("t", TIMEOUT_MS, pid, epoch)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, pid, epoch + 1)
    # Its retry (the answer was lost) gets the same epoch again, not a second bump.
    retry = await h.coordinator.init_producer_id("t", TIMEOUT_MS, pid, epoch)
    assert (retry.error, retry.producer_epoch) == (E.NONE, epoch + 1)


async def test_kip_360_another_producer_id_or_an_old_epoch_is_fenced() -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    await h.init("t")
    await h.init("t")  # now epoch + 2; last epoch -1 (a plain re-init)
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS, pid + 7, epoch)).error is E.PRODUCER_FENCED
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS, pid, epoch)).error is E.PRODUCER_FENCED
    assert error_for_version("InitProducerId", 3, E.PRODUCER_FENCED) is E.INVALID_PRODUCER_EPOCH
    assert error_for_version("InitProducerId", 4, E.PRODUCER_FENCED) is E.PRODUCER_FENCED


async def test_kip_360_a_new_transactional_id_accepts_any_identity() -> None:
    h = Harness()
    result = await h.coordinator.init_producer_id("t", TIMEOUT_MS, 77, 3)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, 1000, 0)


async def test_kip_360_a_retry_of_a_rotation_is_answered_with_the_new_id() -> None:
    h = Harness()
    pid, _ = await h.init("t")
    md = h.coordinator.transaction("t")
    assert md is not None
    md.producer_epoch = MAX_PRODUCER_EPOCH - 1
    rotated = await h.coordinator.init_producer_id("t", TIMEOUT_MS, pid, MAX_PRODUCER_EPOCH - 1)
    assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (E.NONE, pid + 1, 0)
    retry = await h.coordinator.init_producer_id("t", TIMEOUT_MS, pid, MAX_PRODUCER_EPOCH - 1)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, pid + 1, 0)


# -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------------


async def test_add_partitions_starts_a_transaction() -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    h.clock.advance(5)
    errors = await h.coordinator.add_partitions("t", pid, epoch, [("a", 0), ("a", 1)])
    assert errors == {("a", 0): E.NONE, ("a", 1): E.NONE}
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.topic_partitions, md.txn_start_timestamp) == (
        S.ONGOING,
        {("a", 0), ("a", 1)},
        T0 + 5,
    )
    writes = len(h.log.appends)
    # Partitions already in the transaction: answered at once, nothing written.
    assert await h.coordinator.add_partitions("t", pid, epoch, [("a", 1)]) == {("a", 1): E.NONE}
    assert len(h.log.appends) == writes
    h.clock.advance(5)
    assert await h.coordinator.add_partitions("t", pid, epoch, [("b", 0)]) == {("b", 0): E.NONE}
    assert md.topic_partitions == {("a", 0), ("a", 1), ("b", 0)}
    assert md.txn_start_timestamp == T0 + 5


async def test_add_partitions_errors() -> None:
    h = Harness()
    tp = ("a", 0)
    assert await h.coordinator.add_partitions("", 1, 0, [tp]) == {tp: E.INVALID_REQUEST}
    assert await h.coordinator.add_partitions("unknown", 1, 0, [tp]) == {tp: E.INVALID_PRODUCER_ID_MAPPING}
    pid, epoch = await h.init("t")
    assert await h.coordinator.add_partitions("t", pid + 1, epoch, [tp]) == {
        tp: E.INVALID_PRODUCER_ID_MAPPING
    }
    await h.init("t")
    assert await h.coordinator.add_partitions("t", pid, epoch, [tp]) == {tp: E.PRODUCER_FENCED}
    assert error_for_version("AddPartitionsToTxn", 1, E.PRODUCER_FENCED) is E.INVALID_PRODUCER_EPOCH
    assert error_for_version("AddOffsetsToTxn", 1, E.PRODUCER_FENCED) is E.INVALID_PRODUCER_EPOCH
    h2 = Harness(load=False)
    assert await h2.coordinator.add_partitions("t", 1, 0, [tp]) == {tp: E.NOT_COORDINATOR}


async def test_add_partitions_during_prepare_commit_is_concurrent() -> None:
    h = Harness()
    h.markers.hold = True
    pid, epoch = await h.begin("t")
    await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    await h.settle()
    assert h.coordinator.transaction("t").state is S.PREPARE_COMMIT  # type: ignore[union-attr]
    assert await h.coordinator.add_partitions("t", pid, epoch, [("z", 0)]) == {
        ("z", 0): E.CONCURRENT_TRANSACTIONS
    }
    h.markers.release_all()
    await h.settle()


async def test_concurrent_requests_for_one_id_wait_for_the_write_in_flight() -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    h.log.hold = True
    first = asyncio.create_task(h.coordinator.add_partitions("t", pid, epoch, [("a", 0)]))
    await asyncio.sleep(0)
    assert h.log.held == 1
    # The same id meanwhile: its transition is pending, the client is told to retry.
    assert await h.coordinator.add_partitions("t", pid, epoch, [("b", 0)]) == {
        ("b", 0): E.CONCURRENT_TRANSACTIONS
    }
    assert (await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)).error is (
        E.CONCURRENT_TRANSACTIONS
    )
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is E.CONCURRENT_TRANSACTIONS
    h.log.release_all()
    assert await first == {("a", 0): E.NONE}


@pytest.mark.parametrize(
    ("log_error", "answer"),
    [
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
        (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
        (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
        (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
        (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
        (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
        (E.INVALID_REQUIRED_ACKS, E.INVALID_REQUIRED_ACKS),
    ],
)
async def test_a_failed_write_is_mapped_and_leaves_the_old_state(
    log_error: ErrorCode, answer: ErrorCode
) -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    h.log.fail_with = log_error
    assert await h.coordinator.add_partitions("t", pid, epoch, [("a", 0)]) == {("a", 0): answer}
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.pending_state, md.topic_partitions) == (S.EMPTY, None, set())
    assert (await h.coordinator.init_producer_id("t", TIMEOUT_MS)).error is answer
    assert md.producer_epoch == epoch
    h.log.fail_with = None
    assert await h.coordinator.add_partitions("t", pid, epoch, [("a", 0)]) == {("a", 0): E.NONE}


async def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    assert await h.coordinator.add_offsets("t", pid, epoch, ("__consumer_offsets", 7)) is E.NONE
    md = h.coordinator.transaction("t")
    assert md is not None
    assert md.topic_partitions == {("__consumer_offsets", 7)}
    assert (
        await h.coordinator.add_offsets("t", pid, epoch + 1, ("__consumer_offsets", 7)) is E.PRODUCER_FENCED
    )


async def test_verify_only_checks_membership_without_writing() -> None:
    h = Harness()
    pid, epoch = await h.begin("t", ("a", 0))
    writes = len(h.log.appends)
    errors = await h.coordinator.add_partitions("t", pid, epoch, [("a", 0), ("b", 0)], verify_only=True)
    assert errors == {("a", 0): E.NONE, ("b", 0): E.TRANSACTION_ABORTABLE}
    assert len(h.log.appends) == writes
    assert h.coordinator.transaction("t").topic_partitions == {("a", 0)}  # type: ignore[union-attr]
    verify = h.coordinator.add_partitions
    assert await verify("t", pid + 1, epoch, [("a", 0)], verify_only=True) == {
        ("a", 0): E.INVALID_PRODUCER_ID_MAPPING
    }
    assert await verify("t", pid, epoch + 1, [("a", 0)], verify_only=True) == {("a", 0): E.PRODUCER_FENCED}
    assert await verify("nope", pid, epoch, [("a", 0)], verify_only=True) == {
        ("a", 0): E.INVALID_PRODUCER_ID_MAPPING
    }
    h.markers.hold = True
    await h.coordinator.end_txn("t", pid, epoch, False, transaction_version=0)
    assert await verify("t", pid, epoch, [("a", 0)], verify_only=True) == {
        ("a", 0): E.CONCURRENT_TRANSACTIONS
    }
    await h.settle()
    h.markers.release_all()
    await h.settle()
    assert await verify("t", pid, epoch, [("a", 0)], verify_only=True) == {("a", 0): E.TRANSACTION_ABORTABLE}


# -- EndTxn (transaction versions 0 and 1) -----------------------------------------------------------


async def test_commit_answers_once_prepare_commit_is_durable_then_marks_then_completes() -> None:
    h = Harness()
    h.markers.hold = True
    pid, epoch = await h.begin("t", ("a", 0), ("b", 2))
    result = await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, -1, -1)
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    await h.settle()
    assert h.markers.requests == [MarkerRequest("t", pid, epoch, 1, True, frozenset({("a", 0), ("b", 2)}))]
    states = [tl.decode_value(a.value).transaction_status for a in h.log.appends]  # type: ignore[union-attr]
    assert states[-1] == S.PREPARE_COMMIT
    h.markers.release_all()
    await h.settle()
    assert (md.state, md.pending_state, md.topic_partitions, md.producer_epoch) == (
        S.COMPLETE_COMMIT,
        None,
        set(),
        epoch,
    )
    last = tl.decode_value(h.log.appends[-1].value)
    assert last is not None
    assert (last.transaction_status, last.partitions) == (S.COMPLETE_COMMIT, ())


async def test_end_txn_without_a_transaction_is_an_invalid_state() -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    assert (
        await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    ).error is E.INVALID_TXN_STATE
    assert (
        await h.coordinator.end_txn("t", pid, epoch, False, transaction_version=0)
    ).error is E.INVALID_TXN_STATE
    assert (
        await h.coordinator.end_txn("", pid, epoch, False, transaction_version=0)
    ).error is E.INVALID_REQUEST
    assert (await h.coordinator.end_txn("x", pid, epoch, False, transaction_version=0)).error is (
        E.INVALID_PRODUCER_ID_MAPPING
    )


async def test_end_txn_fenced_and_unknown_producers() -> None:
    h = Harness()
    pid, epoch = await h.begin("t")
    assert (await h.coordinator.end_txn("t", pid + 1, epoch, True, transaction_version=0)).error is (
        E.INVALID_PRODUCER_ID_MAPPING
    )
    assert (
        await h.coordinator.end_txn("t", pid, epoch + 1, True, transaction_version=0)
    ).error is E.PRODUCER_FENCED
    assert (
        await h.coordinator.end_txn("t", pid, epoch - 1, True, transaction_version=0)
    ).error is E.PRODUCER_FENCED
    assert error_for_version("EndTxn", 1, E.PRODUCER_FENCED) is E.INVALID_PRODUCER_EPOCH


async def test_a_retried_end_txn_after_completion() -> None:
    h = Harness()
    pid, epoch = await h.begin("t")
    await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    await h.settle()
    assert (await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)).error is E.NONE
    assert (
        await h.coordinator.end_txn("t", pid, epoch, False, transaction_version=0)
    ).error is E.INVALID_TXN_STATE
    assert len(h.markers.requests) == 1


async def test_a_retried_end_txn_while_completing() -> None:
    h = Harness()
    h.markers.hold = True
    pid, epoch = await h.begin("t")
    await h.coordinator.end_txn("t", pid, epoch, False, transaction_version=0)
    await h.settle()
    assert (await h.coordinator.end_txn("t", pid, epoch, False, transaction_version=0)).error is (
        E.CONCURRENT_TRANSACTIONS
    )
    h.markers.release_all()
    await h.settle()
    assert (await h.coordinator.end_txn("t", pid, epoch, False, transaction_version=0)).error is E.NONE
    assert (
        await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    ).error is E.INVALID_TXN_STATE


async def test_a_failed_prepare_write_leaves_the_transaction_ongoing() -> None:
    h = Harness()
    pid, epoch = await h.begin("t")
    h.log.fail_with = E.NOT_LEADER_OR_FOLLOWER
    assert (
        await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    ).error is E.NOT_COORDINATOR
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.pending_state) == (S.ONGOING, None)
    assert h.markers.requests == []
    h.log.fail_with = None
    assert (await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)).error is E.NONE


async def test_a_failed_complete_write_is_retried_by_the_periodic_task() -> None:
    h = Harness()
    pid, epoch = await h.begin("t")
    h.markers.hold = True
    await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    await h.settle()
    h.log.fail_with = E.NOT_ENOUGH_REPLICAS
    h.markers.release_all()
    await h.settle()
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    h.log.fail_with = None
    assert await h.coordinator.abort_timed_out_transactions() == 0
    await h.settle()
    assert (md.state, md.pending_state) == (S.COMPLETE_COMMIT, None)
    assert len(h.markers.requests) == 1


async def test_a_fenced_coordinator_stops_completing() -> None:
    h = Harness()
    pid, epoch = await h.begin("t")
    h.markers.fence = True
    await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    await h.settle()
    md = h.coordinator.transaction("t")
    assert md is not None
    assert md.state is S.PREPARE_COMMIT


# -- EndTxn with transaction version 2 (KIP-890 part 2) ----------------------------------------------


async def test_v2_every_end_bumps_the_epoch_and_answers_the_new_one() -> None:
    h = Harness()
    pid, epoch = await h.begin("t", transaction_version=2)
    result = await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=2)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, pid, epoch + 1)
    await h.settle()
    # Markers carry the bumped epoch.
    assert h.markers.requests[-1].producer_epoch == epoch + 1
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (S.COMPLETE_COMMIT, epoch + 1, epoch + 1)
    # A retry with the old epoch is answered with the new one; the opposite result is refused.
    retry = await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=2)
    assert (retry.error, retry.producer_epoch) == (E.NONE, epoch + 1)
    assert (
        await h.coordinator.end_txn("t", pid, epoch, False, transaction_version=2)
    ).error is E.INVALID_TXN_STATE
    # The next transaction runs at the new epoch; the old one is fenced.
    assert await h.coordinator.add_partitions("t", pid, epoch, [("a", 0)], transaction_version=2) == {
        ("a", 0): E.PRODUCER_FENCED
    }
    assert await h.coordinator.add_partitions("t", pid, epoch + 1, [("a", 0)], transaction_version=2) == {
        ("a", 0): E.NONE
    }


async def test_v2_an_abort_with_nothing_added_bumps_the_epoch_without_markers() -> None:
    h = Harness()
    pid, epoch = await h.init("t")
    result = await h.coordinator.end_txn("t", pid, epoch, False, transaction_version=2)
    assert (result.error, result.producer_epoch) == (E.NONE, epoch + 1)
    await h.settle()
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    assert h.markers.requests == []
    assert (await h.coordinator.end_txn("t", pid, epoch + 1, True, transaction_version=2)).error is (
        E.INVALID_TXN_STATE
    )


async def test_v2_exhausting_the_epoch_moves_to_a_new_producer_id_after_the_markers() -> None:
    h = Harness()
    pid, _ = await h.init("t")
    md = h.coordinator.transaction("t")
    assert md is not None
    md.producer_epoch = MAX_PRODUCER_EPOCH - 1  # 32766: exhausted
    await h.coordinator.add_partitions("t", pid, MAX_PRODUCER_EPOCH - 1, [("a", 0)], transaction_version=2)
    h.markers.hold = True
    result = await h.coordinator.end_txn("t", pid, MAX_PRODUCER_EPOCH - 1, True, transaction_version=2)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, pid + 1, 0)
    await h.settle()
    assert h.markers.requests[-1].producer_id == pid
    assert h.markers.requests[-1].producer_epoch == MAX_PRODUCER_EPOCH
    h.markers.release_all()
    await h.settle()
    assert (md.state, md.producer_id, md.producer_epoch, md.previous_producer_id) == (
        S.COMPLETE_COMMIT,
        pid + 1,
        0,
        pid,
    )
    # A retry from before the rotation is recognised.
    retry = await h.coordinator.end_txn("t", pid, MAX_PRODUCER_EPOCH - 1, True, transaction_version=2)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, pid + 1, 0)


# -- timeouts ----------------------------------------------------------------------------------------


async def test_a_timed_out_transaction_is_aborted_with_a_fenced_epoch() -> None:
    h = Harness(
        TransactionConfig(transaction_state_log_num_partitions=PARTITIONS, transaction_version_level=0)
    )
    pid, epoch = await h.begin("t", ("a", 0))
    await h.begin("other", ("b", 0))
    h.clock.advance(TIMEOUT_MS)
    assert await h.coordinator.abort_timed_out_transactions() == 0  # not past the timeout yet
    h.clock.advance(1)
    assert await h.coordinator.abort_timed_out_transactions() == 2
    await h.settle()
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (S.COMPLETE_ABORT, epoch + 1, -1)
    assert MarkerRequest("t", pid, epoch + 1, 1, False, frozenset({("a", 0)})) in h.markers.requests
    # The producer learns it was fenced.
    assert (
        await h.coordinator.end_txn("t", pid, epoch, True, transaction_version=0)
    ).error is E.PRODUCER_FENCED
    assert await h.coordinator.add_partitions("t", pid, epoch, [("a", 0)]) == {("a", 0): E.PRODUCER_FENCED}


async def test_a_timeout_abort_with_transaction_version_2_bumps_once() -> None:
    h = Harness()  # transaction.version 2: the coordinator's own aborts use it
    pid, _ = await h.begin("t", ("a", 0))
    md = h.coordinator.transaction("t")
    assert md is not None
    md.producer_epoch = MAX_PRODUCER_EPOCH - 1
    h.clock.advance(TIMEOUT_MS + 1)
    assert await h.coordinator.abort_timed_out_transactions() == 1
    await h.settle()
    assert (md.state, md.producer_id, md.producer_epoch) == (S.COMPLETE_ABORT, pid, MAX_PRODUCER_EPOCH)
    assert await h.init("t") == (pid + 1, 0)


async def test_a_failed_fence_is_not_bumped_again() -> None:
    h = Harness(
        TransactionConfig(transaction_state_log_num_partitions=PARTITIONS, transaction_version_level=0)
    )
    _, epoch = await h.begin("t")
    h.clock.advance(TIMEOUT_MS + 1)
    h.log.fail_with = E.NOT_ENOUGH_REPLICAS
    assert await h.coordinator.abort_timed_out_transactions() == 1
    await h.settle()
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.pending_state, md.producer_epoch, md.has_failed_epoch_fence) == (
        S.ONGOING,
        None,
        epoch + 1,
        True,
    )
    h.log.fail_with = None
    assert await h.coordinator.abort_timed_out_transactions() == 1
    await h.settle()
    assert (md.state, md.producer_epoch, md.has_failed_epoch_fence) == (S.COMPLETE_ABORT, epoch + 1, False)


# -- expiration --------------------------------------------------------------------------------------


async def test_expiration_removes_only_idle_ids_and_writes_tombstones() -> None:
    config = TransactionConfig(
        transaction_state_log_num_partitions=PARTITIONS, transactional_id_expiration_ms=1000
    )
    h = Harness(config)
    await h.init("empty")
    pid, epoch = await h.begin("done")
    await h.coordinator.end_txn("done", pid, epoch, True, transaction_version=0)
    await h.begin("open")
    await h.settle()
    h.clock.advance(999)
    assert await h.coordinator.expire_transactional_ids() == 0
    h.clock.advance(1)
    assert await h.coordinator.expire_transactional_ids() == 2
    assert {md.transactional_id for md in h.coordinator.transactions()} == {"open"}
    tombstones = [tl.decode_key(a.key) for a in h.log.appends if a.value is None]
    assert sorted(tombstones) == [tl.TransactionLogKey("done"), tl.TransactionLogKey("empty")]
    # A new coordinator loading the log knows only "open".
    assert {md.transactional_id for md in h.fresh().transactions()} == {"open"}
    # The id can be used again: a new producer id.
    result = await h.coordinator.init_producer_id("empty", TIMEOUT_MS)
    assert (result.error, result.producer_epoch) == (E.NONE, 0)


async def test_a_failed_tombstone_keeps_the_id() -> None:
    config = TransactionConfig(
        transaction_state_log_num_partitions=PARTITIONS, transactional_id_expiration_ms=1000
    )
    h = Harness(config)
    await h.init("t")
    h.clock.advance(1000)
    h.log.fail_with = E.NOT_ENOUGH_REPLICAS
    assert await h.coordinator.expire_transactional_ids() == 0
    md = h.coordinator.transaction("t")
    assert md is not None
    assert (md.state, md.pending_state) == (S.EMPTY, None)


# -- describe and list -------------------------------------------------------------------------------


async def test_describe_transactions() -> None:
    h = Harness()
    pid, epoch = await h.begin("t", ("b", 1), ("a", 0), ("b", 0))
    [described, missing, empty] = h.coordinator.describe_transactions(["t", "nope", ""])
    assert described.error is E.NONE
    assert (described.state, described.producer_id, described.producer_epoch) == ("Ongoing", pid, epoch)
    assert (described.transaction_timeout_ms, described.transaction_start_time_ms) == (TIMEOUT_MS, T0)
    assert described.topics == (("a", (0,)), ("b", (0, 1)))
    assert missing.error is E.TRANSACTIONAL_ID_NOT_FOUND
    assert empty.error is E.INVALID_REQUEST
    h.coordinator.unload_partition(h.coordinator.partition_for("t"))
    assert h.coordinator.describe_transactions(["t"])[0].error is E.NOT_COORDINATOR


async def test_list_transactions_with_filters() -> None:
    h = Harness()
    pid_a, _ = await h.begin("a")
    h.clock.advance(100)
    pid_b, _ = await h.init("b")
    listing = h.coordinator.list_transactions([], [], -1)
    assert listing.error is E.NONE
    assert sorted((t.transactional_id, t.producer_id, t.state) for t in listing.transactions) == [
        ("a", pid_a, "Ongoing"),
        ("b", pid_b, "Empty"),
    ]
    by_state = h.coordinator.list_transactions(["Ongoing", "Bogus"], [], -1)
    assert [t.transactional_id for t in by_state.transactions] == ["a"]
    assert by_state.unknown_state_filters == ("Bogus",)
    assert [t.transactional_id for t in h.coordinator.list_transactions([], [pid_b], -1).transactions] == [
        "b"
    ]
    # Running longer than 50 ms: "a" started 100 ms ago ("b" has no start: -1, always long).
    assert {t.transactional_id for t in h.coordinator.list_transactions([], [], 50).transactions} == {
        "a",
        "b",
    }
    assert {t.transactional_id for t in h.coordinator.list_transactions([], [], 100).transactions} == {"b"}
    h.coordinator.begin_loading(0, 2)
    assert h.coordinator.list_transactions([], [], -1).error is E.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.shutdown()
    assert h.coordinator.list_transactions([], [], -1).error is E.COORDINATOR_NOT_AVAILABLE
    assert h.coordinator.describe_transactions(["a"])[0].error is E.COORDINATOR_NOT_AVAILABLE
