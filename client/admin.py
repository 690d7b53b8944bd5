"""A small admin client: create and delete topics, add partitions, read cluster and topic metadata.

Single broker for now: every request goes to the connection it is given (the bootstrap broker, which
kipling's single-broker setup makes the controller too). Results are plain dataclasses, and per-topic
errors are reported, not raised, by the batch calls (``create_topics``, ``delete_topics``), because one
failed topic must not hide the others' outcome; the one-topic helpers raise
:class:`~client.errors.KafkaResponseError`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from client.connection import KafkaConnection
from client.errors import error_code, raise_for_error
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID

DEFAULT_TIMEOUT_MS = 30_000
METADATA_MIN_VERSION = 1
"""v1 is the first whose ``topics`` may be null (meaning "all topics")."""


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str | None] = field(default_factory=dict)
    assignments: Mapping[int, Sequence[int]] | None = None
    """partition → broker ids; when given, partitions and replication factor are sent as -1."""


@dataclass(frozen=True, slots=True)
class TopicResult:
    """One topic's outcome of a create or delete."""

    name: str
    error: ErrorCode
    message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    topics: Mapping[str, TopicDescription]


class AdminClient:
    """Admin operations over one connection (it does not reconnect; see ReconnectingConnection)."""

    def __init__(self, connection: KafkaConnection, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self._connection = connection
        self._timeout_ms = timeout_ms

    def _request_timeout_s(self) -> float:
        """The broker may take ``timeout_ms`` itself; the client waits a little longer than that."""
        return max(self._connection.request_timeout_s, self._timeout_ms / 1000 + 5)

    # -- topics ------------------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> dict[str, TopicResult]:
        """Create ``topics``; the result has one entry per topic (error NONE when created)."""
        version = self._connection.version_for(ApiKey.CREATE_TOPICS)
        body = {
            "topics": [_creatable(t) for t in topics],
            "timeout_ms": self._timeout_ms,
            "validate_only": validate_only,
        }
        response = await self._connection.request(
            ApiKey.CREATE_TOPICS, version, body, self._request_timeout_s()
        )
        return {
            r.name: TopicResult(r.name, error_code(r.error_code), r.error_message, r.topic_id)
            for r in response.topics
        }

    async def create_topic(
        self,
        name: str,
        num_partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str | None] | None = None,
    ) -> TopicResult:
        """Create one topic; raises KafkaResponseError (e.g. TOPIC_ALREADY_EXISTS) on failure."""
        results = await self.create_topics(
            [NewTopic(name, num_partitions, replication_factor, configs or {})]
        )
        result = results[name]
        raise_for_error(result.error, result.message, context=f"create topic {name}")
        return result

    async def delete_topics(self, names: Sequence[str]) -> dict[str, TopicResult]:
        """Delete topics by name; one result per topic."""
        version = self._connection.version_for(ApiKey.DELETE_TOPICS)
        body: dict[str, Any] = {"timeout_ms": self._timeout_ms}
        if version >= 6:
            body["topics"] = [{"name": n, "topic_id": ZERO_UUID} for n in names]
        else:
            body["topic_names"] = list(names)
        response = await self._connection.request(
            ApiKey.DELETE_TOPICS, version, body, self._request_timeout_s()
        )
        return {
            r.name: TopicResult(r.name, error_code(r.error_code), r.error_message, r.topic_id)
            for r in response.responses
        }

    async def delete_topic(self, name: str) -> None:
        """Delete one topic; raises KafkaResponseError (e.g. UNKNOWN_TOPIC_OR_PARTITION) on failure."""
        result = (await self.delete_topics([name]))[name]
        raise_for_error(result.error, result.message, context=f"delete topic {name}")

    async def create_partitions(
        self, counts: Mapping[str, int], *, validate_only: bool = False
    ) -> dict[str, TopicResult]:
        """Raise each topic's partition count to ``counts[topic]`` (CreatePartitions); one result per
        topic (INVALID_PARTITIONS when the count is not an increase, UNKNOWN_TOPIC_OR_PARTITION...)."""
        version = self._connection.version_for(ApiKey.CREATE_PARTITIONS)
        body = {
            "topics": [{"name": name, "count": count, "assignments": None} for name, count in counts.items()],
            "timeout_ms": self._timeout_ms,
            "validate_only": validate_only,
        }
        response = await self._connection.request(
            ApiKey.CREATE_PARTITIONS, version, body, self._request_timeout_s()
        )
        return {
            r.name: TopicResult(r.name, error_code(r.error_code), r.error_message) for r in response.results
        }

    # -- metadata ----------------------------------------------------------------------------------

    async def metadata(
        self, topics: Sequence[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> ClusterMetadata:
        """Brokers, controller and the given topics (all topics when None).

        Never auto-creates unless ``allow_auto_topic_creation`` (as Kafka's producer and consumer ask
        for the topics they use): then a broker with auto.create.topics.enable creates a missing topic.
        (Versions before 4 have no such flag; a broker auto-creates for them whenever it may.)
        """
        version = self._connection.version_for(ApiKey.METADATA, wanted_min=METADATA_MIN_VERSION)
        body = {
            "topics": None if topics is None else [{"name": n, "topic_id": ZERO_UUID} for n in topics],
            "allow_auto_topic_creation": allow_auto_topic_creation,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        response = await self._connection.request(ApiKey.METADATA, version, body)
        return ClusterMetadata(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            brokers=tuple(BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers),
            topics={t.name: _description(t) for t in response.topics},
        )

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        """Names of the cluster's topics, sorted."""
        metadata = await self.metadata()
        return sorted(
            name
            for name, topic in metadata.topics.items()
            if topic.error is ErrorCode.NONE and (include_internal or not topic.is_internal)
        )

    async def describe_topics(self, names: Sequence[str]) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of ``names`` (an unknown topic carries its error)."""
        return dict((await self.metadata(names)).topics)


def _creatable(topic: NewTopic) -> dict[str, Any]:
    explicit = topic.assignments is not None
    return {
        "name": topic.name,
        "num_partitions": -1 if explicit else topic.num_partitions,
        "replication_factor": -1 if explicit else topic.replication_factor,
        "assignments": [
            {"partition_index": p, "broker_ids": list(ids)} for p, ids in (topic.assignments or {}).items()
        ],
        "configs": [{"name": k, "value": v} for k, v in topic.configs.items()],
    }


def _description(topic: Any) -> TopicDescription:
    return TopicDescription(
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=tuple(
            PartitionInfo(
                partition=p.partition_index,
                leader=p.leader_id,
                leader_epoch=p.leader_epoch,
                replicas=tuple(p.replica_nodes),
                isr=tuple(p.isr_nodes),
                offline_replicas=tuple(p.offline_replicas),
                error=error_code(p.error_code),
            )
            for p in sorted(topic.partitions, key=lambda p: p.partition_index)
        ),
        error=error_code(topic.error_code),
    )


__all__ = [
    "AdminClient",
    "BrokerInfo",
    "ClusterMetadata",
    "NewTopic",
    "PartitionInfo",
    "TopicDescription",
    "TopicResult",
]
