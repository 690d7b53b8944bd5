"""The data plane and the group coordination of a broker, as the composition root wires them.

Every broker serves clients with this data plane (fetch sessions, long-poll and delayed-produce
purgatories, the fetch and produce services, their metrics), runs this housekeeping, and moves its
group coordinator with leadership of ``__consumer_offsets``; :mod:`broker.node` calls these builders.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from broker.fetch.service import FetchService
from broker.fetch_session.cache import FetchSessionCache
from broker.fetch_session.context import FetchManager
from broker.fetch_session.metrics import FetchSessionCacheMetrics
from broker.group_runtime import GroupCoordinatorRuntime, OffsetsTopicCreator, OffsetsTopicGroupLog
from broker.handlers.base import Handler
from broker.handlers.delete_groups import DeleteGroupsHandler
from broker.handlers.describe_groups import DescribeGroupsHandler
from broker.handlers.find_coordinator import FindCoordinatorHandler
from broker.handlers.heartbeat import HeartbeatHandler
from broker.handlers.join_group import JoinGroupHandler
from broker.handlers.leave_group import LeaveGroupHandler
from broker.handlers.list_groups import ListGroupsHandler
from broker.handlers.metadata import BrokerEndpoint
from broker.handlers.offset_commit import OffsetCommitHandler
from broker.handlers.offset_fetch import OffsetFetchHandler
from broker.handlers.sync_group import SyncGroupHandler
from broker.metrics.purgatory import DelayedFetchMetrics, DelayedProduceMetrics, PurgatoryMetrics
from broker.produce.service import ProduceService
from broker.replication.partition_metrics import register_partition_metrics
from broker.replication.replica_manager import ReplicaManager
from coordinator.group import GroupCoordinator, GroupCoordinatorConfig
from metadata.topics import TopicLookup
from server_common.config import BrokerConfig
from server_common.periodic import PeriodicTask
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import Clock
from storage.log_manager import LogManager
from storage.producer_state import PRODUCER_EXPIRATION_CHECK_INTERVAL_MS

__all__ = [
    "DataPlane",
    "GroupCoordination",
    "build_data_plane",
    "build_group_coordination",
    "group_handlers",
    "housekeeping_tasks",
]

FLUSH_CHECK_INTERVAL_MS = 1_000
"""How often logs with a time-based flush policy (flush.ms) are checked for an overdue fsync."""


@dataclass
class DataPlane:
    fetch_service: FetchService
    produce_service: ProduceService
    purgatories: list[DelayedOperationPurgatory]
    purgatory_metrics: PurgatoryMetrics


def build_data_plane(
    config: BrokerConfig,
    registry: CollectorRegistry,
    clock: Clock,
    replicas: ReplicaManager,
    topics: TopicLookup,
) -> DataPlane:
    """Fetch and produce services over ``replicas``, woken by every partition change."""
    loop = asyncio.get_running_loop()
    purgatory_metrics = PurgatoryMetrics(registry)
    fetch_purgatory = DelayedOperationPurgatory("Fetch", loop)
    produce_purgatory = DelayedOperationPurgatory("Produce", loop)
    purgatory_metrics.track(fetch_purgatory)
    purgatory_metrics.track(produce_purgatory)
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
    )
    replicas.add_partition_listener(fetch_service.on_partition_changed)
    produce_service = ProduceService(
        replicas,
        produce_purgatory,
        clock,
        expiration_meter=DelayedProduceMetrics(registry).record_expiration,
    )
    replicas.add_partition_listener(produce_service.on_partition_changed)
    register_partition_metrics(registry, replicas.partitions)
    return DataPlane(fetch_service, produce_service, [fetch_purgatory, produce_purgatory], purgatory_metrics)


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
) -> GroupCoordination:
    """The coordinator on ``__consumer_offsets`` through the produce path, told of its leadership."""
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
        ),
        OffsetsTopicGroupLog(plane.produce_service, config.offsets_commit_timeout_ms),
        clock,
        heartbeat,
        rebalance,
    )
    runtime = GroupCoordinatorRuntime(coordinator, topics, brokers, create_offsets_topic)
    replicas.add_leadership_listener(runtime.on_leadership)
    expiry = PeriodicTask(
        "group-metadata-expiration", config.offsets_retention_check_interval_ms, runtime.expire_offsets
    )
    return GroupCoordination(runtime, [heartbeat, rebalance], [expiry])


def group_handlers(groups: GroupCoordination, topics: TopicLookup) -> list[Handler]:
    """The handlers of the group APIs, served by every broker (each answers for the groups whose
    ``__consumer_offsets`` partition it leads; FindCoordinator says which broker that is)."""
    coordinator = groups.runtime.coordinator

    def partition_exists(topic: str, partition: int) -> bool:
        state = topics.get(topic)
        return state is not None and partition in state.partitions

    return [
        FindCoordinatorHandler(groups.runtime),
        JoinGroupHandler(coordinator),
        SyncGroupHandler(coordinator),
        HeartbeatHandler(coordinator),
        LeaveGroupHandler(coordinator),
        OffsetCommitHandler(coordinator, partition_exists=partition_exists),
        OffsetFetchHandler(coordinator),
        ListGroupsHandler(coordinator),
        DescribeGroupsHandler(coordinator),
        DeleteGroupsHandler(coordinator),
    ]
