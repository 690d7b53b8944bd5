"""The controller's metadata log on disk: the ``__cluster_metadata-0`` partition, led by the controller.

The log is an ordinary partition (segments, indexes, leader-epoch checkpoint, crash recovery) held
as a :class:`~broker.partition.Partition` whose only replica is the controller. Being a Partition
is what lets brokers fetch it with the ordinary Fetch machinery: long polls woken by appends,
diverging-epoch answers, file slices sent without copies.

Durability: every batch is fsynced before the controller applies it to its image and answers.
A metadata change that was answered (a created topic, an elected leader, a committed ISR) therefore
survives a crash of the controller; the log is tiny, so the fsync costs a few milliseconds per
change, not per produced record.

Epochs: the partition's leader epoch is the controller epoch, bumped at every controller start
(the latest epoch in the log's leader-epoch cache plus one), and stamped on every batch as its
partition leader epoch. A broker that fetched batches of an older epoch is told by the diverging
epoch of the next fetch, which is how a future quorum of controllers fences a deposed one.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterator, Sequence

from broker.metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from broker.metadata.records import MetadataRecord
from broker.metadata.serde import MetadataBatch, decode_metadata_batches, encode_metadata_batch
from broker.partition import Partition
from broker.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode
from storage.clock import Clock
from storage.log import PartitionLog

__all__ = ["MetadataPartitionSource", "PartitionMetadataLog", "next_controller_epoch", "read_metadata_log"]

READ_CHUNK_BYTES = 8 * 1024 * 1024


def next_controller_epoch(log: PartitionLog) -> int:
    """One more than the latest epoch in the log (0 for a new log)."""
    latest = log.leader_epoch_cache.latest_epoch
    return 0 if latest is None else latest + 1


def read_metadata_log(log: PartitionLog) -> Iterator[MetadataBatch]:
    """Every batch of the metadata log, in order (the controller replays them at start-up)."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, READ_CHUNK_BYTES)
        if result.slice is None:
            return
        data = result.slice.read_bytes()
        last = offset - 1
        for batch in decode_metadata_batches(data):
            last = batch.last_offset
            yield batch
        if last < offset:
            raise ValueError(f"no complete metadata batch at offset {offset}")
        offset = last + 1


class PartitionMetadataLog:
    """:class:`~broker.controller.metadata_log.MetadataLog` over the metadata partition."""

    def __init__(self, partition: Partition, clock: Clock) -> None:
        self.partition = partition
        self._clock = clock

    @property
    def end_offset(self) -> int:
        return self.partition.log_end_offset

    def append(self, records: Sequence[MetadataRecord], epoch: int) -> int:
        """Append one batch, fsync it, and return the offset of its first record."""
        if epoch != self.partition.leader_epoch:
            raise ValueError(f"controller epoch {epoch} is not the log's epoch {self.partition.leader_epoch}")
        now = self._clock.time_ms()
        batch = encode_metadata_batch(records, epoch=epoch, timestamp_ms=now)
        result = self.partition.append_records(batch, required_acks=1, now_ms=now)
        self.partition.log.flush()
        return result.base_offset


class MetadataPartitionSource:
    """The controller listener's view for Fetch: one partition, the metadata log, and its topic.

    Satisfies the FetchService's ``PartitionSource`` and ``TopicLookup`` protocols, so brokers'
    metadata fetches go through the same code as every other fetch.
    """

    def __init__(self, partition: Partition) -> None:
        self._partition = partition
        self._state = PartitionState(
            partition=METADATA_PARTITION,
            leader_id=partition.node_id,
            leader_epoch=partition.leader_epoch,
            partition_epoch=0,
            replicas=[partition.node_id],
            isr=[partition.node_id],
        )
        self._topic = TopicState(METADATA_TOPIC, METADATA_TOPIC_ID, {METADATA_PARTITION: self._state})

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self._partition if (topic, index) == (METADATA_TOPIC, METADATA_PARTITION) else None

    def get_partition_by_id(self, topic_id: uuid.UUID, index: int) -> Partition | None:
        return self._partition if (topic_id, index) == (METADATA_TOPIC_ID, METADATA_PARTITION) else None

    def get_partition_by_key(self, key: Hashable) -> Partition | None:
        return self._partition if key == self._partition.key else None

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        return self._state if (topic, index) == (METADATA_TOPIC, METADATA_PARTITION) else None

    def partition_error(self, topic: str, index: int) -> ErrorCode:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def get(self, name: str) -> TopicState | None:
        return self._topic if name == METADATA_TOPIC else None

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self._topic if topic_id == METADATA_TOPIC_ID else None

    def all(self) -> list[TopicState]:
        return [self._topic]
