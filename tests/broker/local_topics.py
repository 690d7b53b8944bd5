"""Topics for in-process broker tests, created by a real controller and led by a real ReplicaManager.

A node learns its topics from the metadata log: the controller validates and places a topic, the
broker's metadata loader replays the records, and the replica transitions open a log and a
Partition for each partition led here. :class:`LocalTopics` keeps that chain without sockets: a
:class:`QuorumController` over an in-memory log, with this node registered and unfenced, answers
CreateTopics/DeleteTopics/CreatePartitions (the admin handlers' :class:`TopicAdmin`) and lookups
(its image); every change is then handed to the subscribed ReplicaManager as the transitions would
(``lead`` each partition led here, ``on_topic_deleted``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from metadata.controller.admin import ControllerTopicAdmin
from metadata.controller.controller import ControllerConfig, QuorumController
from metadata.controller.metadata_log import InMemoryMetadataLog
from metadata.records import BrokerEndpointRecord, SecurityProtocol
from metadata.topics import PartitionState, TopicState
from storage.clock import FakeClock

CLUSTER_ID = "kipling-local-topics"


class Leader(Protocol):
    """What the replica transitions call on a ReplicaManager (ReplicaManager satisfies it)."""

    def lead(self, topic: TopicState, state: PartitionState) -> object: ...

    def on_topic_deleted(self, topic: TopicState) -> None: ...


class LocalTopics(ControllerTopicAdmin):
    """The cluster's topics as node ``node_id`` (the only registered broker) sees them: the
    controller's admin interface, whose changes are also handed to the subscribed leaders."""

    def __init__(
        self,
        node_id: int = 1,
        *,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        brokers: Sequence[int] = (),
    ) -> None:
        """``brokers`` are further registered, unfenced brokers (for replica placement)."""
        self.node_id = node_id
        self.clock = FakeClock(1_000_000)
        self.controller = QuorumController(
            InMemoryMetadataLog(),
            self.clock,
            1,
            CLUSTER_ID,
            ControllerConfig(
                default_num_partitions=default_num_partitions,
                default_replication_factor=default_replication_factor,
            ),
        )
        super().__init__(self.controller)
        for broker_id in dict.fromkeys([node_id, *brokers]):
            self._register(broker_id)
        self._leaders: list[Leader] = []

    def _register(self, broker_id: int) -> None:
        endpoint = BrokerEndpointRecord("PLAINTEXT", "localhost", 9092, SecurityProtocol.PLAINTEXT)
        epoch = self.controller.register_broker(
            broker_id, uuid.UUID(int=broker_id + 1), CLUSTER_ID, (endpoint,)
        )
        offset = self.controller.image.offset
        self.controller.heartbeat(broker_id, epoch, offset)  # caught up: unfenced

    def subscribe(self, leader: Leader) -> None:
        """``leader`` leads the partitions of this node, those of existing topics at once."""
        self._leaders.append(leader)
        for topic in self.all():
            self._lead(topic, topic.sorted_partitions(), [leader])

    # -- changes, through the controller ---------------------------------------------------------

    def create_topic(self, *args: Any, **kwargs: Any) -> TopicState:
        topic = super().create_topic(*args, **kwargs)
        if not kwargs.get("validate_only"):
            self._lead(topic, topic.sorted_partitions(), self._leaders)
        return topic

    async def auto_create(self, name: str) -> TopicState:
        """Metadata's auto-creation (MetadataHandler's ``auto_create``): a CreateTopics with the
        controller's defaults, as a broker forwards it."""
        return self.create_topic(name, -1, -1, {})

    def delete_topic(self, name: str) -> TopicState:
        topic = super().delete_topic(name)
        for leader in self._leaders:
            leader.on_topic_deleted(topic)
        return topic

    def create_partitions(self, *args: Any, **kwargs: Any) -> list[PartitionState]:
        added = super().create_partitions(*args, **kwargs)
        topic = self.get(args[0] if args else kwargs["name"])
        if not kwargs.get("validate_only") and topic is not None:
            self._lead(topic, [topic.partitions[p.partition] for p in added], self._leaders)
        return added

    def _lead(self, topic: TopicState, states: Sequence[PartitionState], leaders: Sequence[Leader]) -> None:
        for state in states:
            if state.leader_id == self.node_id:
                for leader in leaders:
                    leader.lead(topic, state)
