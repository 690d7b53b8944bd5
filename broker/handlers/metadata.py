"""Metadata (3): the brokers, the cluster id, the controller, and topics with their partition leaders.

Topic selection follows Kafka: a null topic list means every topic (v1+), and so does an empty list
in v0 (which has no null); an empty list in v1+ means none. v10+ carries topic ids; v12 may name a
topic by id alone (null name), answered with its name or UNKNOWN_TOPIC_ID.

Auto-creation (``allow_auto_topic_creation``, v4+; earlier versions always allow it, as Kafka
assumes) creates a missing topic with num.partitions and default.replication.factor when
auto.create.topics.enable is true. Kafka answers such a topic with LEADER_NOT_AVAILABLE because its
controller creates topics asynchronously. Here the broker forwards a CreateTopics to the controller
and waits (a few seconds at most) until its own metadata shows the topic, so the topic is answered
at once with its partitions: the client saves a metadata round trip and nothing it is told is
untrue. Internal topic names (``__consumer_offsets``...) are never auto-created from Metadata: they
belong to their coordinators. A creation that fails answers its own error code (e.g.
INVALID_REPLICATION_FACTOR when default.replication.factor exceeds the brokers), which clients
treat as retriable metadata errors, where Kafka would keep answering LEADER_NOT_AVAILABLE and only
log the reason.

A topic deleted a moment ago is, once this broker's metadata has applied the deletion, a missing topic
like any other, and auto-creation makes it anew (a new topic id, empty logs): Kafka's KRaft
controller frees the name with the RemoveTopicRecord (no "being deleted" state) and its
AutoTopicCreationManager keeps no memory of deletions. A client that holds on to a deleted topic must
not ask for auto-creation; Kafka's consumers do not (Java: allow_auto_topic_creation=false;
librdkafka: allow.auto.create.topics=false by default). A broker that has not yet applied the
deletion still answers the old topic.

Authorization (KafkaApis.handleTopicMetadataRequest): a topic the requester may not DESCRIBE is left
out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (with no topic id and
whether or not it exists; named by id, with its id and no name); auto-creating a missing topic needs
CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED. Authorized operations, when
asked for, are the authorizer's bit fields (the cluster's only with DESCRIBE on it, else 0). Without
an authorizer a client asking for authorized operations gets every operation Kafka supports on the
resource; otherwise the INT32_MIN "not computed" sentinel (kafka-python's admin crashes on -1).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from metadata import topic_names
from metadata.authorizer.standard import Authorizer
from metadata.topics import NO_LEADER, PartitionState, TopicLookup, TopicState
from protocol.acl_bindings import CLUSTER_NAME
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.messages import RESPONSES
from protocol.sentinels import ZERO_UUID
from protocol.wire import EncodedArray

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""Kafka's "not computed" value for topic/cluster authorized operations."""
_TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)
"""AclOperation codes Kafka supports on a topic: READ WRITE CREATE DELETE ALTER DESCRIBE
DESCRIBE_CONFIGS ALTER_CONFIGS."""
_CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12)
"""On the cluster: CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE."""
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in _TOPIC_OPERATIONS)
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << op for op in _CLUSTER_OPERATIONS)

_log = structlog.get_logger("kipling.handlers.metadata")


@dataclass(frozen=True)
class BrokerEndpoint:
    """A broker as Metadata lists it: its id and the advertised address clients should use."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class MetadataHandler(Handler):
    api_key = ApiKey.METADATA
    min_version = 0
    max_version = 12

    def __init__(
        self,
        topics: TopicLookup,
        brokers: Callable[[str], Sequence[BrokerEndpoint]],
        cluster_id: str,
        controller_id: int | Callable[[], int],
        auto_create_topics_enable: bool,
        auto_create: TopicCreator,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        """``brokers(listener)`` lists the live brokers with their address on the listener a request
        came in on. ``auto_create`` creates a topic for auto-creation (a CreateTopics forwarded to the
        controller)."""
        self._topics = topics
        self._brokers = brokers
        self._cluster_id = cluster_id
        self._controller_id = controller_id if callable(controller_id) else (lambda: controller_id)
        self._auto_create_topics_enable = auto_create_topics_enable
        self._auto_create = auto_create
        self._authorizer = authorizer
        self._encoded_partitions: dict[tuple[int, uuid.UUID], tuple[TopicState, int, EncodedArray]] = {}
        """(version, topic id) → (topic, its generation, its partitions encoded): a full Metadata
        request of 100,000 partitions costs the encoding of the topics that changed since."""
        self._prune_at = 1024

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        version = ctx.api_version
        try:
            _check_request(version, request)
        except KafkaError as exc:
            return self.error_response(ctx, request, exc.code)
        include_ops = version >= 8 and request.include_topic_authorized_operations
        ops_for: Callable[[str], int] | None = None
        if include_ops:
            ops_for = functools.partial(self._topic_operations, ctx)
        if _wants_all_topics(version, request.topics):
            topics = self._topics.all()
            if self._authorizer.enabled:
                topics = [t for t in topics if self._may_describe(ctx, t.name)]
            results = [self._describe(topic, ops_for, version) for topic in topics]
        else:
            results = await self._requested(ctx, request, ops_for)
        cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
        if 8 <= version <= 10 and request.include_cluster_authorized_operations:
            cluster_ops = self._cluster_operations(ctx)
        return {
            "throttle_time_ms": 0,
            "brokers": [_broker(b) for b in self._brokers(ctx.listener)],
            "cluster_id": self._cluster_id,
            "controller_id": self._controller_id(),
            "topics": results,
            "cluster_authorized_operations": cluster_ops,
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every requested topic carries ``code`` (Metadata has no top-level error)."""
        requested = request.topics if request is not None and request.topics else []
        return {
            "throttle_time_ms": 0,
            "brokers": [],
            "topics": [
                _error_topic(code, t.name if t.name is not None or ctx.api_version >= 12 else "", t.topic_id)
                for t in requested
            ],
        }

    # -- authorization ----------------------------------------------------------------------------

    def _may_describe(self, ctx: RequestContext, name: str) -> bool:
        return allowed(self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    def _may_create(self, ctx: RequestContext, name: str) -> bool:
        """Kafka's auto-creation check: CREATE on the cluster, else on the topic."""
        return cluster_allowed(self._authorizer, ctx, AclOperation.CREATE) or allowed(
            self._authorizer, ctx, AclOperation.CREATE, ResourceType.TOPIC, name
        )

    def _topic_operations(self, ctx: RequestContext, name: str) -> int:
        if not self._authorizer.enabled:
            return TOPIC_AUTHORIZED_OPERATIONS
        return self._authorizer.authorized_operations(
            ctx.principal, ctx.client_host, ResourceType.TOPIC, name
        )

    def _cluster_operations(self, ctx: RequestContext) -> int:
        if not self._authorizer.enabled:
            return CLUSTER_AUTHORIZED_OPERATIONS
        if not cluster_allowed(self._authorizer, ctx, AclOperation.DESCRIBE):
            return 0
        return self._authorizer.authorized_operations(
            ctx.principal, ctx.client_host, ResourceType.CLUSTER, CLUSTER_NAME
        )

    # -- topics -----------------------------------------------------------------------------------

    async def _requested(
        self, ctx: RequestContext, request: MessageData, ops_for: Callable[[str], int] | None
    ) -> list[dict[str, Any]]:
        allow_create = self._auto_create_topics_enable and (
            ctx.api_version < 4 or request.allow_auto_topic_creation
        )
        results: list[dict[str, Any]] = []
        seen_names: set[str] = set()
        seen_ids: set[uuid.UUID] = set()
        for wanted in request.topics:
            if wanted.topic_id != ZERO_UUID:
                if wanted.topic_id not in seen_ids:
                    seen_ids.add(wanted.topic_id)
                    results.append(self._by_id(ctx, wanted.topic_id, ops_for))
            elif wanted.name not in seen_names:
                seen_names.add(wanted.name)
                results.append(await self._by_name(ctx, wanted.name, allow_create, ops_for))
        return results

    def _by_id(
        self, ctx: RequestContext, topic_id: uuid.UUID, ops_for: Callable[[str], int] | None
    ) -> dict[str, Any]:
        topic = self._topics.get_by_id(topic_id)
        if topic is None:
            return _error_topic(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id)
        if self._authorizer.enabled and not self._may_describe(ctx, topic.name):
            # topic ids are not sensitive: Kafka answers with the id, never the name
            return _error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, topic_id, internal=False)
        return self._describe(topic, ops_for, ctx.api_version)

    async def _by_name(
        self, ctx: RequestContext, name: str, allow_create: bool, ops_for: Callable[[str], int] | None
    ) -> dict[str, Any]:
        if self._authorizer.enabled and name is not None and not self._may_describe(ctx, name):
            # whether it exists is not disclosed
            return _error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, ZERO_UUID, internal=False)
        topic = self._topics.get(name)
        if topic is not None:
            return self._describe(topic, ops_for, ctx.api_version)
        if allow_create and self._authorizer.enabled and not self._may_create(ctx, name):
            return _error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, ZERO_UUID)
        if not topic_names.is_valid(name):
            return _error_topic(ErrorCode.INVALID_TOPIC_EXCEPTION, name, ZERO_UUID)
        if not allow_create or topic_names.is_internal(name):
            return _error_topic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name, ZERO_UUID)
        try:
            created = await self._auto_create(name)
        except KafkaError as exc:
            _log.warning(
                "auto-creation failed", topic=name, error=exc.code.name, reason=exc.message, peer=ctx.peer
            )
            return _error_topic(exc.code, name, ZERO_UUID)
        _log.info("topic auto-created", topic=name, client_id=ctx.client_id, peer=ctx.peer)
        return self._describe(created, ops_for, ctx.api_version)

    def _describe(
        self, topic: TopicState, ops_for: Callable[[str], int] | None, version: int
    ) -> dict[str, Any]:
        return {
            "error_code": int(ErrorCode.NONE),
            "name": topic.name,
            "topic_id": topic.topic_id,
            "is_internal": topic.is_internal,
            "partitions": self._partitions(topic, version),
            "topic_authorized_operations": ops_for(topic.name)
            if ops_for is not None
            else AUTHORIZED_OPERATIONS_OMITTED,
        }

    def _partitions(self, topic: TopicState, version: int) -> EncodedArray:
        """The topic's partitions in wire form for ``version``, encoded again only when it changed."""
        key = (version, topic.topic_id)
        cached = self._encoded_partitions.get(key)
        if cached is not None and cached[0] is topic and cached[1] == topic.generation:
            return cached[2]
        encoded = _partitions_encoder(version)([_partition(p) for p in topic.sorted_partitions()])
        if cached is None and len(self._encoded_partitions) >= self._prune_at:
            self._prune()
        self._encoded_partitions[key] = (topic, topic.generation, encoded)
        return encoded

    def _prune(self) -> None:
        """Forget the encodings of deleted topics (kept until the cache grows: deletions are rare)."""
        self._encoded_partitions = {
            key: entry
            for key, entry in self._encoded_partitions.items()
            if self._topics.get_by_id(key[1]) is entry[0]
        }
        self._prune_at = max(self._prune_at, 2 * len(self._encoded_partitions))


@functools.cache
def _partitions_encoder(version: int) -> Callable[[Sequence[Any]], EncodedArray]:
    return RESPONSES[ApiKey.METADATA].codec(version).array_encoder("topics", "partitions")


TopicCreator = Callable[[str], Awaitable[TopicState]]
"""Auto-create a topic with the broker defaults; raises KafkaError with the reason it cannot."""


def _check_request(version: int, request: MessageData) -> None:
    """Kafka refuses null names and topic ids in the versions that cannot use them (10-11)."""
    if version >= 12 or not request.topics:
        return
    for topic in request.topics:
        if topic.name is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Topic name can not be null for version {version}")
        if topic.topic_id != ZERO_UUID:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Topic IDs are not supported in requests for version {version}"
            )


def _wants_all_topics(version: int, topics: list[MessageData] | None) -> bool:
    return topics is None or (version == 0 and not topics)


def _partition(p: PartitionState) -> dict[str, Any]:
    error = ErrorCode.LEADER_NOT_AVAILABLE if p.leader_id == NO_LEADER else ErrorCode.NONE
    return {
        "error_code": int(error),
        "partition_index": p.partition,
        "leader_id": p.leader_id,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas),
        "isr_nodes": list(p.isr),
        "offline_replicas": [],
    }


def _error_topic(
    code: ErrorCode, name: str | None, topic_id: uuid.UUID, *, internal: bool | None = None
) -> dict[str, Any]:
    return {
        "error_code": int(code),
        "name": name,
        "topic_id": topic_id,
        "is_internal": topic_names.is_internal(name) if internal is None else internal,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _broker(endpoint: BrokerEndpoint) -> dict[str, Any]:
    return {"node_id": endpoint.node_id, "host": endpoint.host, "port": endpoint.port, "rack": endpoint.rack}
