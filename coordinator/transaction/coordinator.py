"""The transaction coordinator (Kafka's ``TransactionCoordinator``), free of I/O.

:class:`TransactionCoordinator` is the one object the broker talks to. Requests are async methods
that answer once the state they change is durable in ``__transaction_state`` (through the injected
:class:`~coordinator.transaction.log.TransactionLog`). EndTxn answers once PrepareCommit/PrepareAbort
is written; the markers are then written in the background (the injected
:class:`~coordinator.transaction.markers.TransactionMarkerSender`) and CompleteCommit/CompleteAbort
after them. The background work runs in tasks started by the injected ``spawn``
(``asyncio.create_task``).

One transition per transactional id at a time: a request prepares its transition synchronously (it
becomes the id's *pending state*) before it awaits the write, so a request for the same id that
arrives meanwhile sees the pending state and is answered CONCURRENT_TRANSACTIONS, which clients
retry, exactly as Kafka answers concurrent requests. Between the check and the pending state there
is no await, so no two requests can both pass it.

Leadership of ``__transaction_state`` partitions: :meth:`TransactionCoordinator.begin_loading`
(requests answer COORDINATOR_LOAD_IN_PROGRESS), :meth:`TransactionCoordinator.load_partition` with
the partition's records (transactions found in PrepareCommit/PrepareAbort are completed: markers
again, then Complete*), :meth:`TransactionCoordinator.unload_partition` when leadership goes. The
owner calls :meth:`TransactionCoordinator.abort_timed_out_transactions` every
transaction.abort.timed.out.transaction.cleanup.interval.ms and
:meth:`TransactionCoordinator.expire_transactional_ids` every
transaction.remove.expired.transaction.cleanup.interval.ms.
"""

from __future__ import annotations

from collections.abc import Collection, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from coordinator.transaction.background import BackgroundTask, Spawn
from coordinator.transaction.config import TransactionConfig
from coordinator.transaction.loader import rebuild_transactions
from coordinator.transaction.log import LoggedRecord, TransactionLog
from coordinator.transaction.markers import CoordinatorFencedError, MarkerRequest, TransactionMarkerSender
from coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    TopicPartition,
    TransactionMetadata,
    TransactionStateError,
    TxnTransitMetadata,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from coordinator.transaction.producer_ids import ProducerIdSource, ProducerIdUnavailableError
from coordinator.transaction.results import (
    DescribedTransaction,
    EndTxnResult,
    InitProducerIdResult,
    ListedTransaction,
    ListTransactionsResult,
)
from coordinator.transaction.state import TransactionState
from coordinator.transaction.store import Held, TransactionStore
from protocol.error_codes import ErrorCode
from protocol.transaction_log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, group_partitions
from storage.clock import Clock

_log = structlog.get_logger("kipling.transactions.coordinator")

S = TransactionState
E = ErrorCode
_LEFT_TO_THE_LOADER = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS})


@dataclass(frozen=True, slots=True)
class _EndPlan:
    """An EndTxn whose PrepareCommit/PrepareAbort is prepared and is to be written."""

    held: Held
    transit: TxnTransitMetadata
    producer_id: int
    producer_epoch: int
    commit: bool
    transaction_version: int
    is_epoch_fence: bool


@dataclass(frozen=True, slots=True)
class _Completion:
    """A transaction in PrepareCommit/PrepareAbort: its markers, then its Complete* record."""

    held: Held
    transit: TxnTransitMetadata
    markers: MarkerRequest


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        log: TransactionLog,
        markers: TransactionMarkerSender,
        producer_ids: ProducerIdSource,
        clock: Clock,
        num_partitions: int,
        *,
        spawn: Spawn,
    ) -> None:
        self.config = config
        self.active = True
        self._store = TransactionStore(log, clock, num_partitions, config.transaction_version_level)
        self._markers = markers
        self._producer_ids = producer_ids
        self._clock = clock
        self._spawn = spawn
        self._tasks: dict[int, list[BackgroundTask]] = {}
        self._completion_retries: dict[str, _Completion] = {}

    # -- InitProducerId -------------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitProducerIdResult:
        """A producer (re)starts. Without a transactional id: a fresh producer id at epoch 0.
        With one: the next epoch of its producer id (a new id once the epoch is exhausted); an
        open transaction is aborted first and CONCURRENT_TRANSACTIONS answered, so the client
        retries once the abort is done. ``producer_id``/``producer_epoch`` (KIP-360, both or
        neither) name the producer that asks to continue after an error."""
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitProducerIdResult(E.INVALID_REQUEST)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if transactional_id is None:
            new_id = self._generate_producer_id()
            if isinstance(new_id, ErrorCode):
                return InitProducerIdResult(new_id)
            return InitProducerIdResult(E.NONE, new_id, 0)
        if transactional_id == "":
            return InitProducerIdResult(E.INVALID_REQUEST)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT)
        found = self._store.lookup(transactional_id)
        if found is None:
            new_id = self._generate_producer_id()
            if isinstance(new_id, ErrorCode):
                return InitProducerIdResult(new_id)
            created = TransactionMetadata(
                transactional_id,
                new_id,
                NO_PRODUCER_EPOCH,
                transaction_timeout_ms,
                S.EMPTY,
                self._clock.time_ms(),
            )
            found = self._store.put_if_absent(created)
        if isinstance(found, ErrorCode):
            return InitProducerIdResult(found)
        transit = self._prepare_init(found.metadata, transaction_timeout_ms, expected)
        if isinstance(transit, ErrorCode):
            return InitProducerIdResult(transit)
        if transit.state is S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction with the fenced epoch (never handed out); the client
            # retries and its next InitProducerId bumps the epoch again.
            result = await self._end_transaction(
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                commit=False,
                from_client=False,
                transaction_version=self.config.transaction_version_level,
            )
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS if result.error is E.NONE else result.error)
        error = await self._store.append_transition(found, transit)
        if error is not E.NONE:
            return InitProducerIdResult(error)
        _log.info(
            "initialized transactional id",
            transactional_id=transactional_id,
            producer_id=transit.producer_id,
            producer_epoch=transit.producer_epoch,
        )
        return InitProducerIdResult(E.NONE, transit.producer_id, transit.producer_epoch)

    def _prepare_init(
        self, metadata: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None
    ) -> TxnTransitMetadata | ErrorCode:
        if metadata.pending_transition_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None and not (
            # a just-created id, the current producer id, or a retry of a rotation the client
            # never heard of (the previous id with an exhausted epoch)
            metadata.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == metadata.producer_id
            or (expected[0] == metadata.previous_producer_id and is_epoch_exhausted(expected[1]))
        ):
            return E.PRODUCER_FENCED
        state = metadata.state
        if state.is_prepare:
            return E.CONCURRENT_TRANSACTIONS
        if state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            now = self._clock.time_ms()
            if metadata.is_producer_epoch_exhausted and (
                expected is None or expected[1] == metadata.producer_epoch
            ):
                new_id = self._generate_producer_id()
                if isinstance(new_id, ErrorCode):
                    return new_id
                return metadata.prepare_producer_id_rotation(new_id, timeout_ms, now, expected is not None)
            transit = metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
            return E.PRODUCER_FENCED if transit is None else transit
        if state is S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise TransactionStateError(f"{metadata}: found in state {state.kafka_name}, which is never held")

    def _generate_producer_id(self) -> int | ErrorCode:
        try:
            return self._producer_ids.generate_producer_id()
        except ProducerIdUnavailableError:
            _log.info("no producer id available")
            return E.COORDINATOR_LOAD_IN_PROGRESS

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[tuple[str, int]],
        *,
        verify_only: bool = False,
        transaction_version: int = 0,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Add ``partitions`` to the producer's transaction (starting one if none is open); every
        partition gets the one answer. ``verify_only`` (AddPartitionsToTxn v4+ from a partition
        leader, KIP-890 part 1) checks without writing: NONE for partitions in the transaction,
        TRANSACTION_ABORTABLE for the others."""
        wanted = list(dict.fromkeys(partitions))
        if not transactional_id:
            return dict.fromkeys(wanted, E.INVALID_REQUEST)
        if verify_only:
            return self._verify(transactional_id, producer_id, producer_epoch, wanted)
        found = self._store.lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(wanted, found)
        if found is None:
            return dict.fromkeys(wanted, E.INVALID_PRODUCER_ID_MAPPING)
        metadata = found.metadata
        if metadata.producer_id != producer_id:
            return dict.fromkeys(wanted, E.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return dict.fromkeys(wanted, E.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress or metadata.state.is_prepare:
            return dict.fromkeys(wanted, E.CONCURRENT_TRANSACTIONS)
        if metadata.state is S.ONGOING and set(wanted) <= metadata.topic_partitions:
            return dict.fromkeys(wanted, E.NONE)
        transit = metadata.prepare_add_partitions(wanted, self._clock.time_ms(), transaction_version)
        error = await self._store.append_transition(found, transit)
        return dict.fromkeys(wanted, error)

    def _verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[tuple[str, int], ErrorCode]:
        found = self._store.lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(partitions, found)
        if found is None or found.metadata.producer_id != producer_id:
            return dict.fromkeys(partitions, E.INVALID_PRODUCER_ID_MAPPING)
        metadata = found.metadata
        if metadata.producer_epoch != producer_epoch:
            return dict.fromkeys(partitions, E.PRODUCER_FENCED)
        if metadata.state.is_prepare:
            return dict.fromkeys(partitions, E.CONCURRENT_TRANSACTIONS)
        return {p: E.NONE if p in metadata.topic_partitions else E.TRANSACTION_ABORTABLE for p in partitions}

    async def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_partition: tuple[str, int],
        *,
        transaction_version: int = 0,
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        errors = await self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            [group_partition],
            transaction_version=transaction_version,
        )
        return errors[group_partition]

    # -- EndTxn ---------------------------------------------------------------------------------------

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        transaction_version: int,
    ) -> EndTxnResult:
        """Commit or abort the open transaction. Answers once PrepareCommit/PrepareAbort is durable;
        markers and Complete* follow in the background. ``transaction_version`` is 2 for EndTxn v5+
        (KIP-890 part 2: every commit or abort bumps the epoch, and the result carries the
        producer id and epoch to continue with)."""
        return await self._end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            commit=commit,
            from_client=True,
            transaction_version=transaction_version,
        )

    async def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        from_client: bool,
        transaction_version: int,
    ) -> EndTxnResult:
        plan = self._prepare_end(
            transactional_id, producer_id, producer_epoch, commit, from_client, transaction_version
        )
        if isinstance(plan, EndTxnResult):
            return plan
        return await self._write_end(plan)

    def _prepare_end(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        transaction_version: int,
    ) -> _EndPlan | EndTxnResult:
        """Everything EndTxn does before its write, with no await: a plan, or the answer."""
        if not transactional_id:
            return EndTxnResult(E.INVALID_REQUEST)
        found = self._store.lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return EndTxnResult(found)
        if found is None:
            return EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
        if supports_epoch_bump(transaction_version):
            decision = self._decide_end_v2(found.metadata, producer_id, producer_epoch, commit, from_client)
        else:
            decision = self._decide_end_v1(found.metadata, producer_id, producer_epoch, commit, from_client)
        if isinstance(decision, ErrorCode):
            if decision is not E.NONE:
                return EndTxnResult(decision)
            # Already completed with this result: a retry.
            if supports_epoch_bump(transaction_version):
                return EndTxnResult(E.NONE, found.metadata.producer_id, found.metadata.producer_epoch)
            return EndTxnResult(E.NONE)
        no_partition_added, is_epoch_fence = decision
        return self._plan_end(
            found,
            producer_id,
            producer_epoch,
            commit,
            transaction_version,
            no_partition_added,
            is_epoch_fence,
        )

    def _decide_end_v1(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
    ) -> ErrorCode | tuple[bool, bool]:
        """Transaction versions 0 and 1: (no partition added, is epoch fence) to go on, or the
        answer (NONE: already completed that way)."""
        if metadata.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        # A client's epoch must match exactly; the coordinator's own abort may carry a higher one.
        if (
            from_client and producer_epoch != metadata.producer_epoch
        ) or producer_epoch < metadata.producer_epoch:
            return E.PRODUCER_FENCED
        is_epoch_fence = metadata.pending_state is S.PREPARE_EPOCH_FENCE
        if metadata.pending_transition_in_progress and not is_epoch_fence:
            return E.CONCURRENT_TRANSACTIONS
        return self._decide_by_state(metadata, commit, is_retry=True, v2=False, is_epoch_fence=is_epoch_fence)

    def _decide_end_v2(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
    ) -> ErrorCode | tuple[bool, bool]:
        """Transaction version 2: a retry is recognised by the epoch being one behind (or by the
        previous producer id at the last epoch after a rotation)."""
        is_epoch_fence = metadata.pending_state is S.PREPARE_EPOCH_FENCE
        retry_on_overflow = (
            not is_epoch_fence
            and metadata.previous_producer_id == producer_id
            and producer_epoch == MAX_PRODUCER_EPOCH - 1
            and metadata.producer_epoch == 0
        )
        retry_on_epoch_bump = not is_epoch_fence and metadata.producer_epoch == producer_epoch + 1
        state = metadata.state
        if is_epoch_fence:
            valid_epoch = (not from_client or producer_epoch == metadata.producer_epoch) and (
                producer_epoch >= metadata.producer_epoch
            )
        elif state.is_prepare:
            valid_epoch = retry_on_epoch_bump
        elif state.is_complete:
            valid_epoch = (
                retry_on_epoch_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
            )
        else:
            valid_epoch = producer_epoch == metadata.producer_epoch
        if metadata.producer_id != producer_id and not retry_on_overflow:
            return E.INVALID_PRODUCER_ID_MAPPING
        # A pending transition first (KAFKA-18464): an abort right after a commit must wait for
        # the commit to complete rather than be fenced by the commit's epoch bump.
        if metadata.pending_transition_in_progress and not is_epoch_fence:
            return E.CONCURRENT_TRANSACTIONS
        if not valid_epoch:
            return E.PRODUCER_FENCED
        is_retry = retry_on_epoch_bump or retry_on_overflow
        return self._decide_by_state(
            metadata, commit, is_retry=is_retry, v2=True, is_epoch_fence=is_epoch_fence
        )

    def _decide_by_state(
        self, metadata: TransactionMetadata, commit: bool, *, is_retry: bool, v2: bool, is_epoch_fence: bool
    ) -> ErrorCode | tuple[bool, bool]:
        state = metadata.state
        if state is S.ONGOING:
            return (False, is_epoch_fence)
        if state is S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else self._invalid(metadata, commit)
        if state is S.PREPARE_ABORT:
            return self._invalid(metadata, commit) if commit else E.CONCURRENT_TRANSACTIONS
        if state is S.COMPLETE_COMMIT:
            if commit:
                return E.NONE if is_retry else self._invalid(metadata, commit)
            # Version 2 may abort a transaction that added nothing (the client cannot tell).
            return (True, False) if v2 and not is_retry else self._invalid(metadata, commit)
        if state is S.COMPLETE_ABORT:
            if commit:
                return self._invalid(metadata, commit)
            if is_retry:
                return E.NONE
            return (True, False) if v2 else self._invalid(metadata, commit)
        if state is S.EMPTY:
            return (True, False) if v2 and not commit else self._invalid(metadata, commit)
        raise TransactionStateError(f"{metadata}: found in state {state.kafka_name}, which is never held")

    def _invalid(self, metadata: TransactionMetadata, commit: bool) -> ErrorCode:
        _log.warning(
            "EndTxn does not fit the transaction's state",
            transactional_id=metadata.transactional_id,
            state=metadata.state.kafka_name,
            commit=commit,
        )
        return E.INVALID_TXN_STATE

    def _plan_end(
        self,
        held: Held,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        transaction_version: int,
        no_partition_added: bool,
        is_epoch_fence: bool,
    ) -> _EndPlan | EndTxnResult:
        metadata = held.metadata
        v2 = supports_epoch_bump(transaction_version)
        next_producer_id = NO_PRODUCER_ID
        if v2 and not is_epoch_fence and metadata.is_producer_epoch_exhausted:
            # This commit/abort takes the last epoch: the id moves to a new producer id after it.
            new_id = self._generate_producer_id()
            if isinstance(new_id, ErrorCode):
                return EndTxnResult(new_id)
            next_producer_id = new_id
        if is_epoch_fence:
            # The fence's bump becomes the epoch of the abort (and is never handed out).
            metadata.pending_state = None
            metadata.producer_epoch = producer_epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
        new_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        transit = metadata.prepare_abort_or_commit(
            new_state,
            transaction_version if v2 else 0,
            next_producer_id,
            self._clock.time_ms(),
            no_partition_added=no_partition_added,
            bump_epoch=not is_epoch_fence,
        )
        return _EndPlan(
            held, transit, producer_id, producer_epoch, commit, transaction_version, is_epoch_fence
        )

    async def _write_end(self, plan: _EndPlan) -> EndTxnResult:
        error = await self._store.append_transition(plan.held, plan.transit)
        if error is not E.NONE:
            if plan.is_epoch_fence and self._store.is_current(plan.held):
                # The bumped epoch stays in memory (the write may still land); the next fence
                # reuses it instead of bumping again (KAFKA-9666).
                plan.held.metadata.has_failed_epoch_fence = True
                _log.warning(
                    "writing an epoch fence failed",
                    transactional_id=plan.held.metadata.transactional_id,
                    error=error.name,
                )
            return EndTxnResult(error)
        return self._after_prepare_written(plan)

    def _after_prepare_written(self, plan: _EndPlan) -> EndTxnResult:
        """PrepareCommit/PrepareAbort is durable: answer, and start the markers (Kafka's
        ``sendTxnMarkersCallback``)."""
        held = plan.held
        if not self._store.is_current(held):
            found = self._store.lookup(held.metadata.transactional_id)
            return EndTxnResult(found if isinstance(found, ErrorCode) else E.NOT_COORDINATOR)
        metadata = held.metadata
        v2 = supports_epoch_bump(plan.transaction_version) and not plan.is_epoch_fence
        epoch_ok = metadata.producer_epoch == plan.producer_epoch or (
            v2 and metadata.producer_epoch == plan.producer_epoch + 1
        )
        wanted = S.PREPARE_COMMIT if plan.commit else S.PREPARE_ABORT
        if metadata.producer_id != plan.producer_id:
            return EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
        if not epoch_ok:
            return EndTxnResult(E.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress:
            return EndTxnResult(E.CONCURRENT_TRANSACTIONS)
        if metadata.state is not wanted:
            return EndTxnResult(self._invalid(metadata, plan.commit))
        self._start_completion(held, plan.commit)
        if not supports_epoch_bump(plan.transaction_version):
            return EndTxnResult(E.NONE)
        if metadata.next_producer_id != NO_PRODUCER_ID:
            return EndTxnResult(E.NONE, metadata.next_producer_id, 0)
        return EndTxnResult(E.NONE, metadata.producer_id, metadata.producer_epoch)

    # -- completing transactions (markers, then Complete*) --------------------------------------------

    def _start_completion(self, held: Held, commit: bool) -> None:
        metadata = held.metadata
        transit = metadata.prepare_complete(self._clock.time_ms())
        markers = MarkerRequest(
            metadata.transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
            held.coordinator_epoch,
            commit,
            frozenset(metadata.topic_partitions),
        )
        completion = _Completion(held, transit, markers)
        self._run(self._store.partition_for(metadata.transactional_id), self._complete(completion))

    async def _complete(self, completion: _Completion) -> None:
        if completion.markers.partitions:
            try:
                await self._markers.write_markers(completion.markers)
            except CoordinatorFencedError:
                _log.info(
                    "a newer coordinator owns the transaction; not completing it",
                    transactional_id=completion.markers.transactional_id,
                    coordinator_epoch=completion.markers.coordinator_epoch,
                )
                return
        await self._write_completion(completion)

    async def _write_completion(self, completion: _Completion) -> None:
        held = completion.held
        if not self._store.is_current(held):
            return  # moved away; whoever loads the partition completes the transaction
        error = await self._store.append_transition(
            held, completion.transit, retry_on=lambda e: e not in _LEFT_TO_THE_LOADER
        )
        if error is E.NONE or error in _LEFT_TO_THE_LOADER:
            return
        _log.warning(
            "writing a completed transaction failed; retrying later",
            transactional_id=held.metadata.transactional_id,
            error=error.name,
        )
        self._completion_retries[held.metadata.transactional_id] = completion

    def _retry_completions(self) -> None:
        retries, self._completion_retries = self._completion_retries, {}
        for transactional_id, completion in retries.items():
            if self._store.is_current(completion.held):
                self._run(self._store.partition_for(transactional_id), self._write_completion(completion))

    def _run(self, partition: int, work: Coroutine[Any, Any, None]) -> None:
        tasks = [task for task in self._tasks.get(partition, ()) if not task.done()]
        tasks.append(self._spawn(self._guarded(work)))
        self._tasks[partition] = tasks

    async def _guarded(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception:
            _log.exception("transaction coordinator background work failed")

    def _cancel_work(self, partition: int) -> None:
        for task in self._tasks.pop(partition, ()):
            task.cancel()
        for transactional_id in list(self._completion_retries):
            if self._store.partition_for(transactional_id) == partition:
                del self._completion_retries[transactional_id]

    @property
    def pending_completions(self) -> int:
        """Background work still running (markers or Complete* writes)."""
        return sum(1 for tasks in self._tasks.values() for task in tasks if not task.done())

    # -- timeouts and expiration ----------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> int:
        """Abort every transaction open longer than its timeout: fence the producer (epoch bump)
        and write PrepareAbort, then markers and CompleteAbort, all in the background. Also retries
        Complete* writes that failed. Returns how many aborts were started."""
        self._retry_completions()
        now = self._clock.time_ms()
        started = 0
        for held in list(self._store.all_held()):
            metadata = held.metadata
            if (
                metadata.pending_transition_in_progress
                or metadata.state is not S.ONGOING
                or metadata.txn_start_timestamp + metadata.txn_timeout_ms >= now
            ):
                continue
            fence = metadata.prepare_fence_producer_epoch()
            plan = self._prepare_end(
                metadata.transactional_id,
                metadata.producer_id,
                fence.producer_epoch,
                commit=False,
                from_client=False,
                transaction_version=self.config.transaction_version_level,
            )
            if isinstance(plan, EndTxnResult):
                metadata.pending_state = None
                _log.warning(
                    "aborting a timed-out transaction was refused",
                    transactional_id=metadata.transactional_id,
                    error=plan.error.name,
                )
                continue
            started += 1
            _log.info("aborting a timed-out transaction", transactional_id=metadata.transactional_id)
            self._run(self._store.partition_for(metadata.transactional_id), self._write_timeout_abort(plan))
        return started

    async def _write_timeout_abort(self, plan: _EndPlan) -> None:
        result = await self._write_end(plan)
        if result.error is not E.NONE:
            _log.info(
                "aborting a timed-out transaction failed",
                transactional_id=plan.held.metadata.transactional_id,
                error=result.error.name,
            )

    async def expire_transactional_ids(self) -> int:
        """Forget transactional ids idle (Empty, CompleteCommit, CompleteAbort) for
        transactional.id.expiration.ms: write their tombstones, then drop them. Returns how many
        were removed."""
        horizon = self._clock.time_ms() - self.config.transactional_id_expiration_ms
        expiring: list[Held] = []
        for held in list(self._store.all_held()):
            metadata = held.metadata
            if (
                not metadata.pending_transition_in_progress
                and metadata.state.expiration_allowed
                and metadata.txn_last_update_timestamp <= horizon
            ):
                metadata.prepare_dead()
                expiring.append(held)
        removed = 0
        for held in expiring:
            if await self._store.append_tombstone(held) is E.NONE:
                removed += 1
                _log.info("expired transactional id", transactional_id=held.metadata.transactional_id)
        return removed

    # -- admin ----------------------------------------------------------------------------------------

    def describe_transactions(self, ids: Sequence[str]) -> list[DescribedTransaction]:
        return [self._describe(transactional_id) for transactional_id in ids]

    def _describe(self, transactional_id: str) -> DescribedTransaction:
        if not self.active:
            return DescribedTransaction(transactional_id, E.COORDINATOR_NOT_AVAILABLE)
        if transactional_id == "":
            return DescribedTransaction(transactional_id, E.INVALID_REQUEST)
        found = self._store.lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return DescribedTransaction(transactional_id, found)
        if found is None or found.metadata.state is S.DEAD:
            return DescribedTransaction(transactional_id, E.TRANSACTIONAL_ID_NOT_FOUND)
        metadata = found.metadata
        return DescribedTransaction(
            transactional_id,
            E.NONE,
            metadata.state.kafka_name,
            metadata.producer_id,
            metadata.producer_epoch,
            metadata.txn_timeout_ms,
            metadata.txn_start_timestamp,
            group_partitions(metadata.topic_partitions),
        )

    def list_transactions(
        self, states: Collection[str], producer_ids: Collection[int], min_duration_ms: int
    ) -> ListTransactionsResult:
        """ListTransactions: filters by state name (unknown names are reported back), producer id,
        and (``min_duration_ms`` >= 0) transactions running longer than that."""
        if not self.active:
            return ListTransactionsResult(E.COORDINATOR_NOT_AVAILABLE)
        if self._store.any_loading:
            return ListTransactionsResult(E.COORDINATOR_LOAD_IN_PROGRESS)
        known = {state for name in states if (state := S.from_name(name)) is not None}
        unknown = tuple(name for name in states if S.from_name(name) is None)
        now = self._clock.time_ms()
        listed = []
        for held in self._store.all_held():
            metadata = held.metadata
            if metadata.state is S.DEAD:
                continue
            if producer_ids and metadata.producer_id not in producer_ids:
                continue
            if states and metadata.state not in known:
                continue
            if min_duration_ms >= 0 and now - metadata.txn_start_timestamp <= min_duration_ms:
                continue
            listed.append(
                ListedTransaction(metadata.transactional_id, metadata.producer_id, metadata.state.kafka_name)
            )
        return ListTransactionsResult(E.NONE, tuple(listed), unknown)

    # -- partitions of __transaction_state ------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self._store.partition_for(transactional_id)

    @property
    def num_partitions(self) -> int:
        return self._store.num_partitions

    @property
    def owned_partitions(self) -> frozenset[int]:
        return self._store.owned_partitions

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads ``partition`` at ``coordinator_epoch`` and reads it back: its ids
        answer COORDINATOR_LOAD_IN_PROGRESS until :meth:`load_partition`."""
        self._store.check_partition(partition)
        self._cancel_work(partition)
        self._store.begin_loading(partition, coordinator_epoch)

    def load_partition(self, partition: int, coordinator_epoch: int, records: Iterable[LoggedRecord]) -> None:
        """Take over the transactional ids of ``partition`` from its records (log order), then
        complete the transactions left in PrepareCommit/PrepareAbort (markers, then Complete*).
        A load for an older coordinator epoch than the one loading is ignored. A corrupt record
        leaves the partition unserved (NOT_COORDINATOR) and the DecodeError goes up."""
        self._store.check_partition(partition)
        loading = self._store.loading_epoch(partition)
        if loading is not None and loading > coordinator_epoch:
            _log.info("ignoring a stale load", partition=partition, coordinator_epoch=coordinator_epoch)
            return
        self._cancel_work(partition)
        self._store.begin_loading(partition, coordinator_epoch)
        try:
            loaded = rebuild_transactions(records)
        except Exception:
            self._store.release(partition)
            _log.exception("loading transactions failed", partition=partition)
            raise
        mine = {}
        for transactional_id, metadata in loaded.items():
            if self._store.partition_for(transactional_id) != partition:
                _log.warning(
                    "skipping a transactional id of another partition", transactional_id=transactional_id
                )
                continue
            mine[transactional_id] = metadata
        self._store.finish_loading(partition, coordinator_epoch, mine)
        _log.info("loaded transaction partition", partition=partition, transactional_ids=len(mine))
        for metadata in mine.values():
            if metadata.state.is_prepare:
                self._start_completion(Held(coordinator_epoch, metadata), metadata.state is S.PREPARE_COMMIT)

    def unload_partition(self, partition: int) -> None:
        """Leadership of ``partition`` moved away: forget its ids and stop completing them."""
        self._store.check_partition(partition)
        self._cancel_work(partition)
        self._store.release(partition)

    def shutdown(self) -> None:
        """Stop: cancel background work, forget everything; admin requests answer
        COORDINATOR_NOT_AVAILABLE."""
        self.active = False
        for partition in list(self._tasks):
            self._cancel_work(partition)
        for partition in self._store.owned_partitions:
            self._store.release(partition)

    # -- for tests and tools --------------------------------------------------------------------------

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        """The metadata held for ``transactional_id`` (None if not held here)."""
        found = self._store.lookup(transactional_id)
        return found.metadata if isinstance(found, Held) else None

    def transactions(self) -> list[TransactionMetadata]:
        return [held.metadata for held in self._store.all_held()]
