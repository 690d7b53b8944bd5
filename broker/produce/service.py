"""Serving one Produce request: request-level checks, appends through the ReplicaManager, acks=-1 wait.

Request-level rules, as Kafka's KafkaApis applies them before any append:

- acks must be -1, 0 or 1, else every partition answers INVALID_REQUIRED_ACKS (nothing appended).
- Transactional batches without a transactional id from a client: every partition answers
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's check for that case. The group coordinator's own
  TxnOffsetCommit appends (origin "coordinator") carry none and are not refused.
- Transactional batches (KIP-890): a partition where the producer's transaction has not written yet
  asks the transaction coordinator, before appending, whether the partition was added to that
  transaction (:class:`~broker.transactions.verification.TransactionVerifier`). Not added (or the
  transaction ended): INVALID_TXN_STATE; the coordinator unreachable or busy: NOT_ENOUGH_REPLICAS,
  which the producer retries (Kafka's translation, since older clients mishandle the coordinator's
  own retriable errors on a produce).
- Per partition, before the append: unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION, led
  elsewhere → NOT_LEADER_OR_FOLLOWER, an internal topic written by a client →
  INVALID_TOPIC_EXCEPTION, a zstd batch below v7 → UNSUPPORTED_COMPRESSION_TYPE. The partition then
  applies its own checks (see :mod:`broker.replication.partition`).

A partition the metadata names this broker leader of, while the broker is still taking the lead
(its follower process is handing the log back), waits for that first, for at most half the
request's timeout, rather than answering NOT_LEADER_OR_FOLLOWER (see ``_wait_for_leadership``).
An idempotent producer's batch refused without an append leaves a gap in its sequences; a later
batch of that producer whose gap is exactly the refused batch is answered the refused batch's error,
not OUT_OF_ORDER_SEQUENCE_NUMBER (:mod:`broker.produce.refused_batches`).

acks=-1 is refused with NOT_ENOUGH_REPLICAS, nothing appended, while the committed ISR is below
``min(min.insync.replicas, replication factor)`` (the partition checks it). Otherwise it waits in
the produce purgatory (:class:`~broker.produce.delayed.DelayedProduce`) until the high watermark
covers the batch, or ``timeout_ms`` passes (REQUEST_TIMED_OUT). With a single replica the high
watermark moves at append, so the wait completes before it starts. With followers it moves when
their fetches show they have the batch; every HW move (and a leadership loss) wakes the wait
through :meth:`ProduceService.on_partition_changed`, a partition listener.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from broker.produce.delayed import DelayedProduce, ProducePartitionStatus
from broker.produce.refused_batches import RefusedBatches
from broker.produce.validation import RecordError, RecordValidationError
from broker.replication.partition import AppendResult, Partition
from broker.replication.replica_manager import ReplicaManager
from metadata import topic_names
from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import ProtocolError
from protocol.records.batch import RecordBatchHeader, read_header
from protocol.records.compression import CompressionType
from protocol.sentinels import UNKNOWN_OFFSET
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import Clock
from storage.producer_state import AppendOrigin

__all__ = [
    "ADMIN_CLIENT_ID",
    "PartitionOutcome",
    "ProducePartitionData",
    "ProduceRequest",
    "ProduceService",
]

ADMIN_CLIENT_ID = "__admin_client"
"""Kafka lets only this client id append to internal topics (AdminUtils.ADMIN_CLIENT_ID)."""
ZSTD_MIN_VERSION = 7
MAX_TAKING_LEAD_WAIT_MS = 5000
"""The longest a produce waits for this broker to finish taking the lead of a partition."""

_log = structlog.get_logger("kipling.produce")


@dataclass(frozen=True, slots=True)
class ProducePartitionData:
    """One partition's records in a Produce request, in request order."""

    topic: str
    index: int
    records: bytes | memoryview | None


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """A Produce request in domain terms, as the handler decoded it."""

    version: int
    client_id: str | None
    acks: int
    timeout_ms: int
    transactional_id: str | None
    partitions: Sequence[ProducePartitionData]
    origin: AppendOrigin = "leader"
    """"coordinator" for the broker's own coordinators' writes to internal topics."""


@dataclass(slots=True)
class PartitionOutcome:
    """One partition's answer: the append's result, or an error (with a message for v8+)."""

    topic: str
    index: int
    error_code: ErrorCode = ErrorCode.NONE
    message: str | None = None
    result: AppendResult | None = None
    key: Hashable = None
    record_errors: tuple[RecordError, ...] = ()
    """The records that made the batch fail (INVALID_TIMESTAMP, INVALID_RECORD), for the response's
    record_errors."""
    log_start_offset: int = UNKNOWN_OFFSET
    """The partition's log start offset when its own checks refused the batch (Kafka's
    ReplicaManager answers it then, -1 for the errors it lists apart), else -1; an appended batch's
    comes with its result."""


class ProduceService:
    """Appends Produce requests' batches on the partitions this broker leads (see the module docstring)."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        purgatory: DelayedOperationPurgatory,
        clock: Clock,
        *,
        expiration_meter: Callable[[Hashable], None] | None = None,
        verifier: TxnPartitionVerifier | None = None,
    ) -> None:
        """``purgatory`` is the Produce purgatory; ``expiration_meter(key)`` counts expiries;
        ``verifier`` asks transaction coordinators about transactional batches (None: unverified)."""
        self._replicas = replica_manager
        self._purgatory = purgatory
        self._clock = clock
        self._expiration_meter = expiration_meter
        self.verifier = verifier
        self._refused = RefusedBatches()

    def on_partition_changed(self, partition: Partition) -> None:
        """A partition listener: every HW move re-checks the acks=-1 produces parked on it."""
        self._purgatory.check_and_complete(partition.key)

    async def produce(self, request: ProduceRequest) -> list[PartitionOutcome]:
        """Append every partition's batch; with acks=-1, wait until they are committed (or time out).

        The outcomes come in request order.
        """
        started_ms = self._clock.time_ms()
        await self._wait_for_leadership(request)
        verified = await self._verify_transactions(request)
        outcomes = self.append(request, verified)
        if request.acks == -1:
            waited_ms = self._clock.time_ms() - started_ms
            await self.wait_for_commit(max(0, request.timeout_ms - waited_ms), outcomes)
        return outcomes

    async def _wait_for_leadership(self, request: ProduceRequest) -> None:
        """Partitions this broker is taking the lead of wait for it, up to half the request's timeout
        (at most :data:`MAX_TAKING_LEAD_WAIT_MS`), instead of answering NOT_LEADER_OR_FOLLOWER.

        A producer that learned of the new leader sends it several requests at once. Answering the
        first NOT_LEADER_OR_FOLLOWER and the next, once led, OUT_OF_ORDER_SEQUENCE_NUMBER (the first
        was refused) makes librdkafka bump its producer epoch and resend the first batch under new
        sequence numbers, a duplicate if that batch had reached this replica from the old leader
        (librdkafka issue 4953, seen after leader changes with Kafka too). The window is short in
        Kafka and an IPC round trip here, so it is waited out rather than answered.
        """
        wait_ms = min(request.timeout_ms // 2, MAX_TAKING_LEAD_WAIT_MS)
        if wait_ms <= 0:
            return
        deadline = self._clock.time_ms() + wait_ms
        for data in request.partitions:
            if self._replicas.taking_lead(data.topic, data.index):
                remaining_ms = deadline - self._clock.time_ms()
                await self._replicas.wait_until_led(data.topic, data.index, max(0, remaining_ms) / 1000)

    async def _verify_transactions(self, request: ProduceRequest) -> dict[int, Verification]:
        """KIP-890: for each transactional batch whose producer has no ongoing transaction on the
        partition yet, the coordinator's word that the partition is in the transaction (a guard
        the partition checks at append) or the error to answer; keyed by position in the request.

        One request carries one producer's batches: transactional batches of several producer ids
        or epochs are all refused INVALID_PRODUCER_ID_MAPPING, as Kafka refuses them.
        """
        transactional_id = request.transactional_id
        if self.verifier is None or transactional_id is None or request.origin != "leader":
            return {}
        pending: dict[int, Partition] = {}
        producers: set[tuple[int, int]] = set()
        for position, data in enumerate(request.partitions):
            header = _peek_header(data.records)
            if header is None or not header.is_transactional:
                continue
            producers.add((header.producer_id, header.producer_epoch))
            partition = self._replicas.get_partition(data.topic, data.index)
            if partition is not None and not partition.has_ongoing_transaction(
                header.producer_id, header.producer_epoch
            ):
                pending[position] = partition
        if len(producers) > 1:
            mixed = KafkaError(
                ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                "Transactional records from more than one producer id or epoch in one request",
            )
            return dict.fromkeys(range(len(request.partitions)), mixed)
        if not pending:
            return {}
        [(producer_id, producer_epoch)] = producers
        verified = await self.verify_transaction(
            transactional_id, producer_id, producer_epoch, pending.values()
        )
        return {position: verified[partition.key] for position, partition in pending.items()}

    async def verify_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[Partition]
    ) -> dict[Hashable, Verification]:
        """Ask the transaction coordinator whether ``partitions`` are in the producer's ongoing
        transaction: per partition key, a guard to append with, or the KafkaError to answer. Also
        what TxnOffsetCommit does for its partition of ``__consumer_offsets``."""
        partitions = list(partitions)
        guards: dict[Hashable, Verification] = {
            partition.key: partition.start_txn_verification(producer_id) for partition in partitions
        }
        if self.verifier is None:
            return guards
        errors = await self.verifier.verify(
            transactional_id, producer_id, producer_epoch, [(p.topic, p.index) for p in partitions]
        )
        verified: dict[Hashable, Verification] = {}
        for partition in partitions:
            code = errors.get((partition.topic, partition.index), ErrorCode.UNKNOWN_SERVER_ERROR)
            verified[partition.key] = (
                guards[partition.key] if code is ErrorCode.NONE else _verification_error(code)
            )
        return verified

    def current_leader(self, topic: str, index: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) of a partition led by a known broker, else None."""
        state = self._replicas.partition_state(topic, index)
        if state is not None and state.leader_id >= 0:
            return state.leader_id, state.leader_epoch
        return None

    # -- appends ---------------------------------------------------------------------------------

    def append(
        self, request: ProduceRequest, verified: dict[int, Verification] | None = None
    ) -> list[PartitionOutcome]:
        """The first half of :meth:`produce`: append every partition's batch now, synchronously.

        The group coordinator uses the halves separately: its write must be in the log before the
        request that caused it is answered, while the acks=-1 wait may come later. ``verified``
        holds the transaction verifications of :meth:`produce`, by position in the request.
        """
        whole_request_error = _request_error(request)
        if whole_request_error is not None:
            code, message = whole_request_error
            return [PartitionOutcome(p.topic, p.index, code, message) for p in request.partitions]
        now = self._clock.time_ms()
        verified = verified or {}
        return [
            self._append(request, p, now, verified.get(position))
            for position, p in enumerate(request.partitions)
        ]

    def _append(
        self,
        request: ProduceRequest,
        data: ProducePartitionData,
        now_ms: int,
        verification: Verification | None,
    ) -> PartitionOutcome:
        outcome = PartitionOutcome(data.topic, data.index, key=(data.topic, data.index))
        partition: Partition | None = None
        header = _peek_header(data.records)
        try:
            if isinstance(verification, KafkaError):
                raise verification
            partition = self._partition_for_append(request, data, header)
            outcome.key = partition.key
            outcome.result = partition.append_records(
                data.records,
                required_acks=request.acks,
                now_ms=now_ms,
                origin=request.origin,
                verification=verification,
            )
        except RecordValidationError as exc:
            outcome.error_code, outcome.message = exc.code, exc.message
            outcome.record_errors = exc.record_errors
        except KafkaError as exc:
            outcome.error_code, outcome.message = exc.code, exc.message
        except Exception:
            _log.exception("produce failed", topic=data.topic, partition=data.index)
            outcome.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
        if header is not None and request.origin == "leader":
            self._track_sequence_gap(data, header, partition, outcome, now_ms)
        refused_here = outcome.result is None and outcome.error_code not in _NO_LOG_START_OFFSET
        if partition is not None and refused_here:
            outcome.log_start_offset = partition.log_start_offset  # Kafka's processFailedRecord
        return outcome

    def _track_sequence_gap(
        self,
        data: ProducePartitionData,
        header: RecordBatchHeader,
        partition: Partition | None,
        outcome: PartitionOutcome,
        now_ms: int,
    ) -> None:
        """Remember a producer's batch refused without an append; answer a later batch whose
        sequence gap is exactly that batch with its error (see :mod:`broker.produce.refused_batches`)."""
        if outcome.result is not None:
            self._refused.appended(data.topic, data.index, header)
        elif outcome.error_code is not ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            self._refused.refused(data.topic, data.index, header, outcome.error_code, now_ms)
        elif partition is not None:
            entry = partition.producer_state.last_entry(header.producer_id)
            explained = self._refused.explain_gap(data.topic, data.index, header, entry, now_ms)
            if explained is not None:
                outcome.error_code, outcome.message = explained

    def _partition_for_append(
        self, request: ProduceRequest, data: ProducePartitionData, header: RecordBatchHeader | None
    ) -> Any:
        topic = data.topic
        if topic_names.is_internal(topic) and request.client_id != ADMIN_CLIENT_ID:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
        partition = self._replicas.get_partition(topic, data.index)
        if partition is None:
            raise KafkaError(self._replicas.partition_error(topic, data.index))
        zstd = header is not None and header.compression == CompressionType.ZSTD
        if zstd and request.version < ZSTD_MIN_VERSION:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"Produce requests with version {request.version} may not use ZStandard compression",
            )
        return partition

    def _committed(self, status: ProducePartitionStatus) -> bool:
        """True when the batch is already committed with enough in-sync replicas: answering at
        once then gives exactly what the delayed produce would, without parking it."""
        partition = self._replicas.get_partition_by_key(status.key)
        return (
            partition is not None
            and partition.is_leader
            and partition.high_watermark >= status.required_offset
            and partition.acks_all_completion_error() == ErrorCode.NONE
        )

    async def wait_for_commit(self, timeout_ms: int, outcomes: list[PartitionOutcome]) -> None:
        """The second half of an acks=-1 :meth:`produce`: wait until the HW covers every appended
        batch (or the timeout); errors land in ``outcomes``."""
        statuses = [_status(outcome) for outcome in outcomes]
        if not any(status.acks_pending for status in statuses):
            return  # Kafka creates the delayed produce only if a partition appended
        if all(not status.acks_pending or self._committed(status) for status in statuses):
            return  # the high watermark already covers every batch (a single in-sync replica)
        done: asyncio.Future[Sequence[ProducePartitionStatus]] = asyncio.get_running_loop().create_future()

        def respond(final: Sequence[ProducePartitionStatus]) -> None:
            if not done.done():
                done.set_result(final)

        operation = DelayedProduce(
            max(timeout_ms, 0),
            statuses,
            respond,
            get_partition=self._replicas.get_partition_by_key,
            expiration_meter=self._expiration_meter,
        )
        self._purgatory.try_complete_else_watch(operation, operation.watch_keys)
        try:
            final = await done
        except asyncio.CancelledError:
            operation.cancel()
            raise
        for outcome, status in zip(outcomes, final):
            if outcome.error_code is ErrorCode.NONE and status.error_code is not ErrorCode.NONE:
                outcome.error_code = status.error_code
                outcome.message = status.error_code.description


class TxnPartitionVerifier(Protocol):
    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """Per partition: NONE if it is in the producer's ongoing transaction, else the error."""
        ...


Verification = object
"""A guard from :meth:`Partition.start_txn_verification`, or the KafkaError to answer instead."""

_UNVERIFIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


def _verification_error(code: ErrorCode) -> KafkaError:
    """Kafka's translation of a failed verification into a produce error."""
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        # The coordinator's verify-only answer is TRANSACTION_ABORTABLE; producers before
        # transactions v2 know only INVALID_TXN_STATE, which makes them abort just the same.
        return KafkaError(ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction")
    if code is ErrorCode.PRODUCER_FENCED:
        # Kafka's AddPartitionsToTxnManager: producers handle INVALID_PRODUCER_EPOCH here (abortable),
        # where PRODUCER_FENCED on a Produce would be fatal.
        return KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, "the producer epoch is fenced")
    if code in _UNVERIFIABLE:
        return KafkaError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {code.name}",
        )
    return KafkaError(code, f"transaction verification failed: {code.name}")


_NO_LOG_START_OFFSET = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
"""Kafka's ReplicaManager.appendToLocalLog answers these with UNKNOWN_LOG_APPEND_INFO (log start
offset -1); any other failure of the partition's append (a RecordValidationException, a sequence or
epoch error, NOT_ENOUGH_REPLICAS...) with the partition's log start offset."""


def _request_error(request: ProduceRequest) -> tuple[ErrorCode, str] | None:
    """Errors Kafka gives every partition of the request before appending anything."""
    if request.acks not in (-1, 0, 1):
        return ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, not {request.acks}"
    # KafkaApis' check of a client's Produce: the group coordinator's TxnOffsetCommit batches
    # (origin "coordinator") are transactional batches of the producer without a transactional id,
    # which Kafka appends through ReplicaManager directly, past this check.
    if (
        request.origin == "leader"
        and request.transactional_id is None
        and any(
            (header := _peek_header(data.records)) is not None and header.is_transactional
            for data in request.partitions
        )
    ):
        return (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "Transactional records were sent without a transactional id",
        )
    return None


def _peek_header(records: bytes | memoryview | None) -> RecordBatchHeader | None:
    """The first batch's header when it is readable; the partition reports anything else."""
    if not records:
        return None
    try:
        return read_header(records, 0)
    except ProtocolError:
        return None


def _status(outcome: PartitionOutcome) -> ProducePartitionStatus:
    if outcome.result is None:
        return ProducePartitionStatus(outcome.key, UNKNOWN_OFFSET, outcome.error_code, outcome)
    return ProducePartitionStatus(outcome.key, outcome.result.required_offset, ErrorCode.NONE, outcome)
