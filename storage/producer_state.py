"""The idempotent producer's state in one partition: Kafka's ProducerStateManager.

For every producer id that wrote to the partition the leader remembers the producer epoch and the
last five batches (their sequences, offsets and max timestamp). That is enough to

- answer a retried batch (same epoch and sequences as one of the last five) with the offsets it got
  the first time instead of writing it twice: :class:`DuplicateBatch`;
- reject a batch whose first sequence does not follow the last one (OUT_OF_ORDER_SEQUENCE_NUMBER),
  or whose epoch is older than the producer's (INVALID_PRODUCER_EPOCH, a zombie producer).

Sequence rules, as in Kafka 2.5+ (KIP-360) for a batch with producer id P, epoch E, sequences [F, L]:

1. P == -1: no idempotence, nothing is checked or stored (kafkajs and others write epoch 0 and
   sequence 0 with P == -1).
2. A duplicate of one of P's last five batches (same E, same F and L) is answered, not appended.
3. E below P's epoch: InvalidProducerEpochError.
4. P unknown (never seen, or removed as expired): any F is accepted, since the state may have been
   lost to retention, DeleteRecords or expiration; with ``require_zero_first_sequence`` F must be 0.
5. E above P's epoch: F must be 0 (a new epoch restarts the sequences).
6. Same epoch: F must be the last sequence + 1, or 0 after 2**31 - 1 (sequences wrap). With no
   batch remembered in this epoch (a marker bumped it), F must be 0.

Followers (``origin="replication"``) trust their leader: nothing is checked, state is still updated.

The state is rebuilt from headers alone: on recovery or after a truncation the log loads the newest
snapshot at or below its end and calls :meth:`ProducerStateManager.update` for every later batch.
Snapshots use Kafka's file layout (:mod:`storage.producer_snapshot`); a producer is written as one
row per remembered batch, oldest first, so a snapshot keeps all five batches (Kafka's own keeps only
the last, and Kafka reading ours keeps the last row per producer, which is the row it would have
written). Transactions are not implemented yet: transactional batches and control batches only keep
``current_txn_first_offset`` and the epoch up to date, from their headers.
"""

from __future__ import annotations

import pathlib
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, NamedTuple

import structlog

from protocol.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, RecordBatchHeader
from protocol.sentinels import NO_TIMESTAMP, UNKNOWN_OFFSET
from storage.errors import StorageError
from storage.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    list_snapshot_offsets,
    read_snapshot,
    remove_temporary_files,
    snapshot_path,
    write_snapshot,
)

_log = structlog.get_logger(__name__)

NUM_BATCHES_TO_RETAIN = 5
"""Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: producers keep at most 5 requests in flight."""
INT32_MAX = 2**31 - 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""producer.id.expiration.ms: a producer idle this long is forgotten."""
PRODUCER_EXPIRATION_CHECK_INTERVAL_MS = 600_000
"""How often leaders and followers expire idle producers (Kafka's
producer.id.expiration.check.interval.ms)."""
NO_COORDINATOR_EPOCH = -1

AppendOrigin = Literal["leader", "replication"]


class OutOfOrderSequenceError(StorageError):
    """The batch's first sequence does not follow the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerEpochError(StorageError):
    """The batch's producer epoch is older than the producer's current one (INVALID_PRODUCER_EPOCH)."""


class DuplicateBatch(NamedTuple):
    """Where a retried batch was written the first time: the produce response reports these."""

    first_offset: int
    last_offset: int
    timestamp: int


class BatchMetadata(NamedTuple):
    """One remembered batch, stored as Kafka stores it (first values derive from the last ones)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        if self.last_seq == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.last_seq - self.offset_delta) % (INT32_MAX + 1)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """``next_seq`` directly follows ``last_seq``; after Int.MAX sequences start again at 0."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(slots=True)
class ProducerStateEntry:
    """What the partition knows about one producer id. Owned by the manager: do not mutate."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    """The last batches of the current epoch, oldest first."""
    last_timestamp: int = NO_TIMESTAMP
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else UNKNOWN_OFFSET

    def find_duplicate_batch(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """The remembered batch with the same epoch and exactly the same sequence range, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batch_metadata:
            if batch.last_seq == last and batch.first_seq == first:
                return batch
        return None

    def maybe_update_producer_epoch(self, producer_epoch: int) -> None:
        """A new epoch starts a new sequence space: the batches of the old one are forgotten."""
        if producer_epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch

    def add_batch(self, producer_epoch: int, batch: BatchMetadata) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(batch)  # maxlen drops the oldest
        self.last_timestamp = batch.timestamp


class ProducerStateManager:
    """Producer ids -> :class:`ProducerStateEntry` for one partition, plus its snapshot files.

    ``map_end_offset`` is the offset the state reflects: every batch below it has been applied.
    Not thread-safe: the partition's single owner drives it, like the log itself.
    """

    def __init__(
        self,
        partition_dir: pathlib.Path,
        max_producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        *,
        require_zero_first_sequence: bool = False,
    ) -> None:
        """Scan ``partition_dir`` for snapshots (nothing is loaded yet: see :meth:`truncate_and_reload`).

        ``require_zero_first_sequence`` makes an unknown producer's first batch start at sequence 0
        (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise). Brokers before 2.5 made that check (answering
        UNKNOWN_PRODUCER_ID); Kafka 2.5+ (KIP-360), the default here, accepts any first sequence.
        """
        self.partition_dir = pathlib.Path(partition_dir)
        self.max_producer_id_expiration_ms = max_producer_id_expiration_ms
        self.require_zero_first_sequence = require_zero_first_sequence
        self._producers: dict[int, ProducerStateEntry] = {}
        self._map_end_offset = 0
        remove_temporary_files(self.partition_dir)
        self._snapshots = list_snapshot_offsets(self.partition_dir)
        self._logger = _log.bind(partition_dir=str(self.partition_dir))

    # -- inspection --------------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The state reflects every batch below this offset."""
        return self._map_end_offset

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of the active producers (live: it follows later updates)."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files, ascending."""
        return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return self._snapshots[0] if self._snapshots else None

    # -- appends -----------------------------------------------------------------------------------

    def check_and_prepare(
        self, header: RecordBatchHeader, *, origin: AppendOrigin, now_ms: int | None = None
    ) -> DuplicateBatch | None:
        """Validate a batch about to be appended; a duplicate is returned, not appended.

        Raises OutOfOrderSequenceError or InvalidProducerEpochError (nothing must be written then).
        Changes nothing: call :meth:`update` once the batch is in the log.

        ``now_ms`` does not make an idle producer unknown here: expiry is measured on batch
        timestamps, which come from the producer's clock (MirrorMaker keeps old ones), and such a
        producer would lose its duplicate detection on every batch. Expiry stays with
        :meth:`remove_expired_producers`, as in Kafka; the argument is kept for transaction
        verification later.
        """
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID or origin == "replication":
            return None
        entry = self._producers.get(producer_id)
        if entry is not None:
            duplicate = None if header.is_control else entry.find_duplicate_batch(header)
            if duplicate is not None:
                return DuplicateBatch(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp)
            if header.producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"producer {producer_id} in {self.partition_dir.name}: epoch {header.producer_epoch} "
                    f"is older than the current epoch {entry.producer_epoch}"
                )
        if not header.is_control:
            self._check_sequence(entry, header)
        return None

    def _check_sequence(self, entry: ProducerStateEntry | None, header: RecordBatchHeader) -> None:
        first = header.base_sequence
        if entry is None or entry.producer_epoch == NO_PRODUCER_EPOCH:
            if self.require_zero_first_sequence and first != 0:
                raise self._out_of_order(header, f"an unknown producer must start at 0, not {first}")
            return
        if header.producer_epoch != entry.producer_epoch:
            if first != 0:
                raise self._out_of_order(
                    header,
                    f"the first batch of epoch {header.producer_epoch} (after {entry.producer_epoch}) "
                    f"must start at 0, not {first}",
                )
        elif not in_sequence(entry.last_seq, first):
            raise self._out_of_order(header, f"{first} does not follow the last sequence {entry.last_seq}")

    def _out_of_order(self, header: RecordBatchHeader, reason: str) -> OutOfOrderSequenceError:
        return OutOfOrderSequenceError(
            f"out of order sequence for producer {header.producer_id} epoch {header.producer_epoch} "
            f"in {self.partition_dir.name}: {reason}"
        )

    def update(self, header: RecordBatchHeader, first_offset: int, last_offset: int) -> None:
        """Apply a batch now in the log at [``first_offset``, ``last_offset``].

        Call it for every batch, in log order, with or without a producer id (map_end_offset
        follows), on the leader, on followers and during replays. ``header`` must carry the
        timestamps as written (after LogAppendTime stamping): a duplicate reports them.
        """
        if last_offset < self._map_end_offset or first_offset > last_offset:
            raise ValueError(
                f"batch [{first_offset}, {last_offset}] cannot follow the producer state of "
                f"{self.partition_dir.name}, which ends at {self._map_end_offset}"
            )
        self._map_end_offset = last_offset + 1
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            return
        if header.is_control:
            if header.records_count == 0:
                return  # the cleaner emptied it: the transaction is gone from the log
            entry = self._entry_for(producer_id)
            entry.maybe_update_producer_epoch(header.producer_epoch)
            entry.current_txn_first_offset = None
            entry.last_timestamp = header.max_timestamp
            return
        entry = self._entry_for(producer_id)
        delta = last_offset - first_offset
        batch = BatchMetadata(header.last_sequence, last_offset, delta, header.max_timestamp)
        entry.add_batch(header.producer_epoch, batch)
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset

    def _entry_for(self, producer_id: int) -> ProducerStateEntry:
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        return entry

    def update_map_end_offset(self, offset: int) -> None:
        """Declare the state current up to ``offset`` when the log moved without batches to apply."""
        self._map_end_offset = offset

    # -- expiration --------------------------------------------------------------------------------

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """Idle for producer.id.expiration.ms (by its batches' timestamps) and not in a transaction."""
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.max_producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget the producers idle for producer.id.expiration.ms; returns their ids."""
        expired = [pid for pid, entry in self._producers.items() if self._is_expired(entry, now_ms)]
        for producer_id in expired:
            del self._producers[producer_id]
        return expired

    # -- snapshots ---------------------------------------------------------------------------------

    def take_snapshot(self, offset: int | None = None) -> pathlib.Path:
        """Write the state to ``<offset>.snapshot`` (default: map_end_offset) and return its path.

        ``offset`` may not be below map_end_offset: the state already holds batches at or after it.
        """
        offset = self._map_end_offset if offset is None else offset
        if offset < self._map_end_offset:
            raise ValueError(
                f"cannot snapshot {self.partition_dir.name} at {offset}: "
                f"the state already reflects offsets up to {self._map_end_offset}"
            )
        path = snapshot_path(self.partition_dir, offset)
        write_snapshot(path, self._snapshot_rows())
        index = bisect_left(self._snapshots, offset)
        if index == len(self._snapshots) or self._snapshots[index] != offset:
            self._snapshots.insert(index, offset)
        return path

    def _snapshot_rows(self) -> Iterator[SnapshotEntry]:
        """One row per remembered batch, oldest first; the last row of a producer is Kafka's row.

        When the producer's last timestamp is not its last batch's (a later control batch), a final
        row repeats the last batch with the last timestamp, as Kafka would write it.
        """
        for producer_id in sorted(self._producers):
            entry = self._producers[producer_id]
            if not entry.batch_metadata:
                yield _row(entry, NO_SEQUENCE, UNKNOWN_OFFSET, 0, entry.last_timestamp)
                continue
            for batch in entry.batch_metadata:
                yield _row(entry, *batch)
            last = entry.batch_metadata[-1]
            if last.timestamp != entry.last_timestamp:
                yield _row(entry, last.last_seq, last.last_offset, last.offset_delta, entry.last_timestamp)

    def load_snapshot(self, up_to_offset: int, *, now_ms: int | None = None) -> int | None:
        """Replace the state with the newest valid snapshot at or below ``up_to_offset``.

        Corrupt snapshots on the way are deleted. Returns the snapshot's offset, from which the log
        replays its batches through :meth:`update`; None (state empty, map_end_offset 0) when there
        is no usable snapshot, and the log replays from its start. With ``now_ms``, producers
        already expired then are not loaded.
        """
        self._producers = {}
        self._map_end_offset = 0
        for offset in reversed(self._snapshots[: bisect_right(self._snapshots, up_to_offset)]):
            path = snapshot_path(self.partition_dir, offset)
            try:
                rows = read_snapshot(path)
                producers = _entries_from_rows(rows, str(path))
            except (CorruptSnapshotError, FileNotFoundError) as exc:
                self._logger.warning("deleting unusable producer snapshot", offset=offset, reason=str(exc))
                self._delete_snapshot(offset)
                continue
            if now_ms is not None:
                producers = {pid: e for pid, e in producers.items() if not self._is_expired(e, now_ms)}
            self._producers = producers
            self._map_end_offset = offset
            return offset
        return None

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, *, now_ms: int | None = None
    ) -> int:
        """Match the state to a log now spanning [``log_start_offset``, ``log_end_offset``).

        Snapshots above the log end (their batches are gone) and below the log start are deleted.
        If the state does not end at ``log_end_offset``, it is reloaded from the newest remaining
        snapshot. Returns map_end_offset: the log calls :meth:`update` for each batch from there to
        its end (nothing when it equals ``log_end_offset``). Also the recovery entry point.
        """
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)
        if log_end_offset != self._map_end_offset:
            if self.load_snapshot(log_end_offset, now_ms=now_ms) is None:
                self._map_end_offset = log_start_offset
        elif self._map_end_offset < log_start_offset:
            self._map_end_offset = log_start_offset
        return self._map_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at ``offset``: forget every producer and snapshot."""
        for snapshot in list(self._snapshots):
            self._delete_snapshot(snapshot)
        self._producers = {}
        self._map_end_offset = offset

    def delete_snapshots_before(self, offset: int) -> None:
        """Retention: delete snapshots below ``offset`` (the new log start); the state itself stays."""
        for snapshot in self._snapshots[: bisect_left(self._snapshots, offset)]:
            self._delete_snapshot(snapshot)

    def _delete_snapshot(self, offset: int) -> None:
        snapshot_path(self.partition_dir, offset).unlink(missing_ok=True)
        index = bisect_left(self._snapshots, offset)
        if index < len(self._snapshots) and self._snapshots[index] == offset:
            del self._snapshots[index]


def _row(
    entry: ProducerStateEntry, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
) -> SnapshotEntry:
    txn_first_offset = entry.current_txn_first_offset
    return SnapshotEntry(
        entry.producer_id,
        entry.producer_epoch,
        last_seq,
        last_offset,
        offset_delta,
        timestamp,
        entry.coordinator_epoch,
        UNKNOWN_OFFSET if txn_first_offset is None else txn_first_offset,
    )


def _entries_from_rows(rows: list[SnapshotEntry], name: str) -> dict[int, ProducerStateEntry]:
    """Group rows by producer: each row with a new last offset is one more batch, the last row of a
    producer gives its epoch, timestamp and transaction state (so a Kafka-written snapshot, one row
    per producer, loads too)."""
    producers: dict[int, ProducerStateEntry] = {}
    for row in rows:
        entry = producers.get(row.producer_id)
        if entry is None:
            entry = producers[row.producer_id] = ProducerStateEntry(row.producer_id, row.producer_epoch)
        entry.maybe_update_producer_epoch(row.producer_epoch)
        if row.last_offset >= 0:
            previous = entry.last_data_offset
            if row.last_offset > previous:
                entry.batch_metadata.append(
                    BatchMetadata(row.last_sequence, row.last_offset, row.offset_delta, row.timestamp)
                )
            elif row.last_offset < previous:
                raise CorruptSnapshotError(
                    f"{name}: producer {row.producer_id} rows go back from offset {previous} "
                    f"to {row.last_offset}"
                )
        entry.last_timestamp = row.timestamp
        entry.coordinator_epoch = row.coordinator_epoch
        entry.current_txn_first_offset = (
            None if row.current_txn_first_offset < 0 else row.current_txn_first_offset
        )
    return producers
