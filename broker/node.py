"""The composition root: any kipling node, built from ``process.roles`` and its listeners.

Used only by the entry point (``broker/__main__.py``); like it, this module builds and wires objects
and holds no logic of its own. There is one kind of node, as in Kafka 4 (KRaft only):

* the **controller** role (``process.roles`` has ``controller`` and this node is a voter) owns the
  ``__cluster_metadata-0`` log in one of its log dirs and serves, on its controller listener,
  BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds, the admin requests
  brokers forward, and Fetch of the metadata log;
* the **broker** role registers with the controller and heartbeats (``BrokerLifecycleManager``),
  fetches and replays the metadata log (``MetadataLoader``), leads the partitions the metadata gives
  it and hands the ones it follows to its follower processes (``ReplicaTransitions``,
  ``FollowerSupervisor``, which starts a process only once a partition is followed), sends ISR
  changes to the controller (``AlterPartitionManager``), and serves clients once its metadata has
  caught up.

A **single node** is the same code: a combined node with no ``controller.quorum.voters`` is the only
voter of its own quorum (``BrokerConfig.quorum_voters``), on its controller listener or, when none is
configured, on a loopback port of its own. On its first start it imports the topic file of kipling's
earlier single-node releases into the metadata log (:mod:`metadata.legacy_import`). Any voter
whose metadata log is still empty when it first leads writes the bootstrap metadata ``kipling storage
format`` left in its metadata log dir (SCRAM credentials, :mod:`metadata.bootstrap`) as the log's
first batch.

Start order matters: controller first (brokers register with it), then the follower supervisor,
the metadata loader and the registration; the client listeners open only once the metadata has
caught up and the controller unfenced this broker. Stop order is the reverse, beginning with a
controlled shutdown so that leadership moves before clients lose this broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from broker.assembly import (
    TransactionCoordination,
    build_data_plane,
    build_group_coordination,
    build_transaction_coordination,
    housekeeping_tasks,
)
from broker.client_security import controller_client_security
from broker.cluster.alter_partition_manager import AlterPartitionManager
from broker.cluster.controller_channel import BrokerListener, ControllerChannel
from broker.cluster.controller_locator import ControllerLocator
from broker.cluster.lifecycle import BrokerLifecycleManager
from broker.cluster.metadata_loader import MetadataLoader
from broker.cluster.producer_id_blocks import ControllerProducerIdManager
from broker.dynamic_config import DynamicBrokerConfig, DynamicConfigPublisher, reconfigure_loaded_logs, then
from broker.group_runtime import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_CONFIGS,
    GroupCoordinatorRuntime,
    internal_topic_replication_factor,
)
from broker.handler_sets import broker_handlers, controller_handlers
from broker.handlers.broker_heartbeat import HeartbeatConnections
from broker.handlers.metadata import BrokerEndpoint
from broker.handlers.registry import HandlerRegistry
from broker.log_cleaner import LogCleaner, build_log_cleaner
from broker.meta_properties import ensure_meta_properties
from broker.metrics.client_quotas import ClientQuotaMetrics
from broker.metrics.endpoint import MetricsEndpoint
from broker.metrics.raft import RaftMetrics
from broker.metrics.replication_quota import ReplicationQuotaMetrics
from broker.metrics.requests import RequestMetrics
from broker.metrics.socket_server import SocketServerMetrics
from broker.metrics.transactions import register_transaction_metrics
from broker.quorum.controller_access import ControllerAccess, InternalControllerLogin
from broker.quorum.controller_role import CommitGate, ControllerRole, RaftMetadataLog
from broker.quorum.peers import QuorumPeers
from broker.quorum.raft_manager import RaftManager
from broker.quorum.snapshots import MetadataSnapshots
from broker.quotas.connection_rate import BrokerConnectionRate, IpConnectionRates
from broker.quotas.enforcement import BrokerQuotas, ChannelThrottles
from broker.quotas.request_quota import RequestQuota
from broker.replication.followers import FollowerSupervisor
from broker.replication.followers.followed_replicas import FollowedReplicas
from broker.replication.followers.settings import follower_settings
from broker.replication.replica_manager import ReplicaManager
from broker.replication.replication_quota import FollowerQuotaPublisher, LeaderReplicationQuota
from broker.replication.transitions import ReplicaTransitions
from broker.server.connection_quotas import ConnectionQuotas, resolve_overrides
from broker.server.credentials import BrokerCredentials, ScramLookup
from broker.server.dispatcher import RequestDispatcher
from broker.server.listener import BrokerServer
from broker.server.memory_pool import MemoryPool
from broker.server.tls_reload import ListenerKeystores
from broker.startup import bound
from broker.transactions.runtime import TRANSACTION_STATE_TOPIC, transaction_state_topic_configs
from metadata.authorizer import AclCache, authorizer_enabled, authorizer_over
from metadata.bootstrap import BootstrapMetadata, read_bootstrap
from metadata.committed_image import CommittedMetadataImage
from metadata.controller.active import ActiveController
from metadata.controller.controller import ControllerConfig, QuorumController
from metadata.controller.partition_log import read_metadata_log
from metadata.image import MetadataImage
from metadata.legacy_import import (
    LegacyMetadata,
    LegacyMetadataError,
    legacy_records,
    read_legacy_metadata,
    set_aside,
)
from metadata.local_copy import LocalMetadataCopy
from metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from metadata.raft.config import RaftConfig
from metadata.raft.quorum import RaftNode
from metadata.raft.segment_log import SegmentRaftLog
from metadata.raft.store import FileQuorumStateStore
from metadata.snapshot import latest_snapshot, load_snapshot
from metadata.topics import TopicState
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from security.scram import ScramCredential, ScramMechanism
from server_common.config import BrokerConfig, to_log_config
from server_common.config.broker_config import INTERNAL_CONTROLLER_LISTENER, Listener
from server_common.config.group_config import GroupConfigBounds
from server_common.periodic import PeriodicTask
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import Clock, SystemClock
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.log_manager import LogManager

__all__ = ["Node", "build_node"]

log = structlog.get_logger("kipling.broker")

CONTROLLER_TICK_MS = 250
"""How often the controller looks for brokers whose session expired."""
STALL_MS = 1000
"""A controller tick this late means the process was stopped or its loop blocked, not merely busy:
a busy loop still reads heartbeats, so only a stall this long is discounted from broker sessions."""
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0
AUTO_CREATE_WAIT_S = 5.0
METADATA_LOG_CONFIG_OVERRIDES = {
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "compression.type": "producer",
    "max.message.bytes": str(8 * 1024 * 1024),
}
"""The metadata log is never trimmed by time or size (it is the cluster's whole history), its
batches stay as the controller wrote them whatever the broker-wide ``compression.type``, and a
batch may be 8 MiB whatever ``message.max.bytes`` says (Kafka's KRaft batch bound): 10,000 partition
records of a high replication factor are more than the 1 MiB default."""
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's SecurityProtocol ids, registered with each listener (BrokerRegistration)."""
COMMIT_WAIT_FACTOR = 2
"""A controller answer waits at most this many quorum fetch timeouts for its commit: longer than a
leader that no majority follows takes to resign (check quorum, 1.5 fetch timeouts)."""


@dataclass
class ControllerNode:
    """The controller role of this node: its seat in the quorum, its listener and its tasks."""

    raft: RaftManager
    active: ActiveController
    role: ControllerRole
    server: BrokerServer
    tick: PeriodicTask


@dataclass
class BrokerNode:
    """The broker role of this node: what serves clients and replicates partitions."""

    replicas: ReplicaManager
    channel: ControllerChannel
    metadata_channel: ControllerChannel
    supervisor: FollowerSupervisor
    loader: MetadataLoader
    lifecycle: BrokerLifecycleManager
    alter_partitions: AlterPartitionManager
    purgatories: list[DelayedOperationPurgatory]
    servers: list[BrokerServer]
    producer_ids: ControllerProducerIdManager
    groups: GroupCoordinatorRuntime
    transactions: TransactionCoordination
    tasks: list[PeriodicTask] = field(default_factory=list)
    cleaner: LogCleaner | None = None
    configure_loaded_logs: Callable[[], object] | None = None
    """Applies the dynamic configs to the logs opened before the metadata (once the local copy is in)."""

    async def start(self, config: BrokerConfig) -> None:
        await self.supervisor.start()
        self.alter_partitions.start()
        local_end = self.loader.load_local()
        if local_end > 0 and self.configure_loaded_logs is not None:
            self.configure_loaded_logs()
        self.loader.start()
        self.lifecycle.start()
        if local_end > 0:
            # a local copy: wait one session for the quorum, then serve with what it holds
            try:
                async with asyncio.timeout(config.broker_session_timeout_ms / 1000):
                    await self._join_cluster()
            except TimeoutError:
                await self.loader.publish_local()
        else:
            await self._join_cluster()
        self.producer_ids.prefetch()  # the first InitProducerId need not wait for a block
        for listener, server in zip(config.client_listeners(), self.servers, strict=True):
            await bound("listeners", [str(listener)], server.start())
        for task in self.tasks:
            task.start()
        if self.cleaner is not None:
            self.cleaner.start()

    async def _join_cluster(self) -> None:
        """Registered, caught up with the metadata log and unfenced, as Kafka's broker starts."""
        await self.lifecycle.wait_registered()
        await self.loader.wait_caught_up()
        self.lifecycle.nudge()
        await self.lifecycle.wait_unfenced()  # as Kafka's broker startup: serve once unfenced

    async def stop_serving(self) -> None:
        """Move leadership away (controlled shutdown), then stop answering clients."""
        await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)
        for task in self.tasks:
            task.stop()
        await self.groups.stop()  # before the purgatories: group timers are cancelled, not expired
        await self.transactions.stop()
        for purgatory in self.purgatories:
            purgatory.shutdown()  # answer parked fetches/produces now rather than at their deadlines
        await self.stop_listening()

    async def stop_listening(self) -> None:
        for server in self.servers:
            await server.stop()

    async def stop_background(self) -> None:
        await self.producer_ids.close()
        await self.lifecycle.stop()
        await self.loader.stop()
        await self.alter_partitions.stop()
        await self.channel.close()
        await self.metadata_channel.close()

    async def close_logs(self, log_manager: LogManager) -> None:
        if self.cleaner is not None:
            await self.cleaner.stop()  # no install may land on a closing log
        self.replicas.shutdown()
        for handover in (await self.supervisor.stop()).values():
            log_manager.external_log_closed(handover)


@dataclass
class Node:
    """A composed node, a controller, a broker or both: what to start and stop, in order."""

    config: BrokerConfig
    log_manager: LogManager
    controller: ControllerNode | None
    broker: BrokerNode | None
    metrics_endpoint: MetricsEndpoint | None

    async def start(self) -> None:
        if self.controller is not None:
            listener = self.config.controller_listener
            await bound("listeners", [str(listener)], self.controller.server.start())
            self.controller.raft.start()
            self.controller.tick.start()
        if self.metrics_endpoint is not None and self.config.metrics_listener is not None:
            host, port = self.config.metrics_listener
            await bound("metrics.listener", [f"{host}:{port}"], self.metrics_endpoint.start())
        if self.broker is not None:
            await self.broker.start(self.config)
        log.info(
            "node started",
            node_id=self.config.node_id,
            roles=self.config.process_roles,
            broker_epoch=self.broker.lifecycle.broker_epoch if self.broker else None,
            log_dirs=[str(d) for d in self.config.log_dirs],
        )

    async def abort(self) -> None:
        """Undo a start that failed or was interrupted: close what listens, then the logs."""
        if self.broker is not None:
            await self.broker.stop_listening()
        await self._stop_background()
        await self._close_logs()

    async def stop(self) -> None:
        log.info("shutting down")
        if self.broker is not None:
            await self.broker.stop_serving()
        await self._stop_background()
        await self._close_logs()
        log.info("shutdown complete")

    async def _stop_background(self) -> None:
        if self.broker is not None:
            await self.broker.stop_background()
        if self.controller is not None:
            self.controller.tick.stop()
            await self.controller.raft.stop()  # resigns first, so another voter takes over at once
            self.controller.active.deactivate()
            await self.controller.server.stop()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()

    async def _close_logs(self) -> None:
        if self.broker is not None:
            await self.broker.close_logs(self.log_manager)
        self.log_manager.shutdown()


def build_node(config: BrokerConfig) -> Node:
    """The node ``config`` describes; nothing is started (see :meth:`Node.start`)."""
    legacy = _legacy_metadata(config)  # refused before anything in the log dirs changes
    registry = CollectorRegistry()
    request_metrics = RequestMetrics(registry)  # one set for the node's broker and controller listeners
    clock = SystemClock()
    cluster_id = ensure_meta_properties(config.all_log_dirs, config.node_id, config.cluster_id)
    image = MetadataImage()
    dynamic = DynamicBrokerConfig(config, image)

    def log_config_by_name(name: str) -> LogConfig:
        if name == METADATA_TOPIC:
            return to_log_config(METADATA_LOG_CONFIG_OVERRIDES, config)
        topic = image.get(name)
        return to_log_config(topic.configs if topic else {}, dynamic.layers())

    log_manager = LogManager(
        config.all_log_dirs,
        to_log_config({}, config),
        clock,
        topic_configs=log_config_by_name,
        placement_dirs=config.log_dirs,
    )
    # A single node's internal controller listener is reachable by any local process: with an
    # authorizer, only this process may log in to it (broker/quorum/controller_access.py).
    internal_login = (
        InternalControllerLogin()
        if config.controller_listener is INTERNAL_CONTROLLER_LISTENER and authorizer_enabled(config)
        else None
    )
    try:
        controller = (
            _build_controller(
                config,
                cluster_id,
                log_manager,
                clock,
                legacy,
                registry,
                request_metrics,
                image if config.is_broker else None,
                internal_login,
            )
            if config.is_voter
            else None
        )
        broker = (
            _build_broker(
                config,
                cluster_id,
                image,
                log_manager,
                clock,
                registry,
                request_metrics,
                controller,
                internal_login,
            )
            if config.is_broker
            else None
        )
    except BaseException:
        log_manager.shutdown()  # a refused start leaves the logs closed and the log dirs clean
        raise
    endpoint = MetricsEndpoint(registry, *config.metrics_listener) if config.metrics_listener else None
    return Node(config, log_manager, controller, broker, endpoint)


def _build_broker(
    config: BrokerConfig,
    cluster_id: str,
    image: MetadataImage,
    log_manager: LogManager,
    clock: Clock,
    registry: CollectorRegistry,
    request_metrics: RequestMetrics,
    controller: ControllerNode | None,
    internal_login: InternalControllerLogin | None = None,
) -> BrokerNode:
    locator = _controller_locator(config, controller)
    hooks: dict[str, Any] = {
        "on_unreachable": lambda address, answered: locator.unreachable(address, answered=answered),
        "on_leader": locator.leader_is,
        # a paused voter accepts connections and never answers: give up on it as Raft would
        "connect_timeout_s": config.controller_quorum_request_timeout_ms / 1000,
        "security": (  # one TLS context for both
            internal_login.client_security() if internal_login else controller_client_security(config)
        ).build(),
    }
    channel = ControllerChannel(
        locator.address, client_id=f"broker-{config.node_id}-controller-channel", **hooks
    )
    # The metadata fetch long-polls (up to half a second) and a connection answers in order: on a
    # connection of its own it never holds up a heartbeat, an AlterPartition or a forwarded request
    # (Kafka too keeps the Raft fetch apart from its broker-to-controller channel).
    metadata_channel = ControllerChannel(
        locator.address,
        client_id=f"broker-{config.node_id}-metadata-fetcher",
        request_timeout_s=config.controller_quorum_request_timeout_ms / 1000,
        **hooks,
    )
    locator.on_move(channel.controller_moved)
    locator.on_move(metadata_channel.controller_moved)
    servers: list[BrokerServer] = []
    lifecycle_ref: list[BrokerLifecycleManager] = []

    def broker_epoch() -> int:
        return lifecycle_ref[0].broker_epoch if lifecycle_ref else -1

    dynamic = DynamicBrokerConfig(config, image)

    def topic_log_config(topic: TopicState) -> LogConfig:
        return dynamic.topic_log_config(topic)

    alter_partitions = AlterPartitionManager(channel, broker_id=config.node_id, broker_epoch=broker_epoch)
    replicas = ReplicaManager(
        log_manager,
        image,
        config.node_id,
        config,
        clock,
        alter_partition=alter_partitions,
        broker_eligibility=_eligibility(image),
        broker_layers=dynamic.layers,
    )
    followed = FollowedReplicas(config.node_id, replicas.partition_state, _topic_id_of(image))
    supervisor = FollowerSupervisor(
        config.node_id,
        config.num_replica_fetchers,
        follower_settings(config),
        on_offsets=log_manager.update_external_offsets,
        read_replicas=followed,
    )
    supervisor.register_collector(registry)
    transitions = ReplicaTransitions(
        replicas,
        log_manager,
        supervisor,
        node_id=config.node_id,
        inter_broker_listener=config.inter_broker_listener_name or "PLAINTEXT",
        log_config=topic_log_config,
    )
    follower_quota = FollowerQuotaPublisher(config.node_id, supervisor.update_replication_quota)
    dynamic_configs = DynamicConfigPublisher(dynamic, replicas, supervisor)
    keystores = ListenerKeystores(config.node_id)  # the TLS listeners join once they are built

    async def publish_initial(published: MetadataImage, *, delete_strays: bool = True) -> None:
        await transitions.apply_initial(published, delete_strays=delete_strays)
        # a snapshot installed over a running broker has no delta: partitions already led or
        # followed here would otherwise keep the configs they had
        await dynamic_configs.apply_image(published)
        await follower_quota.apply_image(published)
        keystores.apply_image(published)

    loader = MetadataLoader(
        metadata_channel,
        image,
        then(
            then(then(transitions.apply, dynamic_configs.apply), keystores.apply),
            follower_quota.apply,
        ),
        publish_initial,
        broker_id=config.node_id,
        observer_id=-1 if config.is_voter else config.node_id,
        local=_local_metadata_copy(config, log_manager, controller),
        publish_local_initial=functools.partial(publish_initial, delete_strays=False),
        delete_strays=transitions.delete_strays,
    )

    epoch_updates: set[asyncio.Task[None]] = set()

    def on_epoch(epoch: int) -> None:
        """Tell the follower processes the new broker epoch (held until done, its failure logged)."""
        task = asyncio.get_running_loop().create_task(supervisor.set_broker_epoch(epoch))
        epoch_updates.add(task)
        task.add_done_callback(_finished_epoch_update(epoch_updates))

    lifecycle = BrokerLifecycleManager(
        channel,
        broker_id=config.node_id,
        cluster_id=cluster_id,
        listeners=lambda: _registered_listeners(config, servers),
        rack=config.broker_rack,
        heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
        metadata_offset=lambda: loader.next_offset - 1,
        on_epoch=on_epoch,
    )
    lifecycle_ref.append(lifecycle)
    locator.on_new_leader(lifecycle.nudge)  # heartbeat a new controller at once, well within its grace
    leader_quota = LeaderReplicationQuota(image, config.node_id, clock.time_ms)
    ReplicationQuotaMetrics(registry, leader_quota.rate)
    plane = build_data_plane(
        config,
        registry,
        clock,
        replicas,
        image,
        leader_quota=leader_quota,
        replica_racks=_replica_racks(image),
        followed=followed,
    )
    register_transaction_metrics(
        registry, replicas.partitions, clock.time_ms, config.transaction_max_timeout_ms
    )
    producer_ids = ControllerProducerIdManager(
        lambda: channel.allocate_producer_ids(broker_id=config.node_id, broker_epoch=broker_epoch())
    )
    brokers = _live_brokers(image)
    groups = build_group_coordination(
        config,
        clock,
        replicas,
        plane,
        image,
        brokers,
        _offsets_topic_creator(channel, loader, config),
        group_configs=image.group_configs,
    )
    transactions = build_transaction_coordination(
        config,
        clock,
        replicas,
        plane,
        image,
        brokers,
        producer_ids,
        _transaction_state_topic_creator(channel, loader, config),
    )
    quota_metrics = ClientQuotaMetrics(registry)
    client_quotas = BrokerQuotas(
        image.client_quota,
        any_quota=image.has_client_quotas,
        samples=config.quota_window_num,
        window_s=config.quota_window_size_seconds,
        on_throttle=quota_metrics.record,
        on_request_time=quota_metrics.record_request_time,
    )
    handler_registry = broker_handlers(
        config,
        cluster_id=cluster_id,
        image=image,
        channel=channel,
        loader=loader,
        plane=plane,
        replicas=replicas,
        producer_ids=producer_ids,
        groups=groups,
        transactions=transactions,
        brokers=brokers,
        controller_id=lambda: _any_live_broker(image, config.node_id),
        auto_create=_auto_creator(channel, loader),
        client_listener=_client_listener(config).name,
        quotas=client_quotas,
    )
    client_servers = _client_servers(
        config,
        handler_registry,
        request_metrics,
        registry,
        client_quotas.throttles,
        RequestQuota(client_quotas),
        IpConnectionRates(
            image.client_quota,
            any_quota=image.has_client_quotas,
            samples=config.quota_window_num,
            window_s=config.quota_window_size_seconds,
        ),
        BrokerCredentials(config.listener_security, image.scram_credential),
    )
    servers.extend(client_servers)
    for server in client_servers:
        security = config.listener_security.get(server.listener)
        if server.tls_context is not None and security is not None and security.ssl is not None:
            keystores.add(server.listener, security.ssl, server.tls_context)
    keystores.apply_image(image)  # dynamic keystores already in the local metadata copy
    tasks = [*housekeeping_tasks(config, replicas, log_manager), *groups.tasks, *transactions.tasks]
    return BrokerNode(
        replicas,
        channel,
        metadata_channel,
        supervisor,
        loader,
        lifecycle,
        alter_partitions,
        [*plane.purgatories, *groups.purgatories],
        servers,
        producer_ids,
        groups.runtime,
        transactions,
        tasks,
        build_log_cleaner(config, replicas, clock, registry, follower_stats=supervisor.cleaner_stats),
        lambda: reconfigure_loaded_logs(log_manager.all_logs(), dynamic, image),
    )


# -- controller ------------------------------------------------------------------------------------


def _controller_image(
    partition_log: PartitionLog, broker_image: MetadataImage | None
) -> Callable[[], MetadataImage]:
    """The image the controller listener checks logins and ACLs against: the committed metadata.

    A node that is also a broker has it already (``broker_image``, replayed from the committed
    batches its loader fetches). A controller-only node replays its own voter's committed log,
    active and standby alike: Kafka's controllers all feed their authorizer and SCRAM credentials
    from the committed log (its MetadataLoader), so a standby serves the same logins and ACLs as the
    active one, and the active one never authorizes with a record the quorum may still lose (its
    QuorumController's image holds records before they commit). One source for both also keeps a
    leadership change from switching what the listener sees.
    """
    if broker_image is not None:
        return lambda: broker_image
    committed = CommittedMetadataImage(LocalMetadataCopy(partition_log, writable=False))
    committed.current()  # replays the log there is now, rather than in the first login
    return committed.current


def _controller_scram(image: Callable[[], MetadataImage]) -> ScramLookup:
    def lookup(mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return image().scram_credential(mechanism, user)

    return lookup


def _controller_acls(image: Callable[[], MetadataImage]) -> Callable[[], AclCache]:
    return lambda: image().acls


def _build_controller(
    config: BrokerConfig,
    cluster_id: str,
    log_manager: LogManager,
    clock: Clock,
    legacy: LegacyMetadata | None,
    registry: CollectorRegistry,
    request_metrics: RequestMetrics,
    broker_image: MetadataImage | None = None,
    internal_login: InternalControllerLogin | None = None,
) -> ControllerNode:
    """The controller role. Its listener's SCRAM logins and ACLs are read from the committed
    metadata: ``broker_image`` on a node that is also a broker, else this voter's own committed log,
    replayed when read, on a standby controller as on the active one (:func:`_controller_image`).
    ``internal_login`` secures a single node's internal listener."""
    metadata_config = to_log_config(METADATA_LOG_CONFIG_OVERRIDES, config)
    partition_log = log_manager.get_or_create_log(
        METADATA_TOPIC, METADATA_PARTITION, METADATA_TOPIC_ID, metadata_config, config.metadata_log_dir
    )
    raft_log = SegmentRaftLog(partition_log, clock)
    voter_ids = frozenset(voter.node_id for voter in config.quorum_voters)
    settings = dataclasses.replace(
        RaftConfig.from_broker_config(config), empty_fetch_backoff_ms=0
    )  # the leader long-polls
    node = RaftNode(
        config.node_id,
        voter_ids,
        raft_log,
        FileQuorumStateStore(partition_log.directory, voter_ids),
        clock,
        random.Random(),
        settings,
    )
    listener = config.controller_listener
    assert listener is not None  # a voter has the controller role
    server_ref: list[BrokerServer] = []
    voter_address = _voter_address(config, server_ref)
    peers = QuorumPeers(
        config.node_id,
        sorted(voter_ids),
        voter_address,
        cluster_id=cluster_id,
        fetch_max_wait_ms=settings.fetch_max_wait_ms,
        request_timeout_ms=settings.request_timeout_ms,
        leader_endpoints=lambda: [(listener.name, *voter_address(config.node_id))],
        security=controller_client_security(config).build(),
    )
    snapshots = MetadataSnapshots(raft_log, clock, config.metadata_log_max_record_bytes_between_snapshots)
    raft = RaftManager(node, raft_log, peers, clock, RaftMetrics(registry), snapshots)
    active = ActiveController(config.node_id)
    controller_config = ControllerConfig(
        broker_session_timeout_ms=config.broker_session_timeout_ms,
        default_num_partitions=config.num_partitions,
        default_replication_factor=config.default_replication_factor,
        unclean_leader_election_enable=config.unclean_leader_election_enable,
        node_id=config.node_id,
        group_config_bounds=GroupConfigBounds.of(config),
        lost_connection_grace_ms=config.broker_heartbeat_interval_ms,
        # a broker may first try a dead or paused voter for one request timeout before it finds us
        takeover_grace_ms=max(
            config.broker_heartbeat_interval_ms, config.controller_quorum_request_timeout_ms
        ),
    )
    pending = _legacy_import_pending(config, partition_log, legacy)
    pending_import = [pending] if pending is not None else []
    bootstrap = read_bootstrap(config.metadata_log_dir)  # a damaged file stops the start here

    def build(epoch: int) -> QuorumController:
        """The controller of leader epoch ``epoch``, from the committed log (all of it, now): its
        newest snapshot, then the batches after it."""
        snapshot = latest_snapshot(partition_log.directory)
        start = 0 if snapshot is None else snapshot.end_offset
        records = [
            (offset, batch.epoch, record)
            for batch in read_metadata_log(partition_log, start)
            for offset, record in batch.records
            if offset >= start
        ]
        controller = QuorumController(
            RaftMetadataLog(raft),
            clock,
            epoch,
            cluster_id,
            controller_config,
            records,
            log_end_offset=partition_log.log_end_offset,
            image=None if snapshot is None else load_snapshot(partition_log.directory, snapshot),
        )
        if bootstrap is not None and bootstrap.records and snapshot is None and not records:
            _import_bootstrap_metadata(controller, bootstrap)  # the log is empty: a new cluster
        if pending_import:
            _import_legacy_metadata(config, controller, pending_import.pop())
        return controller

    role = ControllerRole(raft, active, build)
    heartbeat_connections = HeartbeatConnections(active)
    handlers = controller_handlers(config, active, raft, cluster_id, clock, heartbeat_connections)
    gate = CommitGate(raft, active, COMMIT_WAIT_FACTOR * settings.fetch_timeout_ms / 1000)
    listener_image = _controller_image(partition_log, broker_image)
    access = ControllerAccess(
        authorizer_over(
            config,
            _controller_acls(listener_image),
            frozenset({internal_login.principal}) if internal_login else frozenset(),
        )
    )
    security = (
        internal_login.listener_security(listener.name)
        if internal_login
        else config.listener_security.get(listener.name)
    )
    server = BrokerServer(
        RequestDispatcher(handlers, request_metrics, listener.name, gate=gate, access=access.allowed),
        [(listener.host, listener.port)],
        request_metrics,
        max_frame_size=config.socket_request_max_bytes,
        idle_timeout_ms=config.connections_max_idle_ms,
        on_connection_closed=heartbeat_connections.closed,
        receive_timeout_ms=config.kipling_request_receive_timeout_ms,
        pool=MemoryPool.of(config.queued_max_request_bytes),
        listener=listener.name,
        security=security,
        credentials=BrokerCredentials(
            {listener.name: security} if security else {}, _controller_scram(listener_image)
        ),
        authentication_timeout_ms=config.kipling_authentication_timeout_ms,
        failed_authentication_delay_ms=config.connection_failed_authentication_delay_ms,
    )
    server_ref.append(server)

    def tick() -> None:
        if active.current is not None:
            active.current.tick()

    def forgive_stall(stalled_ms: int) -> None:
        if active.current is not None:
            active.current.forgive_stall(stalled_ms)

    tick_task = PeriodicTask(
        "controller-tick",
        min(CONTROLLER_TICK_MS, config.broker_session_timeout_ms // 4 or 1),
        tick,
        on_late=forgive_stall,  # a paused controller fences nobody for the pause
        late_after_ms=STALL_MS,
    )
    log.info("controller ready", voters=sorted(voter_ids), metadata_log_end=raft_log.end_offset)
    return ControllerNode(raft, active, role, server, tick_task)


def _voter_address(
    config: BrokerConfig, own_server: Sequence[BrokerServer]
) -> Callable[[int], tuple[str, int]]:
    """A voter's controller listener address; this node's own is its bound one (its port may be 0)."""
    voters = {voter.node_id: voter for voter in config.quorum_voters}

    def address(voter_id: int) -> tuple[str, int]:
        voter = voters[voter_id]
        if voter_id == config.node_id and own_server and own_server[0].bound:
            host, port = own_server[0].bound[0]
            return (voter.host or host, port)
        return voter.host, voter.port

    return address


def _legacy_metadata(config: BrokerConfig) -> LegacyMetadata | None:
    """The topics an earlier single-node release left in the first log dir, for a single node to
    import; any other node with such files is refused, since its broker would delete those
    topics' logs as strays. Raises LegacyMetadataError (one line, naming the file)."""
    found = [
        (log_dir, legacy)
        for log_dir in config.log_dirs
        if (legacy := read_legacy_metadata(log_dir, config.node_id)) is not None
    ]
    if not found:
        return None
    log_dir, legacy = found[0]
    if log_dir != config.log_dirs[0]:
        raise LegacyMetadataError(
            f"{legacy.files[0]} of an earlier single-node release is not in the first of log.dirs: "
            f"list {log_dir} first to import it"
        )
    if not (config.is_voter and config.is_broker):
        raise LegacyMetadataError(
            f"{legacy.files[0]} holds topics of an earlier single-node release: start this log dir "
            "once as a single node (no controller.quorum.voters) to import them into its metadata log"
        )
    return legacy


def _legacy_import_pending(
    config: BrokerConfig, partition_log: PartitionLog, legacy: LegacyMetadata | None
) -> LegacyMetadata | None:
    """What an earlier single-node release left that the controller must import when first active.

    Decided before the node starts, so that a refusal leaves the log dirs untouched. A metadata
    log that already holds every legacy topic was imported by a start that stopped before it
    renamed the files: they are only renamed now. Any other metadata log with legacy files beside
    it is refused: its stray-log rules would delete the legacy topics' data.
    """
    if legacy is None:
        return None
    image = MetadataImage()
    for batch in read_metadata_log(partition_log):
        image.apply_batch(batch.records, batch.epoch)
    if not image.all() and not image.broker_ids():
        return legacy  # a new metadata log: import it once this node leads
    if any(image.get_by_id(topic.topic_id) is None for topic in legacy.topics):
        raise LegacyMetadataError(
            f"{legacy.files[0]} holds topics of an earlier single-node release that the metadata log "
            "does not: move the file aside to start without them"
        )
    _set_legacy_aside(legacy)
    return None


def _import_legacy_metadata(
    config: BrokerConfig, controller: QuorumController, legacy: LegacyMetadata
) -> None:
    """Import an earlier single-node release's topics as the first batch of a new metadata log."""
    controller.import_records(legacy_records(legacy, config.node_id))
    _set_legacy_aside(legacy)


def _set_legacy_aside(legacy: LegacyMetadata) -> None:
    moved = set_aside(legacy)
    log.info(
        "imported the topics of an earlier single-node release into the metadata log",
        topics=len(legacy.topics),
        next_producer_id=legacy.next_producer_id,
        set_aside=[str(path) for path in moved],
    )


def _import_bootstrap_metadata(controller: QuorumController, bootstrap: BootstrapMetadata) -> None:
    """Write what ``kipling storage format`` left as the first batch of a new metadata log. The file
    is kept, as Kafka keeps bootstrap.checkpoint: it is read only while the log is empty."""
    controller.import_records(bootstrap.records)
    log.info(
        "wrote the bootstrap metadata into the new metadata log",
        file=str(bootstrap.path),
        records=len(bootstrap.records),
    )


def _finished_epoch_update(pending: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
    def finished(task: asyncio.Task[None]) -> None:
        pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "could not send the broker epoch to the follower processes", error=repr(task.exception())
            )

    return finished


def _local_metadata_copy(
    config: BrokerConfig, log_manager: LogManager, controller: ControllerNode | None
) -> LocalMetadataCopy:
    """The broker's local copy of the committed metadata log: its voter's log, or one of its own."""
    if controller is not None:
        return LocalMetadataCopy(controller.raft.log.partition_log, writable=False)
    metadata_config = to_log_config(METADATA_LOG_CONFIG_OVERRIDES, config)
    log_ = log_manager.get_or_create_log(
        METADATA_TOPIC, METADATA_PARTITION, METADATA_TOPIC_ID, metadata_config, config.metadata_log_dir
    )
    return LocalMetadataCopy(log_, writable=True)


def _controller_locator(config: BrokerConfig, controller: ControllerNode | None) -> ControllerLocator:
    """Finds the active controller among the voters; this node's own voter at its bound address.

    A broker given only ``controller.quorum.bootstrap.servers`` knows addresses but not ids: it
    tries them in turn (the leader hints name ids it cannot place, so they are ignored).
    """
    forget_after_s = 2 * config.controller_quorum_request_timeout_ms / 1000
    if not config.quorum_voters:
        servers = config.controller_quorum_bootstrap_servers
        return ControllerLocator(
            [-1 - i for i in range(len(servers))],
            lambda pseudo_id: servers[-1 - pseudo_id],
            forget_after_s=forget_after_s,
        )
    own = [controller.server] if controller is not None else []
    voter_ids = [voter.node_id for voter in config.quorum_voters]
    return ControllerLocator(voter_ids, _voter_address(config, own), forget_after_s=forget_after_s)


def _client_servers(
    config: BrokerConfig,
    handlers: HandlerRegistry,
    request_metrics: RequestMetrics,
    registry: CollectorRegistry,
    throttles: ChannelThrottles | None = None,
    request_quota: RequestQuota | None = None,
    ip_rates: IpConnectionRates | None = None,
    credentials: BrokerCredentials | None = None,
) -> list[BrokerServer]:
    """One server per client listener, all sharing the broker's request memory pool and
    connection quotas (per broker, as in Kafka)."""
    pool = MemoryPool.of(config.queued_max_request_bytes)
    SocketServerMetrics(registry, pool)
    listeners = config.client_listeners()
    quotas = ConnectionQuotas(
        max_connections=config.max_connections,
        max_connections_per_ip=config.max_connections_per_ip,
        per_ip_overrides=resolve_overrides(config.max_connections_per_ip_overrides),
        listeners=[listener.name for listener in listeners],
        inter_broker_listener=config.inter_broker_listener_name,
        ip_rates=ip_rates,
        broker_rate=_broker_connection_rate(config),
    )
    return [
        BrokerServer(
            RequestDispatcher(
                handlers, request_metrics, listener.name, throttles=throttles, request_quota=request_quota
            ),
            [(listener.host, listener.port)],
            request_metrics,
            max_frame_size=config.socket_request_max_bytes,
            idle_timeout_ms=config.connections_max_idle_ms,
            receive_timeout_ms=config.kipling_request_receive_timeout_ms,
            pool=pool,
            quotas=quotas,
            listener=listener.name,
            security=config.listener_security.get(listener.name),
            credentials=credentials,
            authentication_timeout_ms=config.kipling_authentication_timeout_ms,
            failed_authentication_delay_ms=config.connection_failed_authentication_delay_ms,
        )
        for listener in listeners
    ]


def _broker_connection_rate(config: BrokerConfig) -> BrokerConnectionRate | None:
    """``max.connection.creation.rate``, or None at its default (no limit: nothing recorded)."""
    if config.max_connection_creation_rate >= 2**31 - 1:
        return None
    return BrokerConnectionRate(
        config.max_connection_creation_rate,
        samples=config.quota_window_num,
        window_s=config.quota_window_size_seconds,
    )


def _client_listener(config: BrokerConfig) -> Listener:
    return next(li for li in config.advertised_listeners if li.name not in config.controller_listener_names)


def _registered_listeners(config: BrokerConfig, servers: Sequence[BrokerServer]) -> list[BrokerListener]:
    """The advertised listeners, with the bound port where the configured one was 0."""
    bound = {
        li.name: server.bound[0][1]
        for li, server in zip(config.client_listeners(), servers, strict=False)
        if server.bound
    }
    return [
        BrokerListener(
            li.name,
            li.host,
            li.port or bound.get(li.name, 0),
            SECURITY_PROTOCOL_IDS[config.listener_security_protocol_map[li.name]],
        )
        for li in config.advertised_listeners
        if li.name not in config.controller_listener_names
    ]


def _live_brokers(image: MetadataImage) -> Callable[[str], list[BrokerEndpoint]]:
    def brokers(listener: str) -> list[BrokerEndpoint]:
        endpoints = []
        for registration in image.brokers():
            if registration.fenced:
                continue
            for endpoint in registration.endpoints:
                if endpoint.name == listener:
                    endpoints.append(
                        BrokerEndpoint(
                            registration.broker_id, endpoint.host, endpoint.port, registration.rack
                        )
                    )
        return endpoints

    return brokers


def _topic_id_of(image: MetadataImage) -> Callable[[str], uuid.UUID | None]:
    def topic_id(name: str) -> uuid.UUID | None:
        topic = image.get(name)
        return None if topic is None else topic.topic_id

    return topic_id


def _replica_racks(image: MetadataImage) -> Callable[[str], dict[int, str | None]]:
    """Broker id -> rack of the registered, unfenced brokers with an endpoint on a listener: where a
    preferred read replica may be (Kafka's ``getPartitionReplicaEndpoints``)."""

    def racks(listener: str) -> dict[int, str | None]:
        return {
            registration.broker_id: registration.rack
            for registration in image.brokers()
            if not registration.fenced and any(e.name == listener for e in registration.endpoints)
        }

    return racks


def _any_live_broker(image: MetadataImage, fallback: int) -> int:
    """KRaft reports a random live broker as "controller": clients cannot reach the real one."""
    live = image.live_broker_ids()
    return live[0] if live else fallback


def _eligibility(image: MetadataImage) -> Callable[[int, int], bool]:
    """KIP-903: a replica may join the ISR only while registered, unfenced, with a current epoch."""

    def eligible(replica_id: int, broker_epoch: int) -> bool:
        registration = image.broker(replica_id)
        if registration is None or registration.fenced:
            return False
        return broker_epoch in (-1, registration.broker_epoch)

    return eligible


def _offsets_topic_creator(
    channel: ControllerChannel, loader: MetadataLoader, config: BrokerConfig
) -> Callable[[], Any]:
    """``__consumer_offsets`` with offsets.topic.num.partitions, .replication.factor and
    .segment.bytes, compacted."""
    create = _topic_creator(
        channel,
        loader,
        config.offsets_topic_num_partitions,
        internal_topic_replication_factor(
            OFFSETS_TOPIC, config.offsets_topic_replication_factor, not config.controller_quorum_voters
        ),
        {**OFFSETS_TOPIC_CONFIGS, "segment.bytes": str(config.offsets_topic_segment_bytes)},
    )

    async def create_offsets_topic() -> None:
        await create(OFFSETS_TOPIC)

    return create_offsets_topic


def _transaction_state_topic_creator(
    channel: ControllerChannel, loader: MetadataLoader, config: BrokerConfig
) -> Callable[[], Any]:
    """``__transaction_state`` with transaction.state.log.* (one replica on a single node, as for
    ``__consumer_offsets``)."""
    create = _topic_creator(
        channel,
        loader,
        config.transaction_state_log_num_partitions,
        internal_topic_replication_factor(
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_replication_factor,
            not config.controller_quorum_voters,
        ),
        transaction_state_topic_configs(
            config.transaction_state_log_min_isr, config.transaction_state_log_segment_bytes
        ),
    )

    async def create_transaction_state_topic() -> None:
        await create(TRANSACTION_STATE_TOPIC)

    return create_transaction_state_topic


def _auto_creator(channel: ControllerChannel, loader: MetadataLoader) -> Callable[[str], Any]:
    """Metadata's auto-creation in a cluster: a CreateTopics to the controller with the defaults."""
    return _topic_creator(channel, loader, -1, -1, {})


def _topic_creator(
    channel: ControllerChannel,
    loader: MetadataLoader,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
) -> Callable[[str], Any]:
    async def create(name: str) -> TopicState:
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": num_partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": key, "value": value} for key, value in configs.items()],
                }
            ],
            "timeout_ms": int(AUTO_CREATE_WAIT_S * 1000),
            "validate_only": False,
        }
        try:
            _, response = await channel.request(ApiKey.CREATE_TOPICS, body, wanted_max=7)
        except Exception as exc:
            raise KafkaError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"auto-creation of {name} pending: {exc}"
            ) from None
        code = ErrorCode(response.topics[0].error_code) if response.topics else ErrorCode.UNKNOWN_SERVER_ERROR
        if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise KafkaError(code, response.topics[0].error_message)
        await loader.wait_for(lambda image: image.get(name) is not None, AUTO_CREATE_WAIT_S)
        topic = loader.image.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE)
        return topic

    return create
