"""ElectLeaders on the controller: preferred and unclean elections asked for by an admin (Kafka's
``ReplicationControlManager.electLeaders``).

* PREFERRED moves leadership to the partition's first replica (its *preferred* replica) when that
  replica is active (registered, unfenced, not shutting down) and in the ISR. A partition it already
  leads is ELECTION_NOT_NEEDED; one where it may not lead is PREFERRED_LEADER_NOT_AVAILABLE.
* UNCLEAN is for a partition without a leader (no ISR member is active): the online election of
  :func:`~metadata.controller.replication_control.elect_leader` with unclean allowed whatever the
  topic's ``unclean.leader.election.enable`` says, so the first active replica outside the ISR
  leads and becomes the whole ISR. A partition with a leader is ELECTION_NOT_NEEDED; one with no
  active replica at all is ELIGIBLE_LEADERS_NOT_AVAILABLE.

Each election is a PartitionChangeRecord built by
:func:`~metadata.controller.replication_control.change_record` (leader epoch and partition epoch
bumped), as every other election writes it; one request's records go into one batch.

``requested`` None asks for every partition of every topic; then, as Kafka does, partitions whose
answer would be ELECTION_NOT_NEEDED are left out of the result (their topic still appears). Topics
named in a request are answered in request order; an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION with Kafka's messages.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from metadata.controller.replication_control import change_record, elect_leader
from metadata.image import MetadataImage, partition_state_of
from metadata.records import PartitionChangeRecord
from metadata.topics import NO_LEADER, PartitionState, TopicState
from protocol.error_codes import ErrorCode

__all__ = [
    "KAFKA_MESSAGES",
    "ElectionType",
    "PartitionElectionResult",
    "TopicElectionResult",
    "plan_elections",
]


KAFKA_MESSAGES = {
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
}
"""The default messages of Kafka's errors (what its ``ApiError(error)`` carries) for these answers."""


class ElectionType(enum.IntEnum):
    """ElectLeaders' ``election_type`` (v0 requests are always PREFERRED)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class PartitionElectionResult:
    partition: int
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class TopicElectionResult:
    topic: str
    partitions: tuple[PartitionElectionResult, ...]


def plan_elections(
    image: MetadataImage,
    is_active: Callable[[int], bool],
    election_type: ElectionType,
    requested: Sequence[tuple[str, Sequence[int]]] | None,
) -> tuple[list[TopicElectionResult], list[PartitionChangeRecord]]:
    """The results of an ElectLeaders request against ``image`` and the records that carry them out.

    A partition named twice is judged the second time against the first election's outcome, so a
    request never yields two records for one partition epoch.
    """
    planner = _Planner(image, is_active, election_type)
    if requested is None:
        return [planner.all_of(topic) for topic in image.all()], planner.records
    return [planner.named(name, partitions) for name, partitions in requested], planner.records


class _Planner:
    def __init__(
        self, image: MetadataImage, is_active: Callable[[int], bool], election_type: ElectionType
    ) -> None:
        self._image = image
        self._is_active = is_active
        self._type = election_type
        self._pending: dict[tuple[uuid.UUID, int], PartitionState] = {}
        self.records: list[PartitionChangeRecord] = []

    def all_of(self, topic: TopicState) -> TopicElectionResult:
        results = (self._elect(topic, p.partition) for p in topic.sorted_partitions())
        return _topic_result(topic.name, (r for r in results if r.error is not ErrorCode.ELECTION_NOT_NEEDED))

    def named(self, name: str, partitions: Sequence[int]) -> TopicElectionResult:
        topic = self._image.get(name)
        if topic is None:
            unknown = PartitionElectionResult
            return _topic_result(
                name,
                (
                    unknown(p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
                    for p in partitions
                ),
            )
        return _topic_result(name, (self._elect(topic, p) for p in partitions))

    def _elect(self, topic: TopicState, index: int) -> PartitionElectionResult:
        key = (topic.topic_id, index)
        partition = self._pending.get(key) or topic.partitions.get(index)
        if partition is None:
            return PartitionElectionResult(
                index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic.name}-{index}"
            )
        if self._type is ElectionType.PREFERRED:
            error, leader, isr = self._preferred(partition)
        else:
            error, leader, isr = self._unclean(partition)
        record = (
            None if error is not ErrorCode.NONE else change_record(topic.topic_id, partition, leader, isr)
        )
        if record is None:  # (an election that changes nothing cannot happen: each rule moves the leader)
            error = ErrorCode.ELECTION_NOT_NEEDED if error is ErrorCode.NONE else error
            return PartitionElectionResult(index, error, KAFKA_MESSAGES[error])
        self.records.append(record)
        self._pending[key] = partition_state_of(record)
        return PartitionElectionResult(index, ErrorCode.NONE)

    def _preferred(self, partition: PartitionState) -> tuple[ErrorCode, int, list[int]]:
        preferred = partition.replicas[0] if partition.replicas else NO_LEADER
        if partition.leader_id == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED, NO_LEADER, []
        if preferred not in partition.isr or not self._is_active(preferred):
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, NO_LEADER, []
        return ErrorCode.NONE, preferred, list(partition.isr)

    def _unclean(self, partition: PartitionState) -> tuple[ErrorCode, int, list[int]]:
        if partition.leader_id != NO_LEADER:
            return ErrorCode.ELECTION_NOT_NEEDED, NO_LEADER, []
        leader, isr = elect_leader(partition, partition.isr, self._is_active, unclean=True)
        if leader == NO_LEADER:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, NO_LEADER, []
        return ErrorCode.NONE, leader, isr


def _topic_result(name: str, results: Iterable[PartitionElectionResult]) -> TopicElectionResult:
    return TopicElectionResult(name, tuple(results))
