"""Groups and offsets to ``__consumer_offsets`` records and back (Kafka's GroupMetadataManager codecs).

A group's record holds what survives a coordinator move: generation, protocol type and name, leader,
when the current state began, and per member its ids, client id and host, timeouts, its metadata
for the selected protocol (its "subscription") and its assignment. A group read back is Stable if it
has members, Empty otherwise; its members support only the selected protocol.
"""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.group.group import GroupMetadata
from coordinator.group.log import OffsetsRecord
from coordinator.group.member import MemberMetadata
from coordinator.group.offsets import OffsetAndMetadata, TopicPartition
from coordinator.group.requests import JoinProtocol
from coordinator.group.state import GroupState
from protocol import consumer_offsets as co
from protocol.data import MessageData
from protocol.sentinels import NO_TIMESTAMP
from storage.clock import Clock


def offset_commit_record(
    group_id: str, partition: TopicPartition, offset: OffsetAndMetadata
) -> OffsetsRecord:
    expire = offset.expire_timestamp if offset.expire_timestamp is not None else NO_TIMESTAMP
    value = co.encode_offset_commit_value(
        {
            "offset": offset.offset,
            "leader_epoch": offset.leader_epoch,
            "metadata": offset.metadata,
            "commit_timestamp": offset.commit_timestamp,
            "expire_timestamp": expire,
        }
    )
    return OffsetsRecord(co.encode_offset_commit_key(group_id, *partition), value)


def offset_tombstone(group_id: str, partition: TopicPartition) -> OffsetsRecord:
    return OffsetsRecord(co.encode_offset_commit_key(group_id, *partition), None)


def group_tombstone(group_id: str) -> OffsetsRecord:
    return OffsetsRecord(co.encode_group_metadata_key(group_id), None)


def group_metadata_record(group: GroupMetadata, assignment: Mapping[str, bytes]) -> OffsetsRecord:
    """The group as it stands, with ``assignment`` (every member must have one)."""
    members = []
    for member in group.members:
        if group.protocol_name is None:
            raise RuntimeError(f"cannot write non-empty group {group.group_id} without a protocol")
        if member.member_id not in assignment:
            raise RuntimeError(
                f"cannot write member {member.member_id} of {group.group_id} without assignment"
            )
        members.append(
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "rebalance_timeout": member.rebalance_timeout_ms,
                "session_timeout": member.session_timeout_ms,
                "subscription": member.metadata(group.protocol_name),
                "assignment": assignment[member.member_id],
            }
        )
    timestamp = group.current_state_timestamp
    value = co.encode_group_metadata_value(
        {
            "protocol_type": group.protocol_type or "",
            "generation": group.generation_id,
            "protocol": group.protocol_name,
            "leader": group.leader_id,
            "current_state_timestamp": timestamp if timestamp is not None else NO_TIMESTAMP,
            "members": members,
        }
    )
    return OffsetsRecord(co.encode_group_metadata_key(group.group_id), value)


def read_offset(value: bytes) -> OffsetAndMetadata:
    data = co.decode_offset_commit_value(value).data
    expire = data.expire_timestamp
    return OffsetAndMetadata(
        offset=data.offset,
        leader_epoch=data.leader_epoch,
        metadata=data.metadata,
        commit_timestamp=data.commit_timestamp,
        expire_timestamp=None if expire == NO_TIMESTAMP else expire,
    )


def read_group(group_id: str, value: bytes, clock: Clock) -> GroupMetadata:
    """Rebuild a group from its last record (Kafka's ``readGroupMessageValue`` + ``loadGroup``)."""
    decoded = co.decode_group_metadata_value(value)
    data = decoded.data
    group = GroupMetadata(group_id, GroupState.STABLE if data.members else GroupState.EMPTY, clock)
    group.generation_id = data.generation
    group.protocol_type = data.protocol_type or None
    group.protocol_name = data.protocol
    timestamp = data.current_state_timestamp
    group.current_state_timestamp = None if timestamp == NO_TIMESTAMP else timestamp
    for stored in data.members:
        group.add(_read_member(stored, data.protocol_type, data.protocol, decoded.version))
    group.leader_id = data.leader
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def _read_member(
    stored: MessageData, protocol_type: str, protocol: str | None, version: int
) -> MemberMetadata:
    """Version 0 had no rebalance timeout: the session timeout stood for both."""
    return MemberMetadata(
        member_id=stored.member_id,
        group_instance_id=stored.group_instance_id,
        client_id=stored.client_id,
        client_host=stored.client_host,
        rebalance_timeout_ms=stored.session_timeout if version == 0 else stored.rebalance_timeout,
        session_timeout_ms=stored.session_timeout,
        protocol_type=protocol_type,
        supported_protocols=(JoinProtocol(protocol or "", bytes(stored.subscription)),),
        assignment=bytes(stored.assignment),
    )
