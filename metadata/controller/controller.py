"""The active controller: the one writer of the cluster metadata log (Kafka's QuorumController).

:class:`QuorumController` composes :class:`~metadata.controller.cluster_control.ClusterControl` and
:class:`~metadata.controller.replication_control.ReplicationControl` over one
:class:`~metadata.image.MetadataImage` and one
:class:`~metadata.controller.metadata_log.MetadataLog`. Its methods are synchronous and pure of I/O
except through the log: each validates against the image, appends one batch, applies it and
returns the result. Only the voter that leads the metadata quorum runs one (it is built from the
committed log when the node's Raft epoch commits, broker/quorum/controller_role.py), and each
answer waits until its batch is committed on a majority of voters. Time comes from the injected
clock.

While no controller is active
-----------------------------
Brokers keep the last image they replayed and keep serving with it: leaders stay leaders and keep
accepting produce, followers keep fetching from the leaders their image names, consumers are served
by those leaders. What needs the controller waits for a quorum to elect one (a majority of voters):
no leader election, no topic change (forwarded admin requests answer REQUEST_TIMED_OUT or
NOT_CONTROLLER, which clients retry), no registration, and no ISR change (acks=-1 produce to a
partition whose follower died times out until it can shrink). Nobody is fenced meanwhile.

Sessions after a takeover
-------------------------
A controller builds its sessions anew: with ``ControllerConfig.takeover_grace_ms`` (what a node
built by the quorum uses) every registered broker has that long to heartbeat to it, as after a closed
heartbeat connection, so a broker that died with the previous controller is fenced within seconds;
without it, each gets a whole ``broker.session.timeout.ms``. A controller that was stalled extends
every session by the stall (:meth:`QuorumController.forgive_stall`).

Epochs
------
* Every batch is appended with the Raft leader's epoch as its epoch (the partition leader epoch of
  the ``__cluster_metadata`` batch, as KRaft writes it); a replay refuses a batch whose epoch is
  older than one already applied, and the constructor refuses to start a controller whose epoch is
  older than the log's.
* Broker epochs (the offset of the registration record) are in every broker record, leader epochs
  and partition epochs in every partition record, so a replay checks each change against the state it
  applies to and epochs only move forward. A broker's view of "who leads, at which epoch" therefore
  depends only on the log, never on which controller wrote it.
* AlterPartition answers NOT_CONTROLLER when a request carries a newer leader or partition epoch
  than the image: the requester has seen a newer controller's writes, so this one is stale.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import structlog

from metadata.client_quotas import AlterationResult, QuotaAlteration, plan_alterations
from metadata.controller.acl_control import (
    AclCreationResult,
    AclDeletionResult,
    plan_acl_creations,
    plan_acl_deletions,
)
from metadata.controller.cluster_control import BrokerSessions, ClusterControl, HeartbeatResult
from metadata.controller.config_control import AlterConfigsResult, ConfigControl, ConfigResourceChange
from metadata.controller.leader_election import ElectionType, TopicElectionResult, plan_elections
from metadata.controller.metadata_log import (
    AppendListener,
    ControllerFailedError,
    LogEntry,
    MetadataLog,
    MetadataWriter,
)
from metadata.controller.reassignment_control import (
    OngoingReassignment,
    ReassignablePartition,
    ReassignmentControl,
    ReassignmentResult,
)
from metadata.controller.replication_control import (
    AlterPartitionItem,
    AlterPartitionResponse,
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    ReplicationControl,
)
from metadata.controller.scram_control import (
    ScramAlterationResult,
    ScramDeletion,
    ScramUpsertion,
    plan_scram_alterations,
)
from metadata.controller.topic_rules import ConfigValidator, TopicDefaults
from metadata.image import MetadataImage
from metadata.producer_id_block import ProducerIdBlock
from metadata.records import BrokerEndpointRecord, MetadataRecord
from metadata.topics import NO_LEADER
from protocol.acl_bindings import AclBinding, AclBindingFilter
from server_common.config import validate_topic_configs
from server_common.config.group_config import GroupConfigBounds
from storage.clock import Clock

_log = structlog.get_logger("kipling.controller")


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The controller's settings, with Kafka's defaults."""

    broker_session_timeout_ms: int = 9000
    default_num_partitions: int = 1
    default_replication_factor: int = 1
    unclean_leader_election_enable: bool = False
    node_id: int | None = None
    """This controller's node id: its per-node dynamic ``unclean.leader.election.enable`` (BROKER
    resource named after it) beats the cluster-wide default, as Kafka's active controller reads it."""
    config_validator: ConfigValidator = validate_topic_configs
    group_config_bounds: GroupConfigBounds = field(default_factory=GroupConfigBounds)
    """The broker's group.consumer.* settings: the defaults and bounds a GROUP resource's group
    configs are validated against."""
    lost_connection_grace_ms: int = 2000
    """How long a broker whose heartbeat connection closed keeps its session without a heartbeat:
    one broker.heartbeat.interval.ms (Kafka's default 2000). A live broker retries a failed heartbeat
    within 0.1 s and reconnects in milliseconds, so an interval is ample."""
    takeover_grace_ms: int | None = None
    """When set, how long each registered broker has to heartbeat to this controller after it took
    over (None: a whole session). A controller elected by the quorum holds none of the brokers'
    heartbeat connections, so, as for a closed connection, a live broker must reconnect within this
    grace; a broker that died with the previous controller (often on the same node) is fenced after
    it, not after a whole session, which is what lets writes resume within seconds."""


class QuorumController:
    """The active controller over ``log``, writing at ``controller_epoch``.

    ``records`` is the whole existing log as (offset, epoch, record); it is replayed before anything
    else. Raises ControllerFailedError if the log holds an epoch newer than ``controller_epoch``.
    """

    def __init__(
        self,
        log: MetadataLog,
        clock: Clock,
        controller_epoch: int,
        cluster_id: str,
        config: ControllerConfig | None = None,
        records: Iterable[LogEntry] = (),
        log_end_offset: int | None = None,
        image: MetadataImage | None = None,
    ) -> None:
        """``log_end_offset``, when given, is where the log ends: the image counts as read up to it
        even where the last batches hold no metadata record (Raft's control batches). ``image``
        is where to start from (a snapshot of the log, KIP-630); ``records`` then follow it."""
        self._clock = clock
        self._config = config or ControllerConfig()
        self._cluster_id = cluster_id
        self._image = image if image is not None else MetadataImage()
        self._writer = MetadataWriter(log, self._image, controller_epoch)
        self._sessions = BrokerSessions(self._config.broker_session_timeout_ms)
        self._replication = ReplicationControl(
            self._image,
            self._writer,
            self._sessions,
            defaults=TopicDefaults(
                self._config.default_num_partitions, self._config.default_replication_factor
            ),
            config_validator=self._config.config_validator,
            unclean_leader_election_enable=self._config.unclean_leader_election_enable,
            node_id=self._config.node_id,
        )
        self._cluster = ClusterControl(
            self._image, self._writer, self._replication, self._sessions, cluster_id
        )
        self._configs = ConfigControl(
            self._image, self._writer, self._config.config_validator, self._config.group_config_bounds
        )
        self._reassignments = ReassignmentControl(self._image, self._writer, self._replication)
        self.replay(records)
        if log_end_offset is not None:
            self._image.skip_to(log_end_offset - 1)
        if self._config.takeover_grace_ms is not None:
            now = self._clock.time_ms()
            for registration in self._image.brokers():
                self._sessions.expire_within(
                    registration.broker_id, registration.broker_epoch, now, self._config.takeover_grace_ms
                )

    # -- state -----------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The committed metadata (read-only for callers)."""
        return self._image

    @property
    def controller_epoch(self) -> int:
        return self._writer.epoch

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def config(self) -> ControllerConfig:
        return self._config

    def on_append(self, callback: AppendListener) -> None:
        """Call ``callback(last_offset)`` after every appended batch."""
        self._writer.on_append(callback)

    def on_failure(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` when a write fails: this controller can never write again."""
        self._writer.on_failure(callback)

    def replay(self, records: Iterable[LogEntry]) -> None:
        """Apply already-logged (offset, epoch, record) entries, batch by batch, then restart sessions.

        Consecutive entries of one epoch are applied as one batch. Entries already applied are skipped.
        """
        for epoch, entries in itertools.groupby(records, key=lambda entry: entry[1]):
            self._image.apply_batch(((offset, record) for offset, _, record in entries), epoch)
        if self._image.epoch > self._writer.epoch:
            raise ControllerFailedError(
                f"the metadata log holds epoch {self._image.epoch}, newer than this controller's epoch "
                f"{self._writer.epoch}: another controller has taken over"
            )
        self._replication.reload()
        self._cluster.start_sessions(self._clock.time_ms())
        _log.info(
            "controller state loaded",
            offset=self._image.offset,
            epoch=self._writer.epoch,
            brokers=self._image.broker_ids(),
            topics=len(self._image.all()),
        )

    def import_records(self, records: Sequence[MetadataRecord]) -> None:
        """Write ``records`` as the first batch of a new metadata log: metadata this node kept
        before it had one (see :mod:`metadata.legacy_import`). Raises ControllerFailedError if the
        log is not empty, so nothing already decided is ever overwritten."""
        if self._image.offset >= 0 and (self._image.broker_ids() or self._image.all()):
            raise ControllerFailedError(
                f"cannot import metadata into a log that already holds metadata up to {self._image.offset}"
            )
        self._writer.commit(records)
        self._replication.reload()
        _log.info("metadata imported", records=len(records), topics=len(self._image.all()))

    # -- brokers ---------------------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        cluster_id: str,
        endpoints: Sequence[BrokerEndpointRecord],
        rack: str | None = None,
    ) -> int:
        """BrokerRegistration: returns the broker epoch; raises KafkaError (see ClusterControl)."""
        return self._cluster.register_broker(
            broker_id, incarnation_id, cluster_id, endpoints, rack, self._clock.time_ms()
        )

    def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker: remove a broker for good; raises KafkaError BROKER_ID_NOT_REGISTERED."""
        self._cluster.unregister_broker(broker_id)

    def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        *,
        want_fence: bool = False,
        want_shutdown: bool = False,
    ) -> HeartbeatResult:
        """BrokerHeartbeat (see ClusterControl for the state machine)."""
        return self._cluster.heartbeat(
            broker_id, broker_epoch, current_metadata_offset, want_fence, want_shutdown, self._clock.time_ms()
        )

    def tick(self, now_ms: int | None = None) -> list[int]:
        """Fence the brokers whose session expired by ``now_ms`` (default: the clock); returns their ids."""
        return self._cluster.fence_stale_brokers(self._clock.time_ms() if now_ms is None else now_ms)

    def broker_connection_lost(self, broker_id: int, broker_epoch: int) -> None:
        """The connection a broker heartbeats on closed: the process died, or its connection broke.

        A live broker reconnects and heartbeats within its heartbeat interval; a dead one never
        will. Its session therefore ends ``lost_connection_grace_ms`` from now instead of a whole
        session timeout after its last heartbeat, so the partitions it led move in seconds
        (fencing then follows Kafka's rules: a new leader only from the ISR).
        """
        now = self._clock.time_ms()
        grace = min(self._config.lost_connection_grace_ms, self._config.broker_session_timeout_ms)
        if self._sessions.expire_within(broker_id, broker_epoch, now, grace):
            _log.info(
                "broker connection lost: session ends soon unless it heartbeats",
                broker=broker_id,
                grace_ms=grace,
            )

    def forgive_stall(self, stalled_ms: int) -> None:
        """The controller could not run for ``stalled_ms`` (a paused process, a blocked event loop):
        that time must not count against any broker's session.

        Heartbeats that queued up during the stall are read only after the next session check,
        so without this a controller resumed from a pause longer than the session timeout would
        fence every broker at once. Its driver calls this before :meth:`tick` when the tick ran late.
        """
        self._sessions.extend(stalled_ms)
        _log.warning("controller stalled: broker sessions extended", stalled_ms=stalled_ms)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdBlock:
        """AllocateProducerIds: the next block of producer ids for this broker."""
        return self._cluster.allocate_producer_ids(broker_id, broker_epoch)

    # -- topics and partitions -------------------------------------------------------------------

    def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        return self._replication.create_topics(topics, validate_only=validate_only)

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False
    ) -> list[CreatePartitionsResult]:
        return self._replication.create_partitions(topics, validate_only=validate_only)

    def delete_topics(self, topics: Sequence[str | uuid.UUID]) -> list[DeleteTopicResult]:
        return self._replication.delete_topics(topics)

    def alter_partition(
        self, broker_id: int, broker_epoch: int, partitions: Sequence[AlterPartitionItem]
    ) -> AlterPartitionResponse:
        return self._replication.alter_partition(broker_id, broker_epoch, partitions)

    def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], *, validate_only: bool = False
    ) -> list[AlterationResult]:
        """AlterClientQuotas (see :mod:`metadata.client_quotas`): the changed keys of every valid
        entity as ClientQuotaRecords, in one batch (none with ``validate_only``)."""
        results, records = plan_alterations(self._image.client_quotas(), alterations)
        if records and not validate_only:
            self._writer.commit(records)
            _log.info("client quotas altered", records=len(records))
        return results

    def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[ScramAlterationResult]:
        """AlterUserScramCredentials (see :mod:`~metadata.controller.scram_control`): one result per
        user; the credentials of every valid user as records, in one batch."""
        results, records = plan_scram_alterations(self._image.scram_credentials, deletions, upsertions)
        if records:
            self._writer.commit(records)
            _log.info(
                "user SCRAM credentials altered",
                users=sorted({record.name for record in records}),
                records=len(records),
            )
        return results

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreationResult]:
        """CreateAcls (see :mod:`~metadata.controller.acl_control`): one result per binding; the new
        ACLs in one batch."""
        results, records = plan_acl_creations(self._image.acls, bindings)
        if records:
            self._writer.commit(records)
            _log.info("ACLs created", acls=[str(self._image.acls.get(r.id)) for r in records])
        return results

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeletionResult]:
        """DeleteAcls: one result per filter, listing the ACLs it matched; every matched ACL is
        removed, in one batch."""
        results, records = plan_acl_deletions(self._image.acls, filters)
        if records:
            deleted = [str(self._image.acls.get(r.id)) for r in records]
            self._writer.commit(records)
            _log.info("ACLs deleted", acls=deleted)
        return results

    def elect_leaders(
        self, election_type: ElectionType, requested: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[TopicElectionResult]:
        """ElectLeaders (see :mod:`~metadata.controller.leader_election`): the elections it calls for,
        in one batch; ``requested`` None means every partition."""
        results, records = plan_elections(self._image, self._replication.is_active, election_type, requested)
        if records:
            self._writer.commit(records, atomic=False)  # independent elections, maybe of every partition
            _log.info("leaders elected", election=election_type.name, partitions=len(records))
        return results

    def alter_partition_reassignments(
        self, partitions: Sequence[ReassignablePartition], *, allow_replication_factor_change: bool = True
    ) -> list[ReassignmentResult]:
        """AlterPartitionReassignments: start, re-target or cancel (replicas None) reassignments."""
        return self._reassignments.alter(
            partitions, allow_replication_factor_change=allow_replication_factor_change
        )

    def list_partition_reassignments(
        self, topics: Sequence[tuple[str, Sequence[int]]] | None = None
    ) -> list[OngoingReassignment]:
        """ListPartitionReassignments: the reassignments in progress (all, or of the named partitions)."""
        return self._reassignments.list(topics)

    # -- configs ---------------------------------------------------------------------------------

    def incremental_alter_configs(
        self, resources: Sequence[ConfigResourceChange], *, validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        """IncrementalAlterConfigs: one batch of ConfigRecords for every valid resource."""
        results = self._configs.incremental_alter_configs(resources, validate_only=validate_only)
        if not validate_only:
            self._elect_where_unclean_became_allowed()
        return results

    def alter_configs(
        self, resources: Sequence[ConfigResourceChange], *, validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        """AlterConfigs: each valid resource's overrides replaced, in one batch."""
        results = self._configs.alter_configs(resources, validate_only=validate_only)
        if not validate_only:
            self._elect_where_unclean_became_allowed()
        return results

    def _elect_where_unclean_became_allowed(self) -> None:
        """unclean.leader.election.enable applies without a restart: once it allows an unclean
        election for a topic (its override, or the cluster-wide dynamic default), its partitions left
        without a leader get one now, as Kafka's controller elects unclean leaders for leaderless
        partitions, instead of waiting for the next broker change."""
        leaderless = [
            (topic.name, [p.partition for p in topic.sorted_partitions() if p.leader_id == NO_LEADER])
            for topic in self._image.all()
            if self._replication.unclean_election_enabled(topic)
        ]
        wanted = [(name, partitions) for name, partitions in leaderless if partitions]
        if not wanted:
            return
        _, records = plan_elections(self._image, self._replication.is_active, ElectionType.UNCLEAN, wanted)
        if records:
            self._writer.commit(records, atomic=False)
            _log.info("unclean leaders elected after a config change", partitions=len(records))
