"""What the consumer-protocol paths are asked and answer, version differences settled by the handlers."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from coordinator.group.consumer.member import Assignment
from protocol.error_codes import ErrorCode

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
"""(topic id, partitions) pairs as a heartbeat carries them."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    """ConsumerGroupHeartbeat's fields; None (and -1 for the rebalance timeout) means unchanged
    since the member's last heartbeat. ``api_version`` decides whether the member must bring its
    own member id (v1+, KIP-1082)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: TopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResult:
    """The answer; ``assignment`` is None when the member's assignment did not change (and the
    request was not a full one). An error answer carries no member id, epoch 0 and interval 0,
    as Kafka's error response does."""

    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None

    @classmethod
    def failure(cls, error: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResult:
        return cls(error, message)


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    uses_classic_protocol: bool = False
    """A classic consumer inside the consumer group (KIP-848's online migration)."""


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    """ConsumerGroupDescribe's answer for one group: an error (with nothing else), or its state."""

    group_id: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = ()
