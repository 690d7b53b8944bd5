"""The metadata log as a partition this node leads: the controller writes it, brokers fetch it.

:class:`PartitionMetadataLog` is the controller's :class:`~metadata.controller.metadata_log.MetadataLog`
over a :class:`~broker.replication.partition.Partition` whose only replica is the controller, so every batch
gets segments, indexes, a leader-epoch checkpoint and crash recovery like any partition.
:class:`MetadataPartitionSource` lets the controller listener's Fetch serve that one partition through the
ordinary fetch path (long polls woken by appends, diverging epochs, zero-copy slices).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Sequence

from broker.replication.partition import Partition
from metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from metadata.records import MetadataRecord
from metadata.serde import encode_metadata_batch
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode
from storage.clock import Clock

__all__ = ["MetadataPartitionSource", "PartitionMetadataLog"]


class PartitionMetadataLog:
    """:class:`~metadata.controller.metadata_log.MetadataLog` over the metadata partition."""

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
