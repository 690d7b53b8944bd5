"""The controller as the admin handlers see it: :class:`TopicAdmin`, which the controller answers.

CreateTopics, DeleteTopics and CreatePartitions on the controller listener call these methods (same
validation order, error codes and messages as Kafka's controller); each change becomes one batch in
the metadata log, fsynced before the handler answers. Brokers forward their clients' admin requests
to these handlers.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.controller import QuorumController
from metadata.controller.replication_control import CreatableTopic, CreatePartitionsTopic
from metadata.controller.topic_rules import ManualAssignment
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode, KafkaError

__all__ = ["ControllerTopicAdmin", "TopicAdmin"]


class TopicAdmin(Protocol):
    """What the admin handlers ask of the controller."""

    @property
    def default_num_partitions(self) -> int: ...

    def get(self, name: str) -> TopicState | None: ...

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None: ...

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        *,
        assignments: Sequence[ManualAssignment] = (),
        validate_only: bool = False,
    ) -> TopicState: ...

    def delete_topic(self, name: str) -> TopicState: ...

    def create_partitions(
        self,
        name: str,
        total_count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> list[PartitionState]: ...


class ControllerTopicAdmin:
    """:class:`TopicAdmin` answered by the active controller."""

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    def _active(self) -> QuorumController:
        return resolve_controller(self._controller)

    @property
    def default_num_partitions(self) -> int:
        return self._active().config.default_num_partitions

    @property
    def default_replication_factor(self) -> int:
        return self._active().config.default_replication_factor

    def get(self, name: str) -> TopicState | None:
        return self._active().image.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self._active().image.get_by_id(topic_id)

    def all(self) -> list[TopicState]:
        return self._active().image.all()

    def broker_ids(self) -> list[int]:
        return self._active().image.broker_ids()

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        *,
        assignments: Sequence[ManualAssignment] = (),
        validate_only: bool = False,
    ) -> TopicState:
        wanted = CreatableTopic(name, num_partitions, replication_factor, configs, assignments)
        [result] = self._active().create_topics([wanted], validate_only=validate_only)
        if result.error != ErrorCode.NONE or result.topic is None:
            raise KafkaError(result.error, result.message)
        return result.topic

    def delete_topic(self, name: str) -> TopicState:
        [result] = self._active().delete_topics([name])
        if result.error != ErrorCode.NONE or result.topic is None:
            raise KafkaError(result.error, result.message)
        return result.topic

    def create_partitions(
        self,
        name: str,
        total_count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> list[PartitionState]:
        wanted = CreatePartitionsTopic(name, total_count, assignments)
        [result] = self._active().create_partitions([wanted], validate_only=validate_only)
        if result.error != ErrorCode.NONE:
            raise KafkaError(result.error, result.message)
        return list(result.partitions)
