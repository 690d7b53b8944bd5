"""Produce (key 0, v3-11): append each partition's batch on this leader and report its offsets.

Request-level rules, as Kafka's KafkaApis applies them before any append:

- acks must be -1, 0 or 1, else every partition answers INVALID_REQUIRED_ACKS (nothing appended).
- Transactional batches without a transactional id: every partition answers
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's check for that case. With a transactional id the
  partition answers INVALID_TXN_STATE: kipling has no transaction coordinator, so no transaction
  can be ongoing, which is what Kafka 3.6+ says of a batch whose transaction it cannot verify.
- Per partition, before the append: unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION, led
  elsewhere → NOT_LEADER_OR_FOLLOWER (with CurrentLeader, v10+), an internal topic written by a
  client → INVALID_TOPIC_EXCEPTION, a zstd batch below v7 → UNSUPPORTED_COMPRESSION_TYPE. The
  partition then applies its own checks (see :mod:`broker.partition`).

acks=0 gets no response; if any partition failed, the connection is closed instead (Kafka does
the same, since the producer reads no response and would never learn of the error otherwise).
acks=-1 waits in the produce purgatory (:class:`~broker.delayed_produce.DelayedProduce`) until the
high watermark covers the batch, or ``timeout_ms`` passes (REQUEST_TIMED_OUT). With a single
replica the high watermark moves at append, so the wait completes before it starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from broker import topic_names
from broker.delayed_produce import DelayedProduce, ProducePartitionStatus
from broker.handlers.base import NO_RESPONSE, Handler, RequestContext
from broker.partition import AppendResult
from broker.purgatory import DelayedOperationPurgatory
from broker.replica_manager import ReplicaManager
from broker.server.dispatcher import CloseConnection
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import ProtocolError
from protocol.records.batch import RecordBatchHeader, read_header
from protocol.records.compression import CompressionType
from storage.clock import Clock

ADMIN_CLIENT_ID = "__admin_client"
"""Kafka lets only this client id append to internal topics (AdminUtils.ADMIN_CLIENT_ID)."""
ZSTD_MIN_VERSION = 7
UNKNOWN_OFFSET = -1
NO_TIMESTAMP = -1

_log = structlog.get_logger("kipling.produce")


@dataclass(slots=True)
class PartitionOutcome:
    """One partition's answer: the append's result, or an error (with a message for v8+)."""

    topic: str
    index: int
    error_code: ErrorCode = ErrorCode.NONE
    message: str | None = None
    result: AppendResult | None = None
    key: Hashable = None


class ProduceHandler(Handler):
    api_key = ApiKey.PRODUCE
    min_version = 3
    max_version = 11

    def __init__(
        self,
        replica_manager: ReplicaManager,
        purgatory: DelayedOperationPurgatory,
        clock: Clock,
        *,
        expiration_meter: Callable[[Hashable], None] | None = None,
    ) -> None:
        """Registers a partition listener so that every HW move re-checks parked acks=-1 produces."""
        self._replicas = replica_manager
        self._purgatory = purgatory
        self._clock = clock
        self._expiration_meter = expiration_meter
        replica_manager.add_partition_listener(lambda partition: purgatory.check_and_complete(partition.key))

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        outcomes = self._append_all(ctx, request)
        if request.acks == 0:
            failed = [o for o in outcomes if o.error_code is not ErrorCode.NONE]
            if failed:
                reason = f"acks=0 produce failed: {failed[0].error_code.name}"
                _log.info("closing connection", peer=ctx.peer, reason=reason)
                raise CloseConnection(reason)
            return NO_RESPONSE
        if request.acks == -1:
            await self._wait_for_commit(request.timeout_ms, outcomes)
        return self._response(ctx.api_version, request, outcomes)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every partition gets ``code``; acks=0 (or an unreadable body) closes the connection."""
        if request is None or request.acks == 0:
            return None
        outcomes = [PartitionOutcome(name, p.index, code) for name, p in _partitions(request)]
        return self._response(ctx.api_version, request, outcomes)

    # -- appends ---------------------------------------------------------------------------------

    def _append_all(self, ctx: RequestContext, request: MessageData) -> list[PartitionOutcome]:
        whole_request_error = _request_error(request)
        if whole_request_error is not None:
            code, message = whole_request_error
            return [PartitionOutcome(name, p.index, code, message) for name, p in _partitions(request)]
        now = self._clock.time_ms()
        return [self._append(ctx, name, p, request.acks, now) for name, p in _partitions(request)]

    def _append(
        self, ctx: RequestContext, topic: str, data: MessageData, acks: int, now_ms: int
    ) -> PartitionOutcome:
        outcome = PartitionOutcome(topic, data.index, key=(topic, data.index))
        try:
            partition = self._partition_for_append(ctx, topic, data)
            outcome.key = partition.key
            outcome.result = partition.append_records(data.records, required_acks=acks, now_ms=now_ms)
        except KafkaError as exc:
            outcome.error_code, outcome.message = exc.code, exc.message
        except Exception:
            _log.exception("produce failed", topic=topic, partition=data.index)
            outcome.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
        return outcome

    def _partition_for_append(self, ctx: RequestContext, topic: str, data: MessageData) -> Any:
        if topic_names.is_internal(topic) and ctx.client_id != ADMIN_CLIENT_ID:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
        partition = self._replicas.get_partition(topic, data.index)
        if partition is None:
            raise KafkaError(self._replicas.partition_error(topic, data.index))
        header = _peek_header(data.records)
        zstd = header is not None and header.compression == CompressionType.ZSTD
        if zstd and ctx.api_version < ZSTD_MIN_VERSION:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"Produce requests with version {ctx.api_version} may not use ZStandard compression",
            )
        return partition

    async def _wait_for_commit(self, timeout_ms: int, outcomes: list[PartitionOutcome]) -> None:
        """Park an acks=-1 produce until the HW covers every appended batch (or the timeout)."""
        statuses = [_status(outcome) for outcome in outcomes]
        if not any(status.acks_pending for status in statuses):
            return  # Kafka creates the delayed produce only if a partition appended
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

    # -- response --------------------------------------------------------------------------------

    def _response(
        self, version: int, request: MessageData, outcomes: list[PartitionOutcome]
    ) -> dict[str, Any]:
        by_topic: list[dict[str, Any]] = []
        remaining = iter(outcomes)
        for topic in request.topic_data:
            partitions = [self._partition_response(version, next(remaining)) for _ in topic.partition_data]
            by_topic.append({"name": topic.name, "partition_responses": partitions})
        return {"responses": by_topic, "throttle_time_ms": 0}

    def _partition_response(self, version: int, outcome: PartitionOutcome) -> dict[str, Any]:
        result = outcome.result
        body: dict[str, Any] = {
            "index": outcome.index,
            "error_code": int(outcome.error_code),
            "base_offset": result.base_offset if result is not None else UNKNOWN_OFFSET,
            "log_append_time_ms": result.log_append_time_ms if result is not None else NO_TIMESTAMP,
            "log_start_offset": result.log_start_offset if result is not None else UNKNOWN_OFFSET,
            "record_errors": [],
            "error_message": outcome.message if outcome.error_code is not ErrorCode.NONE else None,
        }
        if outcome.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER and version >= 10:
            state = self._replicas.partition_state(outcome.topic, outcome.index)
            if state is not None and state.leader_id >= 0:
                body["current_leader"] = {"leader_id": state.leader_id, "leader_epoch": state.leader_epoch}
        return body


def _partitions(request: MessageData) -> Iterator[tuple[str, MessageData]]:
    for topic in request.topic_data:
        for data in topic.partition_data:
            yield topic.name, data


def _request_error(request: MessageData) -> tuple[ErrorCode, str] | None:
    """Errors Kafka gives every partition of the request before appending anything."""
    if request.acks not in (-1, 0, 1):
        return ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, not {request.acks}"
    if request.transactional_id is None and any(
        (header := _peek_header(data.records)) is not None and header.is_transactional
        for _, data in _partitions(request)
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
