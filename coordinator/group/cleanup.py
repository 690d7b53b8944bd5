"""Removing offsets and groups: DeleteGroups, OffsetDelete, offset expiry, deleted topics (Kafka's
``cleanupGroupMetadata``).

For each group, a selector removes some offsets; a group left Empty without offsets is then Dead and
leaves the cache. Tombstones follow for every removed offset, and for the group itself: a classic
group's metadata record unless its generation is 0 (it never had members, so no metadata record was
ever written for it), every record of a consumer-protocol group (Kafka's
``createGroupTombstoneRecords``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import structlog

from coordinator.group.catalog import GroupCatalog
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.consumer.records import group_tombstones, to_offsets_record
from coordinator.group.log import OffsetsRecord
from coordinator.group.offsets import OffsetAndMetadata, TopicPartition
from coordinator.group.records import group_tombstone, offset_tombstone
from coordinator.group.state import GroupState
from coordinator.group.store import GroupStore, OffsetsGroup

_log = structlog.get_logger("kipling.groups.cleanup")

OffsetSelector = Callable[[OffsetsGroup], dict[TopicPartition, OffsetAndMetadata]]


class GroupCleaner:
    def __init__(self, catalog: GroupCatalog, store: GroupStore) -> None:
        self._catalog = catalog
        self._store = store

    def cleanup(
        self, groups: Iterable[OffsetsGroup], select: OffsetSelector, done: Callable[[], None] | None = None
    ) -> int:
        """Apply ``select`` to each group and write the tombstones; returns how many offsets went.
        ``done`` runs once every tombstone append has been answered (at once if there were none)."""
        targets = list(groups)
        outstanding = [len(targets) + 1]

        def one_done() -> None:
            outstanding[0] -= 1
            if outstanding[0] == 0 and done is not None:
                done()

        removed = sum(self._cleanup_group(group, select, one_done) for group in targets)
        one_done()
        return removed

    def _cleanup_group(self, group: OffsetsGroup, select: OffsetSelector, done: Callable[[], None]) -> int:
        removed = select(group)
        tombstones = [offset_tombstone(group.group_id, partition) for partition in removed]
        if isinstance(group, ConsumerGroup):
            tombstones += self._consumer_group_left(group)
        else:
            if group.is_in(GroupState.EMPTY) and not group.offsets.has_offsets:
                _log.info("group is dead", group=group.group_id, generation=group.generation_id)
                group.transition_to(GroupState.DEAD)
            if group.is_in(GroupState.DEAD) and self._catalog.remove(group) and group.generation_id > 0:
                tombstones.append(group_tombstone(group.group_id))
        if removed:
            _log.info("removed offsets", group=group.group_id, count=len(removed))
        self._store.append_tombstones(group.group_id, tombstones, done)
        return len(removed)

    def _consumer_group_left(self, group: ConsumerGroup) -> list[OffsetsRecord]:
        """An empty consumer group without offsets is deleted: its records' tombstones."""
        if group.dead or not group.is_empty or group.offsets.has_offsets:
            return []
        if self._catalog.consumer_group(group.group_id) is not group:
            return []
        _log.info("consumer group is dead", group=group.group_id, epoch=group.group_epoch)
        records = [to_offsets_record(r) for r in group_tombstones(group)]
        self._catalog.remove_consumer_group(group)
        return records
