"""The cluster metadata image: the state obtained by replaying the metadata log in order.

The controller keeps one image (it validates every request against it and applies each batch once
the batch is durably appended); every broker keeps its own, fed by fetching ``__cluster_metadata``.
Both replay the same records through :meth:`MetadataImage.apply_batch`, so the same log always yields
the same image: replay is deterministic, depends on nothing but the records, and is idempotent
(a record at or below :attr:`MetadataImage.offset` was already applied and is skipped, so re-fetching
an overlapping range is harmless).

A record that makes no sense against the image (a partition of an unknown topic, a fence at the
wrong broker epoch, an epoch that goes backwards) raises :class:`MetadataReplayError` naming the
record and its offset. Each record is checked before it changes anything, so the image then holds
every record before the bad one; such a log cannot be trusted and the image should be discarded.

The queries (``get``, ``get_by_id``, ``all``, ``broker_ids``) return the value types of
:mod:`metadata.topics`. Returned objects are the image's own: callers must treat them as read-only. A
:class:`~metadata.topics.PartitionState` is never mutated once in the image (a change replaces it),
so a reference taken earlier keeps describing the partition as it was; a
:class:`~metadata.topics.TopicState` is the live topic (its ``partitions`` and ``configs`` dicts are
updated in place).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from metadata.authorizer.acl_cache import AclCache
from metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpointRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from metadata.scram_credentials import ScramCredentials
from metadata.topics import NO_LEADER, PartitionState, TopicState
from protocol.sentinels import ZERO_UUID
from security.scram import ScramCredential, ScramMechanism

NO_OFFSET = -1
"""The offset of an image that has applied no record: a position below every record's offset (records
at or below :attr:`MetadataImage.offset` are skipped), not protocol.sentinels.UNKNOWN_OFFSET."""
NO_EPOCH = -1
"""The controller epoch of an image that has applied no record."""
INITIAL_NEXT_PRODUCER_ID = 0

QuotaEntity = tuple[tuple[str, str | None], ...]
"""A client quota entity: its (entity type, entity name) pairs sorted by type; a None name is the
type's default entity."""


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The canonical form of an entity given in any order."""
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


class MetadataReplayError(Exception):
    """A record cannot be applied to the image: the log is corrupt or not this image's log."""

    def __init__(self, reason: str, record: MetadataRecord, offset: int) -> None:
        super().__init__(f"cannot replay {type(record).__name__} at offset {offset}: {reason} ({record!r})")
        self.reason = reason
        self.record = record
        self.offset = offset


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One registered broker incarnation (Kafka's BrokerRegistration).

    ``in_controlled_shutdown`` is always False in a replayed image: no record type of this log carries
    it yet (Kafka's BrokerRegistrationChangeRecord does), so the controller keeps it as session state.
    """

    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpointRecord, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A partition of a topic that existed before and after the batch, as it was and as it is."""

    topic_id: uuid.UUID
    topic_name: str
    old: PartitionState
    new: PartitionState


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Partitions added to a topic that existed before the batch (CreatePartitions)."""

    topic: TopicState
    partitions: tuple[PartitionState, ...]


@dataclass(frozen=True, slots=True)
class MetadataDelta:
    """What a batch changed: the net difference between the image before and after it.

    A topic created in the batch is listed once in ``topics_created`` (in its state after the batch:
    its partitions and configs are not repeated elsewhere); a topic created and deleted in the same
    batch does not appear. ``brokers_unfenced`` are the brokers that became usable (unfenced, whether
    newly registered or not), ``brokers_fenced`` those that stopped being usable but are still
    registered, ``brokers_registered`` every broker whose RegisterBrokerRecord took effect (a new
    incarnation or an amended one). Lists are sorted by topic name, partition index, broker id.
    """

    topics_created: tuple[TopicState, ...] = ()
    topics_deleted: tuple[TopicState, ...] = ()
    partitions_created: tuple[NewPartitions, ...] = ()
    partitions_changed: tuple[PartitionChange, ...] = ()
    topic_configs_changed: tuple[str, ...] = ()
    broker_configs_changed: tuple[str, ...] = ()
    """The BROKER resources (a broker id as text, ``""`` the cluster default) whose overrides changed."""
    group_configs_changed: tuple[str, ...] = ()
    """The groups whose group-config overrides (the GROUP resource) changed."""
    brokers_registered: tuple[BrokerRegistration, ...] = ()
    brokers_fenced: tuple[int, ...] = ()
    brokers_unfenced: tuple[int, ...] = ()
    brokers_unregistered: tuple[BrokerRegistration, ...] = ()
    next_producer_id: int | None = None
    """The new next producer id if a ProducerIdsRecord moved it, else None."""

    @property
    def is_empty(self) -> bool:
        return self == MetadataDelta()


class MetadataImage:
    """Brokers, topics, configs, client quotas, SCRAM credentials, ACLs and the producer id block of
    the cluster, as of :attr:`offset`."""

    def __init__(self) -> None:
        self._brokers: dict[int, BrokerRegistration] = {}
        self._registration_offsets: dict[int, int] = {}
        self._by_name: dict[str, TopicState] = {}
        self._by_id: dict[uuid.UUID, TopicState] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}
        self._client_quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._scram = ScramCredentials()
        self._acls = AclCache()
        self._next_producer_id = INITIAL_NEXT_PRODUCER_ID
        self._offset = NO_OFFSET
        self._epoch = NO_EPOCH

    # -- replay ----------------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """The offset of the last applied record (NO_OFFSET before any)."""
        return self._offset

    @property
    def epoch(self) -> int:
        """The controller epoch of the last applied record's batch (NO_EPOCH before any)."""
        return self._epoch

    def replace_with(self, other: MetadataImage) -> None:
        """Become ``other`` in place (a snapshot loaded over a broker's image, which the rest of the
        broker holds by reference); ``other`` must not be used afterwards."""
        self.__dict__.update(other.__dict__)

    def skip_to(self, offset: int) -> None:
        """The log holds no metadata record up to ``offset`` beyond what was applied (Raft's own
        control batches, such as a new leader's LeaderChange): the image is read up to it."""
        self._offset = max(self._offset, offset)

    def apply(self, record: MetadataRecord, offset: int, epoch: int) -> bool:
        """Apply one record read at ``offset`` from a batch of controller ``epoch``.

        Returns False (and changes nothing) for a record at or below :attr:`offset`, already applied.
        An epoch older than the image's means a deposed controller's write: MetadataReplayError.
        """
        if offset <= self._offset:
            return False
        if epoch < self._epoch:
            raise MetadataReplayError(
                f"epoch {epoch} is older than the image's epoch {self._epoch}", record, offset
            )
        self._replay(record, offset)
        self._offset = offset
        self._epoch = epoch
        return True

    @classmethod
    def from_snapshot(
        cls, records: Iterable[tuple[int, MetadataRecord]], *, offset: int, epoch: int
    ) -> MetadataImage:
        """The image a snapshot (KIP-630) of the log up to and including ``offset`` describes.

        ``records`` summarise that log (:func:`metadata.snapshot.image_records`), each paired with
        the log offset it stands for, at most ``offset``. They are applied in order through the same
        replayers as :meth:`apply`, whatever their offsets: the only offset kept is a
        RegisterBrokerRecord's, which becomes the broker's :meth:`registration_offset` (the offset of
        the registration in the original log; a broker's epoch is the one its record carries). The
        image then stands at ``offset`` and controller ``epoch``, as if it had replayed the log.
        Raises MetadataReplayError for a record that cannot be applied or lies beyond ``offset``.
        """
        image = cls()
        for record_offset, record in records:
            if record_offset > offset:
                raise MetadataReplayError(
                    f"beyond the snapshot's last offset {offset}", record, record_offset
                )
            image._replay(record, record_offset)
        image._offset = offset
        image._epoch = epoch
        return image

    def _replay(self, record: MetadataRecord, offset: int) -> None:
        replay = _REPLAYERS.get(type(record))
        if replay is None:
            raise MetadataReplayError("unknown record type", record, offset)
        reason = replay(self, record, offset)
        if reason is not None:
            raise MetadataReplayError(reason, record, offset)

    def apply_batch(
        self, records_with_offsets: Iterable[tuple[int, MetadataRecord]], epoch: int
    ) -> MetadataDelta:
        """Apply a batch of ``(offset, record)`` pairs written at controller ``epoch``; returns its delta."""
        delta = _DeltaBuilder(self)
        for offset, record in records_with_offsets:
            if offset <= self._offset:
                continue
            delta.note(record)
            self.apply(record, offset, epoch)
        return delta.build()

    # -- queries ---------------------------------------------------------------------------

    def get(self, name: str) -> TopicState | None:
        return self._by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicState]:
        """Every topic, by name."""
        return [self._by_name[name] for name in sorted(self._by_name)]

    def broker_ids(self) -> list[int]:
        """Every registered broker id, fenced or not, ascending."""
        return sorted(self._brokers)

    # -- queries (cluster) -----------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def brokers(self) -> list[BrokerRegistration]:
        """Every registration, by broker id."""
        return [self._brokers[broker_id] for broker_id in sorted(self._brokers)]

    def live_broker_ids(self) -> list[int]:
        """The registered, unfenced brokers, ascending: those that may lead and be in an ISR."""
        return sorted(b.broker_id for b in self._brokers.values() if not b.fenced)

    def registration_offset(self, broker_id: int) -> int | None:
        """The offset of the broker's latest RegisterBrokerRecord: it may be unfenced once caught up to it."""
        return self._registration_offsets.get(broker_id)

    def broker_configs(self, resource_name: str) -> dict[str, str]:
        """The overrides of one broker (its id as text), or the cluster default ("")."""
        return dict(self._broker_configs.get(resource_name, {}))

    def broker_config_resources(self) -> list[str]:
        """The resource names that have broker config overrides (``""`` the cluster default), sorted."""
        return sorted(self._broker_configs)

    def group_configs(self, group_id: str) -> dict[str, str]:
        """The group-config overrides of one group (empty for a group without any, existing or not)."""
        return dict(self._group_configs.get(group_id, {}))

    def group_config_resources(self) -> list[str]:
        """The groups that have group-config overrides, sorted."""
        return sorted(self._group_configs)

    def partition(self, topic_id: uuid.UUID, index: int) -> PartitionState | None:
        topic = self._by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(index)

    def partition_count(self) -> int:
        return sum(len(topic.partitions) for topic in self._by_id.values())

    @property
    def next_producer_id(self) -> int:
        """The first producer id of the next block the controller will hand out."""
        return self._next_producer_id

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity with client quotas, and its quotas by key (copies)."""
        return {entity: dict(values) for entity, values in self._client_quotas.items()}

    def has_client_quotas(self) -> bool:
        """Whether any entity has a client quota (the broker skips quota work when none does)."""
        return bool(self._client_quotas)

    def client_quota(self, entity: QuotaEntity) -> dict[str, float]:
        """The quotas of one entity (pairs sorted by entity type), by key; empty when it has none."""
        return self._client_quotas.get(entity, {})

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        """``user``'s SCRAM credential for ``mechanism``, None when it has none: what the broker's
        SASL/SCRAM authenticator checks a login against."""
        return self._scram.get(mechanism, user)

    @property
    def scram_credentials(self) -> ScramCredentials:
        """Every user's SCRAM credentials (DescribeUserScramCredentials, snapshots); read-only."""
        return self._scram

    @property
    def acls(self) -> AclCache:
        """Every ACL of the cluster, indexed for the authorizer (DescribeAcls, snapshots); read-only."""
        return self._acls

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetadataImage):
            return NotImplemented
        return self._state() == other._state()

    __hash__ = None  # type: ignore[assignment]  # unhashable; typeshed declares __hash__ a method

    def __repr__(self) -> str:
        return (
            f"MetadataImage(offset={self._offset}, epoch={self._epoch}, brokers={self.broker_ids()}, "
            f"topics={sorted(self._by_name)})"
        )

    def _state(self) -> tuple[Any, ...]:
        return (
            self._brokers,
            self._registration_offsets,
            self._by_name,
            self._by_id,
            self._broker_configs,
            self._group_configs,
            self._client_quotas,
            self._scram,
            self._acls,
            self._next_producer_id,
            self._offset,
            self._epoch,
        )

    # -- one replayer per record type: check first, then change; return why not, or None ----------

    def _register_broker(self, record: RegisterBrokerRecord, offset: int) -> str | None:
        self._brokers[record.broker_id] = BrokerRegistration(
            broker_id=record.broker_id,
            incarnation_id=record.incarnation_id,
            broker_epoch=record.broker_epoch,
            endpoints=tuple(record.endpoints),
            rack=record.rack,
            fenced=record.fenced,
        )
        self._registration_offsets[record.broker_id] = offset
        return None

    def _unregister_broker(self, record: UnregisterBrokerRecord, offset: int) -> str | None:
        reason = self._check_broker_epoch(record.broker_id, record.broker_epoch)
        if reason is None:
            del self._brokers[record.broker_id]
            del self._registration_offsets[record.broker_id]
        return reason

    def _fence_broker(self, record: FenceBrokerRecord, offset: int) -> str | None:
        return self._set_fenced(record.broker_id, record.broker_epoch, fenced=True)

    def _unfence_broker(self, record: UnfenceBrokerRecord, offset: int) -> str | None:
        return self._set_fenced(record.broker_id, record.broker_epoch, fenced=False)

    def _set_fenced(self, broker_id: int, broker_epoch: int, *, fenced: bool) -> str | None:
        reason = self._check_broker_epoch(broker_id, broker_epoch)
        if reason is None:
            self._brokers[broker_id] = dataclasses.replace(self._brokers[broker_id], fenced=fenced)
        return reason

    def _check_broker_epoch(self, broker_id: int, broker_epoch: int) -> str | None:
        registration = self._brokers.get(broker_id)
        if registration is None:
            return f"broker {broker_id} is not registered"
        if registration.broker_epoch != broker_epoch:
            return (
                f"broker {broker_id} is registered at epoch {registration.broker_epoch}, not {broker_epoch}"
            )
        return None

    def _create_topic(self, record: TopicRecord, offset: int) -> str | None:
        if record.topic_id == ZERO_UUID:
            return "the zero UUID is not a topic id"
        if record.name in self._by_name:
            return f"topic {record.name!r} already exists"
        if record.topic_id in self._by_id:
            return f"topic id {record.topic_id} is already used by {self._by_id[record.topic_id].name!r}"
        topic = TopicState(record.name, record.topic_id, {})
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        return None

    def _create_partition(self, record: PartitionRecord, offset: int) -> str | None:
        topic = self._by_id.get(record.topic_id)
        if topic is None:
            return f"unknown topic id {record.topic_id}"
        if record.partition_id in topic.partitions:
            return f"partition {topic.name}-{record.partition_id} already exists"
        reason = _invalid_partition(record)
        if reason is None:
            topic.set_partition(partition_state_of(record))
        return reason

    def _change_partition(self, record: PartitionChangeRecord, offset: int) -> str | None:
        topic = self._by_id.get(record.topic_id)
        if topic is None:
            return f"unknown topic id {record.topic_id}"
        old = topic.partitions.get(record.partition_id)
        if old is None:
            return f"unknown partition {topic.name}-{record.partition_id}"
        reason = _invalid_partition(record) or _invalid_epochs(old, record)
        if reason is None:
            topic.set_partition(partition_state_of(record))
        return reason

    def _remove_topic(self, record: RemoveTopicRecord, offset: int) -> str | None:
        topic = self._by_id.get(record.topic_id)
        if topic is None:
            return f"unknown topic id {record.topic_id}"
        del self._by_id[topic.topic_id]
        del self._by_name[topic.name]
        return None

    def _set_config(self, record: ConfigRecord, offset: int) -> str | None:
        if record.resource_type == ConfigResourceType.TOPIC:
            topic = self._by_name.get(record.resource_name)
            if topic is None:
                return f"unknown topic {record.resource_name!r}"
            _set_or_delete(topic.configs, record.name, record.value)
            return None
        if record.resource_type == ConfigResourceType.BROKER:
            _set_resource_config(self._broker_configs, record)
            return None
        if record.resource_type == ConfigResourceType.GROUP:
            if record.resource_name == "":
                return "a group config without a group"
            _set_resource_config(self._group_configs, record)
            return None
        return f"unsupported config resource type {record.resource_type}"

    def _set_client_quota(self, record: ClientQuotaRecord, offset: int) -> str | None:
        if not record.entity:
            return "a client quota without an entity"
        entity = quota_entity(record.entity)
        quotas = self._client_quotas.setdefault(entity, {})
        if record.remove:
            quotas.pop(record.key, None)
        else:
            quotas[record.key] = record.value
        if not quotas:
            del self._client_quotas[entity]
        return None

    def _upsert_scram_credential(self, record: UserScramCredentialRecord, offset: int) -> str | None:
        return self._scram.upsert(record)

    def _remove_scram_credential(self, record: RemoveUserScramCredentialRecord, offset: int) -> str | None:
        return self._scram.remove(record)

    def _add_acl(self, record: AccessControlEntryRecord, offset: int) -> str | None:
        return self._acls.add(record)

    def _remove_acl(self, record: RemoveAccessControlEntryRecord, offset: int) -> str | None:
        return self._acls.remove(record)

    def _allocate_producer_ids(self, record: ProducerIdsRecord, offset: int) -> str | None:
        if record.next_producer_id <= self._next_producer_id:
            return (
                f"next producer id {record.next_producer_id} is not above the current "
                f"next producer id {self._next_producer_id}"
            )
        self._next_producer_id = record.next_producer_id
        return None


_Replayer = Callable[[MetadataImage, Any, int], "str | None"]
_REPLAYERS: dict[type, _Replayer] = {
    RegisterBrokerRecord: MetadataImage._register_broker,
    UnregisterBrokerRecord: MetadataImage._unregister_broker,
    TopicRecord: MetadataImage._create_topic,
    PartitionRecord: MetadataImage._create_partition,
    ConfigRecord: MetadataImage._set_config,
    PartitionChangeRecord: MetadataImage._change_partition,
    FenceBrokerRecord: MetadataImage._fence_broker,
    UnfenceBrokerRecord: MetadataImage._unfence_broker,
    RemoveTopicRecord: MetadataImage._remove_topic,
    ClientQuotaRecord: MetadataImage._set_client_quota,
    ProducerIdsRecord: MetadataImage._allocate_producer_ids,
    UserScramCredentialRecord: MetadataImage._upsert_scram_credential,
    RemoveUserScramCredentialRecord: MetadataImage._remove_scram_credential,
    AccessControlEntryRecord: MetadataImage._add_acl,
    RemoveAccessControlEntryRecord: MetadataImage._remove_acl,
}


def partition_state_of(record: PartitionRecord | PartitionChangeRecord) -> PartitionState:
    """The partition state a PartitionRecord or PartitionChangeRecord describes."""
    return PartitionState(
        partition=record.partition_id,
        leader_id=record.leader,
        leader_epoch=record.leader_epoch,
        partition_epoch=record.partition_epoch,
        replicas=list(record.replicas),
        isr=list(record.isr),
        removing_replicas=list(record.removing_replicas),
        adding_replicas=list(record.adding_replicas),
    )


def _invalid_partition(record: PartitionRecord | PartitionChangeRecord) -> str | None:
    """Why the partition state a record carries is impossible, or None."""
    if record.partition_id < 0:
        return "negative partition id"
    if not record.replicas or len(set(record.replicas)) != len(record.replicas):
        return f"replicas {list(record.replicas)} must be a non-empty list of distinct brokers"
    if (
        not record.isr
        or len(set(record.isr)) != len(record.isr)
        or not set(record.isr) <= set(record.replicas)
    ):
        return f"ISR {list(record.isr)} must be a non-empty set of replicas {list(record.replicas)}"
    if record.leader != NO_LEADER and record.leader not in record.isr:
        return f"leader {record.leader} is not in the ISR {list(record.isr)}"
    removing, adding = set(record.removing_replicas), set(record.adding_replicas)
    if (
        len(removing) != len(record.removing_replicas)
        or len(adding) != len(record.adding_replicas)
        or not (removing | adding) <= set(record.replicas)
        or removing & adding
    ):
        return (
            f"removing {list(record.removing_replicas)} and adding {list(record.adding_replicas)} must be "
            f"disjoint sets of replicas {list(record.replicas)}"
        )
    if record.leader_epoch < 0 or record.partition_epoch < 0:
        return "negative epoch"
    return None


def _invalid_epochs(old: PartitionState, record: PartitionChangeRecord) -> str | None:
    """Epochs only move forward: every change bumps the partition epoch, a new leader the leader epoch."""
    if record.partition_epoch <= old.partition_epoch:
        return f"partition epoch {record.partition_epoch} does not advance past {old.partition_epoch}"
    if record.leader_epoch < old.leader_epoch:
        return f"leader epoch {record.leader_epoch} is older than {old.leader_epoch}"
    if record.leader != old.leader_id and record.leader_epoch == old.leader_epoch:
        return f"leader changes from {old.leader_id} to {record.leader} without a new leader epoch"
    return None


def _set_resource_config(resources: dict[str, dict[str, str]], record: ConfigRecord) -> None:
    """Set or delete one key of a resource's overrides; a resource left without any is dropped."""
    configs = resources.setdefault(record.resource_name, {})
    _set_or_delete(configs, record.name, record.value)
    if not configs:
        del resources[record.resource_name]


def _set_or_delete(configs: dict[str, str], name: str, value: str | None) -> None:
    if value is None:
        configs.pop(name, None)
    else:
        configs[name] = value


class _DeltaBuilder:
    """Remembers, before each record of a batch, the state it is about to change; then diffs."""

    def __init__(self, image: MetadataImage) -> None:
        self._image = image
        self._brokers_before: dict[int, BrokerRegistration | None] = {}
        self._registered: set[int] = set()
        self._topics_before: dict[uuid.UUID, bool] = {}
        self._removed: dict[uuid.UUID, TopicState] = {}
        self._partitions_before: dict[tuple[uuid.UUID, int], PartitionState | None] = {}
        self._topic_configs_before: dict[str, tuple[uuid.UUID, dict[str, str]]] = {}
        self._broker_configs_before: dict[str, dict[str, str]] = {}
        self._group_configs_before: dict[str, dict[str, str]] = {}
        self._producer_id_before: int | None = None

    def note(self, record: MetadataRecord) -> None:
        image = self._image
        match record:
            case (
                RegisterBrokerRecord()
                | UnregisterBrokerRecord()
                | FenceBrokerRecord()
                | UnfenceBrokerRecord()
            ):
                self._brokers_before.setdefault(record.broker_id, image.broker(record.broker_id))
                if isinstance(record, RegisterBrokerRecord):
                    self._registered.add(record.broker_id)
            case TopicRecord():
                self._topics_before.setdefault(record.topic_id, image.get_by_id(record.topic_id) is not None)
            case RemoveTopicRecord():
                topic = image.get_by_id(record.topic_id)
                self._topics_before.setdefault(record.topic_id, topic is not None)
                if topic is not None:
                    self._removed[record.topic_id] = topic
            case PartitionRecord() | PartitionChangeRecord():
                key = (record.topic_id, record.partition_id)
                self._partitions_before.setdefault(key, image.partition(record.topic_id, record.partition_id))
            case ConfigRecord(resource_type=ConfigResourceType.TOPIC):
                topic = image.get(record.resource_name)
                if topic is not None and record.resource_name not in self._topic_configs_before:
                    self._topic_configs_before[record.resource_name] = (topic.topic_id, dict(topic.configs))
            case ConfigRecord(resource_type=ConfigResourceType.GROUP):
                self._group_configs_before.setdefault(
                    record.resource_name, image.group_configs(record.resource_name)
                )
            case ConfigRecord(resource_type=ConfigResourceType.BROKER):
                self._broker_configs_before.setdefault(
                    record.resource_name, image.broker_configs(record.resource_name)
                )
            case ProducerIdsRecord():
                if self._producer_id_before is None:
                    self._producer_id_before = image.next_producer_id

    def build(self) -> MetadataDelta:
        created, deleted = self._topic_changes()
        reported_whole = {t.topic_id for t in created} | {t.topic_id for t in deleted}
        new_partitions, changed_partitions = self._partition_changes(reported_whole)
        registered, fenced, unfenced, unregistered = self._broker_changes()
        next_producer_id = self._image.next_producer_id
        return MetadataDelta(
            topics_created=created,
            topics_deleted=deleted,
            partitions_created=new_partitions,
            partitions_changed=changed_partitions,
            topic_configs_changed=self._topic_config_changes(reported_whole),
            broker_configs_changed=tuple(
                name
                for name, before in sorted(self._broker_configs_before.items())
                if self._image.broker_configs(name) != before
            ),
            group_configs_changed=tuple(
                name
                for name, before in sorted(self._group_configs_before.items())
                if self._image.group_configs(name) != before
            ),
            brokers_registered=registered,
            brokers_fenced=fenced,
            brokers_unfenced=unfenced,
            brokers_unregistered=unregistered,
            next_producer_id=(
                next_producer_id
                if self._producer_id_before is not None and self._producer_id_before != next_producer_id
                else None
            ),
        )

    def _topic_changes(self) -> tuple[tuple[TopicState, ...], tuple[TopicState, ...]]:
        created, deleted = [], []
        for topic_id, existed in self._topics_before.items():
            now = self._image.get_by_id(topic_id)
            if now is not None and not existed:
                created.append(now)
            elif now is None and existed:
                deleted.append(self._removed[topic_id])
        return tuple(sorted(created, key=_by_name)), tuple(sorted(deleted, key=_by_name))

    def _partition_changes(
        self, skipped_topics: set[uuid.UUID]
    ) -> tuple[tuple[NewPartitions, ...], tuple[PartitionChange, ...]]:
        added: dict[uuid.UUID, list[PartitionState]] = {}
        changed: list[PartitionChange] = []
        for (topic_id, index), old in self._partitions_before.items():
            topic = self._image.get_by_id(topic_id)
            if topic_id in skipped_topics or topic is None or index not in topic.partitions:
                continue
            new = topic.partitions[index]
            if old is None:
                added.setdefault(topic_id, []).append(new)
            elif old != new:
                changed.append(PartitionChange(topic_id, topic.name, old, new))
        created = [
            NewPartitions(topic, tuple(sorted(parts, key=lambda p: p.partition)))
            for topic_id, parts in added.items()
            if (topic := self._image.get_by_id(topic_id)) is not None
        ]
        return (
            tuple(sorted(created, key=lambda n: n.topic.name)),
            tuple(sorted(changed, key=lambda c: (c.topic_name, c.new.partition))),
        )

    def _topic_config_changes(self, skipped_topics: set[uuid.UUID]) -> tuple[str, ...]:
        changed = []
        for name, (topic_id, before) in self._topic_configs_before.items():
            topic = self._image.get(name)
            if topic_id in skipped_topics or topic is None or topic.topic_id != topic_id:
                continue
            if topic.configs != before:
                changed.append(name)
        return tuple(sorted(changed))

    def _broker_changes(
        self,
    ) -> tuple[
        tuple[BrokerRegistration, ...], tuple[int, ...], tuple[int, ...], tuple[BrokerRegistration, ...]
    ]:
        registered, fenced, unfenced, unregistered = [], [], [], []
        for broker_id, old in sorted(self._brokers_before.items()):
            new = self._image.broker(broker_id)
            if new is None:
                if old is not None:
                    unregistered.append(old)
                continue
            if broker_id in self._registered:
                registered.append(new)
            was_usable = old is not None and not old.fenced
            if was_usable and new.fenced:
                fenced.append(broker_id)
            elif not was_usable and not new.fenced:
                unfenced.append(broker_id)
        return tuple(registered), tuple(fenced), tuple(unfenced), tuple(unregistered)


def _by_name(topic: TopicState) -> str:
    return topic.name
