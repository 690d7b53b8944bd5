"""Topics and partitions as the controller registers them (Kafka's TopicImage / PartitionRegistration).

The value types every layer shares: the controller builds them from its records, each broker's
:class:`~metadata.image.MetadataImage` replays them, handlers and the replica manager read them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol

from metadata import topic_names

NO_LEADER = -1
"""A partition's leader id while no replica may lead it."""
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0


@dataclass
class PartitionState:
    """One partition as the controller sees it (Kafka's PartitionRegistration)."""

    partition: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    removing_replicas: list[int] = field(default_factory=list)
    """During a reassignment: the replicas that leave once it completes (Kafka's field)."""
    adding_replicas: list[int] = field(default_factory=list)
    """During a reassignment: the replicas that must join the ISR for it to complete."""

    @property
    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)

    @property
    def target_replicas(self) -> list[int]:
        """Where the partition is going: ``replicas`` without the removing ones (``replicas`` when
        no reassignment is in progress)."""
        return [r for r in self.replicas if r not in self.removing_replicas]


@dataclass
class TopicState:
    """One topic: its id, partitions by index, and its topic-level config overrides."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    generation: int = field(default=0, compare=False)
    """Bumped by every change to ``partitions`` (:meth:`set_partition`): what is derived from them,
    such as a Metadata response's encoded partitions, is reused while it stays the same."""

    def set_partition(self, state: PartitionState) -> None:
        """Add or replace one partition (the only way ``partitions`` changes)."""
        self.partitions[state.partition] = state
        self.generation += 1

    @property
    def replication_factor(self) -> int:
        """The replica count of partition 0 (Kafka keeps it equal for every partition), not counting
        replicas a reassignment is removing."""
        first = self.partitions.get(0)
        return len(first.target_replicas) if first is not None else 0

    @property
    def is_internal(self) -> bool:
        return topic_names.is_internal(self.name)

    def sorted_partitions(self) -> list[PartitionState]:
        return [self.partitions[index] for index in sorted(self.partitions)]


class TopicLookup(Protocol):
    """Topic metadata by name and by id, as a broker reads it (its :class:`~metadata.image.MetadataImage`)."""

    def get(self, name: str) -> TopicState | None: ...

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None: ...

    def all(self) -> list[TopicState]: ...
