"""Rebuilding groups from one partition of ``__consumer_offsets`` (Kafka's ``doLoadGroupsAndOffsets``).

The records are read in log order; the last record of each key wins and a tombstone removes what it
names. A group's metadata record rebuilds the group (Stable with its members and assignments, or
Empty); offsets without a live metadata record belong to groups that only store offsets (manual
assignment), which come back Empty with no protocol type. Keys of unknown versions are skipped.

Kafka remembers, for each offset, the offset of its record *batch*; the records here carry their own
offset, which orders commits of one partition just as well (two commits of one partition never share
a batch).

Consumer-protocol groups (KIP-848, key versions 3-8) are rebuilt by applying their records in log
order, exactly as they were applied when written (:func:`coordinator.group.consumer.records.apply`).
A group id that ends with both a live classic group record and a live consumer group (a conversion
writes tombstones for the old kind first, so only a damaged log has both) keeps the kind written
last.

Transactional offset commits (TxnOffsetCommit) wait per producer id until that producer's marker:
a COMMIT makes them committed offsets (unless a later commit of the partition is already loaded),
an ABORT drops them, and those of a transaction still open at the end of the log are loaded as
pending transactional offsets, for the marker that will come.
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.consumer.records import apply as apply_consumer_group_record
from coordinator.group.consumer.records import from_logged
from coordinator.group.group import GroupMetadata
from coordinator.group.log import LoggedEntry, LoggedRecord, LoggedTxnMarker
from coordinator.group.offsets import CommitRecord, TopicPartition
from coordinator.group.records import read_group, read_offset
from coordinator.group.state import GroupState
from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey, UnknownKey, decode_key
from storage.clock import Clock

_log = structlog.get_logger("kipling.groups.loader")


class _ConsumerGroups:
    """The consumer groups of a partition being loaded, for the records to build."""

    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroup] = {}

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def create_consumer_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def remove_consumer_group(self, group: ConsumerGroup) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]


class _PartitionReplay:
    """The state the records leave behind: last offsets per group and partition, last group values."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, CommitRecord]] = {}
        self.group_values: dict[str, bytes] = {}
        self.group_value_offsets: dict[str, int] = {}
        self.consumer_groups = _ConsumerGroups()
        self.consumer_group_offsets: dict[str, int] = {}
        self.txn_offsets: dict[int, dict[str, dict[TopicPartition, CommitRecord]]] = {}
        """producer id -> group -> offsets written in its open transaction."""

    def apply(self, entry: LoggedEntry) -> None:
        if isinstance(entry, LoggedTxnMarker):
            self._end_txn(entry)
            return
        record = entry
        key = decode_key(record.key)
        if isinstance(key, OffsetCommitKey):
            self._apply_offset(key, record)
        elif isinstance(key, GroupMetadataKey):
            if record.value is None:
                self.group_values.pop(key.group, None)
            else:
                self.group_values[key.group] = bytes(record.value)
                self.group_value_offsets[key.group] = record.offset
        elif isinstance(key, UnknownKey):
            _log.warning(
                "skipping a record with an unknown key version", version=key.version, offset=record.offset
            )
        else:
            value = None if record.value is None else bytes(record.value)
            apply_consumer_group_record(from_logged(key, value), self.consumer_groups)
            self.consumer_group_offsets[key.group] = record.offset

    def _end_txn(self, marker: LoggedTxnMarker) -> None:
        groups = self.txn_offsets.pop(marker.producer_id, {})
        if not marker.commit:
            return
        for group_id, offsets in groups.items():
            loaded = self.offsets.setdefault(group_id, {})
            for partition, commit in offsets.items():
                current = loaded.get(partition)
                if current is None or current.older_than(commit):
                    loaded[partition] = commit

    def _apply_offset(self, key: OffsetCommitKey, record: LoggedRecord) -> None:
        partition = (key.topic, key.partition)
        if record.producer_id is not None:
            if record.value is not None:
                commit = CommitRecord(record.offset, read_offset(bytes(record.value)))
                groups = self.txn_offsets.setdefault(record.producer_id, {})
                groups.setdefault(key.group, {})[partition] = commit
            return
        if record.value is None:
            group_offsets = self.offsets.get(key.group)
            if group_offsets is not None:
                group_offsets.pop(partition, None)
                if not group_offsets:
                    del self.offsets[key.group]
            return
        commit = CommitRecord(record.offset, read_offset(bytes(record.value)))
        self.offsets.setdefault(key.group, {})[partition] = commit


def rebuild_groups(
    records: Iterable[LoggedEntry], clock: Clock
) -> tuple[list[GroupMetadata], list[ConsumerGroup]]:
    """Every group the records describe, classic and consumer-protocol ones, with their offsets;
    raises DecodeError on a corrupt record (RuntimeError on consumer group records that give a
    partition to two members)."""
    replay = _PartitionReplay()
    for record in records:
        replay.apply(record)
    consumer_groups = replay.consumer_groups.groups
    for group_id in list(replay.group_values):
        if group_id in consumer_groups:
            if replay.group_value_offsets[group_id] > replay.consumer_group_offsets[group_id]:
                del consumer_groups[group_id]
            else:
                del replay.group_values[group_id]
            _log.warning("a group is both a classic and a consumer group; keeping the later", group=group_id)
    groups = [read_group(group_id, value, clock) for group_id, value in replay.group_values.items()]
    with_txn = {group_id for groups_of in replay.txn_offsets.values() for group_id in groups_of}
    groups += [
        GroupMetadata(group_id, GroupState.EMPTY, clock)
        for group_id in sorted(set(replay.offsets) | with_txn)
        if group_id not in replay.group_values and group_id not in consumer_groups
    ]
    holders: list[GroupMetadata | ConsumerGroup] = [*groups, *consumer_groups.values()]
    for group in holders:
        group.offsets.initialize(replay.offsets.get(group.group_id, {}))
        for producer_id, groups_of in replay.txn_offsets.items():
            if group.group_id in groups_of:
                group.offsets.initialize_txn(producer_id, groups_of[group.group_id])
    return groups, list(consumer_groups.values())
