"""AlterPartitionReassignments and ListPartitionReassignments on the controller.

The controller side of Kafka's ReplicationControlManager.alterPartitionReassignments and
listPartitionReassignments, over the rules of :mod:`~metadata.controller.reassignment`. Every
accepted change of one request is committed in one batch; each partition is answered on its own
(UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, with Kafka's
messages). Completion happens later, in the AlterPartition that brings the last target replica
into the ISR (:meth:`ReplicationControl.alter_partition`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from metadata.controller import reassignment
from metadata.controller.metadata_log import MetadataWriter
from metadata.controller.replication_control import ReplicationControl
from metadata.image import MetadataImage, partition_state_of
from metadata.records import MetadataRecord, PartitionChangeRecord
from metadata.topics import PartitionState
from protocol.error_codes import ErrorCode, KafkaError

__all__ = ["OngoingReassignment", "ReassignablePartition", "ReassignmentControl", "ReassignmentResult"]

_log = structlog.get_logger("kipling.controller.reassignment")


@dataclass(frozen=True, slots=True)
class ReassignablePartition:
    """One partition of an AlterPartitionReassignments request; ``replicas`` None cancels."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition: int
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """A partition being reassigned, as ListPartitionReassignments reports it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


class ReassignmentControl:
    """Starts, re-targets and cancels reassignments; lists those in progress."""

    def __init__(self, image: MetadataImage, writer: MetadataWriter, replication: ReplicationControl) -> None:
        self._image = image
        self._writer = writer
        self._replication = replication

    def alter(
        self, partitions: Sequence[ReassignablePartition], *, allow_replication_factor_change: bool = True
    ) -> list[ReassignmentResult]:
        """Apply each partition's target (or cancel); results in request order, one batch."""
        pending: dict[tuple[uuid.UUID, int], PartitionState] = {}
        records: list[MetadataRecord] = []
        results: list[ReassignmentResult] = []
        for request in partitions:
            try:
                topic_id, record = self._alter_one(request, pending, allow_replication_factor_change)
            except KafkaError as exc:
                _log.info(
                    "unable to alter partition reassignment",
                    topic=request.topic,
                    partition=request.partition,
                    error=exc.code.name,
                    reason=exc.message,
                )
                results.append(ReassignmentResult(request.topic, request.partition, exc.code, exc.message))
                continue
            if record is not None:
                records.append(record)
                pending[(topic_id, request.partition)] = partition_state_of(record)
            results.append(ReassignmentResult(request.topic, request.partition, ErrorCode.NONE))
        if records:
            self._writer.commit(records)
        _log.info(
            "altered partition reassignments",
            succeeded=sum(1 for r in results if r.error is ErrorCode.NONE),
            total=len(results),
            records=len(records),
        )
        return results

    def _alter_one(
        self,
        request: ReassignablePartition,
        pending: dict[tuple[uuid.UUID, int], PartitionState],
        allow_replication_factor_change: bool,
    ) -> tuple[uuid.UUID, PartitionChangeRecord | None]:
        topic = self._image.get(request.topic)
        if topic is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {request.topic}."
            )
        state = pending.get((topic.topic_id, request.partition)) or topic.partitions.get(request.partition)
        if state is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Unable to find partition {request.topic}:{request.partition}.",
            )
        unclean = self._replication.unclean_election_enabled(topic)
        if request.replicas is None:
            if not state.is_reassigning:
                raise KafkaError(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS.description
                )
            reverted = reassignment.revert(state)
            if reverted.unclean and not unclean:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {request.topic}:{request.partition} "
                    "because it would require an unclean leader election.",
                )
            record = reassignment.build_change(
                topic.topic_id,
                state,
                acceptable=self._replication.is_active,
                isr=reverted.isr,
                replicas=reverted.replicas,
                removing=(),
                adding=(),
                unclean=unclean,
            )
            return topic.topic_id, record
        target = request.replicas
        current_rf = len(state.target_replicas)
        if not allow_replication_factor_change and len(target) != current_rf:
            # Kafka's validatePartitionReplicationFactorUnchanged: its message, before the target's checks
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {current_rf} to {len(target)}",
            )
        reassignment.validate_target(target, self._image.broker_ids())
        planned = reassignment.retarget(state, target)
        record = reassignment.build_change(
            topic.topic_id,
            state,
            acceptable=self._replication.is_active,
            replicas=planned.replicas,
            removing=planned.removing,
            adding=planned.adding,
        )
        return topic.topic_id, record

    def list(self, topics: Sequence[tuple[str, Sequence[int]]] | None = None) -> list[OngoingReassignment]:
        """The reassignments in progress: all of them (``topics`` None), or those among the named
        partitions (unknown topics and partitions are left out, as in Kafka)."""
        ongoing: list[OngoingReassignment] = []
        if topics is None:
            wanted = [(topic.name, sorted(topic.partitions)) for topic in self._image.all()]
        else:
            wanted = [(name, list(indexes)) for name, indexes in topics]
        for name, indexes in wanted:
            topic = self._image.get(name)
            if topic is None:
                continue
            for index in indexes:
                state = topic.partitions.get(index)
                if state is not None and state.is_reassigning:
                    ongoing.append(
                        OngoingReassignment(
                            name,
                            index,
                            tuple(state.replicas),
                            tuple(state.adding_replicas),
                            tuple(state.removing_replicas),
                        )
                    )
        return ongoing
