"""Serving one Produce request: request-level checks, appends through the ReplicaManager, acks=-1 wait.

Request-level rules, as Kafka's KafkaApis applies them before any append:

- acks must be -1, 0 or 1, else every partition answers INVALID_REQUIRED_ACKS (nothing appended).
- Transactional batches without a transactional id: every partition answers
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's check for that case. With a transactional id the
  partition answers INVALID_TXN_STATE: kipling has no transaction coordinator, so no transaction
  can be ongoing, which is what Kafka 3.6+ says of a batch whose transaction it cannot verify.
- Per partition, before the append: unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION, led
  elsewhere → NOT_LEADER_OR_FOLLOWER, an internal topic written by a client →
  INVALID_TOPIC_EXCEPTION, a zstd batch below v7 → UNSUPPORTED_COMPRESSION_TYPE. The partition then
  applies its own checks (see :mod:`broker.replication.partition`).

A partition the metadata names this broker leader of, while the broker is still taking the lead
(its follower process is handing the log back), waits for that first, for at most half the
request's timeout, rather than answering NOT_LEADER_OR_FOLLOWER (see ``_wait_for_leadership``).

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
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from broker.produce.delayed import DelayedProduce, ProducePartitionStatus
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
    """The records that made the batch fail (INVALID_TIMESTAMP), for the response's record_errors."""


class ProduceService:
    """Appends Produce requests' batches on the partitions this broker leads (see the module docstring)."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        purgatory: DelayedOperationPurgatory,
        clock: Clock,
        *,
        expiration_meter: Callable[[Hashable], None] | None = None,
    ) -> None:
        """``purgatory`` is the Produce purgatory; ``expiration_meter(key)`` counts expiries."""
        self._replicas = replica_manager
        self._purgatory = purgatory
        self._clock = clock
        self._expiration_meter = expiration_meter

    def on_partition_changed(self, partition: Partition) -> None:
        """A partition listener: every HW move re-checks the acks=-1 produces parked on it."""
        self._purgatory.check_and_complete(partition.key)

    async def produce(self, request: ProduceRequest) -> list[PartitionOutcome]:
        """Append every partition's batch; with acks=-1, wait until they are committed (or time out).

        The outcomes come in request order.
        """
        started_ms = self._clock.time_ms()
        await self._wait_for_leadership(request)
        outcomes = self.append(request)
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

    def current_leader(self, topic: str, index: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) of a partition led by a known broker, else None."""
        state = self._replicas.partition_state(topic, index)
        if state is not None and state.leader_id >= 0:
            return state.leader_id, state.leader_epoch
        return None

    # -- appends ---------------------------------------------------------------------------------

    def append(self, request: ProduceRequest) -> list[PartitionOutcome]:
        """The first half of :meth:`produce`: append every partition's batch now, synchronously.

        The group coordinator uses the halves separately: its write must be in the log before the
        request that caused it is answered, while the acks=-1 wait may come later.
        """
        whole_request_error = _request_error(request)
        if whole_request_error is not None:
            code, message = whole_request_error
            return [PartitionOutcome(p.topic, p.index, code, message) for p in request.partitions]
        now = self._clock.time_ms()
        return [self._append(request, p, now) for p in request.partitions]

    def _append(self, request: ProduceRequest, data: ProducePartitionData, now_ms: int) -> PartitionOutcome:
        outcome = PartitionOutcome(data.topic, data.index, key=(data.topic, data.index))
        try:
            partition = self._partition_for_append(request, data)
            outcome.key = partition.key
            outcome.result = partition.append_records(data.records, required_acks=request.acks, now_ms=now_ms)
        except RecordValidationError as exc:
            outcome.error_code, outcome.message = exc.code, exc.message
            outcome.record_errors = exc.record_errors
        except KafkaError as exc:
            outcome.error_code, outcome.message = exc.code, exc.message
        except Exception:
            _log.exception("produce failed", topic=data.topic, partition=data.index)
            outcome.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
        return outcome

    def _partition_for_append(self, request: ProduceRequest, data: ProducePartitionData) -> Any:
        topic = data.topic
        if topic_names.is_internal(topic) and request.client_id != ADMIN_CLIENT_ID:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
        partition = self._replicas.get_partition(topic, data.index)
        if partition is None:
            raise KafkaError(self._replicas.partition_error(topic, data.index))
        header = _peek_header(data.records)
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


def _request_error(request: ProduceRequest) -> tuple[ErrorCode, str] | None:
    """Errors Kafka gives every partition of the request before appending anything."""
    if request.acks not in (-1, 0, 1):
        return ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, not {request.acks}"
    if request.transactional_id is None and any(
        (header := _peek_header(data.records)) is not None and header.is_transactional
        for data in request.partitions
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
