"""A small admin client: create and delete topics, add partitions, read cluster and topic metadata,
find coordinators, inspect and abort transactions (KIP-664's DescribeTransactions,
ListTransactions, DescribeProducers, and WriteTxnMarkers to abort a hanging transaction),
describe a broker's log dirs (DescribeLogDirs), move partitions (AlterPartitionReassignments,
ListPartitionReassignments), manage users' SCRAM credentials (Describe/AlterUserScramCredentials:
the password is salted here, as Kafka's admin client does, and never sent), and manage ACLs
(DescribeAcls, CreateAcls, DeleteAcls, with :mod:`protocol.acl_bindings`' bindings and filters).

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
from typing import Any, NamedTuple

from client.connection import KafkaConnection
from client.errors import error_code, raise_for_error
from protocol.acl_bindings import ANY_BINDING_FILTER, AclBinding, AclBindingFilter
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID
from security.scram import ScramMechanism, random_salt, salted_password

DEFAULT_TIMEOUT_MS = 30_000
TRANSACTION_KEY_TYPE = 1
"""FindCoordinator's key type of a transactional id (0 is a group)."""
FIND_COORDINATOR_MAX_VERSION = 3
"""The last version with one key per request (v4 batches them)."""
NO_TXN_START = -1
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


class CoordinatorNode(NamedTuple):
    """The broker FindCoordinator names."""

    node_id: int
    host: str
    port: int


class TopicPartitionKey(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """One transactional id as its coordinator describes it (DescribeTransactions); when ``error``
    is not NONE only the id is meaningful."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    """-1 when no transaction ran (Kafka's admin client then says None)."""
    partitions: tuple[TopicPartitionKey, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionListings:
    """One broker's ListTransactions answer."""

    error: ErrorCode
    transactions: tuple[TransactionListing, ...] = ()
    unknown_state_filters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One active producer of a partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    """-1 before the producer's first marker."""
    current_txn_start_offset: int
    """The first offset of the producer's open transaction; -1 when none is open."""

    @property
    def has_open_transaction(self) -> bool:
        return self.current_txn_start_offset >= 0


@dataclass(frozen=True, slots=True)
class PartitionProducers:
    """A partition's answer to DescribeProducers: its error, or its active producers."""

    error: ErrorCode
    producers: tuple[ProducerState, ...] = ()
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One partition's log in a log dir (DescribeLogDirs): Kafka's ``ReplicaInfo``."""

    size: int
    """Bytes of the log's segments."""
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log dir of a broker (DescribeLogDirs): Kafka's ``LogDirDescription``."""

    error: ErrorCode
    """KAFKA_STORAGE_ERROR for an offline dir (it lists no replicas then)."""
    replicas: dict[TopicPartitionKey, ReplicaInfo]
    total_bytes: int | None = None
    """The volume's size (v4+); None when the broker did not say."""
    usable_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment in progress (ListPartitionReassignments): all replicas, and those being added
    and removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """DescribeCluster's answer; ``authorized_operations`` is None when not asked for."""

    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    authorized_operations: int | None


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's outcome of ElectLeaders (error NONE: elected)."""

    error: ErrorCode
    message: str | None


@dataclass(frozen=True, slots=True)
class TopicPartitionsPage:
    """One DescribeTopicPartitions response: topics in name order, and where the next page starts
    (None: nothing left)."""

    topics: tuple[TopicDescription, ...]
    next_cursor: TopicPartitionKey | None


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    """Kafka's AbortTransactionSpec: the marker that ends a producer's transaction on a partition."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:
        return (
            f"AbortTransactionSpec(topicPartition={self.topic}-{self.partition}, "
            f"producerId={self.producer_id}, producerEpoch={self.producer_epoch}, "
            f"coordinatorEpoch={self.coordinator_epoch})"
        )


TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
"""Kafka's ConfigResource.Type ids of the resources kipling configures."""
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
"""Kafka's AlterConfigOp.OpType ids."""


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A config resource (Kafka's ConfigResource); ``keys`` narrows DescribeConfigs (None: all)."""

    type: int
    name: str
    keys: tuple[str, ...] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One key's change in IncrementalAlterConfigs (``op``: OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT)."""

    name: str
    value: str | None
    op: int = OP_SET


@dataclass(frozen=True, slots=True)
class ConfigSynonymDescription:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntryDescription:
    """One described config; ``source`` is DescribeConfigs' ConfigSource id."""

    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonymDescription, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigDescription:
    error: ErrorCode
    message: str | None
    entries: tuple[ConfigEntryDescription, ...]


@dataclass(frozen=True, slots=True)
class ConfigAlterResult:
    error: ErrorCode
    message: str | None


DEFAULT_SCRAM_ITERATIONS = 4096
"""Kafka's default iteration count for a new SCRAM credential (ConfigCommand's DefaultScramIterations)."""


@dataclass(frozen=True, slots=True)
class ScramCredentialUpsertion:
    """Set ``user``'s SCRAM credential for ``mechanism`` (Kafka's UserScramCredentialUpsertion).

    The password stays on this side: the request carries a salt and Hi(password, salt, iterations).
    ``salt`` None draws a fresh one, in Kafka's form.
    """

    user: str
    mechanism: ScramMechanism
    password: str = field(repr=False)
    iterations: int = DEFAULT_SCRAM_ITERATIONS
    salt: bytes | None = None


@dataclass(frozen=True, slots=True)
class ScramCredentialDeletion:
    """Delete ``user``'s SCRAM credential for ``mechanism``."""

    user: str
    mechanism: ScramMechanism


@dataclass(frozen=True, slots=True)
class UserScramCredentialsDescription:
    """One user of DescribeUserScramCredentials: (mechanism type byte, iterations), or an error."""

    user: str
    error: ErrorCode
    message: str | None
    credentials: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class AclCreateResult:
    """One binding's outcome of CreateAcls."""

    error: ErrorCode
    message: str | None


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    """One filter's outcome of DeleteAcls: an error, or the ACLs it matched, each with the error of
    its own deletion (NONE when deleted)."""

    error: ErrorCode
    message: str | None
    matching: tuple[tuple[AclBinding, ErrorCode, str | None], ...] = ()

    @property
    def deleted(self) -> list[AclBinding]:
        return [binding for binding, error, _ in self.matching if error is ErrorCode.NONE]


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

    # -- coordinators and transactions ---------------------------------------------------------------

    async def find_coordinator(self, key: str, key_type: int = TRANSACTION_KEY_TYPE) -> CoordinatorNode:
        """The coordinator of ``key`` (a transactional id by default); KafkaResponseError on an
        error (COORDINATOR_NOT_AVAILABLE while ``__transaction_state`` is created or loads: retry)."""
        version = self._connection.version_for(
            ApiKey.FIND_COORDINATOR, wanted_max=FIND_COORDINATOR_MAX_VERSION
        )
        response = await self._connection.request(
            ApiKey.FIND_COORDINATOR, version, {"key": key, "key_type": key_type}
        )
        raise_for_error(
            response.error_code,
            getattr(response, "error_message", None),
            context=f"find coordinator of {key}",
        )
        return CoordinatorNode(response.node_id, response.host, response.port)

    async def describe_transactions(self, transactional_ids: Sequence[str]) -> list[TransactionDescription]:
        """DescribeTransactions at this connection's broker (the ids' coordinator): one entry per id,
        each with its own error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        TRANSACTIONAL_ID_NOT_FOUND...)."""
        version = self._connection.version_for(ApiKey.DESCRIBE_TRANSACTIONS)
        response = await self._connection.request(
            ApiKey.DESCRIBE_TRANSACTIONS, version, {"transactional_ids": list(transactional_ids)}
        )
        return [
            TransactionDescription(
                s.transactional_id,
                error_code(s.error_code),
                s.transaction_state,
                s.producer_id,
                s.producer_epoch,
                s.transaction_timeout_ms,
                s.transaction_start_time_ms,
                tuple(TopicPartitionKey(t.topic, p) for t in s.topics for p in t.partitions),
            )
            for s in response.transaction_states
        ]

    async def list_transactions(
        self,
        *,
        states: Sequence[str] = (),
        producer_ids: Sequence[int] = (),
        duration_filter_ms: int = -1,
    ) -> TransactionListings:
        """ListTransactions at this connection's broker: the transactions it coordinates. A
        ``duration_filter_ms`` >= 0 needs v1 (KIP-994): UnsupportedApiVersionError from an older broker."""
        wanted_min = 1 if duration_filter_ms >= 0 else None
        version = self._connection.version_for(ApiKey.LIST_TRANSACTIONS, wanted_min=wanted_min)
        body = {
            "state_filters": list(states),
            "producer_id_filters": list(producer_ids),
            "duration_filter": duration_filter_ms,
        }
        response = await self._connection.request(ApiKey.LIST_TRANSACTIONS, version, body)
        return TransactionListings(
            error_code(response.error_code),
            tuple(
                TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                for t in response.transaction_states
            ),
            tuple(response.unknown_state_filters),
        )

    async def describe_producers(
        self, partitions: Sequence[tuple[str, int]]
    ) -> dict[TopicPartitionKey, PartitionProducers]:
        """DescribeProducers at this connection's broker (the partitions' leader): each partition's
        active producers, or its error (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION...)."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        version = self._connection.version_for(ApiKey.DESCRIBE_PRODUCERS)
        body = {"topics": [{"name": t, "partition_indexes": indexes} for t, indexes in by_topic.items()]}
        response = await self._connection.request(ApiKey.DESCRIBE_PRODUCERS, version, body)
        out: dict[TopicPartitionKey, PartitionProducers] = {}
        for topic in response.topics:
            for p in topic.partitions:
                out[TopicPartitionKey(topic.name, p.partition_index)] = PartitionProducers(
                    error_code(p.error_code),
                    tuple(
                        ProducerState(
                            s.producer_id,
                            s.producer_epoch,
                            s.last_sequence,
                            s.last_timestamp,
                            s.coordinator_epoch,
                            s.current_txn_start_offset,
                        )
                        for s in p.active_producers
                    ),
                    p.error_message,
                )
        return out

    async def abort_transaction(self, spec: AbortTransactionSpec) -> ErrorCode:
        """Kafka's ``Admin.abortTransaction``: WriteTxnMarkers with one ABORT marker for the spec's
        producer on its partition, sent to this connection's broker (the partition's leader). The
        partition's error: NONE once the marker is written, INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED, NOT_LEADER_OR_FOLLOWER..."""
        version = self._connection.version_for(ApiKey.WRITE_TXN_MARKERS)
        body = {
            "markers": [
                {
                    "producer_id": spec.producer_id,
                    "producer_epoch": spec.producer_epoch,
                    "transaction_result": False,
                    "topics": [{"name": spec.topic, "partition_indexes": [spec.partition]}],
                    "coordinator_epoch": spec.coordinator_epoch,
                    "transaction_version": 0,
                }
            ]
        }
        response = await self._connection.request(
            ApiKey.WRITE_TXN_MARKERS, version, body, self._request_timeout_s()
        )
        for marker in response.markers:
            if marker.producer_id != spec.producer_id:
                continue
            for topic in marker.topics:
                for p in topic.partitions:
                    if topic.name == spec.topic and p.partition_index == spec.partition:
                        return error_code(p.error_code)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def describe_log_dirs(
        self, partitions: Mapping[str, Sequence[int]] | None = None
    ) -> dict[str, LogDirDescription]:
        """DescribeLogDirs at this connection's broker: each of its log dirs, by path, with the
        partitions held there (``partitions``: topic → indexes to ask about; None: all). A top-level
        error (v3+) raises KafkaResponseError, as Kafka's admin fails that broker's result."""
        version = self._connection.version_for(ApiKey.DESCRIBE_LOG_DIRS)
        topics = (
            None
            if partitions is None
            else [{"topic": t, "partitions": list(indexes)} for t, indexes in partitions.items()]
        )
        response = await self._connection.request(ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": topics})
        if version >= 3:
            raise_for_error(response.error_code, context="describe log dirs")
        known = version >= 4
        return {
            r.log_dir: LogDirDescription(
                error_code(r.error_code),
                {
                    TopicPartitionKey(t.name, p.partition_index): ReplicaInfo(
                        p.partition_size, p.offset_lag, p.is_future_key
                    )
                    for t in r.topics
                    for p in t.partitions
                },
                r.total_bytes if known and r.total_bytes >= 0 else None,
                r.usable_bytes if known and r.usable_bytes >= 0 else None,
            )
            for r in response.results
        }

    # -- partition reassignment ----------------------------------------------------------------------

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartitionKey, Sequence[int] | None]
    ) -> dict[TopicPartitionKey, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: move each partition to its target replicas (None cancels its
        reassignment in progress); each partition's (error, message). A top-level error stands for
        every partition."""
        version = self._connection.version_for(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, replicas in reassignments.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "replicas": None if replicas is None else list(replicas)}
            )
        body = {
            "timeout_ms": self._timeout_ms,
            "allow_replication_factor_change": True,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        }
        response = await self._connection.request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, version, body, self._request_timeout_s()
        )
        top = error_code(response.error_code)
        out: dict[TopicPartitionKey, tuple[ErrorCode, str | None]] = {
            tp: (top, response.error_message) for tp in reassignments
        }
        if top is ErrorCode.NONE:
            for topic in response.responses:
                for p in topic.partitions:
                    out[TopicPartitionKey(topic.name, p.partition_index)] = (
                        error_code(p.error_code),
                        p.error_message,
                    )
        return out

    async def list_partition_reassignments(
        self, partitions: Sequence[TopicPartitionKey] | None = None
    ) -> dict[TopicPartitionKey, PartitionReassignment]:
        """ListPartitionReassignments: the reassignments in progress (of ``partitions``, or all);
        a top-level error raises KafkaResponseError."""
        version = self._connection.version_for(ApiKey.LIST_PARTITION_REASSIGNMENTS)
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": name, "partition_indexes": indexes} for name, indexes in by_topic.items()]
        body = {"timeout_ms": self._timeout_ms, "topics": topics}
        response = await self._connection.request(
            ApiKey.LIST_PARTITION_REASSIGNMENTS, version, body, self._request_timeout_s()
        )
        raise_for_error(response.error_code, response.error_message, context="list partition reassignments")
        return {
            TopicPartitionKey(topic.name, p.partition_index): PartitionReassignment(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for topic in response.topics
            for p in topic.partitions
        }

    # -- cluster and leaders (ElectLeaders, DescribeCluster, DescribeTopicPartitions) --------------

    async def elect_leaders(
        self, election_type: int, partitions: Mapping[str, Sequence[int]] | None
    ) -> dict[TopicPartitionKey, ElectionResult]:
        """ElectLeaders (0: preferred, 1: unclean) for ``partitions`` (topic → indexes; None: every
        partition, answered only where an election was needed). The broker forwards it to the
        controller. A top-level error (v1+) raises KafkaResponseError, as Kafka's admin fails every
        partition with it; v0 can only ask for a preferred election."""
        version = self._connection.version_for(ApiKey.ELECT_LEADERS, wanted_min=1 if election_type else None)
        body = {
            "election_type": election_type,
            "topic_partitions": None
            if partitions is None
            else [{"topic": t, "partitions": list(indexes)} for t, indexes in partitions.items()],
            "timeout_ms": self._timeout_ms,
        }
        response = await self._connection.request(
            ApiKey.ELECT_LEADERS, version, body, self._request_timeout_s()
        )
        if version >= 1:
            raise_for_error(response.error_code, context="elect leaders")
        return {
            TopicPartitionKey(r.topic, p.partition_id): ElectionResult(
                error_code(p.error_code), p.error_message
            )
            for r in response.replica_election_results
            for p in r.partition_result
        }

    async def describe_cluster(self, *, include_authorized_operations: bool = False) -> ClusterDescription:
        """DescribeCluster at this connection's broker: cluster id, controller id, brokers (with rack)."""
        version = self._connection.version_for(ApiKey.DESCRIBE_CLUSTER)
        body = {"include_cluster_authorized_operations": include_authorized_operations, "endpoint_type": 1}
        response = await self._connection.request(ApiKey.DESCRIBE_CLUSTER, version, body)
        raise_for_error(response.error_code, response.error_message, context="describe cluster")
        return ClusterDescription(
            response.cluster_id,
            response.controller_id,
            tuple(BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in response.brokers),
            response.cluster_authorized_operations if include_authorized_operations else None,
        )

    async def describe_topic_partitions(
        self,
        topics: Sequence[str],
        *,
        limit: int = 2000,
        cursor: TopicPartitionKey | None = None,
    ) -> TopicPartitionsPage:
        """One page of DescribeTopicPartitions (``topics`` empty: every topic), from ``cursor``."""
        body = {
            "topics": [{"name": t} for t in topics],
            "response_partition_limit": limit,
            "cursor": None
            if cursor is None
            else {"topic_name": cursor.topic, "partition_index": cursor.partition},
        }
        response = await self._connection.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)
        following = response.next_cursor
        return TopicPartitionsPage(
            tuple(_description(t) for t in response.topics),
            None if following is None else TopicPartitionKey(following.topic_name, following.partition_index),
        )

    # -- client quotas (DescribeClientQuotas, AlterClientQuotas) ----------------------------------

    async def describe_client_quotas(
        self, components: Sequence[tuple[str, int, str | None]], *, strict: bool = False
    ) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        """The entities matching the filter ((entity type, match type, match) components: 0 exact,
        1 default, 2 any name) with their quotas; a top-level error raises KafkaResponseError."""
        version = self._connection.version_for(ApiKey.DESCRIBE_CLIENT_QUOTAS)
        body = {
            "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
            "strict": strict,
        }
        response = await self._connection.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, body)
        raise_for_error(response.error_code, response.error_message, context="describe client quotas")
        return [
            (
                tuple((e.entity_type, e.entity_name) for e in entry.entity),
                {v.key: v.value for v in entry["values"]},
            )
            for entry in response.entries or []
        ]

    async def alter_client_quotas(
        self,
        alterations: Sequence[tuple[Sequence[tuple[str, str | None]], Mapping[str, float | None]]],
        *,
        validate_only: bool = False,
    ) -> list[tuple[tuple[tuple[str, str | None], ...], ErrorCode, str | None]]:
        """Set (a value) or remove (None) quota keys of each entity; each entity's (error, message)."""
        version = self._connection.version_for(ApiKey.ALTER_CLIENT_QUOTAS)
        body = {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [
                        {"key": k, "value": 0.0 if v is None else v, "remove": v is None}
                        for k, v in ops.items()
                    ],
                }
                for entity, ops in alterations
            ],
            "validate_only": validate_only,
        }
        response = await self._connection.request(
            ApiKey.ALTER_CLIENT_QUOTAS, version, body, self._request_timeout_s()
        )
        return [
            (
                tuple((e.entity_type, e.entity_name) for e in r.entity),
                error_code(r.error_code),
                r.error_message,
            )
            for r in response.entries
        ]

    # -- SCRAM credentials -------------------------------------------------------------------------

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> list[UserScramCredentialsDescription]:
        """Each user's mechanisms and iterations (``users`` None: every user with credentials); a
        named user without any is RESOURCE_NOT_FOUND, a top-level error raises KafkaResponseError."""
        version = self._connection.version_for(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
        body = {"users": None if users is None else [{"name": user} for user in users]}
        response = await self._connection.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version, body)
        raise_for_error(response.error_code, response.error_message, context="describe SCRAM credentials")
        return [
            UserScramCredentialsDescription(
                r.user,
                error_code(r.error_code),
                r.error_message,
                tuple((c.mechanism, c.iterations) for c in r.credential_infos),
            )
            for r in response.results
        ]

    async def alter_user_scram_credentials(
        self,
        upsertions: Sequence[ScramCredentialUpsertion] = (),
        deletions: Sequence[ScramCredentialDeletion] = (),
    ) -> dict[str, tuple[ErrorCode, str | None]]:
        """Upsert and delete credentials in one request; each user's (error, message)."""
        version = self._connection.version_for(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
        body = {
            "deletions": [{"name": d.user, "mechanism": d.mechanism.type_id} for d in deletions],
            "upsertions": [_upsertion(u) for u in upsertions],
        }
        response = await self._connection.request(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version, body, self._request_timeout_s()
        )
        return {r.user: (error_code(r.error_code), r.error_message) for r in response.results}

    # -- ACLs (DescribeAcls, CreateAcls, DeleteAcls) -------------------------------------------------

    async def describe_acls(self, binding_filter: AclBindingFilter = ANY_BINDING_FILTER) -> list[AclBinding]:
        """The ACLs ``binding_filter`` matches; a top-level error (SECURITY_DISABLED without an
        authorizer, CLUSTER_AUTHORIZATION_FAILED) raises KafkaResponseError."""
        version = self._connection.version_for(ApiKey.DESCRIBE_ACLS)
        pattern, entry = binding_filter.pattern, binding_filter.entry
        body = {
            "resource_type_filter": int(pattern.resource_type),
            "resource_name_filter": pattern.name,
            "pattern_type_filter": int(pattern.pattern_type),
            "principal_filter": entry.principal,
            "host_filter": entry.host,
            "operation": int(entry.operation),
            "permission_type": int(entry.permission_type),
        }
        response = await self._connection.request(ApiKey.DESCRIBE_ACLS, version, body)
        raise_for_error(response.error_code, response.error_message, context="describe ACLs")
        return [
            AclBinding.from_codes(
                r.resource_type,
                r.resource_name,
                r.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission_type,
            )
            for r in response.resources
            for a in r.acls
        ]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreateResult]:
        """Create ACLs in one request; each binding's outcome, in order."""
        version = self._connection.version_for(ApiKey.CREATE_ACLS)
        body = {
            "creations": [
                {
                    "resource_type": int(b.pattern.resource_type),
                    "resource_name": b.pattern.name,
                    "resource_pattern_type": int(b.pattern.pattern_type),
                    "principal": b.entry.principal,
                    "host": b.entry.host,
                    "operation": int(b.entry.operation),
                    "permission_type": int(b.entry.permission_type),
                }
                for b in bindings
            ]
        }
        response = await self._connection.request(
            ApiKey.CREATE_ACLS, version, body, self._request_timeout_s()
        )
        return [AclCreateResult(error_code(r.error_code), r.error_message) for r in response.results]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """Delete the ACLs each filter matches, in one request; each filter's outcome, in order."""
        version = self._connection.version_for(ApiKey.DELETE_ACLS)
        body = {
            "filters": [
                {
                    "resource_type_filter": int(f.pattern.resource_type),
                    "resource_name_filter": f.pattern.name,
                    "pattern_type_filter": int(f.pattern.pattern_type),
                    "principal_filter": f.entry.principal,
                    "host_filter": f.entry.host,
                    "operation": int(f.entry.operation),
                    "permission_type": int(f.entry.permission_type),
                }
                for f in filters
            ]
        }
        response = await self._connection.request(
            ApiKey.DELETE_ACLS, version, body, self._request_timeout_s()
        )
        return [
            AclDeleteResult(
                error_code(r.error_code),
                r.error_message,
                tuple(
                    (
                        AclBinding.from_codes(
                            m.resource_type,
                            m.resource_name,
                            m.pattern_type,
                            m.principal,
                            m.host,
                            m.operation,
                            m.permission_type,
                        ),
                        error_code(m.error_code),
                        m.error_message,
                    )
                    for m in r.matching_acls
                ),
            )
            for r in response.filter_results
        ]

    # -- configs -----------------------------------------------------------------------------------

    async def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[ConfigResource, ConfigDescription]:
        """DescribeConfigs: every config of each resource (``configs`` narrows to those keys)."""
        version = self._connection.version_for(ApiKey.DESCRIBE_CONFIGS)
        body = {
            "resources": [
                {"resource_type": r.type, "resource_name": r.name, "configuration_keys": r.keys}
                for r in resources
            ],
            "include_synonyms": include_synonyms,
            "include_documentation": include_documentation,
        }
        response = await self._connection.request(
            ApiKey.DESCRIBE_CONFIGS, version, body, self._request_timeout_s()
        )
        result: dict[ConfigResource, ConfigDescription] = {}
        for r in response.results:
            entries = tuple(
                ConfigEntryDescription(
                    c.name,
                    c.value,
                    c.config_source,
                    c.read_only,
                    c.is_sensitive,
                    tuple(ConfigSynonymDescription(s.name, s.value, s.source) for s in c.synonyms),
                )
                for c in r.configs
            )
            resource = ConfigResource(r.resource_type, r.resource_name)
            result[resource] = ConfigDescription(error_code(r.error_code), r.error_message, entries)
        return result

    async def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], *, validate_only: bool = False
    ) -> dict[ConfigResource, ConfigAlterResult]:
        """IncrementalAlterConfigs: per resource, SET/DELETE/APPEND/SUBTRACT of single keys."""
        version = self._connection.version_for(ApiKey.INCREMENTAL_ALTER_CONFIGS)
        body = {
            "resources": [
                {
                    "resource_type": resource.type,
                    "resource_name": resource.name,
                    "configs": [
                        {"name": op.name, "config_operation": op.op, "value": op.value} for op in ops
                    ],
                }
                for resource, ops in changes.items()
            ],
            "validate_only": validate_only,
        }
        response = await self._connection.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body, self._request_timeout_s()
        )
        return _alter_results(response)

    async def alter_configs(
        self, configs: Mapping[ConfigResource, Mapping[str, str]], *, validate_only: bool = False
    ) -> dict[ConfigResource, ConfigAlterResult]:
        """AlterConfigs (legacy): each resource's overrides become exactly ``configs[resource]``."""
        version = self._connection.version_for(ApiKey.ALTER_CONFIGS)
        body = {
            "resources": [
                {
                    "resource_type": resource.type,
                    "resource_name": resource.name,
                    "configs": [{"name": k, "value": v} for k, v in values.items()],
                }
                for resource, values in configs.items()
            ],
            "validate_only": validate_only,
        }
        response = await self._connection.request(
            ApiKey.ALTER_CONFIGS, version, body, self._request_timeout_s()
        )
        return _alter_results(response)


def _upsertion(upsertion: ScramCredentialUpsertion) -> dict[str, Any]:
    """The request's form: the salt and the salted password, never the password."""
    salt = upsertion.salt if upsertion.salt is not None else random_salt()
    salted = salted_password(upsertion.mechanism, upsertion.password, salt, upsertion.iterations)
    return {
        "name": upsertion.user,
        "mechanism": upsertion.mechanism.type_id,
        "iterations": upsertion.iterations,
        "salt": salt,
        "salted_password": salted,
    }


def _alter_results(response: Any) -> dict[ConfigResource, ConfigAlterResult]:
    return {
        ConfigResource(r.resource_type, r.resource_name): ConfigAlterResult(
            error_code(r.error_code), r.error_message
        )
        for r in response.responses
    }


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
    "AbortTransactionSpec",
    "AdminClient",
    "BrokerInfo",
    "ClusterDescription",
    "ClusterMetadata",
    "CoordinatorNode",
    "ElectionResult",
    "NewTopic",
    "PartitionInfo",
    "PartitionProducers",
    "ProducerState",
    "TopicDescription",
    "TopicPartitionKey",
    "TopicPartitionsPage",
    "TopicResult",
    "TransactionDescription",
    "TransactionListing",
    "TransactionListings",
]
