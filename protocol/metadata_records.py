"""Cluster-metadata records: what the controller writes to the metadata log, KRaft style.

The controller owns cluster metadata as a log (DESIGN.md §1): record batches v2 whose record
values are the records declared here, and brokers learn the cluster by fetching that log. Each
record value is framed as Kafka's ``MetadataRecordSerde`` (``AbstractApiMessageSerde``) frames it::

    unsigned varint  frame version (always 1)
    unsigned varint  record type
    unsigned varint  record version
    body             the record as a flexible struct (compact strings and arrays, tag buffer last)

Decoding rejects what Kafka's reader rejects: another frame version, an unknown type or version,
and bytes left after the body.

The frame and the type ids are Kafka's, but the bodies are kipling's own, smaller records, not
Kafka's: e.g. kipling's ``PartitionRecord`` carries adding/removing replicas as tagged fields
(Kafka: plain fields), its endpoint port is an int32 (Kafka: uint16), and
``PartitionChangeRecord`` carries the full partition state after the change (Kafka's carries only
what changed, in tagged fields), so that every record states the epochs it establishes. A Kafka
tool can walk the frames of a kipling metadata log but not read its bodies.

Records are declared once, as data, with the same :class:`~protocol.schema.Field` machinery as
messages, so their codecs are derived and compiled the same way. They are not requests or
responses: :mod:`protocol.messages` never sees them.
"""

from __future__ import annotations

from collections.abc import Mapping
from io import BytesIO
from typing import Any, NamedTuple

from protocol import wire
from protocol.data import MessageData
from protocol.errors import DecodeError, EncodeError
from protocol.schema import Field, MessageSpec, metadata_record

FRAME_VERSION = 1
"""The only frame version Kafka writes (0 was KRaft's 2.8 preview, never readable since)."""

REGISTER_BROKER_RECORD = 0
UNREGISTER_BROKER_RECORD = 1
TOPIC_RECORD = 2
PARTITION_RECORD = 3
CONFIG_RECORD = 4
PARTITION_CHANGE_RECORD = 5
FENCE_BROKER_RECORD = 7
UNFENCE_BROKER_RECORD = 8
REMOVE_TOPIC_RECORD = 9
USER_SCRAM_CREDENTIAL_RECORD = 11
CLIENT_QUOTA_RECORD = 14
PRODUCER_IDS_RECORD = 15
ACCESS_CONTROL_ENTRY_RECORD = 18
REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22


def _record(type_id: int, name: str, *fields: Field) -> MessageSpec:
    """Every record is version 0 and flexible: new fields arrive as tagged fields first."""
    return metadata_record(type_id, name, "0", "0+", *fields)


def _broker_epoch_record(type_id: int, name: str) -> MessageSpec:
    """Unregister, fence and unfence all name a broker in one of its lives (id + epoch)."""
    return _record(type_id, name, Field("broker_id", "int32", "0+"), Field("broker_epoch", "int64", "0+"))


REMOVING_REPLICAS_TAG = 3
ADDING_REPLICAS_TAG = 4
"""Kafka's tags of RemovingReplicas and AddingReplicas in its PartitionChangeRecord."""


def _partition_state_fields() -> tuple[Field, ...]:
    """A partition's whole state: PartitionRecord and PartitionChangeRecord share it.

    The reassignment fields came later: they are tagged (written only while a reassignment is in
    progress, i.e. when not empty), so a log written before them still decodes, as Kafka adds
    fields to its metadata records.
    """
    return (
        Field("partition_id", "int32", "0+"),
        Field("topic_id", "uuid", "0+"),
        Field("replicas", "[]int32", "0+"),
        Field("isr", "[]int32", "0+"),
        Field("leader", "int32", "0+", default=-1),
        Field("leader_epoch", "int32", "0+", default=-1),
        Field("partition_epoch", "int32", "0+", default=-1),
        Field("removing_replicas", "[]int32", "0+", tagged_versions="0+", tag=REMOVING_REPLICAS_TAG),
        Field("adding_replicas", "[]int32", "0+", tagged_versions="0+", tag=ADDING_REPLICAS_TAG),
    )


REGISTER_BROKER_RECORD_SPEC = _record(
    REGISTER_BROKER_RECORD,
    "RegisterBrokerRecord",
    Field("broker_id", "int32", "0+"),
    Field("incarnation_id", "uuid", "0+"),
    Field("broker_epoch", "int64", "0+"),
    Field(
        "endpoints",
        "[]BrokerEndpoint",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("security_protocol", "int16", "0+"),
        ),
    ),
    Field("rack", "string", "0+", nullable_versions="0+"),
    Field("fenced", "bool", "0+", default=True),
)
UNREGISTER_BROKER_RECORD_SPEC = _broker_epoch_record(UNREGISTER_BROKER_RECORD, "UnregisterBrokerRecord")
TOPIC_RECORD_SPEC = _record(
    TOPIC_RECORD,
    "TopicRecord",
    Field("name", "string", "0+"),
    Field("topic_id", "uuid", "0+"),
)
PARTITION_RECORD_SPEC = _record(PARTITION_RECORD, "PartitionRecord", *_partition_state_fields())
CONFIG_RECORD_SPEC = _record(
    CONFIG_RECORD,
    "ConfigRecord",
    Field("resource_type", "int8", "0+"),
    Field("resource_name", "string", "0+"),
    Field("name", "string", "0+"),
    Field("value", "string", "0+", nullable_versions="0+"),
)
PARTITION_CHANGE_RECORD_SPEC = _record(
    PARTITION_CHANGE_RECORD, "PartitionChangeRecord", *_partition_state_fields()
)
FENCE_BROKER_RECORD_SPEC = _broker_epoch_record(FENCE_BROKER_RECORD, "FenceBrokerRecord")
UNFENCE_BROKER_RECORD_SPEC = _broker_epoch_record(UNFENCE_BROKER_RECORD, "UnfenceBrokerRecord")
REMOVE_TOPIC_RECORD_SPEC = _record(REMOVE_TOPIC_RECORD, "RemoveTopicRecord", Field("topic_id", "uuid", "0+"))
CLIENT_QUOTA_RECORD_SPEC = _record(
    CLIENT_QUOTA_RECORD,
    "ClientQuotaRecord",
    Field(
        "entity",
        "[]EntityData",
        "0+",
        fields=(
            Field("entity_type", "string", "0+"),
            Field("entity_name", "string", "0+", nullable_versions="0+"),
        ),
    ),
    Field("key", "string", "0+"),
    Field("value", "float64", "0+"),
    Field("remove", "bool", "0+"),
)
PRODUCER_IDS_RECORD_SPEC = _record(
    PRODUCER_IDS_RECORD,
    "ProducerIdsRecord",
    Field("broker_id", "int32", "0+"),
    Field("broker_epoch", "int64", "0+"),
    Field("next_producer_id", "int64", "0+"),
)
# The ACL records are Kafka's field for field: one ACL binding, named by a uuid the controller
# draws, whose int8 codes are those of protocol.acl_types; removing it names only the uuid.
ACCESS_CONTROL_ENTRY_RECORD_SPEC = _record(
    ACCESS_CONTROL_ENTRY_RECORD,
    "AccessControlEntryRecord",
    Field("id", "uuid", "0+"),
    Field("resource_type", "int8", "0+"),
    Field("resource_name", "string", "0+"),
    Field("pattern_type", "int8", "0+"),
    Field("principal", "string", "0+"),
    Field("host", "string", "0+"),
    Field("operation", "int8", "0+"),
    Field("permission_type", "int8", "0+"),
)
REMOVE_ACCESS_CONTROL_ENTRY_RECORD_SPEC = _record(
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD, "RemoveAccessControlEntryRecord", Field("id", "uuid", "0+")
)
# The SCRAM credential records are Kafka's field for field (3.5 on: the stored and server keys,
# never the salted password); the mechanism is Kafka's type byte (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
USER_SCRAM_CREDENTIAL_RECORD_SPEC = _record(
    USER_SCRAM_CREDENTIAL_RECORD,
    "UserScramCredentialRecord",
    Field("name", "string", "0+"),
    Field("mechanism", "int8", "0+"),
    Field("salt", "bytes", "0+"),
    Field("stored_key", "bytes", "0+"),
    Field("server_key", "bytes", "0+"),
    Field("iterations", "int32", "0+"),
)
REMOVE_USER_SCRAM_CREDENTIAL_RECORD_SPEC = _record(
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    "RemoveUserScramCredentialRecord",
    Field("name", "string", "0+"),
    Field("mechanism", "int8", "0+"),
)

METADATA_RECORDS: dict[int, MessageSpec] = {
    spec.api_key: spec
    for spec in (
        REGISTER_BROKER_RECORD_SPEC,
        UNREGISTER_BROKER_RECORD_SPEC,
        TOPIC_RECORD_SPEC,
        PARTITION_RECORD_SPEC,
        CONFIG_RECORD_SPEC,
        PARTITION_CHANGE_RECORD_SPEC,
        FENCE_BROKER_RECORD_SPEC,
        UNFENCE_BROKER_RECORD_SPEC,
        REMOVE_TOPIC_RECORD_SPEC,
        USER_SCRAM_CREDENTIAL_RECORD_SPEC,
        CLIENT_QUOTA_RECORD_SPEC,
        PRODUCER_IDS_RECORD_SPEC,
        ACCESS_CONTROL_ENTRY_RECORD_SPEC,
        REMOVE_ACCESS_CONTROL_ENTRY_RECORD_SPEC,
        REMOVE_USER_SCRAM_CREDENTIAL_RECORD_SPEC,
    )
}
"""Record type id → its declaration: the table a metadata-log reader dispatches on."""

METADATA_RECORDS_BY_NAME: dict[str, MessageSpec] = {spec.name: spec for spec in METADATA_RECORDS.values()}
"""Kafka-style record name ("TopicRecord") → its declaration, for tools and logs."""


class MetadataRecordFrame(NamedTuple):
    """One decoded record value: which record, in which version, and its fields."""

    record_type: int
    version: int
    data: MessageData


def encode_metadata_record(record_type: int, data: Mapping[str, Any], version: int = 0) -> bytes:
    """The record value for ``data``: frame prefix, then the body.

    ``data`` may be any mapping (nested array elements too, e.g. plain dicts); fields it leaves
    out get their declared defaults, as when encoding a message. Raises :class:`EncodeError` for
    an unknown type or version and for values the schema cannot hold.
    """
    spec = METADATA_RECORDS.get(record_type)
    if spec is None:
        raise EncodeError(f"unknown metadata record type {record_type}")
    if version not in spec.versions:
        raise EncodeError(f"{spec.name} has no version {version} (valid {spec.valid_versions})")
    io = BytesIO()
    for prefix in (FRAME_VERSION, record_type, version):
        wire.write_uvarint(io, prefix)
    spec.codec(version).write(data, io)
    return io.getvalue()


def decode_metadata_record(value: bytes | bytearray | memoryview) -> MetadataRecordFrame:
    """Decode one record value; anything but exactly one well-formed record raises DecodeError.

    Unlike a request body, where Kafka tolerates trailing bytes, a metadata record with bytes after
    its body is corrupt: the log is the controller's source of truth, so it is refused, as Kafka's
    reader refuses it.
    """
    io = BytesIO(value)
    spec, version = _read_frame(io)
    data = spec.codec(version).read(io)
    left = wire.remaining(io)
    if left:
        raise DecodeError(f"{left} byte(s) after the body of {spec.name} v{version}")
    return MetadataRecordFrame(spec.api_key, version, data)


def _read_frame(io: BytesIO) -> tuple[MessageSpec, int]:
    """Read and check the three-varint frame prefix; the stream is left at the body."""
    frame_version = wire.read_uvarint(io)
    if frame_version != FRAME_VERSION:
        raise DecodeError(f"unknown metadata frame version {frame_version} (only {FRAME_VERSION})")
    record_type = wire.read_uvarint(io)
    spec = METADATA_RECORDS.get(record_type)
    if spec is None:
        raise DecodeError(f"unknown metadata record type {record_type}")
    version = wire.read_uvarint(io)
    if version not in spec.versions:
        raise DecodeError(f"{spec.name} has no version {version} (valid {spec.valid_versions})")
    return spec, version
