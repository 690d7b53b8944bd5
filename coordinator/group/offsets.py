"""A group's committed offsets: what is durable, what is being written, and what has expired.

Kafka keeps two maps per group and so does :class:`GroupOffsets`:

* ``committed``: offsets whose records are in ``__consumer_offsets``, each with the log offset of
  its record batch, so that of two commits of one partition the later record always wins
  (``CommitRecordMetadataAndOffset``);
* ``pending``: commits handed to the log and not yet acknowledged. A fetch never sees them (it must
  never return an offset that may not survive), and they are never expired.

and a third for transactions (KIP-98, KIP-447), ``pending_txn``: per producer id, the offsets a
TxnOffsetCommit wrote inside a transaction that has not ended. They become committed when the
transaction's COMMIT marker reaches ``__consumer_offsets`` (:meth:`GroupOffsets.complete_txn`) and
vanish on ABORT. A fetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """One committed offset as Kafka stores it (leader epoch -1 = none; expire timestamp only for
    commits that carried a retention time, OffsetCommit v2-4)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """A durable commit and where its record sits in ``__consumer_offsets``."""

    log_offset: int
    offset: OffsetAndMetadata

    def older_than(self, other: CommitRecord) -> bool:
        return self.log_offset < other.log_offset


BaseTimestamp = Callable[[OffsetAndMetadata], int]


@dataclass(slots=True)
class TxnCommit:
    """An offset written in an open transaction; ``record`` is None until the log took it."""

    offset: OffsetAndMetadata
    record: CommitRecord | None = None


class GroupOffsets:
    def __init__(self) -> None:
        self.committed: dict[TopicPartition, CommitRecord] = {}
        self.pending: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending_txn: dict[int, dict[TopicPartition, TxnCommit]] = {}

    def __len__(self) -> int:
        return len(self.committed)

    def get(self, partition: TopicPartition) -> OffsetAndMetadata | None:
        record = self.committed.get(partition)
        return record.offset if record is not None else None

    def all(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {partition: record.offset for partition, record in self.committed.items()}

    @property
    def has_offsets(self) -> bool:
        """Committed or in flight: a group with either is not removed (GroupMetadata.hasOffsets)."""
        return bool(self.committed) or bool(self.pending) or bool(self.pending_txn)

    def has_pending(self, partition: TopicPartition) -> bool:
        """A commit of ``partition`` is in flight, or waits in an open transaction."""
        return partition in self.pending or any(partition in txn for txn in self.pending_txn.values())

    # -- transactional offsets (TxnOffsetCommit) ---------------------------------------------------

    def prepare_txn(self, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        txn = self.pending_txn.setdefault(producer_id, {})
        for partition, offset in offsets.items():
            txn[partition] = TxnCommit(offset)

    def on_txn_appended(self, producer_id: int, partition: TopicPartition, record: CommitRecord) -> None:
        """The log took a transactional commit: it waits for the transaction's marker."""
        pending = self.pending_txn.get(producer_id, {}).get(partition)
        if pending is not None and pending.offset == record.offset:
            pending.record = record

    def on_txn_failed(self, producer_id: int, partition: TopicPartition, offset: OffsetAndMetadata) -> None:
        """The log refused a transactional commit: forget it unless a newer one of the partition waits."""
        txn = self.pending_txn.get(producer_id)
        if txn is None:
            return
        pending = txn.get(partition)
        if pending is not None and pending.record is None and pending.offset == offset:
            del txn[partition]
        if not txn:
            del self.pending_txn[producer_id]

    def initialize_txn(self, producer_id: int, records: Mapping[TopicPartition, CommitRecord]) -> None:
        """Offsets of a transaction still open when ``__consumer_offsets`` was loaded."""
        txn = self.pending_txn.setdefault(producer_id, {})
        for partition, record in records.items():
            txn[partition] = TxnCommit(record.offset, record)

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """The transaction's marker is in the log: its written offsets become committed (a later
        durable commit of a partition still wins) or are dropped."""
        txn = self.pending_txn.pop(producer_id, None)
        if txn is None or not commit:
            return
        for partition, pending in txn.items():
            record = pending.record
            if record is None:
                continue  # never written: its TxnOffsetCommit failed, the client aborts
            current = self.committed.get(partition)
            if current is None or current.older_than(record):
                self.committed[partition] = record

    def has_pending_txn(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn

    def initialize(self, records: Mapping[TopicPartition, CommitRecord]) -> None:
        """Offsets read from the log when a partition of ``__consumer_offsets`` is loaded."""
        self.committed.update(records)

    def prepare(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending.update(offsets)

    def on_appended(self, partition: TopicPartition, record: CommitRecord) -> None:
        """The log took a commit. It becomes visible only if the partition still has a commit in
        flight (a deleted topic's offsets were dropped meanwhile) and nothing newer is durable."""
        if partition in self.pending:
            current = self.committed.get(partition)
            if current is None or current.older_than(record):
                self.committed[partition] = record
        if self.pending.get(partition) == record.offset:
            del self.pending[partition]

    def on_failed(self, partition: TopicPartition, offset: OffsetAndMetadata) -> None:
        """The log refused a commit: forget it unless a newer commit of the partition is in flight."""
        if self.pending.get(partition) == offset:
            del self.pending[partition]

    def remove(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """Forget the offsets of ``partitions``, durable or in flight; returns what went (tombstones
        are written for all of it). Kafka tombstones only durable offsets, so a commit in flight
        during a group or topic deletion lands after it and comes back on the next load; a
        tombstone for it, appended after the commit's own record, keeps it deleted.

        Offsets of ``partitions`` waiting in open transactions are dropped too, as Kafka's
        ``removeOffsets`` drops them (a later COMMIT marker must not bring them back); the
        transaction itself stays known, so the group keeps ``has_offsets`` until its marker."""
        removed: dict[TopicPartition, OffsetAndMetadata] = {}
        for partition in partitions:
            for txn in self.pending_txn.values():
                txn.pop(partition, None)
            in_flight = self.pending.pop(partition, None)
            record = self.committed.pop(partition, None)
            if record is not None:
                removed[partition] = record.offset
            elif in_flight is not None:
                removed[partition] = in_flight
        return removed

    def remove_all(self) -> dict[TopicPartition, OffsetAndMetadata]:
        self.pending_txn.clear()
        return self.remove(list({**self.committed, **self.pending}))

    def expired(
        self, now_ms: int, retention_ms: int, base_timestamp: BaseTimestamp, subscribed: frozenset[str]
    ) -> list[TopicPartition]:
        """Durable offsets past their retention (KIP-211), skipping subscribed topics and partitions
        with a commit in flight. An offset written with an expire timestamp (OffsetCommit v2-4 with
        a retention time) keeps that older rule: it expires at that timestamp."""
        return [
            partition
            for partition, record in self.committed.items()
            if partition[0] not in subscribed
            and not self.has_pending(partition)
            and _is_expired(record.offset, now_ms, retention_ms, base_timestamp)
        ]


def _is_expired(offset: OffsetAndMetadata, now_ms: int, retention_ms: int, base: BaseTimestamp) -> bool:
    if offset.expire_timestamp is not None:
        return now_ms >= offset.expire_timestamp
    return now_ms - base(offset) >= retention_ms
