"""A partition this broker leads: appends, reads and offset lookups, with Kafka's error codes.

The :class:`Partition` wraps the partition's :class:`~storage.log.PartitionLog` (which it does not
own: the LogManager opens, checkpoints and closes logs) and adds what the leader knows beyond the
bytes on disk: the leader epoch, the replicas and ISR, the high watermark rule, and the idempotent
producers' state (:class:`~storage.producer_state.ProducerStateManager`).

Appends (Produce) follow Kafka's order of checks: leadership, ``min.insync.replicas`` for acks=-1,
then the batch (one whole v2 batch, consistent record count, size, no control or transactional
batch from a client), then the producer's sequence (a retried batch is answered with its first
offsets instead of being written twice), then the log append, which verifies the CRC32C while it
copies and stamps the batch. The CRC is therefore computed once per batch, not once in validation
and once in the log; the rare paths that answer without appending (a duplicate, a sequence error)
verify it themselves first, so a corrupt batch is always CORRUPT_MESSAGE.

With a single replica in the ISR the high watermark is the log end offset right after each append
(kafka-behaviour.md 6.2), so acks=-1 completes at once. Until follower fetch state exists the high
watermark does not move while the ISR holds other replicas, which is what Kafka does when they do
not fetch.

Listeners (fetch sessions, delayed fetches, delayed produces) hear of every change of the log end
offset, high watermark, log start offset or leader epoch, after the change.
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from collections.abc import Callable
from typing import NamedTuple

import structlog

from broker.produce_validation import read_single_batch, verify_crc
from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import CorruptRecordError, UnsupportedMagicError
from protocol.records.batch import RecordBatchHeader
from storage.clock import Clock
from storage.errors import (
    InvalidRecordError,
    KiplingStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from storage.log import FileSlice, PartitionLog
from storage.producer_recovery import rebuild_producer_state
from storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    DuplicateBatch,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
)
from storage.segment import LogSegment

__all__ = [
    "NO_EPOCH",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "AppendResult",
    "Partition",
    "PartitionRead",
    "TimestampAndOffset",
]

NO_EPOCH = -1
"""Absent CurrentLeaderEpoch / LastFetchedEpoch, and the undefined epoch in answers."""
UNKNOWN_OFFSET = -1
NO_TIMESTAMP = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets sentinels (v7: -3, v8: -4, v9: -5)."""

_POSITION_CACHE_LIMIT = 1024

_log = structlog.get_logger("kipling.partition")

PartitionListener = Callable[["Partition"], None]


class AppendResult(NamedTuple):
    """What a Produce answers for one partition (Kafka's LogAppendInfo, reduced)."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    """The broker's time for LogAppendTime topics, -1 for CreateTime."""
    log_start_offset: int
    num_records: int
    duplicate: bool
    """True when the batch was a retry of one already in the log: nothing was written."""

    @property
    def required_offset(self) -> int:
        """The high watermark at which the batch is committed (acks=-1 waits for it)."""
        return self.last_offset + 1


class PartitionRead(NamedTuple):
    """One partition's share of a Fetch: offsets to report and the raw slice of whole batches."""

    error_code: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    slice: FileSlice | None
    records_size: int
    diverging_epoch: tuple[int, int] | None
    """(epoch, end offset) when the follower's last fetched epoch diverges from this log."""
    log_end_offset: int = UNKNOWN_OFFSET
    """The leader's LEO when the read started (followers' ISR bookkeeping uses it)."""
    first_offset: int | None = None
    """Base offset of the first batch in ``slice`` (it may be below the fetch offset)."""


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer; (-1, -1, -1) means no offset qualifies."""

    timestamp: int
    offset: int
    leader_epoch: int


NOT_FOUND = TimestampAndOffset(NO_TIMESTAMP, UNKNOWN_OFFSET, NO_EPOCH)


def _error_read(code: ErrorCode) -> PartitionRead:
    """Kafka reports -1 for every offset of a partition whose read failed."""
    return PartitionRead(code, UNKNOWN_OFFSET, UNKNOWN_OFFSET, UNKNOWN_OFFSET, None, 0, None)


class Partition:
    """A partition led by this broker. Single-threaded: driven from the broker's event loop."""

    def __init__(
        self,
        log: PartitionLog,
        *,
        node_id: int,
        topic_id: uuid.UUID,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
        min_insync_replicas: int,
        producer_state: ProducerStateManager,
        clock: Clock,
    ) -> None:
        """Wire already loaded state; use :meth:`open`, which also rebuilds the producer state."""
        self.log = log
        self.topic = log.topic
        self.index = log.partition
        self.key: tuple[str, int] = (log.topic, log.partition)
        """The purgatory key of this partition (the delayed produce watches it)."""
        self.topic_id = topic_id
        self.node_id = node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.configured_min_insync_replicas = min_insync_replicas
        self.producer_state = producer_state
        self.is_leader = True
        self.is_offline = False
        self._clock = clock
        self._listeners: list[PartitionListener] = []
        self._positions: dict[int, int] = {}
        self._positions_segment: LogSegment | None = None
        self._known_log_start_offset = log.log_start_offset
        self._logger = _log.bind(topic=self.topic, partition=self.index)
        self._become_leader()

    @classmethod
    def open(
        cls,
        log: PartitionLog,
        *,
        node_id: int,
        topic_id: uuid.UUID,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
        min_insync_replicas: int,
        clock: Clock,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> Partition:
        """Take the lead of ``log``: rebuild the producer state, record the epoch, set the HW."""
        producer_state = ProducerStateManager(log.directory, producer_id_expiration_ms)
        rebuild_producer_state(log, producer_state, clock.time_ms())
        return cls(
            log,
            node_id=node_id,
            topic_id=topic_id,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            replicas=replicas,
            isr=isr,
            min_insync_replicas=min_insync_replicas,
            producer_state=producer_state,
            clock=clock,
        )

    def _become_leader(self) -> None:
        """Kafka's makeLeader: the epoch cache gets (epoch, LEO) before any data, then the HW moves.

        An epoch lower than the cache's latest is stale metadata: assigning it would cut the cache.
        """
        cache = self.log.leader_epoch_cache
        latest = cache.latest_epoch
        if latest is None or self.leader_epoch > latest:
            cache.assign(self.leader_epoch, self.log.log_end_offset)
        self._maybe_increment_high_watermark()

    # -- state -------------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Equal to the high watermark: there are no transactions to keep open."""
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def isr_size(self) -> int:
        return len(self.isr)

    @property
    def min_insync_replicas(self) -> int:
        """min(min.insync.replicas, replication factor): Kafka clamps a minimum no ISR could reach."""
        return max(1, min(self.configured_min_insync_replicas, len(self.replicas)))

    def add_listener(self, fn: PartitionListener) -> None:
        """``fn(partition)`` runs after every change of LEO, HW, log start offset or leader epoch."""
        self._listeners.append(fn)

    def remove_listener(self, fn: PartitionListener) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:
                self._logger.exception("partition listener failed")

    def _maybe_increment_high_watermark(self) -> bool:
        """HW = LEO when this broker is the whole ISR; frozen below the effective min ISR (Kafka 3.7+)."""
        if self.isr_size < self.min_insync_replicas or self.isr != [self.node_id]:
            return False
        if self.log.log_end_offset <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(self.log.log_end_offset)
        return True

    # -- appends -----------------------------------------------------------------------------------

    def append_records(
        self, records: bytes | bytearray | memoryview | None, *, required_acks: int, now_ms: int
    ) -> AppendResult:
        """Append one produced batch as leader; raises KafkaError with the partition's error code.

        Nothing is written when an error is raised. A retried batch of an idempotent producer is
        answered from the producer state with the offsets it got the first time.
        """
        self._check_writable()
        if required_acks == -1 and self.isr_size < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr "
                f"requirement of {self.min_insync_replicas} for partition {self.topic}-{self.index}",
            )
        data = records if records is not None else b""
        header = self._validate_batch(data)
        duplicate = self._check_producer_state(data, header, now_ms)
        if duplicate is not None:
            return self._duplicate_result(duplicate)
        return self._append(data, header)

    def _check_writable(self) -> None:
        if self.is_offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log of {self.topic}-{self.index} failed")
        if not self.is_leader:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker no longer leads {self.topic}-{self.index}"
            )

    def _validate_batch(self, data: bytes | bytearray | memoryview) -> RecordBatchHeader:
        """Header-only checks (the CRC is the log's): exactly one whole v2 batch a client may write."""
        header = read_single_batch(data)
        if header.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
        if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"Inconsistent batch: {header.records_count} records for a last offset delta of "
                f"{header.last_offset_delta}",
            )
        max_bytes = self.log.config.max_message_bytes
        if header.size > max_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The record batch of {header.size} bytes is larger than max.message.bytes={max_bytes}",
            )
        if header.is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                "Transactions are not supported: the batch is not part of an ongoing transaction",
            )
        return header

    def _check_producer_state(
        self, data: bytes | bytearray | memoryview, header: RecordBatchHeader, now_ms: int
    ) -> DuplicateBatch | None:
        """Duplicate or sequence errors, answered only for a batch whose CRC holds."""
        if not header.has_producer_id:
            return None
        try:
            duplicate = self.producer_state.check_and_prepare(header, origin="leader", now_ms=now_ms)
        except OutOfOrderSequenceError as exc:
            verify_crc(data)
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, str(exc)) from None
        except InvalidProducerEpochError as exc:
            verify_crc(data)
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, str(exc)) from None
        if duplicate is not None:
            verify_crc(data)
            self._logger.debug(
                "duplicate batch answered from producer state",
                producer_id=header.producer_id,
                base_sequence=header.base_sequence,
                first_offset=duplicate.first_offset,
            )
        return duplicate

    def _duplicate_result(self, duplicate: DuplicateBatch) -> AppendResult:
        log_append_time = duplicate.timestamp if self.log.config.log_append_time else NO_TIMESTAMP
        return AppendResult(
            duplicate.first_offset,
            duplicate.last_offset,
            log_append_time,
            self.log.log_start_offset,
            duplicate.last_offset - duplicate.first_offset + 1,
            True,
        )

    def _append(self, data: bytes | bytearray | memoryview, header: RecordBatchHeader) -> AppendResult:
        active_before = self.log.active_segment
        snapshot_at = self.log.log_end_offset
        try:
            info = self.log.append_as_leader(data, self.leader_epoch)
        except (CorruptRecordError, UnsupportedMagicError) as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        except RecordTooLargeError as exc:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, str(exc)) from None
        except RecordBatchTooLargeError as exc:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, str(exc)) from None
        except InvalidRecordError as exc:
            raise KafkaError(ErrorCode.INVALID_RECORD, str(exc)) from None
        except (OSError, KiplingStorageError) as exc:
            self._go_offline(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        if self.log.active_segment is not active_before:
            self._on_roll(snapshot_at)
        written = header._replace(base_offset=info.first_offset, max_timestamp=info.max_timestamp)
        self.producer_state.update(written, info.first_offset, info.last_offset)
        self._maybe_increment_high_watermark()
        self._notify()
        return AppendResult(
            info.first_offset,
            info.last_offset,
            info.log_append_time,
            self.log.log_start_offset,
            info.num_records,
            False,
        )

    def _on_roll(self, new_base_offset: int) -> None:
        """Kafka snapshots the producer state at each new segment's base offset, before its first batch."""
        self._positions.clear()
        self._positions_segment = None
        try:
            self.producer_state.take_snapshot(new_base_offset)
        except OSError as exc:  # the data is in the log; a missing snapshot only lengthens recovery
            self._logger.warning("producer snapshot failed", offset=new_base_offset, error=str(exc))

    def _go_offline(self, exc: BaseException) -> None:
        """A failed write leaves the log in an unknown state: refuse every later read and append."""
        self.is_offline = True
        self._logger.error("log failed, partition offline", error=str(exc))
        self._notify()

    # -- reads -------------------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int, *, require_leader: bool = True) -> ErrorCode:
        """Kafka's order: an offline log, then the request's CurrentLeaderEpoch, then leadership."""
        if self.is_offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if current_leader_epoch != NO_EPOCH:
            if current_leader_epoch < self.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > self.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if require_leader and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def end_offset_for(self, isolation_level: int, is_follower: bool) -> int:
        """What a reader may read up to: LEO for a follower, else HW (LSO for READ_COMMITTED)."""
        if is_follower:
            return self.log.log_end_offset
        return self.last_stable_offset if isolation_level == READ_COMMITTED else self.log.high_watermark

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation_level: int,
        is_follower: bool,
        min_one_batch: bool,
        current_leader_epoch: int,
        last_fetched_epoch: int,
    ) -> PartitionRead:
        """Whole batches from the one holding ``fetch_offset``, bounded by what the reader may see.

        Never decodes records: the slice points into the segment file. A follower whose last
        fetched epoch diverges from this log gets a DivergingEpoch and no records (kafka-behaviour 6.6).
        """
        error = self.check_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.NONE:
            return _error_read(error)
        log = self.log
        empty = PartitionRead(
            ErrorCode.NONE,
            log.high_watermark,
            self.last_stable_offset,
            log.log_start_offset,
            None,
            0,
            None,
            log.log_end_offset,
        )
        if last_fetched_epoch != NO_EPOCH:
            epoch, end_offset = self.end_offset_for_epoch(last_fetched_epoch)
            if epoch == NO_EPOCH or end_offset == UNKNOWN_OFFSET or fetch_offset < empty.log_start_offset:
                return _error_read(ErrorCode.OFFSET_OUT_OF_RANGE)
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                return empty._replace(diverging_epoch=(epoch, end_offset))
        if not empty.log_start_offset <= fetch_offset <= empty.log_end_offset:
            return _error_read(ErrorCode.OFFSET_OUT_OF_RANGE)
        max_offset = self.end_offset_for(isolation_level, is_follower)
        if fetch_offset >= max_offset:
            return empty
        bound = None if max_offset >= empty.log_end_offset else max_offset
        try:
            result = log.read(fetch_offset, max_bytes, bound, min_one_batch)
        except OffsetOutOfRangeError:
            return _error_read(ErrorCode.OFFSET_OUT_OF_RANGE)
        except (OSError, KiplingStorageError) as exc:
            self._go_offline(exc)
            return _error_read(ErrorCode.KAFKA_STORAGE_ERROR)
        if result.slice is None:
            return empty
        return empty._replace(
            slice=result.slice, records_size=result.slice.length, first_offset=result.first_offset
        )

    # -- what a parked fetch checks ----------------------------------------------------------------

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, its end offset) from the leader epoch cache; (-1, -1) if unknown."""
        found_epoch, end_offset = self.log.leader_epoch_cache.end_offset_for(epoch, self.log.log_end_offset)
        if end_offset == UNKNOWN_OFFSET:
            return NO_EPOCH, UNKNOWN_OFFSET
        return found_epoch, end_offset

    def on_older_segment(self, offset: int, end_offset: int) -> bool:
        """True if ``offset`` lies on an older segment than ``end_offset``.

        O(1) when ``offset`` is on the active segment (the common case of a caught-up reader),
        otherwise O(segments) for the list of base offsets.
        """
        if offset >= self.log.active_segment.base_offset:
            return False
        bases = [segment.base_offset for segment in self.log.segments()]
        return bisect_right(bases, offset) < bisect_right(bases, end_offset)

    def bytes_available(self, fetch_offset: int, end_offset: int, max_bytes: int = 2**31 - 1) -> int:
        """Bytes of whole batches from the one holding ``fetch_offset`` up to ``end_offset``.

        Both offsets must lie on one segment. Cost: O(1) when the end is the segment's end (a
        single replica's HW is its LEO) and the fetch offset's position is cached (parked readers
        of a partition mostly wait at the same offset); otherwise an offset index binary search,
        O(log entries), plus a scan of at most ``index.interval.bytes`` of batch headers (one or two
        preads). No record is read.
        """
        if fetch_offset >= end_offset:
            return 0
        segment = self._segment_for(fetch_offset)
        start = self._batch_position(segment, fetch_offset)
        if start is None:
            return 0
        end = segment.size if end_offset >= segment.next_offset else self._batch_position(segment, end_offset)
        if end is None:
            end = segment.size
        return max(0, min(end - start, max_bytes))

    def _segment_for(self, offset: int) -> LogSegment:
        return self.log.segment_for(offset)

    def _batch_position(self, segment: LogSegment, offset: int) -> int | None:
        """Position of the batch holding ``offset``; cached for the active segment (positions never move)."""
        if segment is not self.log.active_segment:
            batch = segment.translate_offset(offset)
            return None if batch is None else batch.position
        if self._positions_segment is not segment or len(self._positions) >= _POSITION_CACHE_LIMIT:
            self._positions = {}
            self._positions_segment = segment
        position = self._positions.get(offset)
        if position is None:
            batch = segment.translate_offset(offset)
            if batch is None:
                return None
            position = self._positions[offset] = batch.position
        return position

    # -- offsets by time and by epoch --------------------------------------------------------------

    def offset_for_timestamp(
        self,
        timestamp: int,
        *,
        isolation_level: int | None,
        current_leader_epoch: int,
        require_leader: bool = True,
    ) -> TimestampAndOffset:
        """ListOffsets for one partition; raises KafkaError for the partition's error.

        ``isolation_level`` None (followers, the debug replica id) reads up to the LEO. "Latest"
        answers the last fetchable offset with this leader's epoch; earliest (local) answers the log
        start offset; anything else must be below the last fetchable offset, else "not found".
        """
        error = self.check_leader_epoch(current_leader_epoch, require_leader=require_leader)
        if error is not ErrorCode.NONE:
            raise KafkaError(error)
        if isolation_level is None:
            last_fetchable = self.log.log_end_offset
        else:
            last_fetchable = self.end_offset_for(isolation_level, is_follower=False)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, last_fetchable, self.leader_epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return NOT_FOUND  # no tiered storage: Kafka answers -1 with epoch -1
        try:
            found = self.log.offset_for_timestamp(timestamp)
        except (OSError, KiplingStorageError) as exc:
            self._go_offline(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        if found is None:
            return NOT_FOUND
        offset, found_timestamp, epoch = found
        if timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP) and offset >= last_fetchable:
            return NOT_FOUND
        return TimestampAndOffset(found_timestamp, offset, epoch)

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), (-1, -1) when unknown; raises KafkaError."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.NONE:
            raise KafkaError(error)
        return self.end_offset_for_epoch(leader_epoch)

    # -- maintenance -------------------------------------------------------------------------------

    def after_retention(self) -> None:
        """Retention may have moved the log start offset: drop old snapshots, tell the listeners."""
        start = self.log.log_start_offset
        if start == self._known_log_start_offset:
            return
        self._known_log_start_offset = start
        self._positions.clear()
        self._positions_segment = None
        self.producer_state.delete_snapshots_before(start)
        self._notify()

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms (Kafka checks every 10 minutes)."""
        return self.producer_state.remove_expired_producers(now_ms)

    def close(self) -> None:
        """Stop leading; a producer snapshot at the LEO spares the next start any replay."""
        self.is_leader = False
        if not self.is_offline and self.producer_state.map_end_offset == self.log.log_end_offset:
            try:
                self.producer_state.take_snapshot()
            except OSError as exc:
                self._logger.warning("producer snapshot at close failed", error=str(exc))
        self._notify()

    def mark_removed(self) -> None:
        """The partition is going away (topic deleted): waiters re-check and find it gone."""
        self.is_leader = False
        self._notify()

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.index}, epoch={self.leader_epoch}, hw={self.high_watermark}, "
            f"leo={self.log_end_offset}, start={self.log_start_offset})"
        )
