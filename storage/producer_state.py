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
The broker's own coordinators (``origin="coordinator"``: the group coordinator's transactional
offset commits, the transaction coordinator's markers) write batches without sequence numbers:
only their producer epoch is checked, and they are never taken for duplicates, as in Kafka.

Transactions (Kafka's ongoing/unreplicated transactions of ProducerStateManager):

- a transactional data batch of a producer outside a transaction starts one at its first offset
  (:attr:`ProducerStateEntry.current_txn_first_offset`, and the manager's ongoing transactions,
  ordered by first offset);
- a marker (the control batch's ABORT or COMMIT record, passed to :meth:`~ProducerStateManager.update`
  as a :class:`TxnMarker`) ends it: ``update`` returns a :class:`CompletedTxn` (None for a marker
  without data before it, which changes nothing for readers). The caller records an aborted one in
  the transaction index with :meth:`~ProducerStateManager.last_stable_offset_of`, then calls
  :meth:`~ProducerStateManager.complete_txn` (:func:`storage.transactions.apply_batch` does all
  of it);
- a completed transaction stays unstable until the high watermark passes its marker
  (:meth:`~ProducerStateManager.on_high_watermark_updated`); the first unstable offset is the
  smallest first offset of the ongoing and of the unreplicated transactions;
- markers written by the coordinator (``origin="coordinator"``) are fenced: a coordinator epoch
  below the one the producer's last marker carried raises TransactionCoordinatorFencedError, an
  older producer epoch InvalidProducerEpochError. Followers record what they get.

The state is rebuilt from headers alone: on recovery or after a truncation the log loads the newest
snapshot at or below its end and calls :meth:`ProducerStateManager.update` for every later batch.
Snapshots use Kafka's file layout (:mod:`storage.producer_snapshot`); a producer is written as one
row per remembered batch, oldest first, so a snapshot keeps all five batches (Kafka's own keeps only
the last, and Kafka reading ours keeps the last row per producer, which is the row it would have
written). A snapshot keeps each producer's open transaction (``current_txn_first_offset``), from
which loading it rebuilds the ongoing transactions; completed ones are not kept (a reloaded state
counts them as replicated, as Kafka's does). A replay must read the markers of control batches:
their type is in the control record's key, not in the header.
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
from protocol.records.control import ControlRecordType
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

AppendOrigin = Literal["leader", "replication", "coordinator"]
"""Who appends: a producer through the leader, a follower copying its leader, or the transaction
coordinator's markers (WriteTxnMarkers) through the leader."""


class OutOfOrderSequenceError(StorageError):
    """The batch's first sequence does not follow the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerEpochError(StorageError):
    """The batch's producer epoch is older than the producer's current one (INVALID_PRODUCER_EPOCH)."""


class InvalidTxnStateError(StorageError):
    """A producer with an open transaction sent a non-transactional batch (INVALID_TXN_STATE)."""


class TransactionCoordinatorFencedError(StorageError):
    """A marker's coordinator epoch is older than the producer's last marker's
    (TRANSACTION_COORDINATOR_FENCED): a zombie coordinator wrote it."""


class TxnMarker(NamedTuple):
    """What a transaction marker says: read from the control record's key and value."""

    type: ControlRecordType
    """ABORT or COMMIT."""
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.type == ControlRecordType.ABORT


class CompletedTxn(NamedTuple):
    """A transaction a marker just ended: [first_offset, last_offset], the marker at last_offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class OngoingTxn(NamedTuple):
    """An open transaction, for DescribeProducers and the search for hanging transactions."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    last_timestamp: int
    last_sequence: int


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
        self._ongoing: dict[int, int] = {}
        """First offset -> producer id of the open transactions, in first offset order."""
        self._unreplicated: deque[CompletedTxn] = deque()
        """Completed transactions whose marker is not below the high watermark yet, in marker order."""
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

    def ongoing_transactions(self) -> list[OngoingTxn]:
        """The open transactions, oldest first (at most one per producer)."""
        found = []
        for first_offset, producer_id in self._ongoing.items():
            entry = self._producers[producer_id]
            found.append(
                OngoingTxn(
                    producer_id,
                    entry.producer_epoch,
                    entry.coordinator_epoch,
                    first_offset,
                    entry.last_timestamp,
                    entry.last_seq,
                )
            )
        return found

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open, or completed with its marker
        not yet below the high watermark (Kafka's firstUnstableOffset); None when there is none.

        The partition's last stable offset is this, else the high watermark (capped by it).
        """
        first = next(iter(self._ongoing), None)
        if self._unreplicated:
            unreplicated = min(txn.first_offset for txn in self._unreplicated)
            first = unreplicated if first is None else min(first, unreplicated)
        return first

    def last_stable_offset_of(self, completed: CompletedTxn) -> int:
        """The LSO right after ``completed``'s marker, for its transaction index entry.

        The first offset of the oldest open transaction of another producer, else the marker's
        offset + 1 (Kafka's ProducerStateManager.lastStableOffset). Call it before
        :meth:`complete_txn`.
        """
        for first_offset, producer_id in self._ongoing.items():
            if producer_id != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files, ascending."""
        return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return self._snapshots[0] if self._snapshots else None

    # -- appends -----------------------------------------------------------------------------------

    def check_and_prepare(
        self,
        header: RecordBatchHeader,
        *,
        origin: AppendOrigin,
        now_ms: int | None = None,
        marker: TxnMarker | None = None,
    ) -> DuplicateBatch | None:
        """Validate a batch about to be appended; a duplicate is returned, not appended.

        Raises OutOfOrderSequenceError or InvalidProducerEpochError (nothing must be written then),
        and for a marker (a control batch, ``marker`` read from its record) whose coordinator epoch
        is older than the producer's, TransactionCoordinatorFencedError. Changes nothing: call
        :meth:`update` once the batch is in the log.

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
        from_client = origin == "leader"
        if entry is not None:
            duplicate = entry.find_duplicate_batch(header) if from_client and not header.is_control else None
            if duplicate is not None:
                return DuplicateBatch(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp)
            if header.producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"producer {producer_id} in {self.partition_dir.name}: epoch {header.producer_epoch} "
                    f"is older than the current epoch {entry.producer_epoch}"
                )
            if (
                header.is_control
                and marker is not None
                and marker.coordinator_epoch < entry.coordinator_epoch
            ):
                raise TransactionCoordinatorFencedError(
                    f"marker for producer {producer_id} in {self.partition_dir.name}: coordinator epoch "
                    f"{marker.coordinator_epoch} is older than the current {entry.coordinator_epoch}"
                )
        if from_client and not header.is_control:
            if (
                entry is not None
                and entry.current_txn_first_offset is not None
                and not header.is_transactional
            ):
                raise InvalidTxnStateError(
                    f"producer {producer_id} in {self.partition_dir.name} sent a non-transactional batch "
                    f"while its transaction starting at offset {entry.current_txn_first_offset} is open"
                )
            self._check_sequence(entry, header)  # a coordinator's batches carry no sequence
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

    def update(
        self,
        header: RecordBatchHeader,
        first_offset: int,
        last_offset: int,
        *,
        marker: TxnMarker | None = None,
    ) -> CompletedTxn | None:
        """Apply a batch now in the log at [``first_offset``, ``last_offset``].

        Call it for every batch, in log order, with or without a producer id (map_end_offset
        follows), on the leader, on followers and during replays. ``header`` must carry the
        timestamps as written (after LogAppendTime stamping): a duplicate reports them.

        For a control batch ``marker`` is what its record says. The transaction it ends is returned
        as a CompletedTxn (None when the producer had no open transaction); it is still counted as
        open until :meth:`complete_txn`, which must follow (after the transaction index entry of an
        aborted one). Without ``marker`` (a caller that did not read the record) the transaction
        ends unreported: nothing can say whether it was aborted.
        """
        if last_offset < self._map_end_offset or first_offset > last_offset:
            raise ValueError(
                f"batch [{first_offset}, {last_offset}] cannot follow the producer state of "
                f"{self.partition_dir.name}, which ends at {self._map_end_offset}"
            )
        self._map_end_offset = last_offset + 1
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            return None
        if header.is_control:
            if header.records_count == 0:
                return None  # the cleaner emptied it: the transaction is gone from the log
            return self._end_txn(producer_id, header, last_offset, marker)
        entry = self._entry_for(producer_id)
        delta = last_offset - first_offset
        batch = BatchMetadata(header.last_sequence, last_offset, delta, header.max_timestamp)
        entry.add_batch(header.producer_epoch, batch)
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self._add_ongoing(first_offset, producer_id)
        return None

    def _end_txn(
        self, producer_id: int, header: RecordBatchHeader, offset: int, marker: TxnMarker | None
    ) -> CompletedTxn | None:
        entry = self._entry_for(producer_id)
        entry.maybe_update_producer_epoch(header.producer_epoch)
        entry.last_timestamp = header.max_timestamp
        first_offset = entry.current_txn_first_offset
        entry.current_txn_first_offset = None
        if marker is None:
            if first_offset is not None:
                self._ongoing.pop(first_offset, None)
            return None
        entry.coordinator_epoch = marker.coordinator_epoch
        if first_offset is None:
            return None  # a marker without data: nothing for readers to skip or wait for
        return CompletedTxn(producer_id, first_offset, offset, marker.is_abort)

    def _add_ongoing(self, first_offset: int, producer_id: int) -> None:
        last = next(reversed(self._ongoing), None)
        self._ongoing[first_offset] = producer_id
        if last is not None and first_offset < last:  # never in log order; kept sorted regardless
            self._ongoing = dict(sorted(self._ongoing.items()))

    def complete_txn(self, completed: CompletedTxn) -> None:
        """``completed`` is no longer open; it stays unstable until the high watermark passes its
        marker. Raises ValueError when it is not the open transaction :meth:`update` returned."""
        if self._ongoing.get(completed.first_offset) != completed.producer_id:
            raise ValueError(f"{completed} is not an open transaction of {self.partition_dir.name}")
        del self._ongoing[completed.first_offset]
        self._unreplicated.append(completed)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is below the high watermark become stable."""
        self._drop_unreplicated_below(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Completed transactions whose marker is gone from the log are stable."""
        self._drop_unreplicated_below(log_start_offset)

    def _drop_unreplicated_below(self, offset: int) -> None:
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0].last_offset < offset:
            unreplicated.popleft()

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
        self._ongoing = {}
        self._unreplicated.clear()
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
            self._ongoing = {
                entry.current_txn_first_offset: pid
                for pid, entry in sorted(
                    producers.items(), key=lambda item: item[1].current_txn_first_offset or 0
                )
                if entry.current_txn_first_offset is not None
            }
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
        self._ongoing = {}
        self._unreplicated.clear()
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
