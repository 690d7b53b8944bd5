"""A group coordinator with consumer-protocol groups on simulated time, topics it can see, and a
small consumer that heartbeats the way Kafka's (and librdkafka's) KIP-848 consumers do."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from coordinator.group import GroupCoordinator, GroupCoordinatorConfig
from coordinator.group.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult
from coordinator.group.consumer.member import Assignment
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import Harness, Reply, config

REBALANCE_TIMEOUT_MS = 300_000


class FakeTopics:
    """A TopicLookup over topics a test creates (partitions only; leaders do not matter)."""

    def __init__(self) -> None:
        self.by_name: dict[str, TopicState] = {}

    def create(self, name: str, partitions: int) -> uuid.UUID:
        topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        state = TopicState(name, topic_id, {})
        for index in range(partitions):
            state.set_partition(PartitionState(index, 0, 0, 0, [0], [0]))
        self.by_name[name] = state
        return topic_id

    def add_partitions(self, name: str, total: int) -> None:
        state = self.by_name[name]
        for index in range(len(state.partitions), total):
            state.set_partition(PartitionState(index, 0, 0, 0, [0], [0]))

    def delete(self, name: str) -> None:
        del self.by_name[name]

    def get(self, name: str) -> TopicState | None:
        return self.by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return next((t for t in self.by_name.values() if t.topic_id == topic_id), None)

    def all(self) -> list[TopicState]:
        return list(self.by_name.values())


class ConsumerHarness(Harness):
    """The classic Harness with topics and consumer-group requests."""

    def __init__(self, cfg: GroupCoordinatorConfig | None = None, **kwargs: Any) -> None:
        self.topics = FakeTopics()
        self.group_configs: dict[str, dict[str, str]] = {}
        """Group-config overrides by group id, as the broker's metadata image would give them."""
        self._consumer_ids = itertools.count(1)
        super().__init__(cfg or config(), **kwargs)

    def new_coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(
            self.config,
            self.log,
            self.clock,
            self.heartbeats,
            self.rebalances,
            member_id_suffix=lambda: f"id{next(self._ids)}",
            topics=self.topics,
            consumer_member_id=lambda: f"generated-{next(self._consumer_ids)}",
            group_configs=lambda group_id: self.group_configs.get(group_id, {}),
        )

    def reload(self) -> None:
        """A new coordinator loads the log (a new leader of __consumer_offsets)."""
        self.coordinator.shutdown()
        self.coordinator = self.new_coordinator()
        for partition in range(self.config.offsets_topic_num_partitions):
            self.coordinator.load_partition(partition, self.log.records(partition))

    def cg_heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> Reply[ConsumerGroupHeartbeatResult]:
        reply: Reply[ConsumerGroupHeartbeatResult] = Reply()
        self.coordinator.consumer_group_heartbeat(request, reply)
        return reply


def owned_pairs(assignment: Assignment) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    return tuple((topic_id, tuple(sorted(parts))) for topic_id, parts in sorted(assignment.items(), key=str))


@dataclass
class Consumer:
    """A KIP-848 consumer: it joins with epoch 0, sends its whole subscription (names, and its
    expression or "" for none) and its owned partitions on every heartbeat (a "full" request:
    what a client that wants its assignment each time does), takes the
    assignment it is given (revoking at once what is no longer in it), rejoins when fenced."""

    harness: ConsumerHarness
    member_id: str
    topics: tuple[str, ...]
    group_id: str = "group"
    instance_id: str | None = None
    server_assignor: str | None = None
    regex: str | None = None
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    last: ConsumerGroupHeartbeatResult | None = None

    def request(self, epoch: int | None = None, *, full: bool = True) -> ConsumerGroupHeartbeatRequest:
        epoch = self.epoch if epoch is None else epoch
        joining = epoch == 0
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if (joining or full) else -1,
            subscribed_topic_names=self.topics if (joining or full) else None,
            # The whole subscription: "" clears an expression the member id may still hold
            # (SubscribedTopicRegex null keeps it, as Kafka's maybeUpdateSubscribedTopicRegex).
            subscribed_topic_regex=(self.regex or "") if (joining or full) else None,
            server_assignor=self.server_assignor,
            topic_partitions=() if joining else (owned_pairs(self.owned) if full else None),
            client_id="client",
            client_host="/127.0.0.1",
        )

    def heartbeat(self, *, full: bool = True) -> ConsumerGroupHeartbeatResult:
        reply = self.harness.cg_heartbeat(self.request(full=full))
        result = reply.value
        self.last = result
        if result.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self.owned = {}
            self.epoch = 0
            return result
        if result.error is not ErrorCode.NONE:
            return result
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = dict(result.assignment)
        return result

    def leave(self, epoch: int = -1) -> ConsumerGroupHeartbeatResult:
        result = self.harness.cg_heartbeat(self.request(epoch, full=False)).value
        self.owned = {}
        self.epoch = 0
        return result

    @property
    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, parts in self.owned.items() for p in parts}
