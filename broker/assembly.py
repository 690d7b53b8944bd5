"""The data plane and the coordinators of a broker, as the composition root wires them.

Every broker serves clients with this data plane (fetch sessions, long-poll and delayed-produce
purgatories, the fetch and produce services, their metrics), runs this housekeeping, moves its
group coordinator with leadership of ``__consumer_offsets`` and its transaction coordinator with
leadership of ``__transaction_state``; :mod:`broker.node` calls these builders.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from broker.client_security import inter_broker_client_security
from broker.fetch.replica_selector import replica_selector
from broker.fetch.service import FetchService, LeaderQuota
from broker.fetch_session.cache import FetchSessionCache
from broker.fetch_session.context import FetchManager
from broker.fetch_session.metrics import FetchSessionCacheMetrics
from broker.group_runtime import GroupCoordinatorRuntime, OffsetsTopicCreator, OffsetsTopicGroupLog
from broker.handlers.add_offsets_to_txn import AddOffsetsToTxnHandler
from broker.handlers.add_partitions_to_txn import AddPartitionsToTxnHandler
from broker.handlers.authorization import ALLOW_EVERYTHING
from broker.handlers.base import Handler
from broker.handlers.consumer_group_describe import ConsumerGroupDescribeHandler
from broker.handlers.consumer_group_heartbeat import ConsumerGroupHeartbeatHandler
from broker.handlers.delete_groups import DeleteGroupsHandler
from broker.handlers.describe_groups import DescribeGroupsHandler
from broker.handlers.describe_producers import DescribeProducersHandler
from broker.handlers.describe_transactions import DescribeTransactionsHandler
from broker.handlers.end_txn import EndTxnHandler
from broker.handlers.find_coordinator import FindCoordinatorHandler
from broker.handlers.heartbeat import HeartbeatHandler
from broker.handlers.join_group import JoinGroupHandler
from broker.handlers.leave_group import LeaveGroupHandler
from broker.handlers.list_groups import ListGroupsHandler
from broker.handlers.list_transactions import ListTransactionsHandler
from broker.handlers.metadata import BrokerEndpoint
from broker.handlers.offset_commit import OffsetCommitHandler
from broker.handlers.offset_delete import OffsetDeleteHandler
from broker.handlers.offset_fetch import OffsetFetchHandler
from broker.handlers.sync_group import SyncGroupHandler
from broker.handlers.txn_offset_commit import TxnOffsetCommitHandler
from broker.handlers.write_txn_markers import WriteTxnMarkersHandler
from broker.internal_topics import TopicCreator
from broker.metrics.purgatory import DelayedFetchMetrics, DelayedProduceMetrics, PurgatoryMetrics
from broker.produce.producer_ids import ProducerIdGenerator, ProducerIdsUnavailableError
from broker.produce.service import ProduceService
from broker.replication.followers.followed_replicas import FollowedReplicas
from broker.replication.partition import Partition
from broker.replication.partition_metrics import register_partition_metrics
from broker.replication.replica_manager import ReplicaManager
from broker.transactions.markers import TransactionMarkerChannel, TxnMarkerWriter
from broker.transactions.runtime import TransactionCoordinatorRuntime, TransactionStateLog
from broker.transactions.verification import TransactionVerifier
from client.connection_pool import ConnectionPool
from coordinator.group import GroupCoordinator, GroupCoordinatorConfig
from coordinator.group.consumer.service import no_group_configs
from coordinator.transaction import ProducerIdUnavailableError, TransactionConfig, TransactionCoordinator
from metadata.authorizer.standard import Authorizer
from metadata.topic_names import GROUP_METADATA_TOPIC
from metadata.topics import TopicLookup
from protocol.error_codes import ErrorCode, KafkaError
from server_common.config import BrokerConfig
from server_common.periodic import PeriodicTask
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import Clock
from storage.log_manager import LogManager
from storage.producer_state import PRODUCER_EXPIRATION_CHECK_INTERVAL_MS

__all__ = [
    "DataPlane",
    "GroupCoordination",
    "TransactionCoordination",
    "build_data_plane",
    "build_group_coordination",
    "build_transaction_coordination",
    "group_handlers",
    "housekeeping_tasks",
    "transaction_handlers",
]

FLUSH_CHECK_INTERVAL_MS = 1_000
"""How often logs with a time-based flush policy (flush.ms) are checked for an overdue fsync."""


@dataclass
class DataPlane:
    fetch_service: FetchService
    produce_service: ProduceService
    purgatories: list[DelayedOperationPurgatory]
    delete_records_purgatory: DelayedOperationPurgatory
    purgatory_metrics: PurgatoryMetrics


def build_data_plane(
    config: BrokerConfig,
    registry: CollectorRegistry,
    clock: Clock,
    replicas: ReplicaManager,
    topics: TopicLookup,
    *,
    leader_quota: LeaderQuota | None = None,
    replica_racks: Callable[[str], Mapping[int, str | None]] | None = None,
    followed: FollowedReplicas | None = None,
) -> DataPlane:
    """Fetch and produce services over ``replicas``, woken by every partition change.

    ``replica_racks(listener)`` places replicas for ``replica.selector.class``, and consumers read
    the ``followed`` partitions from the follower processes' logs (KIP-392)."""
    loop = asyncio.get_running_loop()
    purgatory_metrics = PurgatoryMetrics(registry)
    fetch_purgatory = DelayedOperationPurgatory("Fetch", loop)
    produce_purgatory = DelayedOperationPurgatory("Produce", loop)
    delete_records_purgatory = DelayedOperationPurgatory("DeleteRecords", loop)
    purgatory_metrics.track(fetch_purgatory)
    purgatory_metrics.track(produce_purgatory)
    purgatory_metrics.track(delete_records_purgatory)
    fetch_cache = FetchSessionCache(
        FetchSessionCacheMetrics(registry),
        max_slots=config.max_incremental_fetch_session_cache_slots,
        eviction_ms=config.min_incremental_fetch_session_eviction_ms,
    )
    fetch_service = FetchService(
        FetchManager(fetch_cache, clock.time_ms),
        replicas,
        topics,
        fetch_purgatory,
        fetch_max_bytes=config.fetch_max_bytes,
        expiration_meter=DelayedFetchMetrics(registry).record_expiration,
        leader_quota=leader_quota,
        replica_selector=replica_selector(config.replica_selector_class),
        replica_racks=replica_racks,
        followed=followed,
    )
    replicas.add_partition_listener(fetch_service.on_partition_changed)
    if followed is not None:
        followed.add_listener(fetch_service.on_followed_replica_changed)
    produce_service = ProduceService(
        replicas,
        produce_purgatory,
        clock,
        expiration_meter=DelayedProduceMetrics(registry).record_expiration,
    )
    replicas.add_partition_listener(produce_service.on_partition_changed)

    def wake_delete_records(partition: Partition) -> None:
        delete_records_purgatory.check_and_complete(partition.key)

    replicas.add_partition_listener(wake_delete_records)
    register_partition_metrics(registry, replicas.partitions)
    return DataPlane(
        fetch_service,
        produce_service,
        [fetch_purgatory, produce_purgatory, delete_records_purgatory],
        delete_records_purgatory,
        purgatory_metrics,
    )


def housekeeping_tasks(
    config: BrokerConfig, replicas: ReplicaManager, log_manager: LogManager
) -> list[PeriodicTask]:
    """Kafka's scheduled tasks: ISR expiration, retention, producer expiry, flushes, checkpoints."""
    return [
        PeriodicTask(
            "isr-expiration", max(config.replica_lag_time_max_ms // 2, 1), replicas.maybe_shrink_isr
        ),
        PeriodicTask("retention", config.log_retention_check_interval_ms, replicas.run_retention),
        PeriodicTask(
            "producer-expiration", PRODUCER_EXPIRATION_CHECK_INTERVAL_MS, replicas.remove_expired_producers
        ),
        PeriodicTask("flush-dirty-logs", FLUSH_CHECK_INTERVAL_MS, log_manager.flush_dirty_logs),
        PeriodicTask(
            "high-watermark-checkpoint",
            config.replica_high_watermark_checkpoint_interval_ms,
            log_manager.checkpoint_high_watermarks,
        ),
        PeriodicTask(
            "recovery-point-checkpoint",
            config.log_flush_offset_checkpoint_interval_ms,
            log_manager.checkpoint_recovery_points,
        ),
        PeriodicTask(
            "log-start-offset-checkpoint",
            config.log_flush_start_offset_checkpoint_interval_ms,
            log_manager.checkpoint_log_start_offsets,
        ),
    ]


@dataclass
class GroupCoordination:
    """The group coordinator of a node, moved by leadership of ``__consumer_offsets``."""

    runtime: GroupCoordinatorRuntime
    purgatories: list[DelayedOperationPurgatory]
    tasks: list[PeriodicTask]


def build_group_coordination(
    config: BrokerConfig,
    clock: Clock,
    replicas: ReplicaManager,
    plane: DataPlane,
    topics: TopicLookup,
    brokers: Callable[[str], Sequence[BrokerEndpoint]],
    create_offsets_topic: OffsetsTopicCreator,
    group_configs: Callable[[str], Mapping[str, str]] | None = None,
) -> GroupCoordination:
    """The coordinator on ``__consumer_offsets`` through the produce path, told of its leadership;
    ``group_configs`` gives a group's overrides of the group configs (the metadata image's GROUP
    resources), which the consumer-group coordinator applies over the broker's settings."""
    loop = asyncio.get_running_loop()
    heartbeat = DelayedOperationPurgatory("Heartbeat", loop)
    rebalance = DelayedOperationPurgatory("Rebalance", loop)
    plane.purgatory_metrics.track(heartbeat)
    plane.purgatory_metrics.track(rebalance)
    coordinator = GroupCoordinator(
        GroupCoordinatorConfig(
            group_min_session_timeout_ms=config.group_min_session_timeout_ms,
            group_max_session_timeout_ms=config.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            group_max_size=config.group_max_size,
            offsets_retention_minutes=config.offsets_retention_minutes,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            group_coordinator_rebalance_protocols=tuple(config.group_coordinator_rebalance_protocols),
            group_consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            group_consumer_min_session_timeout_ms=config.group_consumer_min_session_timeout_ms,
            group_consumer_max_session_timeout_ms=config.group_consumer_max_session_timeout_ms,
            group_consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            group_consumer_min_heartbeat_interval_ms=config.group_consumer_min_heartbeat_interval_ms,
            group_consumer_max_heartbeat_interval_ms=config.group_consumer_max_heartbeat_interval_ms,
            group_consumer_max_size=config.group_consumer_max_size,
            group_consumer_assignors=tuple(config.group_consumer_assignors),
            group_consumer_migration_policy=config.group_consumer_migration_policy,
        ),
        OffsetsTopicGroupLog(plane.produce_service, config.offsets_commit_timeout_ms),
        clock,
        heartbeat,
        rebalance,
        topics=topics,
        group_configs=group_configs if group_configs is not None else no_group_configs,
    )
    runtime = GroupCoordinatorRuntime(coordinator, topics, brokers, create_offsets_topic)
    replicas.add_leadership_listener(runtime.on_leadership)
    expiry = PeriodicTask(
        "group-metadata-expiration", config.offsets_retention_check_interval_ms, runtime.expire_offsets
    )
    return GroupCoordination(runtime, [heartbeat, rebalance], [expiry])


def group_handlers(
    groups: GroupCoordination,
    transactions: TransactionCoordination,
    topics: TopicLookup,
    authorizer: Authorizer = ALLOW_EVERYTHING,
) -> list[Handler]:
    """The handlers of the group APIs, served by every broker (each answers for the groups whose
    ``__consumer_offsets`` partition it leads; FindCoordinator says which broker that is), checking
    the requester's ACLs with ``authorizer``."""
    coordinator = groups.runtime.coordinator

    def partition_exists(topic: str, partition: int) -> bool:
        state = topics.get(topic)
        return state is not None and partition in state.partitions

    consumer_protocol: list[Handler] = []
    if coordinator.config.consumer_protocol_enabled:
        consumer_protocol = [
            ConsumerGroupHeartbeatHandler(coordinator, authorizer),
            ConsumerGroupDescribeHandler(coordinator, authorizer),
        ]
    return [
        *consumer_protocol,
        FindCoordinatorHandler(groups.runtime, transactions.runtime, authorizer),
        JoinGroupHandler(coordinator, authorizer),
        SyncGroupHandler(coordinator, authorizer),
        HeartbeatHandler(coordinator, authorizer),
        LeaveGroupHandler(coordinator, authorizer),
        OffsetCommitHandler(coordinator, partition_exists=partition_exists, authorizer=authorizer),
        OffsetFetchHandler(coordinator, authorizer),
        ListGroupsHandler(coordinator, authorizer),
        DescribeGroupsHandler(coordinator, authorizer),
        DeleteGroupsHandler(coordinator, authorizer),
        OffsetDeleteHandler(coordinator, partition_exists=partition_exists, authorizer=authorizer),
    ]


INTER_BROKER_CONNECT_TIMEOUT_S = 10.0
INTER_BROKER_REQUEST_TIMEOUT_S = 30.0
TRANSACTION_VERSION_LEVEL = 1
"""Kafka's ``transaction.version`` feature level this broker runs at: 1, transactions v1."""
MARKER_WRITE_TIMEOUT_MS = 30_000
"""How long a marker append waits for its in-sync replicas (Kafka's request.timeout.ms default)."""


@dataclass
class TransactionCoordination:
    """The transaction coordinator of a node, its marker writer and its inter-broker connections."""

    runtime: TransactionCoordinatorRuntime
    markers: TxnMarkerWriter
    produce: ProduceService
    """The produce path, which verifies transactional writes with the coordinators."""
    pool: ConnectionPool
    tasks: list[PeriodicTask]

    async def stop(self) -> None:
        await self.runtime.stop()
        self.runtime.coordinator.shutdown()
        await self.pool.close()


class _ProducerIds:
    """The coordinator's ProducerIdSource over the broker's producer id blocks."""

    def __init__(self, generator: ProducerIdGenerator) -> None:
        self._generator = generator

    def generate_producer_id(self) -> int:
        try:
            return self._generator.generate_producer_id()
        except ProducerIdsUnavailableError as exc:
            raise ProducerIdUnavailableError(str(exc)) from exc


def build_transaction_coordination(
    config: BrokerConfig,
    clock: Clock,
    replicas: ReplicaManager,
    plane: DataPlane,
    topics: TopicLookup,
    brokers: Callable[[str], Sequence[BrokerEndpoint]],
    producer_ids: ProducerIdGenerator,
    create_topic: TopicCreator,
) -> TransactionCoordination:
    """The coordinator on ``__transaction_state``, its markers to partition leaders (local or over
    the inter-broker listener), and the produce path's verification of transactional batches."""
    loop = asyncio.get_running_loop()
    inter_broker = config.inter_broker_listener_name or "PLAINTEXT"
    pool = ConnectionPool(
        client_id=f"broker-{config.node_id}-transactions",
        connect_timeout_s=INTER_BROKER_CONNECT_TIMEOUT_S,
        request_timeout_s=INTER_BROKER_REQUEST_TIMEOUT_S,
        security=inter_broker_client_security(config).build(),
    )
    writer = TxnMarkerWriter(replicas, plane.produce_service, clock, MARKER_WRITE_TIMEOUT_MS)
    channel = TransactionMarkerChannel(config.node_id, topics, lambda: brokers(inter_broker), writer, pool)
    settings = TransactionConfig(
        transaction_max_timeout_ms=config.transaction_max_timeout_ms,
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        transaction_abort_timed_out_transaction_cleanup_interval_ms=(
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        ),
        transaction_remove_expired_transaction_cleanup_interval_ms=(
            config.transaction_remove_expired_transaction_cleanup_interval_ms
        ),
        transaction_state_log_num_partitions=config.transaction_state_log_num_partitions,
        # ApiVersions finalizes no transaction.version feature, so clients run transactions v1
        # (explicit AddPartitionsToTxn); the coordinator's own aborts follow the same rules.
        transaction_version_level=TRANSACTION_VERSION_LEVEL,
    )
    coordinator = TransactionCoordinator(
        settings,
        TransactionStateLog(plane.produce_service, MARKER_WRITE_TIMEOUT_MS),
        channel,
        _ProducerIds(producer_ids),
        clock,
        config.transaction_state_log_num_partitions,
        spawn=loop.create_task,
    )
    runtime = TransactionCoordinatorRuntime(coordinator, topics, brokers, create_topic)
    replicas.add_leadership_listener(runtime.on_leadership)

    async def lookup(transactional_id: str) -> tuple[ErrorCode, BrokerEndpoint | None]:
        return await runtime.find_transaction_coordinator(transactional_id, inter_broker)

    if config.transaction_partition_verification_enable:
        plane.produce_service.verifier = TransactionVerifier(config.node_id, coordinator, lookup, pool)
    tasks = [
        PeriodicTask(
            "transaction-abort",
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            runtime.abort_timed_out_transactions,
        ),
        PeriodicTask(
            "transactional-id-expiration",
            config.transaction_remove_expired_transaction_cleanup_interval_ms,
            runtime.expire_transactional_ids,
        ),
    ]
    return TransactionCoordination(runtime, writer, plane.produce_service, pool, tasks)


def transaction_handlers(
    transactions: TransactionCoordination,
    groups: GroupCoordination,
    topics: TopicLookup,
    replicas: ReplicaManager,
    authorizer: Authorizer = ALLOW_EVERYTHING,
) -> list[Handler]:
    """The transaction APIs: each broker answers for the transactional ids it coordinates (and
    describes and lists them), writes markers on the partitions it leads, and describes the
    producers of those partitions, checking the requester's ACLs with ``authorizer``."""
    coordinator = transactions.runtime.coordinator
    group_coordinator = groups.runtime.coordinator
    transactions.markers.listen_for_offsets_markers(group_coordinator.on_transaction_completed)

    def partition_exists(topic: str, partition: int) -> bool:
        state = topics.get(topic)
        return state is not None and partition in state.partitions

    async def verify_offsets_partition(
        transactional_id: str, producer_id: int, producer_epoch: int, index: int
    ) -> object:
        partition = replicas.get_partition(GROUP_METADATA_TOPIC, index)
        if partition is None:
            return ErrorCode.NOT_COORDINATOR
        if partition.has_ongoing_transaction(producer_id, producer_epoch):
            return None
        produce = transactions.produce
        verified = await produce.verify_transaction(
            transactional_id, producer_id, producer_epoch, [partition]
        )
        outcome = verified[partition.key]
        return outcome.code if isinstance(outcome, KafkaError) else outcome

    return [
        AddPartitionsToTxnHandler(coordinator, partition_exists, authorizer),
        AddOffsetsToTxnHandler(coordinator, group_coordinator.partition_for, authorizer),
        EndTxnHandler(coordinator, authorizer),
        TxnOffsetCommitHandler(group_coordinator, partition_exists, verify_offsets_partition, authorizer),
        WriteTxnMarkersHandler(transactions.markers, authorizer),
        DescribeTransactionsHandler(coordinator, authorizer),
        ListTransactionsHandler(coordinator, authorizer),
        DescribeProducersHandler(replicas, topics, authorizer),
    ]
