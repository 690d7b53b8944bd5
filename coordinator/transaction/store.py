"""Which transactional ids this coordinator holds, and the writes that move them (Kafka's
``TransactionStateManager``).

A transactional id belongs to partition ``abs(java_hash(id)) % partitions`` of
``__transaction_state``; the broker leading that partition is its coordinator, and the partition's
leader epoch is the *coordinator epoch*. A partition is *loading* while its records are read back,
then *owned* with its transactional ids until leadership moves. Every write re-checks, once it has
resolved, that the partition is still owned at the same coordinator epoch and that the id is still
the same object: otherwise the write is not applied and NOT_COORDINATOR is answered, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import structlog

from coordinator.transaction.log import TransactionLog, transaction_log_error
from coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from coordinator.transaction.records import transit_value
from coordinator.transaction.state import TransactionState
from protocol import transaction_log as tl
from protocol.error_codes import ErrorCode
from server_common.java_hash import java_string_hash, utils_abs
from storage.clock import Clock

_log = structlog.get_logger("kipling.transactions.store")


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``."""
    return utils_abs(java_string_hash(transactional_id)) % num_partitions


@dataclass(slots=True)
class OwnedPartition:
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Held:
    """A transactional id held here, with the coordinator epoch of its partition."""

    coordinator_epoch: int
    metadata: TransactionMetadata


def _never(error: ErrorCode) -> bool:
    return False


class TransactionStore:
    def __init__(
        self, log: TransactionLog, clock: Clock, num_partitions: int, transaction_version_level: int
    ) -> None:
        if num_partitions < 1:
            raise ValueError(f"__transaction_state must have at least 1 partition, got {num_partitions}")
        self.num_partitions = num_partitions
        self.transaction_version_level = transaction_version_level
        self._log = log
        self._clock = clock
        self._owned: dict[int, OwnedPartition] = {}
        self._loading: dict[int, int] = {}

    # -- partitions -----------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.num_partitions:
            raise ValueError(
                f"__transaction_state has no partition {partition} ({self.num_partitions} partitions)"
            )

    @property
    def any_loading(self) -> bool:
        return bool(self._loading)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._owned)

    def loading_epoch(self, partition: int) -> int | None:
        return self._loading.get(partition)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        self.check_partition(partition)
        self._owned.pop(partition, None)
        self._loading[partition] = coordinator_epoch

    def finish_loading(
        self, partition: int, coordinator_epoch: int, transactions: dict[str, TransactionMetadata]
    ) -> None:
        self._loading.pop(partition, None)
        self._owned[partition] = OwnedPartition(coordinator_epoch, transactions)

    def release(self, partition: int) -> None:
        self._loading.pop(partition, None)
        self._owned.pop(partition, None)

    def held_in(self, partition: int) -> Iterator[Held]:
        owned = self._owned.get(partition)
        if owned is None:
            return
        for metadata in list(owned.transactions.values()):
            yield Held(owned.coordinator_epoch, metadata)

    def all_held(self) -> Iterator[Held]:
        for partition in list(self._owned):
            yield from self.held_in(partition)

    # -- transactional ids ----------------------------------------------------------------------------

    def lookup(self, transactional_id: str) -> ErrorCode | Held | None:
        """Kafka's ``getTransactionState``: the id held here, None if this coordinator owns its
        partition but does not know it, or why this coordinator cannot tell."""
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        owned = self._owned.get(partition)
        if owned is None:
            return ErrorCode.NOT_COORDINATOR
        metadata = owned.transactions.get(transactional_id)
        return None if metadata is None else Held(owned.coordinator_epoch, metadata)

    def put_if_absent(self, metadata: TransactionMetadata) -> ErrorCode | Held:
        partition = self.partition_for(metadata.transactional_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        owned = self._owned.get(partition)
        if owned is None:
            return ErrorCode.NOT_COORDINATOR
        kept = owned.transactions.setdefault(metadata.transactional_id, metadata)
        return Held(owned.coordinator_epoch, kept)

    def is_current(self, held: Held) -> bool:
        """Whether ``held`` is still what this coordinator holds for its id, at the same epoch."""
        now = self.lookup(held.metadata.transactional_id)
        return (
            isinstance(now, Held)
            and now.coordinator_epoch == held.coordinator_epoch
            and now.metadata is held.metadata
        )

    def remove(self, held: Held) -> bool:
        if not self.is_current(held):
            return False
        owned = self._owned[self.partition_for(held.metadata.transactional_id)]
        del owned.transactions[held.metadata.transactional_id]
        return True

    # -- writes ---------------------------------------------------------------------------------------

    async def append_transition(
        self,
        held: Held,
        transit: TxnTransitMetadata,
        *,
        retry_on: Callable[[ErrorCode], bool] = _never,
    ) -> ErrorCode:
        """Kafka's ``appendTransactionToLog``: write ``transit`` for the id ``held`` and apply it
        once durable. A failure answers the mapped error and clears the pending state (unless the
        caller will retry the same write: ``retry_on``); nothing changes once the id has moved."""
        metadata = held.metadata
        if not self.is_current(held):
            found = self.lookup(metadata.transactional_id)
            return found if isinstance(found, ErrorCode) else ErrorCode.NOT_COORDINATOR
        key = tl.encode_key(metadata.transactional_id)
        value = transit_value(transit, self.transaction_version_level, metadata.producer_ids_after(transit))
        partition = self.partition_for(metadata.transactional_id)
        raw = await self._log.append(partition, key, value, self._clock.time_ms())
        error = transaction_log_error(raw)
        if error is ErrorCode.NONE:
            if not self.is_current(held):
                found = self.lookup(metadata.transactional_id)
                _log.info(
                    "transaction moved while its state was written; not applied",
                    transactional_id=metadata.transactional_id,
                    state=transit.state.kafka_name,
                )
                return found if isinstance(found, ErrorCode) else ErrorCode.NOT_COORDINATOR
            metadata.complete_transition_to(transit)
            return ErrorCode.NONE
        _log.info(
            "writing transaction state failed",
            transactional_id=metadata.transactional_id,
            state=transit.state.kafka_name,
            error=raw.name,
        )
        if self.is_current(held) and not retry_on(error):
            metadata.pending_state = None
        return error

    async def append_tombstone(self, held: Held) -> ErrorCode:
        """Expire the id ``held`` (pending Dead): write its tombstone, then forget it."""
        metadata = held.metadata
        if not self.is_current(held):
            # The partition was reloaded (or moved) since the id was marked for expiry: the id may
            # be in use again, and a tombstone now would delete it from the log.
            return ErrorCode.NOT_COORDINATOR
        key = tl.encode_key(metadata.transactional_id)
        partition = self.partition_for(metadata.transactional_id)
        epoch = metadata.producer_epoch
        raw = await self._log.append(partition, key, None, self._clock.time_ms())
        error = transaction_log_error(raw)
        if not self.is_current(held):
            return error if error is not ErrorCode.NONE else ErrorCode.NOT_COORDINATOR
        if (
            error is ErrorCode.NONE
            and metadata.pending_state is TransactionState.DEAD
            and metadata.producer_epoch == epoch
        ):
            self.remove(held)
            return ErrorCode.NONE
        _log.warning(
            "expired transactional id not removed",
            transactional_id=metadata.transactional_id,
            error=raw.name,
        )
        metadata.pending_state = None
        return error if error is not ErrorCode.NONE else ErrorCode.UNKNOWN_SERVER_ERROR
