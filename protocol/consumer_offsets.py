"""The records of ``__consumer_offsets``, byte for byte as Kafka's classic group coordinator writes them.

Every record of the offsets topic has a key and a value (a null value is a tombstone), each prefixed
with an int16 version, then the body declared below (Kafka's ``MessageUtil.toVersionPrefixedBytes``).
The key version says which record it is, so that compaction never merges two kinds::

    key version 0, 1   OffsetCommitKey     group, topic, partition      value: OffsetCommitValue
    key version 2      GroupMetadataKey    group                        value: GroupMetadataValue
    key version 3-8    a consumer-protocol group's records (KIP-848, :mod:`protocol.consumer_group_records`)

What Kafka 3.x writes, and so what kipling writes:

* offset commit keys at version 1, group metadata keys at version 2;
* OffsetCommitValue version 3 (offset, leader epoch, metadata, commit timestamp), or version 1 (offset,
  metadata, commit timestamp, expire timestamp) when the commit carried a retention time
  (OffsetCommit v2-4): :func:`offset_commit_value_version` picks it;
* GroupMetadataValue version 3 (the highest non-flexible one, with group instance ids).

Readers accept every version Kafka can read (values 0-4, version 4 being flexible), as a new
coordinator must read a log written by an older one. A key with a version of none of these kinds
is returned as :class:`UnknownKey` (a share or streams group's, versions 9 and up), which the loader
skips, as Kafka's does (a left-over of an aborted upgrade). Like Kafka's reader, decoding ignores
bytes after a body.
"""

from __future__ import annotations

from collections.abc import Mapping
from io import BytesIO
from typing import Any, NamedTuple

from protocol import consumer_group_records as cgr
from protocol.data import MessageData
from protocol.errors import DecodeError
from protocol.schema import Field, MessageSpec
from protocol.sentinels import NO_LEADER_EPOCH, NO_TIMESTAMP
from protocol.versioned import encode_versioned, read_version

OFFSET_COMMIT_KEY_VERSION = 1
"""The key version Kafka writes for offset commits (0 is the same body, written by 0.8.2-0.10)."""
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
"""The highest non-flexible GroupMetadataValue version: what Kafka 3.x writes."""
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
"""The only OffsetCommitValue version with an expire timestamp."""


OFFSET_COMMIT_KEY_SPEC = MessageSpec(
    1,
    "OffsetCommitKey",
    "coordinator-key",
    "0-1",
    "none",
    (
        Field("group", "string", "0+"),
        Field("topic", "string", "0+"),
        Field("partition", "int32", "0+"),
    ),
)
GROUP_METADATA_KEY_SPEC = MessageSpec(
    2, "GroupMetadataKey", "coordinator-key", "2", "none", (Field("group", "string", "2+"),)
)
OFFSET_COMMIT_VALUE_SPEC = MessageSpec(
    1,
    "OffsetCommitValue",
    "coordinator-value",
    "0-4",
    "4+",
    (
        Field("offset", "int64", "0+"),
        Field("leader_epoch", "int32", "3+", default=NO_LEADER_EPOCH),
        Field("metadata", "string", "0+"),
        Field("commit_timestamp", "int64", "0+"),
        Field("expire_timestamp", "int64", "1", default=NO_TIMESTAMP),
    ),
)
GROUP_METADATA_VALUE_SPEC = MessageSpec(
    2,
    "GroupMetadataValue",
    "coordinator-value",
    "0-4",
    "4+",
    (
        Field("protocol_type", "string", "0+"),
        Field("generation", "int32", "0+"),
        Field("protocol", "string", "0+", nullable_versions="0+"),
        Field("leader", "string", "0+", nullable_versions="0+"),
        Field("current_state_timestamp", "int64", "2+", default=NO_TIMESTAMP),
        Field(
            "members",
            "[]MemberMetadata",
            "0+",
            fields=(
                Field("member_id", "string", "0+"),
                Field("group_instance_id", "string", "3+", nullable_versions="3+", default=None),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("rebalance_timeout", "int32", "1+"),
                Field("session_timeout", "int32", "0+"),
                Field("subscription", "bytes", "0+"),
                Field("assignment", "bytes", "0+"),
            ),
        ),
    ),
)


class OffsetCommitKey(NamedTuple):
    """The key of a committed offset: one partition's offset for one group."""

    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    """The key of a group's metadata (generation, protocol, leader, members and assignments)."""

    group: str


class UnknownKey(NamedTuple):
    """A key whose version is neither kind's: a newer coordinator's record, skipped on load."""

    version: int


OffsetsKey = OffsetCommitKey | GroupMetadataKey | cgr.ConsumerGroupKey | UnknownKey


class VersionedValue(NamedTuple):
    """A decoded value: the version it was written in and its fields (absent ones at defaults)."""

    version: int
    data: MessageData


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return encode_versioned(
        OFFSET_COMMIT_KEY_SPEC,
        OFFSET_COMMIT_KEY_VERSION,
        {"group": group, "topic": topic, "partition": partition},
    )


def encode_group_metadata_key(group: str) -> bytes:
    return encode_versioned(GROUP_METADATA_KEY_SPEC, GROUP_METADATA_KEY_VERSION, {"group": group})


def decode_key(key: bytes | bytearray | memoryview) -> OffsetsKey:
    """Which record a key names: the version prefix decides, as in Kafka's ``readMessageKey``."""
    io = BytesIO(key)
    version = read_version(io, "key")
    if version in OFFSET_COMMIT_KEY_SPEC.versions:
        data = OFFSET_COMMIT_KEY_SPEC.codec(version).read(io)
        return OffsetCommitKey(data.group, data.topic, data.partition)
    if version in GROUP_METADATA_KEY_SPEC.versions:
        return GroupMetadataKey(GROUP_METADATA_KEY_SPEC.codec(version).read(io).group)
    consumer_group = cgr.KEY_TYPES.get(version)
    if consumer_group is not None:
        spec, key_type, _ = consumer_group
        data = spec.codec(version).read(io)
        return key_type(*(data[f.name] for f in spec.fields))  # type: ignore[no-any-return]
    return UnknownKey(version)


def offset_commit_value_version(expire_timestamp: int) -> int:
    """Kafka's choice: version 1 carries an expire timestamp, otherwise version 3."""
    if expire_timestamp != NO_TIMESTAMP:
        return OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return OFFSET_COMMIT_VALUE_VERSION


def encode_offset_commit_value(data: Mapping[str, Any], version: int | None = None) -> bytes:
    """The value of a committed offset; ``version`` defaults to :func:`offset_commit_value_version`."""
    if version is None:
        version = offset_commit_value_version(data.get("expire_timestamp", NO_TIMESTAMP))
    return encode_versioned(OFFSET_COMMIT_VALUE_SPEC, version, data)


def encode_group_metadata_value(
    data: Mapping[str, Any], version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    return encode_versioned(GROUP_METADATA_VALUE_SPEC, version, data)


def _decode_value(spec: MessageSpec, value: bytes | bytearray | memoryview) -> VersionedValue:
    io = BytesIO(value)
    version = read_version(io, spec.name)
    if version not in spec.versions:
        raise DecodeError(f"unknown {spec.name} version {version} (valid {spec.valid_versions})")
    return VersionedValue(version, spec.codec(version).read(io))


def decode_offset_commit_value(value: bytes | bytearray | memoryview) -> VersionedValue:
    return _decode_value(OFFSET_COMMIT_VALUE_SPEC, value)


def decode_group_metadata_value(value: bytes | bytearray | memoryview) -> VersionedValue:
    return _decode_value(GROUP_METADATA_VALUE_SPEC, value)


def decode_consumer_group_value(
    key: cgr.ConsumerGroupKey, value: bytes | bytearray | memoryview
) -> VersionedValue:
    """The value of a consumer-protocol group's record of ``key``'s kind."""
    return _decode_value(cgr.value_spec(key), value)


__all__ = [
    "GROUP_METADATA_KEY_SPEC",
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_SPEC",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_SPEC",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_SPEC",
    "OFFSET_COMMIT_VALUE_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY",
    "GroupMetadataKey",
    "OffsetCommitKey",
    "OffsetsKey",
    "UnknownKey",
    "VersionedValue",
    "decode_consumer_group_value",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "offset_commit_value_version",
]
