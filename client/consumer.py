"""A minimal consumer: fetch assigned partitions from one broker through an incremental fetch session.

Manual assignment only (no groups, no commits). Each :meth:`Consumer.fetch` is one Fetch round trip:
the session handler sends only partitions whose position changed since the last request (new ones,
ones that returned records, seeks), so a steady consumer's requests stay O(changed) — the same
mechanism the follower uses. Records stay bytes until the caller iterates them
(:meth:`FetchedPartition.records`, which leaves out control batches and, read_committed, the
batches of aborted transactions: :mod:`protocol.records.aborted`).

Topics are named, not identified by id, so Fetch is capped at v12 (v13+ needs topic ids). A failed
round (connection error, top-level session error, invalid response) returns no partitions, and the
next round is a full request that re-creates the session, as in Kafka's consumer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import structlog

from client.connection import KafkaConnection
from client.errors import ClientError, KafkaResponseError, error_code, raise_for_error
from client.fetch_session import (
    INVALID_SESSION_ID,
    SESSIONS_MIN_FETCH_VERSION,
    TOPIC_IDS_MIN_FETCH_VERSION,
    FetchMetadata,
    FetchRequestData,
    FetchSessionHandler,
    PartitionData,
    TopicPartition,
    fetch_request_body,
)
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.records import DecodedRecord, iter_batches, iter_records
from protocol.records.aborted import AbortedTransactionFilter
from protocol.sentinels import LATEST_TIMESTAMP, IsolationLevel

DEFAULT_MAX_WAIT_MS = 500
DEFAULT_MIN_BYTES = 1
DEFAULT_MAX_BYTES = 52_428_800
"""Kafka's ``fetch.max.bytes`` default."""
DEFAULT_PARTITION_MAX_BYTES = 1_048_576
"""Kafka's ``max.partition.fetch.bytes`` default."""
CLOSE_TIMEOUT_S = 5.0

_log = structlog.get_logger("kipling.client.consumer")


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a fetch response."""

    tp: TopicPartition
    fetch_offset: int
    """The position the request asked from."""
    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    raw_records: bytes | None
    next_offset: int
    """The position after this response: past the last complete batch, or ``fetch_offset``."""
    aborted_transactions: tuple[tuple[int, int], ...] | None = None
    """read_committed: the (producer id, first offset) of the aborted transactions in range;
    None for read_uncommitted."""

    def batch_filter(self) -> AbortedTransactionFilter | None:
        """What skips aborted transactions' batches (read_committed), else None."""
        if self.aborted_transactions is None:
            return None
        return AbortedTransactionFilter(self.aborted_transactions)

    def records(self) -> Iterator[DecodedRecord]:
        """The records at or after ``fetch_offset`` (a compressed batch may start before it);
        never control records, nor, under read_committed, records of aborted transactions."""
        if not self.raw_records:
            return
        view = memoryview(self.raw_records)
        aborted = self.batch_filter()
        for position, header in iter_batches(view):
            batch = view[position : position + header.size]
            if aborted.skip(header, batch) if aborted is not None else header.is_control:
                continue
            for record in iter_records(batch):
                if record.offset >= self.fetch_offset:
                    yield record


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One fetch round: what was sent and what came back."""

    metadata: FetchMetadata
    """The (session id, epoch) the request carried."""
    partitions_sent: int
    error: ErrorCode = ErrorCode.NONE
    """Top-level error (then ``partitions`` is empty)."""
    valid: bool = True
    partitions: dict[TopicPartition, FetchedPartition] = field(default_factory=dict)

    def records(self) -> Iterator[DecodedRecord]:
        for partition in self.partitions.values():
            yield from partition.records()


class Consumer:
    """Fetch manually assigned partitions from one broker (the leader of all of them)."""

    def __init__(
        self,
        connection: KafkaConnection,
        *,
        session: FetchSessionHandler | None = None,
        max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
        min_bytes: int = DEFAULT_MIN_BYTES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        partition_max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
        rack_id: str = "",
    ) -> None:
        self._connection = connection
        self.session = (
            session if session is not None else FetchSessionHandler(f"{connection.host}:{connection.port}")
        )
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.isolation_level = isolation_level
        self.rack_id = rack_id
        self._positions: dict[TopicPartition, int] = {}

    # -- assignment --------------------------------------------------------------------------------

    def assign(self, tp: TopicPartition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` on (also a seek for an assigned partition)."""
        self._positions[tp] = offset
        self.session.mark_changed(tp, PartitionData(offset, self.partition_max_bytes))

    seek = assign

    def unassign(self, tp: TopicPartition) -> None:
        if self._positions.pop(tp, None) is not None:
            self.session.remove(tp)

    def position(self, tp: TopicPartition) -> int:
        return self._positions[tp]

    @property
    def assignment(self) -> dict[TopicPartition, int]:
        return dict(self._positions)

    # -- fetching ----------------------------------------------------------------------------------

    async def fetch(self, timeout_s: float | None = None) -> FetchResult:
        """One Fetch round trip. Advances the positions of partitions that returned records.

        ``timeout_s`` defaults to the connection's request timeout plus ``max_wait_ms``. A connection
        failure (or cancellation) is raised after telling the session, so the next request is full.
        """
        data = self.session.build()
        if timeout_s is None:
            timeout_s = self._connection.request_timeout_s + self.max_wait_ms / 1000
        try:
            version = self._fetch_version()
            body = fetch_request_body(
                data,
                version,
                max_wait_ms=self.max_wait_ms,
                min_bytes=self.min_bytes,
                max_bytes=self.max_bytes,
                isolation_level=self.isolation_level,
                rack_id=self.rack_id,
            )
            response = await self._connection.request(ApiKey.FETCH, version, body, timeout_s)
        except BaseException:
            # Unanswered (failed, timed out, cancelled, never sent): the broker may or may not have
            # applied the changes this build took out of the pending set, so the next request is full.
            self.session.handle_error()
            raise
        if not self.session.handle_response(response, version):
            return FetchResult(data.metadata, len(data.to_send), error_code(response.error_code), valid=False)
        return FetchResult(data.metadata, len(data.to_send), partitions=self._read(response, version))

    async def poll(self, timeout_s: float | None = None) -> list[DecodedRecord]:
        """One fetch round's records; partition errors are raised as KafkaResponseError."""
        result = await self.fetch(timeout_s)
        for partition in result.partitions.values():
            raise_for_error(partition.error, context=f"fetch {partition.tp.topic}-{partition.tp.partition}")
        return list(result.records())

    async def list_offset(self, tp: TopicPartition, timestamp: int = LATEST_TIMESTAMP) -> int:
        """The offset for ``timestamp`` (-1 latest, -2 earliest) via ListOffsets."""
        version = self._connection.version_for(ApiKey.LIST_OFFSETS)
        body = {
            "replica_id": -1,
            "isolation_level": self.isolation_level,
            "topics": [
                {"name": tp.topic, "partitions": [{"partition_index": tp.partition, "timestamp": timestamp}]}
            ],
        }
        response = await self._connection.request(ApiKey.LIST_OFFSETS, version, body)
        for topic in response.topics:
            for p in topic.partitions:
                if topic.name == tp.topic and p.partition_index == tp.partition:
                    raise_for_error(p.error_code, context=f"list offsets {tp.topic}-{tp.partition}")
                    return int(p.offset)
        raise KafkaResponseError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"no result for {tp.topic}-{tp.partition} in the ListOffsets response",
        )

    async def close(self) -> None:
        """Close the broker's fetch session (best effort): an empty full request with epoch -1."""
        session_id = self.session.session_id
        if session_id == INVALID_SESSION_ID or self._connection.closed:
            self.session.close()
            return
        metadata = self.session.close()
        data = FetchRequestData({}, [], [], self.session.session_partitions, metadata, True)
        version = self._fetch_version()
        body = fetch_request_body(data, version, max_wait_ms=0, min_bytes=0)
        try:
            await self._connection.request(ApiKey.FETCH, version, body, CLOSE_TIMEOUT_S)
        except ClientError as exc:
            _log.info("closing the fetch session failed", session_id=session_id, error=str(exc))

    # -- internals ---------------------------------------------------------------------------------

    def _fetch_version(self) -> int:
        """Sessions need v7+; names are all this consumer has, so it stays below v13 (topic ids)."""
        return self._connection.version_for(
            ApiKey.FETCH, TOPIC_IDS_MIN_FETCH_VERSION - 1, SESSIONS_MIN_FETCH_VERSION
        )

    def _read(self, response: MessageData, version: int) -> dict[TopicPartition, FetchedPartition]:
        out: dict[TopicPartition, FetchedPartition] = {}
        for tp, p in self.session.response_partitions(response, version):
            position = self._positions.get(tp)
            if position is None:
                continue  # unassigned while the request was in flight
            records = p.records
            next_offset = position
            if p.error_code == ErrorCode.NONE and records:
                for _, header in iter_batches(records):
                    next_offset = max(next_offset, header.next_offset)
            out[tp] = FetchedPartition(
                tp,
                position,
                error_code(p.error_code),
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
                records,
                next_offset,
                _aborted(p),
            )
            if next_offset != position:
                self._positions[tp] = next_offset
                self.session.mark_changed(tp, PartitionData(next_offset, self.partition_max_bytes))
        return out


def _aborted(p: MessageData) -> tuple[tuple[int, int], ...] | None:
    """The response's aborted transactions; None when it has none (read_uncommitted, v0-3)."""
    aborted = getattr(p, "aborted_transactions", None)
    if aborted is None:
        return None
    return tuple((a.producer_id, a.first_offset) for a in aborted)


__all__ = [
    "Consumer",
    "FetchResult",
    "FetchedPartition",
]
