"""Transaction markers: the COMMIT or ABORT control batch that ends a transaction on each partition.

:class:`TxnMarkerWriter` appends markers to partitions this broker leads, as Kafka's
``ReplicaManager.appendRecords(origin = Coordinator)`` does for WriteTxnMarkers: one control batch
per partition, acks=-1, and for partitions of ``__consumer_offsets`` the group coordinator hears
that the transaction's offsets are now committed or aborted. The WriteTxnMarkers handler and the
local half of :class:`TransactionMarkerChannel` both use it.

:class:`TransactionMarkerChannel` is the coordinator's :class:`TransactionMarkerSender` (Kafka's
``TransactionMarkerChannelManager``): it groups a transaction's partitions by current leader, writes
the local ones itself and sends WriteTxnMarkers to the other leaders, and retries what did not
succeed (no leader, a leader change, a timeout) with a growing backoff until every partition has its
marker or no longer exists in this broker's metadata. A leader that answers
TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH has seen a newer coordinator or producer
epoch: the coordinator is told (:class:`CoordinatorFencedError`) and stops completing the
transaction, as Kafka's does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import structlog

from broker.handlers.metadata import BrokerEndpoint
from broker.produce.service import PartitionOutcome, ProduceService
from broker.replication.replica_manager import ReplicaManager
from client.connection_pool import ConnectionPool
from coordinator.transaction.markers import CoordinatorFencedError, MarkerRequest
from metadata.topic_names import GROUP_METADATA_TOPIC
from metadata.topics import NO_LEADER, TopicLookup
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from storage.clock import Clock

TopicPartition = tuple[str, int]
OffsetsMarkersListener = Callable[[int, Iterable[int], bool], None]
"""(producer id, partitions of __consumer_offsets, commit): a marker reached those partitions."""

WRITE_TXN_MARKERS_VERSION = 1
MIN_RETRY_BACKOFF_S = 0.05
MAX_RETRY_BACKOFF_S = 1.0
FENCED = frozenset({ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
DONE = frozenset({ErrorCode.NONE})
"""A partition answering UNKNOWN_TOPIC_OR_PARTITION is retried (its leader's metadata may be behind,
as Kafka retries it); a deleted topic's partitions are dropped from our own metadata instead."""

_log = structlog.get_logger("kipling.txn_markers")


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One WriteTxnMarkers entry: a transaction's end, for some partitions."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: Sequence[TopicPartition]


class TxnMarkerWriter:
    """Appends markers on the partitions this broker leads and waits until they are committed."""

    def __init__(
        self,
        replicas: ReplicaManager,
        produce: ProduceService,
        clock: Clock,
        timeout_ms: int,
        on_offsets_markers: OffsetsMarkersListener | None = None,
    ) -> None:
        self._replicas = replicas
        self._produce = produce
        self._clock = clock
        self._timeout_ms = timeout_ms
        self._on_offsets_markers = on_offsets_markers

    def listen_for_offsets_markers(self, listener: OffsetsMarkersListener) -> None:
        self._on_offsets_markers = listener

    async def write(self, marker: TxnMarker) -> dict[TopicPartition, ErrorCode]:
        """Each partition's outcome: NONE once its marker is committed (acks=-1)."""
        now = self._clock.time_ms()
        outcomes = [self._append(marker, topic, index, now) for topic, index in marker.partitions]
        await self._produce.wait_for_commit(self._timeout_ms, outcomes)
        errors = {(o.topic, o.index): o.error_code for o in outcomes}
        offsets_partitions = [
            index
            for (topic, index), code in errors.items()
            if topic == GROUP_METADATA_TOPIC and code is ErrorCode.NONE
        ]
        if offsets_partitions and self._on_offsets_markers is not None:
            self._on_offsets_markers(marker.producer_id, offsets_partitions, marker.commit)
        return errors

    def _append(self, marker: TxnMarker, topic: str, index: int, now_ms: int) -> PartitionOutcome:
        outcome = PartitionOutcome(topic, index, key=(topic, index))
        partition = self._replicas.get_partition(topic, index)
        if partition is None:
            outcome.error_code = self._replicas.partition_error(topic, index)
            return outcome
        outcome.key = partition.key
        try:
            outcome.result = partition.append_txn_marker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                coordinator_epoch=marker.coordinator_epoch,
                commit=marker.commit,
                now_ms=now_ms,
            )
        except KafkaError as exc:
            outcome.error_code, outcome.message = exc.code, exc.message
        except Exception:
            _log.exception("writing a transaction marker failed", topic=topic, partition=index)
            outcome.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
        return outcome


class TransactionMarkerChannel:
    """The coordinator's marker sender: local partitions through the writer, others over the network."""

    def __init__(
        self,
        node_id: int,
        topics: TopicLookup,
        brokers: Callable[[], Sequence[BrokerEndpoint]],
        writer: TxnMarkerWriter,
        pool: ConnectionPool,
    ) -> None:
        """``brokers()`` lists the live brokers' endpoints on the inter-broker listener."""
        self._node_id = node_id
        self._topics = topics
        self._brokers = brokers
        self._writer = writer
        self._pool = pool

    async def write_markers(self, request: MarkerRequest) -> None:
        remaining = set(request.partitions)
        backoff = MIN_RETRY_BACKOFF_S
        while True:
            remaining -= self._gone(remaining)
            if not remaining:
                return
            errors = await self._send_round(request, remaining)
            fenced = {tp: code for tp, code in errors.items() if code in FENCED}
            if fenced:
                raise CoordinatorFencedError(
                    f"markers of {request.transactional_id} refused: "
                    + ", ".join(f"{t}-{p} {code.name}" for (t, p), code in sorted(fenced.items()))
                )
            remaining -= {tp for tp, code in errors.items() if code in DONE}
            if not remaining:
                return
            _log.debug(
                "transaction markers retried",
                transactional_id=request.transactional_id,
                partitions=len(remaining),
                errors=sorted({code.name for code in errors.values() if code not in DONE}),
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)

    def _gone(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Partitions of deleted topics: no marker can or need be written there."""
        gone = set()
        for topic, index in partitions:
            state = self._topics.get(topic)
            if state is None or index not in state.partitions:
                gone.add((topic, index))
        return gone

    async def _send_round(
        self, request: MarkerRequest, partitions: set[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        by_leader: dict[int, list[TopicPartition]] = {}
        errors: dict[TopicPartition, ErrorCode] = {}
        for topic, index in sorted(partitions):
            state = self._topics.get(topic)
            leader = state.partitions[index].leader_id if state is not None else NO_LEADER
            if leader == NO_LEADER:
                errors[(topic, index)] = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                by_leader.setdefault(leader, []).append((topic, index))
        rounds = [self._send_to(leader, request, tps) for leader, tps in by_leader.items()]
        for result in await asyncio.gather(*rounds):
            errors.update(result)
        return errors

    async def _send_to(
        self, leader: int, request: MarkerRequest, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        marker = TxnMarker(
            request.producer_id, request.producer_epoch, request.coordinator_epoch, request.commit, partitions
        )
        if leader == self._node_id:
            return await self._writer.write(marker)
        endpoint = next((b for b in self._brokers() if b.node_id == leader), None)
        if endpoint is None:
            return dict.fromkeys(partitions, ErrorCode.LEADER_NOT_AVAILABLE)
        try:
            connection = await self._pool.shared(endpoint.host, endpoint.port)
            response = await connection.request(
                ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, write_txn_markers_body([marker])
            )
        except Exception as exc:  # unreachable, timed out, closed: retried
            _log.debug("WriteTxnMarkers failed", broker=leader, error=str(exc))
            self._pool.forget_address(endpoint.host, endpoint.port)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        errors = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    errors[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return errors


def write_txn_markers_body(markers: Iterable[TxnMarker]) -> dict[str, object]:
    """A WriteTxnMarkers request body (v1+)."""
    return {
        "markers": [
            {
                "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch,
                "transaction_result": m.commit,
                "topics": _topics_of(m.partitions),
                "coordinator_epoch": m.coordinator_epoch,
            }
            for m in markers
        ]
    }


def _topics_of(partitions: Iterable[TopicPartition]) -> list[dict[str, object]]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return [{"name": name, "partition_indexes": indexes} for name, indexes in by_topic.items()]
