"""Transaction states and the two-step transitions of TransactionMetadata."""

from __future__ import annotations

import pytest

from coordinator.transaction import TransactionMetadata, TransactionState, TransactionStateError

S = TransactionState


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert S.from_name("PrepareAbort") is S.PREPARE_ABORT
    assert S.from_name("prepareabort") is None
    with pytest.raises(ValueError):
        S.from_id(8)


def test_legal_transitions() -> None:
    assert S.PREPARE_COMMIT.valid_previous_states == {S.ONGOING}
    assert S.COMPLETE_ABORT.valid_previous_states == {S.PREPARE_ABORT}
    assert S.EMPTY.valid_previous_states == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def _metadata(state: S = S.EMPTY) -> TransactionMetadata:
    return TransactionMetadata("t", 5, 3, 1000, state, 10)


def test_a_transition_is_pending_until_completed() -> None:
    md = _metadata()
    transit = md.prepare_add_partitions([("a", 0)], 20, 0)
    assert (md.state, md.pending_state, md.topic_partitions) == (S.EMPTY, S.ONGOING, set())
    with pytest.raises(TransactionStateError):
        md.prepare_add_partitions([("b", 0)], 21, 0)  # one transition at a time
    md.complete_transition_to(transit)
    assert (md.state, md.pending_state, md.topic_partitions, md.txn_start_timestamp) == (
        S.ONGOING,
        None,
        {("a", 0)},
        20,
    )


def test_illegal_transitions_raise() -> None:
    md = _metadata()
    with pytest.raises(TransactionStateError):
        md.prepare_abort_or_commit(S.PREPARE_COMMIT, 0, -1, 20)
    with pytest.raises(TransactionStateError):
        md.prepare_fence_producer_epoch()
    md.pending_state = None
    transit = md.prepare_increment_producer_epoch(1000, None, 20)
    assert transit is not None
    md.pending_state = S.ONGOING  # not what was prepared
    with pytest.raises(TransactionStateError):
        md.complete_transition_to(transit)


def test_kip_360_epoch_choices() -> None:
    md = _metadata()
    bump = md.prepare_increment_producer_epoch(1000, 3, 20)
    assert bump is not None
    assert (bump.producer_epoch, bump.last_producer_epoch) == (4, 3)
    md.complete_transition_to(bump)
    retry = md.prepare_increment_producer_epoch(1000, 3, 21)
    assert retry is not None
    assert (retry.producer_epoch, retry.last_producer_epoch) == (4, 3)
    md.complete_transition_to(retry)
    assert md.prepare_increment_producer_epoch(1000, 1, 22) is None
    assert md.pending_state is None
