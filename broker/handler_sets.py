"""The APIs each listener of a node serves, declared once.

A node has at most two kinds of listener: the **controller** listener (brokers register, heartbeat,
send ISR changes, take producer id blocks, forward admin requests and fetch the metadata log) and
the **client** listeners of the broker role (every API a Kafka client or another broker sends).
ApiVersions on each answers exactly the APIs registered there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from broker.assembly import (
    DataPlane,
    GroupCoordination,
    TransactionCoordination,
    group_handlers,
    transaction_handlers,
)
from broker.cluster.controller_channel import ControllerChannel
from broker.cluster.metadata_loader import MetadataLoader
from broker.cluster.producer_id_blocks import ControllerProducerIdManager
from broker.handlers.acls import (
    AuthorizedAclForwarding,
    CreateAclsHandler,
    DeleteAclsHandler,
    DescribeAclsHandler,
    created_acls_shown,
    deleted_acls_gone,
)
from broker.handlers.allocate_producer_ids import AllocateProducerIdsHandler
from broker.handlers.alter_configs import AlterConfigsHandler
from broker.handlers.alter_partition import AlterPartitionHandler
from broker.handlers.api_versions import ApiVersionsHandler
from broker.handlers.authorized_forwarding import AuthorizedForwarding
from broker.handlers.base import Handler
from broker.handlers.broker_heartbeat import BrokerHeartbeatHandler, HeartbeatConnections
from broker.handlers.broker_registration import BrokerRegistrationHandler
from broker.handlers.client_quotas import AlterClientQuotasHandler, DescribeClientQuotasHandler
from broker.handlers.create_partitions import CreatePartitionsHandler
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.delete_records import DeleteRecordsHandler
from broker.handlers.delete_topics import DeleteTopicsHandler
from broker.handlers.describe_cluster import ClusterNode, DescribeClusterHandler, EndpointType
from broker.handlers.describe_configs import DescribeConfigsHandler
from broker.handlers.describe_log_dirs import DescribeLogDirsHandler
from broker.handlers.describe_topic_partitions import DescribeTopicPartitionsHandler
from broker.handlers.elect_leaders import ElectLeadersHandler
from broker.handlers.fetch import FetchHandler
from broker.handlers.forwarding import ForwardedApi, ForwardingHandler, effect_of
from broker.handlers.incremental_alter_configs import (
    ForwardedAlterConfigsHandler,
    IncrementalAlterConfigsHandler,
)
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_offsets import ListOffsetsHandler
from broker.handlers.metadata import BrokerEndpoint, MetadataHandler, TopicCreator
from broker.handlers.metadata_fetch import MetadataFetchHandler
from broker.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from broker.handlers.partition_reassignments import (
    AlterPartitionReassignmentsHandler,
    ListPartitionReassignmentsHandler,
)
from broker.handlers.produce import ProduceHandler
from broker.handlers.quorum import (
    BeginQuorumEpochHandler,
    DescribeQuorumHandler,
    EndQuorumEpochHandler,
    FetchSnapshotHandler,
    ForwardedDescribeQuorumHandler,
    VoteHandler,
)
from broker.handlers.registry import HandlerRegistry
from broker.handlers.sasl import SaslAuthenticateHandler, SaslHandshakeHandler
from broker.handlers.user_scram_credentials import (
    AlterUserScramCredentialsHandler,
    DescribeUserScramCredentialsHandler,
)
from broker.quorum.raft_manager import RaftManager
from broker.quotas.controller_mutation import PartitionMutationQuotas
from broker.quotas.enforcement import BrokerQuotas
from broker.replication.replica_manager import ReplicaManager
from metadata.authorizer import Authorizer, authorizer_enabled, build_authorizer
from metadata.controller.active import ActiveController
from metadata.controller.admin import ControllerTopicAdmin
from metadata.image import MetadataImage
from server_common.config import BrokerConfig
from storage.clock import Clock

__all__ = ["broker_handlers", "controller_handlers", "registry_of"]

FORWARDED_APIS: tuple[ForwardedApi, ...] = (
    CreateTopicsHandler,
    DeleteTopicsHandler,
    CreatePartitionsHandler,
    ElectLeadersHandler,
    AlterClientQuotasHandler,
    AlterUserScramCredentialsHandler,
)
"""Admin APIs only the controller may carry out: a broker forwards them (KIP-590)."""
REASSIGNMENT_APIS: tuple[ForwardedApi, ...] = (
    AlterPartitionReassignmentsHandler,
    ListPartitionReassignmentsHandler,
)
"""Partition reassignment (KIP-455): forwarded like the admin APIs above."""


def registry_of(handlers: Iterable[Handler], config: BrokerConfig) -> HandlerRegistry:
    """``handlers``, the SASL exchange (answered ILLEGAL_SASL_STATE on listeners without SASL, as
    Kafka does), and ApiVersions, which advertises exactly them."""
    registry = HandlerRegistry([])
    registry.register(ApiVersionsHandler(registry.api_ranges))
    registry.register(SaslHandshakeHandler())
    registry.register(SaslAuthenticateHandler())
    for handler in handlers:
        registry.register(handler)
    return registry


def controller_handlers(
    config: BrokerConfig,
    active: ActiveController,
    raft: RaftManager,
    cluster_id: str,
    clock: Clock,
    heartbeat_connections: HeartbeatConnections,
) -> HandlerRegistry:
    """The controller listener's APIs: the quorum's own, and the active controller's."""
    admin = ControllerTopicAdmin(active)
    return registry_of(
        [
            MetadataFetchHandler(raft, cluster_id),
            VoteHandler(raft, cluster_id),
            BeginQuorumEpochHandler(raft, cluster_id),
            EndQuorumEpochHandler(raft, cluster_id),
            DescribeQuorumHandler(raft, clock, _voter_endpoints(config)),
            FetchSnapshotHandler(raft, cluster_id),
            BrokerRegistrationHandler(active),
            BrokerHeartbeatHandler(active, heartbeat_connections),
            AlterPartitionHandler(active),
            AllocateProducerIdsHandler(active),
            AlterPartitionReassignmentsHandler(active),
            ListPartitionReassignmentsHandler(active),
            CreateTopicsHandler(admin, config),
            DeleteTopicsHandler(admin, config.delete_topic_enable),
            CreatePartitionsHandler(admin),
            ElectLeadersHandler(active),
            AlterClientQuotasHandler(active),
            AlterUserScramCredentialsHandler(active),
            CreateAclsHandler(active, authorizer_enabled(config)),
            DeleteAclsHandler(active, authorizer_enabled(config)),
            DescribeClusterHandler(
                EndpointType.CONTROLLER,
                cluster_id,
                lambda listener: _voter_nodes(config),
                lambda: raft.leader_id if raft.leader_id is not None else -1,
            ),
            IncrementalAlterConfigsHandler(active),
            AlterConfigsHandler(active),
        ],
        config,
    )


def broker_handlers(
    config: BrokerConfig,
    *,
    cluster_id: str,
    image: MetadataImage,
    channel: ControllerChannel,
    loader: MetadataLoader,
    plane: DataPlane,
    replicas: ReplicaManager,
    producer_ids: ControllerProducerIdManager,
    groups: GroupCoordination,
    transactions: TransactionCoordination,
    brokers: Callable[[str], Sequence[BrokerEndpoint]],
    controller_id: Callable[[], int],
    auto_create: TopicCreator,
    client_listener: str,
    quotas: BrokerQuotas | None = None,
    authorizer: Authorizer | None = None,
) -> HandlerRegistry:
    """The client listeners' APIs: the data plane, groups, transactions, metadata, and forwarded
    admin requests. ``authorizer`` (by default the one ``config`` names, over ``image``'s ACLs) is
    what handlers check actions with (metadata/authorizer/standard.py)."""
    if authorizer is None:
        authorizer = build_authorizer(config, image)
    mutations = (
        PartitionMutationQuotas(
            quotas.mutations,
            quotas.throttles,
            default_partitions=config.num_partitions,
            on_throttle=quotas.on_throttle,
        )
        if quotas is not None
        else None
    )
    forwarded = [
        AuthorizedForwarding(
            api, ForwardingHandler(api, channel, loader, effect_of(api.api_key), mutations), authorizer, image
        )
        for api in (*FORWARDED_APIS, *REASSIGNMENT_APIS)
    ]
    acl_admin = [
        AuthorizedAclForwarding(api, ForwardingHandler(api, channel, loader, effect), authorizer)
        for api, effect in ((CreateAclsHandler, created_acls_shown), (DeleteAclsHandler, deleted_acls_gone))
    ]
    return registry_of(
        [
            ForwardedDescribeQuorumHandler(channel, authorizer),
            MetadataHandler(
                image,
                brokers=brokers,
                cluster_id=cluster_id,
                controller_id=controller_id,
                auto_create_topics_enable=config.auto_create_topics_enable,
                auto_create=auto_create,
                authorizer=authorizer,
            ),
            *forwarded,
            *acl_admin,
            DescribeAclsHandler(authorizer),
            ForwardedAlterConfigsHandler(
                IncrementalAlterConfigsHandler, channel, loader, config.node_id, authorizer
            ),
            ForwardedAlterConfigsHandler(AlterConfigsHandler, channel, loader, config.node_id, authorizer),
            DescribeClusterHandler(
                EndpointType.BROKER, cluster_id, _broker_nodes(image), controller_id, authorizer
            ),
            DescribeTopicPartitionsHandler(image, authorizer),
            DescribeClientQuotasHandler(image, authorizer),
            DescribeUserScramCredentialsHandler(image, authorizer),
            DescribeConfigsHandler(image, config, authorizer),
            DescribeLogDirsHandler(config.log_dirs, replicas.log_manager, authorizer),
            ProduceHandler(plane.produce_service, quotas, authorizer),
            FetchHandler(
                plane.fetch_service,
                brokers=lambda: brokers(client_listener),
                quotas=quotas,
                authorizer=authorizer,
            ),
            ListOffsetsHandler(replicas, authorizer),
            DeleteRecordsHandler(replicas, plane.delete_records_purgatory, authorizer),
            OffsetForLeaderEpochHandler(replicas, authorizer),
            InitProducerIdHandler(producer_ids, transactions.runtime.coordinator, authorizer),
            *group_handlers(groups, transactions, image, authorizer),
            *transaction_handlers(transactions, groups, image, replicas, authorizer),
        ],
        config,
    )


def _broker_nodes(image: MetadataImage) -> Callable[[str], list[ClusterNode]]:
    """The unfenced brokers with their address on a listener, and their rack (DescribeCluster)."""

    def nodes(listener: str) -> list[ClusterNode]:
        return [
            ClusterNode(registration.broker_id, endpoint.host, endpoint.port, registration.rack)
            for registration in image.brokers()
            if not registration.fenced
            for endpoint in registration.endpoints
            if endpoint.name == listener
        ]

    return nodes


def _voter_nodes(config: BrokerConfig) -> list[ClusterNode]:
    """The quorum's voters with their controller address (DescribeCluster to a controller); a
    single node's own listener, on a port the system picks, is left out, its port unknown here."""
    return [ClusterNode(v.node_id, v.host, v.port) for v in config.quorum_voters if v.port]


def _voter_endpoints(config: BrokerConfig) -> dict[int, list[tuple[str, str, int]]]:
    """Each voter's controller listener (name, host, port), as DescribeQuorum v2 lists them; a
    listener on a port the system picks (a single node's own) is left out, its port unknown here."""
    listener = config.controller_listener
    name = listener.name if listener is not None else "CONTROLLER"
    return {voter.node_id: [(name, voter.host, voter.port)] for voter in config.quorum_voters if voter.port}
