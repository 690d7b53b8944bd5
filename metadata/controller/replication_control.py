"""Topics and partitions on the controller: creation, deletion, leader election, ISR changes.

The controller side of CreateTopics, CreatePartitions, DeleteTopics and AlterPartition, and the
elections that follow a broker being fenced or unfenced (Kafka's ReplicationControlManager and
PartitionChangeBuilder). Requests are validated against the image with the rules of
:mod:`~metadata.controller.topic_rules`; every accepted change becomes records committed in one batch
per request through the :class:`~metadata.controller.metadata_log.MetadataWriter`.

Elections (Kafka's "online" election, without eligible leader replicas):

* a partition keeps its leader while the leader stays in the ISR and is *active* (registered,
  unfenced, not in controlled shutdown);
* otherwise the new leader is the first replica, in assignment order, that is in the ISR and active;
* failing that, only if ``unclean.leader.election.enable`` (the topic's override, else the
  controller's own per-node, cluster-wide dynamic or static value), the first active replica
  outside the ISR, which becomes the whole ISR;
* failing that the partition has no leader (NO_LEADER) until a broker of its ISR comes back.

A leader whose log failed resigns with an AlterPartition whose ISR leaves it out: the first active
replica of that ISR, in assignment order, takes over (a deliberate deviation from Kafka, which
refuses such a request; see :meth:`ReplicationControl._check_alter`).

Removing a broker (fenced, controlled shutdown, replaced by a new incarnation) takes it out of every
ISR it is in, except that an ISR is never emptied: the last member stays, so that when it returns it
is known to hold every committed record. Every change bumps the partition epoch; a change of leader
also bumps the leader epoch. The ISR only ever holds active brokers, except for such a last member.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from metadata.controller import reassignment, topic_rules
from metadata.controller.metadata_log import MetadataWriter
from metadata.controller.topic_rules import ClusterBrokers, ConfigValidator, ManualAssignment, TopicDefaults
from metadata.image import MetadataImage, partition_state_of
from metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from metadata.topics import (
    INITIAL_LEADER_EPOCH,
    INITIAL_PARTITION_EPOCH,
    NO_LEADER,
    PartitionState,
    TopicState,
)
from protocol.error_codes import ErrorCode, KafkaError
from server_common.config import BrokerConfig, layers_of
from server_common.config.dynamic import CLUSTER_DEFAULT

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
NO_BROKER_EPOCH = -1
"""In an AlterPartition v3 ISR entry: do not check this replica's broker epoch."""

_log = structlog.get_logger("kipling.controller.replication")


class ShutdownTracker(Protocol):
    """Which brokers are in controlled shutdown (session state the cluster control keeps)."""

    def in_controlled_shutdown(self, broker_id: int) -> bool: ...


# -- requests and results --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """One topic of a CreateTopics request; -1 means the controller's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = field(default_factory=dict)
    assignments: Sequence[ManualAssignment] = ()


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    """``topic`` is the created topic (with validate_only, the topic as it would be), or None on error."""

    name: str
    error: ErrorCode
    message: str | None = None
    topic: TopicState | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopic:
    """One topic of a CreatePartitions request: the new total count, and optional replica lists."""

    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsResult:
    name: str
    error: ErrorCode
    message: str | None = None
    partitions: tuple[PartitionState, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    """``topic`` is the deleted topic in its last state, or None on error."""

    name: str | None
    topic_id: uuid.UUID | None
    error: ErrorCode
    message: str | None = None
    topic: TopicState | None = None


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition of an AlterPartition request, by topic name (v0-1) or topic id (v2+).

    ``new_isr_broker_epochs`` (v3, KIP-903) gives each new ISR member's broker epoch as the leader
    knows it; NO_BROKER_EPOCH skips the check for that member.
    """

    topic: str | uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    new_isr_broker_epochs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """The partition's state after the request; the state fields mean something only without error."""

    topic: str | uuid.UUID
    partition: int
    error: ErrorCode
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    """A request-level error (STALE_BROKER_EPOCH) comes with no partitions."""

    error: ErrorCode
    partitions: tuple[AlterPartitionResult, ...] = ()


# -- elections -------------------------------------------------------------------------------------


def elect_leader(
    partition: PartitionState, target_isr: Sequence[int], acceptable: Callable[[int], bool], unclean: bool
) -> tuple[int, list[int]]:
    """(leader, ISR) after an online election over ``target_isr``; see the module docstring."""
    if partition.leader_id in target_isr and acceptable(partition.leader_id):
        return partition.leader_id, list(target_isr)
    for replica in partition.replicas:
        if replica in target_isr and acceptable(replica):
            return replica, list(target_isr)
    if unclean:
        for replica in partition.replicas:
            if acceptable(replica):
                return replica, [replica]
    return NO_LEADER, list(target_isr)


def change_record(
    topic_id: uuid.UUID, old: PartitionState, leader: int, isr: Sequence[int]
) -> PartitionChangeRecord | None:
    """The record moving ``old`` to (leader, isr) with the epochs bumped, or None if nothing changes."""
    if leader == old.leader_id and list(isr) == old.isr:
        return None
    return PartitionChangeRecord(
        partition_id=old.partition,
        topic_id=topic_id,
        replicas=tuple(old.replicas),
        isr=tuple(isr),
        leader=leader,
        leader_epoch=old.leader_epoch + 1 if leader != old.leader_id else old.leader_epoch,
        partition_epoch=old.partition_epoch + 1,
        removing_replicas=tuple(old.removing_replicas),
        adding_replicas=tuple(old.adding_replicas),
    )


def without(isr: Sequence[int], broker_id: int) -> list[int]:
    """The ISR minus ``broker_id``, unless that would leave it empty (then unchanged)."""
    remaining = [replica for replica in isr if replica != broker_id]
    return remaining if remaining else list(isr)


class ReplicationControl:
    """Topic and partition changes, validated against ``image`` and committed through ``writer``."""

    def __init__(
        self,
        image: MetadataImage,
        writer: MetadataWriter,
        shutdowns: ShutdownTracker,
        *,
        defaults: TopicDefaults,
        config_validator: ConfigValidator,
        unclean_leader_election_enable: bool,
        node_id: int | None = None,
    ) -> None:
        """``node_id`` is this controller's own id: its per-node dynamic configs (the BROKER
        resource named after it) count for ``unclean.leader.election.enable``, as in Kafka."""
        self._image = image
        self._writer = writer
        self._shutdowns = shutdowns
        self._defaults = defaults
        self._validate_configs = config_validator
        self._static_config, _ = BrokerConfig.from_properties(
            {UNCLEAN_LEADER_ELECTION_ENABLE: str(unclean_leader_election_enable).lower()}
        )
        self._node_id = node_id
        self._names = topic_rules.TopicNames()
        self.reload()

    def reload(self) -> None:
        """Rebuild the topic-name index from the image (after a replay)."""
        self._names = topic_rules.TopicNames(topic.name for topic in self._image.all())

    # -- broker state ----------------------------------------------------------------------------

    def is_active(self, broker_id: int) -> bool:
        """Registered, unfenced and not in controlled shutdown: may lead, join an ISR, get replicas."""
        registration = self._image.broker(broker_id)
        return (
            registration is not None
            and not registration.fenced
            and not self._shutdowns.in_controlled_shutdown(broker_id)
        )

    def cluster_brokers(self) -> ClusterBrokers:
        registered = self._image.broker_ids()
        racks = {registration.broker_id: registration.rack for registration in self._image.brokers()}
        return ClusterBrokers.of(registered, [b for b in registered if self.is_active(b)], racks)

    def unclean_election_enabled(self, topic: TopicState) -> bool:
        """The topic's ``unclean.leader.election.enable`` override, else, as Kafka's
        ConfigurationControlManager resolves it, the active controller's own per-node dynamic value,
        the cluster-wide dynamic default (BROKER resource ``""``), then the controller's static one:
        the broker layers' one precedence rule (:func:`layers_of`)."""
        value = topic.configs.get(UNCLEAN_LEADER_ELECTION_ENABLE)
        if value is not None:
            return value.strip().lower() == "true"
        node = -1 if self._node_id is None else self._node_id  # -1: no per-node layer
        dynamic = {name: self._image.broker_configs(name) for name in (CLUSTER_DEFAULT, str(node))}
        return layers_of(self._static_config, dynamic, node).value(UNCLEAN_LEADER_ELECTION_ENABLE) is True

    # -- CreateTopics ----------------------------------------------------------------------------

    def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        """Create each valid topic; all created topics go into one batch. Results in request order.

        Topics of one request are validated against each other too (a name taken by an earlier
        entry is TOPIC_ALREADY_EXISTS). With ``validate_only`` nothing is written.
        """
        names = self._names.copy()
        brokers = self.cluster_brokers()
        start_index = self._image.partition_count()
        pending_ids: set[uuid.UUID] = set()
        records: list[MetadataRecord] = []
        results: list[CreateTopicResult] = []
        for request in topics:
            try:
                plan = self._plan_topic(request, names, brokers, start_index)
            except KafkaError as exc:
                results.append(CreateTopicResult(request.name, exc.code, exc.message))
                continue
            topic_id = topic_rules.new_topic_id(_IdsInUse(self._image, pending_ids))
            pending_ids.add(topic_id)
            names.add(plan.name)
            start_index += len(plan.partitions)
            records.extend(_topic_records(topic_id, plan))
            results.append(CreateTopicResult(plan.name, ErrorCode.NONE, topic=_planned_topic(topic_id, plan)))
        if validate_only or not records:
            return results
        self._writer.commit(records)
        self._names = names
        _log.info("topics created", topics=[r.name for r in results if r.topic is not None])
        return [self._with_committed_topic(result) for result in results]

    def _plan_topic(
        self,
        request: CreatableTopic,
        names: topic_rules.TopicNames,
        brokers: ClusterBrokers,
        start_index: int,
    ) -> topic_rules.TopicPlan:
        return topic_rules.plan_topic(
            request.name,
            request.num_partitions,
            request.replication_factor,
            request.configs,
            assignments=request.assignments,
            names=names,
            brokers=brokers,
            defaults=self._defaults,
            config_validator=self._validate_configs,
            start_index=start_index,
        )

    def _with_committed_topic(self, result: CreateTopicResult) -> CreateTopicResult:
        if result.topic is None:
            return result
        return dataclasses.replace(result, topic=self._image.get_by_id(result.topic.topic_id))

    # -- CreatePartitions ------------------------------------------------------------------------

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False
    ) -> list[CreatePartitionsResult]:
        """Add partitions to existing topics; all additions go into one batch. Results in request order."""
        brokers = self.cluster_brokers()
        start_index = self._image.partition_count()
        added: dict[str, int] = {}
        records: list[MetadataRecord] = []
        results: list[CreatePartitionsResult] = []
        for request in topics:
            topic = self._image.get(request.name)
            if topic is None:
                results.append(CreatePartitionsResult(request.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                planned = topic_rules.plan_new_partitions(
                    request.name,
                    len(topic.partitions) + added.get(request.name, 0),
                    topic.replication_factor,
                    request.count,
                    assignments=request.assignments,
                    brokers=brokers,
                    start_index=start_index,
                )
            except KafkaError as exc:
                results.append(CreatePartitionsResult(request.name, exc.code, exc.message))
                continue
            added[request.name] = added.get(request.name, 0) + len(planned)
            start_index += len(planned)
            new_records = [_partition_record(topic.topic_id, p) for p in planned]
            records.extend(new_records)
            states = tuple(partition_state_of(r) for r in new_records)
            results.append(CreatePartitionsResult(request.name, ErrorCode.NONE, partitions=states))
        if not validate_only and records:
            self._writer.commit(records)
            _log.info("partitions created", topics=sorted(added))
        return results

    # -- DeleteTopics ----------------------------------------------------------------------------

    def delete_topics(self, topics: Sequence[str | uuid.UUID]) -> list[DeleteTopicResult]:
        """Delete topics named by name or id; one RemoveTopicRecord per distinct topic, one batch.

        An unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID. A topic named
        twice is removed once and both entries report it deleted.
        """
        records: list[MetadataRecord] = []
        removing: set[uuid.UUID] = set()
        results: list[DeleteTopicResult] = []
        for ref in topics:
            topic = self._image.get_by_id(ref) if isinstance(ref, uuid.UUID) else self._image.get(ref)
            if topic is None:
                code = (
                    ErrorCode.UNKNOWN_TOPIC_ID
                    if isinstance(ref, uuid.UUID)
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                name, topic_id = (None, ref) if isinstance(ref, uuid.UUID) else (ref, None)
                results.append(DeleteTopicResult(name, topic_id, code))
                continue
            if topic.topic_id not in removing:
                removing.add(topic.topic_id)
                records.append(RemoveTopicRecord(topic.topic_id))
            results.append(DeleteTopicResult(topic.name, topic.topic_id, ErrorCode.NONE, topic=topic))
        if records:
            self._writer.commit(records)
            for result in results:
                if result.topic is not None:
                    self._names.discard(result.topic.name)
            _log.info("topics deleted", topics=sorted({r.topic.name for r in results if r.topic is not None}))
        return results

    # -- AlterPartition --------------------------------------------------------------------------

    def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> AlterPartitionResponse:
        """A leader's ISR change proposals (Kafka's checks, in Kafka's order), committed in one batch.

        Each accepted item answers the state its own change produced; a proposal equal to the
        current ISR answers the current state without a record. An item naming a partition changed
        earlier in the same request is checked against that change, so a request never yields two
        records for the same partition epoch.
        """
        registration = self._image.broker(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            return AlterPartitionResponse(ErrorCode.STALE_BROKER_EPOCH)
        pending: dict[tuple[uuid.UUID, int], PartitionState] = {}
        records: list[MetadataRecord] = []
        results: list[AlterPartitionResult] = []
        for item in items:
            error, topic_id, state, record = self._alter_one(broker_id, item, pending)
            if record is not None:
                records.append(record)
            if topic_id is not None and state is not None:
                pending[(topic_id, item.partition)] = state
            results.append(_alter_result(item, error, state))
        if records:
            self._writer.commit(records)
        return AlterPartitionResponse(ErrorCode.NONE, tuple(results))

    def _alter_one(
        self,
        broker_id: int,
        item: AlterPartitionItem,
        pending: Mapping[tuple[uuid.UUID, int], PartitionState],
    ) -> tuple[ErrorCode, uuid.UUID | None, PartitionState | None, PartitionChangeRecord | None]:
        """(error, topic id, state after the item, record if the item changes anything)."""
        if isinstance(item.topic, uuid.UUID):
            topic = self._image.get_by_id(item.topic)
            unknown_topic = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = self._image.get(item.topic)
            unknown_topic = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic is None:
            return unknown_topic, None, None, None
        partition = pending.get((topic.topic_id, item.partition)) or topic.partitions.get(item.partition)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None, None
        error = self._check_alter(broker_id, partition, item)
        if error is not ErrorCode.NONE:
            _log.info(
                "AlterPartition rejected",
                broker=broker_id,
                topic=topic.name,
                partition=item.partition,
                error=error.name,
            )
            return error, None, None, None
        if partition.is_reassigning:
            return self._alter_reassigning(broker_id, topic, partition, item)
        leader = partition.leader_id
        if leader not in item.new_isr:
            leader = self._successor(partition, item.new_isr)
            if leader == NO_LEADER:
                return ErrorCode.INELIGIBLE_REPLICA, None, None, None
            _log.info(
                "leader resigned; electing another in-sync replica",
                broker=broker_id,
                topic=topic.name,
                partition=item.partition,
                leader=leader,
                isr=list(item.new_isr),
            )
        record = change_record(topic.topic_id, partition, leader, item.new_isr)
        state = partition if record is None else partition_state_of(record)
        return ErrorCode.NONE, topic.topic_id, state, record

    def _alter_reassigning(
        self, broker_id: int, topic: TopicState, partition: PartitionState, item: AlterPartitionItem
    ) -> tuple[ErrorCode, uuid.UUID | None, PartitionState | None, PartitionChangeRecord | None]:
        """An ISR change of a partition being reassigned: it may complete the reassignment
        (:func:`~metadata.controller.reassignment.build_change`), and then the leader may change
        (it was being removed): the record is written and the leader told NEW_LEADER_ELECTED, as
        Kafka does (the handler answers FENCED_LEADER_EPOCH below v2)."""

        def acceptable(replica: int) -> bool:
            if replica == partition.leader_id:
                return replica in item.new_isr
            return self.is_active(replica)

        record = reassignment.build_change(topic.topic_id, partition, acceptable=acceptable, isr=item.new_isr)
        if record is None:
            return ErrorCode.NONE, topic.topic_id, partition, None
        if record.leader == NO_LEADER:
            return ErrorCode.INELIGIBLE_REPLICA, None, None, None
        state = partition_state_of(record)
        if not state.is_reassigning:
            _log.info(
                "AlterPartition completed the partition reassignment",
                broker=broker_id,
                topic=topic.name,
                partition=item.partition,
                replicas=state.replicas,
                isr=state.isr,
                leader=state.leader_id,
            )
        if record.leader != broker_id:
            return ErrorCode.NEW_LEADER_ELECTED, topic.topic_id, state, record
        return ErrorCode.NONE, topic.topic_id, state, record

    def _successor(self, partition: PartitionState, new_isr: Sequence[int]) -> int:
        """The leader elected when the current one proposes an ISR without itself (it resigns).

        The election a controlled shutdown runs (:func:`elect_leader`): the first replica, in
        assignment order, of the proposed ISR that is active; never the resigning leader, never
        unclean (a replica outside the ISR may lack committed records). NO_LEADER if none is active.
        """

        def acceptable(replica: int) -> bool:
            return replica != partition.leader_id and self.is_active(replica)

        leader, _ = elect_leader(partition, new_isr, acceptable, unclean=False)
        return leader

    def _check_alter(self, broker_id: int, partition: PartitionState, item: AlterPartitionItem) -> ErrorCode:
        """Kafka's validateAlterPartitionData. A newer epoch than ours means we are a stale controller.

        One deliberate deviation: Kafka answers INVALID_REQUEST to an ISR that leaves out the leader
        ("an AlterPartition request can't remove the current leader"); kipling takes it as the
        leader resigning, because its log failed (Kafka's brokers report a failed log directory in
        BrokerHeartbeat's OfflineLogDirs instead, for a whole directory; kipling takes a single
        replica offline). Such an ISR must still be non-empty, name assigned replicas only and
        hold only eligible brokers; :meth:`_successor` then picks the new leader from it.
        """
        if item.leader_epoch > partition.leader_epoch or item.partition_epoch > partition.partition_epoch:
            return ErrorCode.NOT_CONTROLLER
        if item.leader_epoch < partition.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if broker_id != partition.leader_id:
            return ErrorCode.INVALID_REQUEST
        if item.partition_epoch < partition.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        isr = item.new_isr
        if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(partition.replicas):
            return ErrorCode.INVALID_REQUEST
        epochs = item.new_isr_broker_epochs or (NO_BROKER_EPOCH,) * len(isr)
        if len(epochs) != len(isr) or any(not self._eligible(b, e) for b, e in zip(isr, epochs)):
            return ErrorCode.INELIGIBLE_REPLICA
        return ErrorCode.NONE

    def _eligible(self, broker_id: int, broker_epoch: int) -> bool:
        """May join an ISR: active, and at the broker epoch the leader saw it fetch with (if given)."""
        if not self.is_active(broker_id):
            return False
        registration = self._image.broker(broker_id)
        return broker_epoch == NO_BROKER_EPOCH or (
            registration is not None and registration.broker_epoch == broker_epoch
        )

    # -- elections after broker changes (records for the cluster control's batches) --------------

    def changes_for_removed_broker(
        self, broker_id: int, also_leaving: Collection[int] = ()
    ) -> list[PartitionChangeRecord]:
        """Take ``broker_id`` out of every ISR (never emptying one) and re-elect where it led.

        Used when the broker is fenced, enters controlled shutdown, or is replaced by a new
        incarnation; the broker itself counts as inactive even though the image may not say so yet,
        and so do ``also_leaving`` (brokers about to be fenced next), so that no partition moves to
        a broker that is leaving too.
        """

        def acceptable(replica: int) -> bool:
            return replica != broker_id and replica not in also_leaving and self.is_active(replica)

        records = []
        for topic, partition in self._partitions():
            if broker_id not in partition.isr:
                continue
            leader, isr = elect_leader(
                partition, without(partition.isr, broker_id), acceptable, self.unclean_election_enabled(topic)
            )
            record = change_record(topic.topic_id, partition, leader, isr)
            if record is not None:
                records.append(record)
        return records

    def changes_for_unfenced_broker(self, broker_id: int) -> list[PartitionChangeRecord]:
        """Elect leaders for leaderless partitions now that ``broker_id`` may lead again."""

        def acceptable(replica: int) -> bool:
            return replica == broker_id or self.is_active(replica)

        records = []
        for topic, partition in self._partitions():
            if partition.leader_id != NO_LEADER:
                continue
            leader, isr = elect_leader(
                partition, partition.isr, acceptable, self.unclean_election_enabled(topic)
            )
            record = change_record(topic.topic_id, partition, leader, isr)
            if record is not None:
                records.append(record)
        return records

    def leads_any(self, broker_id: int) -> bool:
        return any(partition.leader_id == broker_id for _, partition in self._partitions())

    def _partitions(self) -> Iterator[tuple[TopicState, PartitionState]]:
        """Every partition, by topic name then index (a scan: elections are rare events)."""
        for topic in self._image.all():
            for partition in topic.sorted_partitions():
                yield topic, partition


class _IdsInUse:
    """Topic ids taken in the image or by an earlier topic of the same request."""

    def __init__(self, image: MetadataImage, pending: set[uuid.UUID]) -> None:
        self._image = image
        self._pending = pending

    def __contains__(self, topic_id: object) -> bool:
        return topic_id in self._pending or (
            isinstance(topic_id, uuid.UUID) and self._image.get_by_id(topic_id) is not None
        )


def _alter_result(
    item: AlterPartitionItem, error: ErrorCode, state: PartitionState | None
) -> AlterPartitionResult:
    if error is not ErrorCode.NONE or state is None:
        return AlterPartitionResult(item.topic, item.partition, error)
    return AlterPartitionResult(
        item.topic,
        item.partition,
        ErrorCode.NONE,
        leader_id=state.leader_id,
        leader_epoch=state.leader_epoch,
        isr=tuple(state.isr),
        partition_epoch=state.partition_epoch,
    )


def _topic_records(topic_id: uuid.UUID, plan: topic_rules.TopicPlan) -> list[MetadataRecord]:
    """TopicRecord, then its config overrides (by key), then its partitions (by index)."""
    records: list[MetadataRecord] = [TopicRecord(plan.name, topic_id)]
    records.extend(
        ConfigRecord(ConfigResourceType.TOPIC, plan.name, key, value)
        for key, value in sorted(plan.configs.items())
    )
    records.extend(_partition_record(topic_id, p) for p in plan.partitions)
    return records


def _partition_record(topic_id: uuid.UUID, planned: topic_rules.NewPartition) -> PartitionRecord:
    return PartitionRecord(
        partition_id=planned.index,
        topic_id=topic_id,
        replicas=planned.replicas,
        isr=planned.isr,
        leader=planned.leader,
        leader_epoch=INITIAL_LEADER_EPOCH,
        partition_epoch=INITIAL_PARTITION_EPOCH,
    )


def _planned_topic(topic_id: uuid.UUID, plan: topic_rules.TopicPlan) -> TopicState:
    """The topic as it would be created (what validate_only answers)."""
    partitions = {p.index: partition_state_of(_partition_record(topic_id, p)) for p in plan.partitions}
    return TopicState(plan.name, topic_id, partitions, dict(plan.configs))
