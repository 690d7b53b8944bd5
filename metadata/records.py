"""The metadata records of the ``__cluster_metadata`` log, one frozen dataclass per record type.

These are KRaft's records (``metadata/src/main/resources/common/metadata/*.json`` in Kafka), reduced
to the fields kipling uses. The attribute names are the snake_case form of Kafka's field names, and a
serde in ``protocol/`` maps them to the wire by name, so renaming an attribute is a wire change.
``RECORD_TYPE`` is Kafka's record type id, written in front of every record in the log.

Every record that changes a partition carries its full resulting state with both epochs
(``leader_epoch``, ``partition_epoch``), and every broker record carries the ``broker_epoch`` it
applies to, so a replay never depends on anything but the log itself, and a record written by a
stale controller or about a stale broker incarnation is recognisable as such.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar


class SecurityProtocol(IntEnum):
    """Kafka's SecurityProtocol ids, as carried by a broker endpoint."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids that a ConfigRecord may name."""

    TOPIC = 2
    BROKER = 4
    GROUP = 32
    """A consumer group's overrides of the group configs (Kafka 4.0, KIP-848)."""


@dataclass(frozen=True, slots=True)
class BrokerEndpointRecord:
    """One listener of a broker: where clients (and other brokers) reach it."""

    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker (incarnation) joined; its ``broker_epoch`` is this record's offset in the log."""

    RECORD_TYPE: ClassVar[int] = 0

    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpointRecord, ...]
    rack: str | None
    fenced: bool


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    """The broker registration at ``broker_epoch`` is removed."""

    RECORD_TYPE: ClassVar[int] = 1

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A topic exists under ``name`` with ``topic_id``; its partitions follow as PartitionRecords."""

    RECORD_TYPE: ClassVar[int] = 2

    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A new partition with its assignment, leader, ISR and epochs.

    ``removing_replicas`` and ``adding_replicas`` (Kafka's fields) describe a reassignment in
    progress: ``replicas`` is then the union of the original and the target replicas, the target
    being ``replicas`` minus ``removing_replicas``. Both are empty when none is in progress.
    """

    RECORD_TYPE: ClassVar[int] = 3

    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """A config override of a topic, a broker or a group (:class:`ConfigResourceType`); ``value`` None
    deletes the override."""

    RECORD_TYPE: ClassVar[int] = 4

    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """The FULL state of a partition after a change (leader, ISR, replicas and both epochs).

    Kafka's PartitionChangeRecord carries only the fields that changed and lets the replayer bump
    the epochs; carrying the whole state makes every record self-describing and lets a replay
    check that epochs only move forward. ``removing_replicas`` / ``adding_replicas`` as in
    :class:`PartitionRecord`: the reassignment in progress after the change, if any.
    """

    RECORD_TYPE: ClassVar[int] = 5

    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    """The broker at ``broker_epoch`` is fenced: not leader-eligible, not ISR-eligible."""

    RECORD_TYPE: ClassVar[int] = 7

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    """The broker at ``broker_epoch`` caught up with the metadata log and may lead again."""

    RECORD_TYPE: ClassVar[int] = 8

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    """The topic with ``topic_id`` is deleted, with its partitions and config overrides."""

    RECORD_TYPE: ClassVar[int] = 9

    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """A client quota of an entity is set to ``value``, or removed (``remove``; value unused).

    ``entity`` is Kafka's entity: (entity type, entity name) pairs, types among ``user``,
    ``client-id`` and ``ip``, a None name standing for the type's default entity.
    """

    RECORD_TYPE: ClassVar[int] = 14

    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float
    remove: bool


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids went to a broker; ``next_producer_id`` is the first id of the next block."""

    RECORD_TYPE: ClassVar[int] = 15

    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """An ACL binding exists: ``operation`` on resources matching (``resource_type``,
    ``resource_name``, ``pattern_type``) is allowed or denied (``permission_type``) to
    ``principal`` connecting from ``host``.

    The int8 codes are those of :mod:`protocol.acl_types`. ``id`` is a uuid the controller draws when
    the ACL is created: the one handle by which a RemoveAccessControlEntryRecord deletes it.
    """

    RECORD_TYPE: ClassVar[int] = 18

    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    """The ACL created with ``id`` is deleted."""

    RECORD_TYPE: ClassVar[int] = 19

    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """``name`` has a SCRAM credential for ``mechanism`` (Kafka's type byte, 1 SCRAM-SHA-256,
    2 SCRAM-SHA-512), replacing any it had for that mechanism.

    What a broker needs to verify a login and nothing more: the salt, StoredKey, ServerKey and
    iteration count (RFC 5802), never the password or the salted password. The keys let whoever
    holds them and a captured exchange log in, so they stay out of ``repr`` and thus out of logs.
    """

    RECORD_TYPE: ClassVar[int] = 11

    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    """``name``'s SCRAM credential for ``mechanism`` is deleted."""

    RECORD_TYPE: ClassVar[int] = 22

    name: str
    mechanism: int


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | UserScramCredentialRecord
    | ClientQuotaRecord
    | ProducerIdsRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | RemoveUserScramCredentialRecord
)
"""Any record of the metadata log."""

RECORD_CLASSES: dict[int, type[MetadataRecord]] = {
    cls.RECORD_TYPE: cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        RemoveTopicRecord,
        UserScramCredentialRecord,
        ClientQuotaRecord,
        ProducerIdsRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        RemoveUserScramCredentialRecord,
    )
}
"""Record type id -> record class, for the serde."""
