"""The changes that build a consumer-protocol group, as values: applied to the group, written to
``__consumer_offsets`` as its records, and read back from them (Kafka's
GroupCoordinatorRecordHelpers and the ``replay`` methods of its GroupMetadataManager).

A heartbeat computes its changes from the group as it stands, then applies them all and writes
them; loading a partition applies the same changes read from the log, in log order. Each change
with ``None`` as its content is a tombstone.

How a change is applied is Kafka's ``replay``: a change for a group that does not exist creates
it, a tombstone for one that does not exist is ignored; a member's current-assignment tombstone
leaves it at epoch -1 without partitions until its subscription tombstone removes it; a group
epoch tombstone removes the group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog

from coordinator.group.consumer.group import NO_ASSIGNMENT_EPOCH, ConsumerGroup, TopicMetadata
from coordinator.group.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
)
from coordinator.group.log import OffsetsRecord
from protocol import consumer_group_records as cgr
from protocol.consumer_offsets import decode_consumer_group_value

_log = structlog.get_logger("kipling.groups.consumer")


@dataclass(frozen=True, slots=True)
class GroupEpochRecord:
    group_id: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class SubscriptionMetadataRecord:
    group_id: str
    topics: Mapping[str, TopicMetadata] | None


@dataclass(frozen=True, slots=True)
class MemberSubscriptionRecord:
    group_id: str
    member_id: str
    member: ConsumerGroupMember | None
    """Only its subscription fields count."""


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochRecord:
    group_id: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberRecord:
    group_id: str
    member_id: str
    assignment: Assignment | None


@dataclass(frozen=True, slots=True)
class CurrentAssignmentRecord:
    group_id: str
    member_id: str
    member: ConsumerGroupMember | None
    """Only its epochs, state and partitions count."""


ConsumerGroupRecord = (
    GroupEpochRecord
    | SubscriptionMetadataRecord
    | MemberSubscriptionRecord
    | TargetAssignmentEpochRecord
    | TargetAssignmentMemberRecord
    | CurrentAssignmentRecord
)


class ConsumerGroups(Protocol):
    """Where changes find and make their groups (the coordinator's catalog, or a load's dict)."""

    def consumer_group(self, group_id: str) -> ConsumerGroup | None: ...

    def create_consumer_group(self, group_id: str) -> ConsumerGroup: ...

    def remove_consumer_group(self, group: ConsumerGroup) -> None: ...


# -- building the changes of a member -------------------------------------------------------------


def member_tombstones(group_id: str, member_id: str) -> list[ConsumerGroupRecord]:
    """Kafka's ``removeMember``: current assignment, target assignment, then subscription."""
    return [
        CurrentAssignmentRecord(group_id, member_id, None),
        TargetAssignmentMemberRecord(group_id, member_id, None),
        MemberSubscriptionRecord(group_id, member_id, None),
    ]


def group_tombstones(group: ConsumerGroup) -> list[ConsumerGroupRecord]:
    """Kafka's ``createGroupTombstoneRecords``: every member's records by kind, then the group's."""
    group_id = group.group_id
    members = list(group.members)
    records: list[ConsumerGroupRecord] = [CurrentAssignmentRecord(group_id, m, None) for m in members]
    records += [TargetAssignmentMemberRecord(group_id, m, None) for m in members]
    records.append(TargetAssignmentEpochRecord(group_id, None))
    records += [MemberSubscriptionRecord(group_id, m, None) for m in members]
    records.append(SubscriptionMetadataRecord(group_id, None))
    records.append(GroupEpochRecord(group_id, None))
    return records


# -- applying ------------------------------------------------------------------------------------


def apply(record: ConsumerGroupRecord, groups: ConsumerGroups) -> None:
    """Change the group ``record`` names as Kafka's replay does."""
    group = groups.consumer_group(record.group_id)
    creates = _content(record) is not None
    if group is None:
        if not creates:
            return
        group = groups.create_consumer_group(record.group_id)
    if isinstance(record, GroupEpochRecord):
        if record.epoch is None:
            if group.members:
                _log.warning("group epoch tombstone for a group with members", group=group.group_id)
            groups.remove_consumer_group(group)
        else:
            group.set_group_epoch(record.epoch)
    elif isinstance(record, SubscriptionMetadataRecord):
        group.set_subscription_metadata(dict(record.topics or {}))
    elif isinstance(record, TargetAssignmentEpochRecord):
        group.set_assignment_epoch(NO_ASSIGNMENT_EPOCH if record.epoch is None else record.epoch)
    elif isinstance(record, TargetAssignmentMemberRecord):
        if record.assignment is None:
            group.remove_target_assignment(record.member_id)
        else:
            group.update_target_assignment(record.member_id, record.assignment)
    elif isinstance(record, MemberSubscriptionRecord):
        _apply_subscription(group, record)
    else:
        _apply_current_assignment(group, record)


def _content(record: ConsumerGroupRecord) -> object:
    if isinstance(record, GroupEpochRecord | TargetAssignmentEpochRecord):
        return record.epoch
    if isinstance(record, SubscriptionMetadataRecord):
        return record.topics
    if isinstance(record, TargetAssignmentMemberRecord):
        return record.assignment
    return record.member


def _apply_subscription(group: ConsumerGroup, record: MemberSubscriptionRecord) -> None:
    old = group.member(record.member_id)
    if record.member is None:
        if old is None:
            return
        if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            _log.warning("member removed before its current assignment", group=group.group_id, member=old)
        group.remove_member(record.member_id)
        return
    base = old if old is not None else ConsumerGroupMember(record.member_id)
    new = record.member
    group.update_member(
        replace(
            base,
            instance_id=new.instance_id,
            rack_id=new.rack_id,
            client_id=new.client_id,
            client_host=new.client_host,
            subscribed_topic_names=new.subscribed_topic_names,
            subscribed_topic_regex=new.subscribed_topic_regex,
            rebalance_timeout_ms=new.rebalance_timeout_ms,
            server_assignor=new.server_assignor,
            classic_member_metadata=new.classic_member_metadata,
        )
    )


def _apply_current_assignment(group: ConsumerGroup, record: CurrentAssignmentRecord) -> None:
    old = group.member(record.member_id)
    if record.member is None:
        if old is None:
            return
        group.update_member(
            replace(
                old,
                member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                assigned_partitions={},
                partitions_pending_revocation={},
            )
        )
        return
    base = old if old is not None else ConsumerGroupMember(record.member_id)
    new = record.member
    group.update_member(
        replace(
            base,
            member_epoch=new.member_epoch,
            previous_member_epoch=new.previous_member_epoch,
            state=new.state,
            assigned_partitions=new.assigned_partitions,
            partitions_pending_revocation=new.partitions_pending_revocation,
        )
    )


# -- to and from __consumer_offsets ---------------------------------------------------------------


def _partitions(assignment: Assignment) -> list[dict[str, Any]]:
    return [
        {"topic_id": topic_id, "partitions": sorted(partitions)}
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0]))
    ]


def to_offsets_record(record: ConsumerGroupRecord) -> OffsetsRecord:
    """The key and value Kafka writes for this change."""
    key = _key_of(record)
    value = _value_of(record)
    return OffsetsRecord(cgr.encode_key(key), None if value is None else cgr.encode_value(key, value))


def _key_of(record: ConsumerGroupRecord) -> cgr.ConsumerGroupKey:
    if isinstance(record, GroupEpochRecord):
        return cgr.ConsumerGroupMetadataKey(record.group_id)
    if isinstance(record, SubscriptionMetadataRecord):
        return cgr.ConsumerGroupPartitionMetadataKey(record.group_id)
    if isinstance(record, MemberSubscriptionRecord):
        return cgr.ConsumerGroupMemberMetadataKey(record.group_id, record.member_id)
    if isinstance(record, TargetAssignmentEpochRecord):
        return cgr.ConsumerGroupTargetAssignmentMetadataKey(record.group_id)
    if isinstance(record, TargetAssignmentMemberRecord):
        return cgr.ConsumerGroupTargetAssignmentMemberKey(record.group_id, record.member_id)
    return cgr.ConsumerGroupCurrentMemberAssignmentKey(record.group_id, record.member_id)


def _value_of(record: ConsumerGroupRecord) -> dict[str, Any] | None:
    if isinstance(record, GroupEpochRecord):
        return None if record.epoch is None else {"epoch": record.epoch}
    if isinstance(record, TargetAssignmentEpochRecord):
        return None if record.epoch is None else {"assignment_epoch": record.epoch}
    if isinstance(record, SubscriptionMetadataRecord):
        if record.topics is None:
            return None
        topics = [
            {"topic_id": t.topic_id, "topic_name": t.name, "num_partitions": t.num_partitions}
            for _, t in sorted(record.topics.items())
        ]
        return {"topics": topics}
    if isinstance(record, TargetAssignmentMemberRecord):
        return None if record.assignment is None else {"topic_partitions": _partitions(record.assignment)}
    member = record.member
    if member is None:
        return None
    if isinstance(record, MemberSubscriptionRecord):
        return {
            "instance_id": member.instance_id,
            "rack_id": member.rack_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "subscribed_topic_names": sorted(member.subscribed_topic_names),
            "subscribed_topic_regex": member.subscribed_topic_regex,
            "rebalance_timeout_ms": member.rebalance_timeout_ms,
            "server_assignor": member.server_assignor,
            "classic_member_metadata": _classic_value(member.classic_member_metadata),
        }
    return {
        "member_epoch": member.member_epoch,
        "previous_member_epoch": member.previous_member_epoch,
        "state": int(member.state),
        "assigned_partitions": _partitions(member.assigned_partitions),
        "partitions_pending_revocation": _partitions(member.partitions_pending_revocation),
    }


def _classic_value(metadata: ClassicMemberMetadata | None) -> dict[str, Any] | None:
    if metadata is None:
        return None
    return {
        "session_timeout_ms": metadata.session_timeout_ms,
        "supported_protocols": [
            {"name": name, "metadata": data} for name, data in metadata.supported_protocols
        ],
    }


def _classic_metadata(value: Any) -> ClassicMemberMetadata | None:
    if value is None:
        return None
    return ClassicMemberMetadata(
        value.session_timeout_ms,
        tuple((protocol.name, bytes(protocol.metadata)) for protocol in value.supported_protocols),
    )


def _assignment(topic_partitions: list[Any]) -> Assignment:
    return assignment_of((tp.topic_id, tp.partitions) for tp in topic_partitions)


def from_logged(key: cgr.ConsumerGroupKey, value: bytes | None) -> ConsumerGroupRecord:
    """The change a record of ``__consumer_offsets`` holds (raises DecodeError if corrupt)."""
    data = None if value is None else decode_consumer_group_value(key, value).data
    group_id = key.group
    if isinstance(key, cgr.ConsumerGroupMetadataKey):
        return GroupEpochRecord(group_id, None if data is None else data.epoch)
    if isinstance(key, cgr.ConsumerGroupTargetAssignmentMetadataKey):
        return TargetAssignmentEpochRecord(group_id, None if data is None else data.assignment_epoch)
    if isinstance(key, cgr.ConsumerGroupPartitionMetadataKey):
        if data is None:
            return SubscriptionMetadataRecord(group_id, None)
        topics = {
            t.topic_name: TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in data.topics
        }
        return SubscriptionMetadataRecord(group_id, topics)
    member_id = key.member_id
    if isinstance(key, cgr.ConsumerGroupTargetAssignmentMemberKey):
        return TargetAssignmentMemberRecord(
            group_id, member_id, None if data is None else _assignment(data.topic_partitions)
        )
    if isinstance(key, cgr.ConsumerGroupMemberMetadataKey):
        if data is None:
            return MemberSubscriptionRecord(group_id, member_id, None)
        member = ConsumerGroupMember(
            member_id,
            instance_id=data.instance_id,
            rack_id=data.rack_id,
            client_id=data.client_id,
            client_host=data.client_host,
            subscribed_topic_names=frozenset(data.subscribed_topic_names),
            subscribed_topic_regex=data.subscribed_topic_regex or None,
            rebalance_timeout_ms=data.rebalance_timeout_ms,
            server_assignor=data.server_assignor,
            classic_member_metadata=_classic_metadata(getattr(data, "classic_member_metadata", None)),
        )
        return MemberSubscriptionRecord(group_id, member_id, member)
    if data is None:
        return CurrentAssignmentRecord(group_id, member_id, None)
    member = ConsumerGroupMember(
        member_id,
        member_epoch=data.member_epoch,
        previous_member_epoch=data.previous_member_epoch,
        state=MemberState.from_value(data.state),
        assigned_partitions=_assignment(data.assigned_partitions),
        partitions_pending_revocation=_assignment(data.partitions_pending_revocation),
    )
    return CurrentAssignmentRecord(group_id, member_id, member)
