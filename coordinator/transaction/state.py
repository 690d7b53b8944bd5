"""The states of a transactional id, with Kafka's ids, names and legal transitions.

The id is what ``__transaction_state`` stores (``TransactionStatus``); the name is what
DescribeTransactions and ListTransactions report. A state lists the states it may be entered from
(Kafka's ``validPreviousStates``)::

    Empty              <- Empty, CompleteCommit, CompleteAbort          (InitProducerId)
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitions / AddOffsets)
    PrepareCommit      <- Ongoing                                       (EndTxn commit)
    PrepareAbort       <- Ongoing, PrepareEpochFence                    (EndTxn abort, fence, timeout)
                          (+ Empty, CompleteCommit, CompleteAbort for transaction version 2's abort
                          of a transaction that added no partition)
    CompleteCommit     <- PrepareCommit                                 (markers written)
    CompleteAbort      <- PrepareAbort                                  (markers written)
    Dead               <- Empty, CompleteCommit, CompleteAbort          (transactional id expired)
    PrepareEpochFence  <- Ongoing                                       (only ever a pending state)
"""

from __future__ import annotations

from enum import IntEnum


class TransactionState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka reports ("Empty", "PrepareCommit", ...)."""
        return _NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _PREVIOUS[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may expire (no transaction open)."""
        return self in _EXPIRABLE

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        """The state of a stored id (ValueError for an unknown one, as Kafka's loader fails)."""
        try:
            return cls(state_id)
        except ValueError:
            raise ValueError(f"unknown transaction state id {state_id}") from None

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state called ``name`` (exact, as Kafka's ``fromName``), or None."""
        return _BY_NAME.get(name)


S = TransactionState
_NAMES: dict[TransactionState, str] = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_IDLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: _IDLE,
    S.ONGOING: _IDLE | {S.ONGOING},
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}) | _IDLE,
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: _IDLE,
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
_EXPIRABLE = _IDLE
del S
