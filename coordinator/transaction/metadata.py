"""One transactional id's state (Kafka's ``TransactionMetadata``) and the transitions it goes through.

A transition is made in two steps, as in Kafka. ``prepare_*`` checks that the move is legal, records
the target state in :attr:`TransactionMetadata.pending_state` (so no second transition can start)
and returns a :class:`TxnTransitMetadata`: the state to write to ``__transaction_state``. Only once
that write succeeded does :meth:`TransactionMetadata.complete_transition_to` apply it; a failed write
clears the pending state and leaves the old state in place. Illegal moves raise
:class:`TransactionStateError`: they are coordinator bugs, never answers to clients.

Epochs: a producer may not use ``Short.MAX_VALUE`` (32767), so that the coordinator can always fence
it by one more bump; an epoch of 32766 or more is *exhausted* and the next InitProducerId (or, with
transaction version 2, the next EndTxn) moves the transactional id to a new producer id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn

from coordinator.transaction.state import TransactionState
from protocol.transaction_log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

S = TransactionState
MAX_PRODUCER_EPOCH = 32767
"""Java's Short.MAX_VALUE: the highest epoch, reached only by a fence."""

TopicPartition = tuple[str, int]


class TransactionStateError(RuntimeError):
    """An illegal transition was attempted: a coordinator bug (Kafka's IllegalStateException)."""


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka's ``isEpochExhausted``: no client may be given an epoch past 32766."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


def supports_epoch_bump(transaction_version: int) -> bool:
    """Transaction version 2 (KIP-890 part 2): every commit or abort bumps the producer epoch."""
    return transaction_version >= 2


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The state a transition leads to: what is written to the log, applied once it is written."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


class TransactionMetadata:
    """What the coordinator knows of one transactional id (Kafka's fields and names)."""

    __slots__ = (
        "client_transaction_version",
        "has_failed_epoch_fence",
        "last_producer_epoch",
        "next_producer_id",
        "pending_state",
        "previous_producer_id",
        "producer_epoch",
        "producer_id",
        "state",
        "topic_partitions",
        "transactional_id",
        "txn_last_update_timestamp",
        "txn_start_timestamp",
        "txn_timeout_ms",
    )

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        txn_timeout_ms: int,
        state: TransactionState,
        txn_last_update_timestamp: int,
        *,
        previous_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        topic_partitions: Iterable[TopicPartition] = (),
        txn_start_timestamp: int = -1,
        client_transaction_version: int = 0,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions)
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.client_transaction_version = client_transaction_version
        self.pending_state: TransactionState | None = None
        self.has_failed_epoch_fence = False
        """A fence (epoch bump) was prepared but its write failed: the in-memory epoch is already
        bumped, so the next fence must not bump it again (it was never given to a client)."""

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, producer_id={self.producer_id}, "
            f"epoch={self.producer_epoch}, last_epoch={self.last_producer_epoch}, "
            f"state={self.state.kafka_name}, pending={self.pending_state}, "
            f"partitions={sorted(self.topic_partitions)})"
        )

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def remove_partition(self, partition: TopicPartition) -> None:
        """A marker was written (or the partition is gone): only while completing."""
        if not self.state.is_prepare:
            raise TransactionStateError(f"{self}: removing a marked partition outside PrepareCommit/Abort")
        self.topic_partitions.discard(partition)

    # -- prepare --------------------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the current producer before aborting its transaction (unless a
        previous fence failed to be written: that bump is reused)."""
        if self.has_failed_epoch_fence:
            bumped = self.producer_epoch
        elif self.producer_epoch == MAX_PRODUCER_EPOCH:
            raise TransactionStateError(f"{self}: cannot fence an epoch of {MAX_PRODUCER_EPOCH}")
        else:
            bumped = self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE, producer_epoch=bumped, last_producer_epoch=NO_PRODUCER_EPOCH
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata | None:
        """InitProducerId on an idle id: the next epoch, or None when ``expected_producer_epoch``
        (KIP-360) is neither the current nor the last epoch (the caller answers PRODUCER_FENCED)."""
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            # The producer recovers from an error and nobody re-initialized meanwhile: bump.
            epoch, last = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: hand out the same epoch again.
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        if epoch == bumped and self.is_producer_epoch_exhausted:
            raise TransactionStateError(f"{self}: no epoch left for producer id {self.producer_id}")
        return self._prepare(
            S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=new_txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=-1,
            now_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId with the epoch exhausted: a new producer id at epoch 0."""
        if self.has_pending_transaction:
            raise TransactionStateError(f"{self}: cannot rotate producer ids while a transaction is open")
        return self._prepare(
            S.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=new_txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=-1,
            now_ms=now_ms,
        )

    def prepare_add_partitions(
        self, added: Iterable[TopicPartition], now_ms: int, client_transaction_version: int
    ) -> TxnTransitMetadata:
        """AddPartitionsToTxn / AddOffsetsToTxn: Ongoing, with the partitions added (a transaction
        starts at the first add after Empty or Complete*)."""
        start = (
            now_ms
            if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
            else self.txn_start_timestamp
        )
        return self._prepare(
            S.ONGOING,
            topic_partitions=frozenset(self.topic_partitions) | frozenset(added),
            txn_start_timestamp=start,
            now_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self,
        new_state: TransactionState,
        client_transaction_version: int,
        next_producer_id: int,
        now_ms: int,
        *,
        no_partition_added: bool = False,
        bump_epoch: bool = True,
    ) -> TxnTransitMetadata:
        """EndTxn: PrepareCommit or PrepareAbort. With transaction version 2 the epoch is bumped
        (``next_producer_id`` set when that bump exhausts it) unless this abort is a fence, whose
        epoch was bumped already (Kafka's fix KAFKA-19367: one bump, never two).
        ``no_partition_added``: version 2's abort of a transaction that added nothing, which starts
        now and has no partition to mark."""
        if supports_epoch_bump(client_transaction_version) and bump_epoch:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            new_state,
            next_producer_id=next_producer_id,
            producer_epoch=epoch,
            last_producer_epoch=last,
            topic_partitions=frozenset() if no_partition_added else None,
            txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
            now_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """The markers are written: CompleteCommit or CompleteAbort. With transaction version 2 and
        a next producer id (the epoch ran out), the id moves to it at epoch 0."""
        new_state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        return self._prepare(
            new_state,
            producer_id=producer_id,
            producer_epoch=epoch,
            last_producer_epoch=self.producer_epoch,
            topic_partitions=frozenset(),
            now_ms=now_ms,
            client_transaction_version=self.client_transaction_version,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """Expiration: the tombstone's transition (never applied: the id is removed instead)."""
        return self._prepare(S.DEAD, topic_partitions=frozenset(), now_ms=self.txn_last_update_timestamp)

    def _prepare(
        self,
        state: TransactionState,
        *,
        producer_id: int | None = None,
        next_producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        topic_partitions: frozenset[TopicPartition] | None = None,
        txn_start_timestamp: int | None = None,
        now_ms: int | None = None,
        client_transaction_version: int = 0,
    ) -> TxnTransitMetadata:
        """Kafka's ``prepareTransitionTo``: validate and set the pending state. Fields left None
        keep their current value. Kafka resets the client transaction version to 0 on transitions
        that do not name one (init, fence, expiry), and so does this."""
        if self.pending_state is not None:
            raise TransactionStateError(
                f"{self}: preparing {state.kafka_name} while {self.pending_state.kafka_name} is pending"
            )
        producer_id = self.producer_id if producer_id is None else producer_id
        epoch = self.producer_epoch if producer_epoch is None else producer_epoch
        if producer_id < 0:
            raise TransactionStateError(f"{self}: illegal new producer id {producer_id}")
        if state is not S.DEAD and not 0 <= epoch <= MAX_PRODUCER_EPOCH:
            raise TransactionStateError(f"{self}: illegal new producer epoch {epoch}")
        if self.state not in state.valid_previous_states:
            raise TransactionStateError(f"{self}: {state.kafka_name} cannot follow {self.state.kafka_name}")
        transit = TxnTransitMetadata(
            producer_id=producer_id,
            previous_producer_id=self.producer_id,
            next_producer_id=next_producer_id,
            producer_epoch=epoch,
            last_producer_epoch=self.last_producer_epoch
            if last_producer_epoch is None
            else last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state=state,
            topic_partitions=frozenset(self.topic_partitions)
            if topic_partitions is None
            else topic_partitions,
            txn_start_timestamp=self.txn_start_timestamp
            if txn_start_timestamp is None
            else txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp if now_ms is None else now_ms,
            client_transaction_version=client_transaction_version,
        )
        self.pending_state = state
        return transit

    # -- complete -------------------------------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply ``transit`` once it is in the log (Kafka's ``completeTransitionTo`` and its checks)."""
        to_state = self.pending_state
        if to_state is None or to_state is not transit.state:
            self._fail(transit)
        if to_state is S.EMPTY:
            bumped = self._valid_epoch_bump(transit)
            if (
                (self.producer_epoch != transit.producer_epoch and not bumped)
                or transit.topic_partitions
                or transit.txn_start_timestamp != -1
            ):
                self._fail(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.previous_producer_id = transit.previous_producer_id
            # As written (-1): Kafka keeps the last transaction's start in memory until a reload.
            self.txn_start_timestamp = transit.txn_start_timestamp
        elif to_state is S.ONGOING:
            if (
                not self._valid_producer_epoch(transit)
                or not self.topic_partitions <= transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions |= transit.topic_partitions
        elif to_state.is_prepare:
            if not self._valid_producer_epoch(transit) or self.txn_timeout_ms != transit.txn_timeout_ms:
                self._fail(transit)
            # An abort that added no partition (version 2) starts now with no partition; any
            # other prepare keeps the transaction's partitions and start time.
            no_partition_added = not transit.topic_partitions and self.state is not S.ONGOING
            if not no_partition_added and (
                set(self.topic_partitions) != transit.topic_partitions
                or self.txn_start_timestamp != transit.txn_start_timestamp
            ):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions = set(transit.topic_partitions)
            if supports_epoch_bump(transit.client_transaction_version):
                self.producer_epoch = transit.producer_epoch
                self.last_producer_epoch = transit.last_producer_epoch
                self.next_producer_id = transit.next_producer_id
        elif to_state.is_complete:
            if (
                not self._valid_producer_epoch(transit)
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp == -1
            ):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
            if supports_epoch_bump(transit.client_transaction_version):
                self.producer_epoch = transit.producer_epoch
                self.last_producer_epoch = transit.last_producer_epoch
                self.previous_producer_id = transit.previous_producer_id
                self.producer_id = transit.producer_id
                self.next_producer_id = transit.next_producer_id
        else:
            # PrepareEpochFence is only ever pending (replaced by PrepareAbort); Dead is removed.
            self._fail(transit)
        self.client_transaction_version = transit.client_transaction_version
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def producer_ids_after(self, transit: TxnTransitMetadata) -> tuple[int, int]:
        """(previous, next) producer id once ``transit`` is applied: what the log should keep so
        that loading it gives back the same state."""
        v2 = supports_epoch_bump(transit.client_transaction_version)
        if transit.state is S.EMPTY or (v2 and transit.state.is_complete):
            previous = transit.previous_producer_id
        else:
            previous = self.previous_producer_id
        if v2 and (transit.state.is_prepare or transit.state.is_complete):
            return previous, transit.next_producer_id
        return previous, self.next_producer_id

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        v2 = supports_epoch_bump(transit.client_transaction_version)
        if v2 and transit.state.is_prepare and transit.producer_epoch == self.producer_epoch:
            # A fence's abort: its epoch was bumped once already, not again.
            return transit.producer_id == self.producer_id
        overflow_complete = v2 and transit.state.is_complete and transit.producer_epoch == 0
        if overflow_complete or (v2 and transit.state.is_prepare):
            epoch = transit.last_producer_epoch
        else:
            epoch = transit.producer_epoch
        producer_id = transit.previous_producer_id if overflow_complete else transit.producer_id
        return epoch == self.producer_epoch and producer_id == self.producer_id

    def _valid_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _fail(self, transit: TxnTransitMetadata) -> NoReturn:
        raise TransactionStateError(f"{self}: unexpected transition to {transit}")
