"""The records of ``__consumer_offsets`` for consumer-protocol groups (KIP-848), as Kafka 4.0 writes them.

A consumer group is persisted as six kinds of records, told apart by their key's version (which is
why each key struct is valid in exactly one version); every value is version 0 and flexible::

    key 3  ConsumerGroupMetadataKey                group           value: group epoch
    key 4  ConsumerGroupPartitionMetadataKey       group           value: subscribed topics' metadata
    key 5  ConsumerGroupMemberMetadataKey          group, member   value: the member's subscription
    key 6  ConsumerGroupTargetAssignmentMetadataKey group          value: target assignment epoch
    key 7  ConsumerGroupTargetAssignmentMemberKey  group, member   value: the member's target partitions
    key 8  ConsumerGroupCurrentMemberAssignmentKey group, member   value: epochs, state, partitions

Tombstones (null values) remove what their key names. Kafka writes the member's current assignment
tombstone, then its target assignment tombstone, then its subscription tombstone when a member
leaves, and the same kinds for every member, then the group's own keys, when a group is deleted.

The member metadata value's ``ClassicMemberMetadata`` (tag 0) is set by Kafka only for classic
members of a consumer group (the online migration of KIP-848); kipling writes and reads it the
same way. ``PartitionMetadata`` in the partition metadata value is
deprecated in Kafka 4.0 and always written empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from protocol.schema import Field, MessageSpec
from protocol.versioned import encode_versioned

CONSUMER_GROUP_VALUE_VERSION = 0

_TOPIC_PARTITIONS = (
    Field("topic_id", "uuid", "0+"),
    Field("partitions", "[]int32", "0+"),
)


def _key(version: int, name: str, *fields: str) -> MessageSpec:
    return MessageSpec(
        version,
        name,
        "coordinator-key",
        str(version),
        "none",
        tuple(Field(f, "string", str(version)) for f in fields),
    )


def _value(name: str, *fields: Field) -> MessageSpec:
    return MessageSpec(0, name, "coordinator-value", "0", "0+", tuple(fields))


METADATA_KEY_SPEC = _key(3, "ConsumerGroupMetadataKey", "group_id")
PARTITION_METADATA_KEY_SPEC = _key(4, "ConsumerGroupPartitionMetadataKey", "group_id")
MEMBER_METADATA_KEY_SPEC = _key(5, "ConsumerGroupMemberMetadataKey", "group_id", "member_id")
TARGET_ASSIGNMENT_METADATA_KEY_SPEC = _key(6, "ConsumerGroupTargetAssignmentMetadataKey", "group_id")
TARGET_ASSIGNMENT_MEMBER_KEY_SPEC = _key(7, "ConsumerGroupTargetAssignmentMemberKey", "group_id", "member_id")
CURRENT_MEMBER_ASSIGNMENT_KEY_SPEC = _key(
    8, "ConsumerGroupCurrentMemberAssignmentKey", "group_id", "member_id"
)

METADATA_VALUE_SPEC = _value("ConsumerGroupMetadataValue", Field("epoch", "int32", "0+"))
PARTITION_METADATA_VALUE_SPEC = _value(
    "ConsumerGroupPartitionMetadataValue",
    Field(
        "topics",
        "[]TopicMetadata",
        "0+",
        fields=(
            Field("topic_id", "uuid", "0+"),
            Field("topic_name", "string", "0+"),
            Field("num_partitions", "int32", "0+"),
            Field(
                "partition_metadata",
                "[]PartitionMetadata",
                "0+",
                fields=(Field("partition", "int32", "0+"), Field("racks", "[]string", "0+")),
            ),
        ),
    ),
)
MEMBER_METADATA_VALUE_SPEC = _value(
    "ConsumerGroupMemberMetadataValue",
    Field("instance_id", "string", "0+", nullable_versions="0+"),
    Field("rack_id", "string", "0+", nullable_versions="0+"),
    Field("client_id", "string", "0+"),
    Field("client_host", "string", "0+"),
    Field("subscribed_topic_names", "[]string", "0+"),
    Field("subscribed_topic_regex", "string", "0+", nullable_versions="0+"),
    Field("rebalance_timeout_ms", "int32", "0+", default=-1),
    Field("server_assignor", "string", "0+", nullable_versions="0+"),
    Field(
        "classic_member_metadata",
        "ClassicMemberMetadata",
        "0+",
        nullable_versions="0+",
        tagged_versions="0+",
        tag=0,
        default=None,
        fields=(
            Field("session_timeout_ms", "int32", "0+"),
            Field(
                "supported_protocols",
                "[]ClassicProtocol",
                "0+",
                fields=(Field("name", "string", "0+"), Field("metadata", "bytes", "0+")),
            ),
        ),
    ),
)
TARGET_ASSIGNMENT_METADATA_VALUE_SPEC = _value(
    "ConsumerGroupTargetAssignmentMetadataValue", Field("assignment_epoch", "int32", "0+")
)
TARGET_ASSIGNMENT_MEMBER_VALUE_SPEC = _value(
    "ConsumerGroupTargetAssignmentMemberValue",
    Field("topic_partitions", "[]TopicPartition", "0+", fields=_TOPIC_PARTITIONS),
)
CURRENT_MEMBER_ASSIGNMENT_VALUE_SPEC = _value(
    "ConsumerGroupCurrentMemberAssignmentValue",
    Field("member_epoch", "int32", "0+"),
    Field("previous_member_epoch", "int32", "0+"),
    Field("state", "int8", "0+"),
    Field("assigned_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
    Field("partitions_pending_revocation", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
)


class ConsumerGroupMetadataKey(NamedTuple):
    group: str


class ConsumerGroupPartitionMetadataKey(NamedTuple):
    group: str


class ConsumerGroupMemberMetadataKey(NamedTuple):
    group: str
    member_id: str


class ConsumerGroupTargetAssignmentMetadataKey(NamedTuple):
    group: str


class ConsumerGroupTargetAssignmentMemberKey(NamedTuple):
    group: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentKey(NamedTuple):
    group: str
    member_id: str


ConsumerGroupKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)

KEY_TYPES: Mapping[int, tuple[MessageSpec, type[Any], MessageSpec]] = {
    3: (METADATA_KEY_SPEC, ConsumerGroupMetadataKey, METADATA_VALUE_SPEC),
    4: (PARTITION_METADATA_KEY_SPEC, ConsumerGroupPartitionMetadataKey, PARTITION_METADATA_VALUE_SPEC),
    5: (MEMBER_METADATA_KEY_SPEC, ConsumerGroupMemberMetadataKey, MEMBER_METADATA_VALUE_SPEC),
    6: (
        TARGET_ASSIGNMENT_METADATA_KEY_SPEC,
        ConsumerGroupTargetAssignmentMetadataKey,
        TARGET_ASSIGNMENT_METADATA_VALUE_SPEC,
    ),
    7: (
        TARGET_ASSIGNMENT_MEMBER_KEY_SPEC,
        ConsumerGroupTargetAssignmentMemberKey,
        TARGET_ASSIGNMENT_MEMBER_VALUE_SPEC,
    ),
    8: (
        CURRENT_MEMBER_ASSIGNMENT_KEY_SPEC,
        ConsumerGroupCurrentMemberAssignmentKey,
        CURRENT_MEMBER_ASSIGNMENT_VALUE_SPEC,
    ),
}
"""Key version → (key spec, key type, value spec)."""
_VERSION_OF = {key_type: version for version, (_, key_type, _) in KEY_TYPES.items()}


def encode_key(key: ConsumerGroupKey) -> bytes:
    version = _VERSION_OF[type(key)]
    spec = KEY_TYPES[version][0]
    names = [f.name for f in spec.fields]
    return encode_versioned(spec, version, dict(zip(names, key, strict=True)))


def encode_value(key: ConsumerGroupKey, data: Mapping[str, Any]) -> bytes:
    """The value of ``key``'s kind, version 0."""
    return encode_versioned(KEY_TYPES[_VERSION_OF[type(key)]][2], CONSUMER_GROUP_VALUE_VERSION, data)


def value_spec(key: ConsumerGroupKey) -> MessageSpec:
    return KEY_TYPES[_VERSION_OF[type(key)]][2]


__all__ = [
    "KEY_TYPES",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupKey",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "encode_key",
    "encode_value",
    "value_spec",
]
