"""Writing groups and offsets to ``__consumer_offsets`` (the write side of Kafka's GroupMetadataManager).

Nothing is answered before its records are durable: :meth:`GroupStore.store_group` and
:meth:`GroupStore.store_offsets` call back only when the log does, with the log's error mapped to
what the client must see. Offsets become visible to fetches only then, and a failed write of an
offset leaves the previous offset in place. Tombstones (deleted groups, expired offsets) are written
as Kafka writes them with acks=0: their failure is logged, never reported, because the cache has
already forgotten what they delete.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import structlog

from coordinator.group.catalog import GroupCatalog
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.group import GroupMetadata
from coordinator.group.log import GroupLog, OffsetsRecord, TxnProducer, group_write_error, offset_commit_error
from coordinator.group.offsets import CommitRecord, OffsetAndMetadata, TopicPartition
from coordinator.group.records import group_metadata_record, offset_commit_record
from coordinator.group.state import GroupState
from protocol.error_codes import ErrorCode
from storage.clock import Clock

_log = structlog.get_logger("kipling.groups.store")

StoreGroupCallback = Callable[[ErrorCode], None]
CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]
OffsetsGroup = GroupMetadata | ConsumerGroup
"""A group of either protocol: both keep their offsets in a GroupOffsets."""


def is_dead(group: OffsetsGroup) -> bool:
    return group.dead if isinstance(group, ConsumerGroup) else group.is_in(GroupState.DEAD)


def java_string_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units, which is what offset.metadata.max.bytes bounds."""
    return len(text.encode("utf-16-le")) // 2


class GroupStore:
    def __init__(
        self, log: GroupLog, clock: Clock, config: GroupCoordinatorConfig, catalog: GroupCatalog
    ) -> None:
        self._log = log
        self._clock = clock
        self._config = config
        self._catalog = catalog

    def store_group(
        self, group: GroupMetadata, assignment: Mapping[str, bytes], callback: StoreGroupCallback
    ) -> None:
        """Write the group with ``assignment``; NOT_COORDINATOR at once if its partition is not ours."""
        partition = self._catalog.partition_for(group.group_id)
        if not self._catalog.owns(partition):
            callback(ErrorCode.NOT_COORDINATOR)
            return
        record = group_metadata_record(group, assignment)
        generation = group.generation_id

        def written(error: ErrorCode, _base_offset: int) -> None:
            if error is not ErrorCode.NONE:
                _log.warning(
                    "writing group metadata failed",
                    group=group.group_id,
                    generation=generation,
                    error=error.name,
                )
            callback(group_write_error(error))

        self._log.append(partition, [record], self._clock.time_ms(), written)

    def append_records(
        self, group_id: str, records: Sequence[OffsetsRecord], callback: Callable[[ErrorCode], None]
    ) -> None:
        """Write a consumer-protocol group's records as one batch; ``callback`` gets the log's own
        error (NONE once committed), NOT_COORDINATOR at once if the partition is not ours."""
        partition = self._catalog.partition_for(group_id)
        if not self._catalog.owns(partition):
            callback(ErrorCode.NOT_COORDINATOR)
            return
        self._log.append(
            partition, list(records), self._clock.time_ms(), lambda error, _base_offset: callback(error)
        )

    def store_offsets(
        self,
        group: OffsetsGroup,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback,
    ) -> None:
        """Write the offsets whose metadata fits offset.metadata.max.bytes; the others answer
        OFFSET_METADATA_TOO_LARGE. The written ones are pending until the log answers."""
        valid = self._writable(group, offsets, callback)
        if valid is None:
            return
        group.offsets.prepare(valid)

        def written(error: ErrorCode, base_offset: int) -> ErrorCode:
            return self._apply_commit(group, valid, error, base_offset)

        self._append_offsets(group, offsets, valid, written, callback)

    def store_txn_offsets(
        self,
        group: OffsetsGroup,
        producer: TxnProducer,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback,
    ) -> None:
        """TxnOffsetCommit: write the offsets as a transactional batch of ``producer``; they stay
        pending in the group until the transaction's marker commits or aborts them."""
        valid = self._writable(group, offsets, callback)
        if valid is None:
            return
        producer_id = producer.producer_id
        group.offsets.prepare_txn(producer_id, valid)

        def written(error: ErrorCode, base_offset: int) -> ErrorCode:
            if not is_dead(group):
                for tp, offset in valid.items():
                    if error is ErrorCode.NONE:
                        group.offsets.on_txn_appended(producer_id, tp, CommitRecord(base_offset, offset))
                    else:
                        group.offsets.on_txn_failed(producer_id, tp, offset)
            if error is not ErrorCode.NONE:
                _log.info(
                    "transactional offset commit could not be written",
                    group=group.group_id,
                    producer_id=producer_id,
                    error=error.name,
                )
            return offset_commit_error(error)

        self._append_offsets(group, offsets, valid, written, callback, producer)

    def _writable(
        self,
        group: OffsetsGroup,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback,
    ) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """The offsets to write (metadata within offset.metadata.max.bytes), or None once
        ``callback`` has its answer: none fits, or the group's partition is not ours."""
        valid = {tp: offset for tp, offset in offsets.items() if self.metadata_fits(offset.metadata)}
        if not valid:
            callback({tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets})
            return None
        if not self._catalog.owns(self._catalog.partition_for(group.group_id)):
            callback({tp: ErrorCode.NOT_COORDINATOR for tp in offsets})
            return None
        return valid

    def _append_offsets(
        self,
        group: OffsetsGroup,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        valid: Mapping[TopicPartition, OffsetAndMetadata],
        written: Callable[[ErrorCode, int], ErrorCode],
        callback: CommitCallback,
        producer: TxnProducer | None = None,
    ) -> None:
        """Append ``valid`` as one batch; ``written`` settles the group and gives the outcome that
        every written partition answers (the others OFFSET_METADATA_TOO_LARGE)."""
        records = [offset_commit_record(group.group_id, tp, offset) for tp, offset in valid.items()]

        def answer(error: ErrorCode, base_offset: int) -> None:
            outcome = written(error, base_offset)
            callback({tp: outcome if tp in valid else ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets})

        partition = self._catalog.partition_for(group.group_id)
        self._log.append(partition, records, self._clock.time_ms(), answer, producer)

    def metadata_fits(self, metadata: str | None) -> bool:
        return metadata is None or java_string_length(metadata) <= self._config.offset_metadata_max_bytes

    def _apply_commit(
        self,
        group: OffsetsGroup,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        error: ErrorCode,
        base: int,
    ) -> ErrorCode:
        """A group unloaded or deleted meanwhile (Dead) keeps nothing; the client still learns the outcome."""
        alive = not is_dead(group)
        if error is ErrorCode.NONE:
            if alive:
                for tp, offset in offsets.items():
                    group.offsets.on_appended(tp, CommitRecord(base, offset))
            return ErrorCode.NONE
        if alive:
            for tp, offset in offsets.items():
                group.offsets.on_failed(tp, offset)
        _log.info("offset commit could not be written", group=group.group_id, error=error.name)
        return offset_commit_error(error)

    def append_tombstones(
        self, group_id: str, records: Sequence[OffsetsRecord], done: Callable[[], None]
    ) -> None:
        """Fire-and-forget deletions (Kafka appends them with acks=0); ``done`` runs when the log answers."""
        partition = self._catalog.partition_for(group_id)
        if not records or not self._catalog.owns(partition):
            done()
            return

        def written(error: ErrorCode, _base_offset: int) -> None:
            if error is not ErrorCode.NONE:
                _log.warning(
                    "writing tombstones failed", group=group_id, count=len(records), error=error.name
                )
            done()

        self._log.append(partition, list(records), self._clock.time_ms(), written)
