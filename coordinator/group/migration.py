"""The online upgrade and downgrade of KIP-848 (upgrade: Kafka 4.0's ``validateOnlineUpgrade``,
``convertToConsumerGroup`` and ConsumerGroup ``fromClassicGroup``; a ConsumerGroupHeartbeat that
joins a classic group of protocol type ``consumer`` with members, under the ``upgrade`` or
``bidirectional`` policy and within group.consumer.max.size, makes it a consumer group whose
members are the classic ones, Stable at the generation with their last assignments).

The online downgrade of KIP-848 (Kafka 4.0's GroupMetadataManager ``validateOnlineDowngrade*``,
``convertToClassicGroup`` and ClassicGroup ``fromConsumerGroup``).

When the last member speaking ConsumerGroupHeartbeat leaves a consumer group (or is fenced) and
every member left joined with the classic protocol, the group becomes a classic group again if
``group.consumer.migration.policy`` is ``downgrade`` or ``bidirectional`` and the members left fit
in ``group.max.size``. The classic group is Stable at a generation equal to the group epoch (the
classic members' generation when reconciled), with protocol type ``consumer``, each member holding
its target assignment serialized with the consumer protocol, and it keeps the group's offsets; once
the conversion is written a rebalance starts, so the classic members rejoin and their leader
assigns again. The same happens when a classic JoinGroup's static member replaces the static member
that was the last one using the consumer protocol (``validateOnlineDowngradeWithReplacedMember``;
the group's size is unchanged): the classic group holds the joining member in place of the
replaced one, with its partitions, at the group epoch before the join, and rebalances only if the
joining member brings another subscription or is not at that epoch.

Every conversion is one write (:class:`~coordinator.group.consumer.writes.Conversion`): the old
group's tombstones and the new group's records, with the triggering request's own records, go into
``__consumer_offsets`` as one batch (an upgrade: the classic group's tombstone, then the consumer
group's records; a downgrade: the request's records, the consumer group's tombstones, then the
classic group's record), so a reload finds the group as one kind or the other. The new group
takes the old one's place at once, as Kafka applies a write before it is durable; a batch that
fails puts the old group back (:mod:`~coordinator.group.coordinator`).
"""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.consumer.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
)
from coordinator.group.consumer.records import (
    ConsumerGroupRecord,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)
from coordinator.group.group import GroupMetadata
from coordinator.group.member import MemberMetadata
from coordinator.group.requests import JoinProtocol
from coordinator.group.state import GroupState
from coordinator.group.subscriptions import CONSUMER_PROTOCOL_TYPE
from metadata.topics import TopicLookup
from protocol import consumer_protocol
from storage.clock import Clock

DOWNGRADE_POLICIES = frozenset({"downgrade", "bidirectional"})


def can_downgrade(config: GroupCoordinatorConfig, group: ConsumerGroup, leaving_member_id: str) -> bool:
    """Kafka's ``validateOnlineDowngradeWithFencedMember``: the leaving member is the last one not
    using the classic protocol, others remain, the policy allows it and they fit a classic group."""
    leaving = group.member(leaving_member_id)
    if leaving is None or leaving.uses_classic_protocol:
        return False
    others = [m for m in group.members.values() if m.member_id != leaving_member_id]
    if not others or not all(m.uses_classic_protocol for m in others):
        return False
    if config.group_consumer_migration_policy.lower() not in DOWNGRADE_POLICIES:
        return False
    return len(others) <= config.group_max_size


def can_downgrade_with_replaced_member(
    config: GroupCoordinatorConfig, group: ConsumerGroup, replaced_member_id: str
) -> bool:
    """Kafka's ``validateOnlineDowngradeWithReplacedMember``: a classic JoinGroup's static member
    replaces ``replaced_member_id``, and every other member uses the classic protocol already;
    the policy allows a downgrade and the group (the same size once replaced) fits a classic
    group."""
    if not all(m.uses_classic_protocol for m in group.members.values() if m.member_id != replaced_member_id):
        return False
    if config.group_consumer_migration_policy.lower() not in DOWNGRADE_POLICIES:
        return False
    return group.num_members <= config.group_max_size


def classic_group_from(
    group: ConsumerGroup,
    leaving_member_id: str | None,
    topics: TopicLookup,
    clock: Clock,
    generation: int | None = None,
) -> tuple[GroupMetadata, Mapping[str, bytes]]:
    """The classic group the consumer group becomes without ``leaving_member_id`` (None: with all
    its members, as after a static member's replacement), at ``generation`` (by default the
    group epoch), and each member's assignment (the bytes the group record carries)."""
    classic = GroupMetadata(group.group_id, GroupState.STABLE, clock)
    classic.generation_id = group.group_epoch if generation is None else generation
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    classic.current_state_timestamp = clock.time_ms()
    for member in group.members.values():
        metadata = member.classic_member_metadata
        if member.member_id == leaving_member_id or metadata is None:
            continue
        classic.add(
            MemberMetadata(
                member_id=member.member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                session_timeout_ms=metadata.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                supported_protocols=tuple(JoinProtocol(n, d) for n, d in metadata.supported_protocols),
            )
        )
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    assignments: dict[str, bytes] = {}
    for classic_member in classic.members:
        metadata_bytes = next(
            (p.metadata for p in classic_member.supported_protocols if p.name == classic.protocol_name), b""
        )
        version = 0
        if len(metadata_bytes) >= 2:
            version = max(0, min(int.from_bytes(metadata_bytes[:2], "big", signed=True), 3))
        partitions = []
        for topic_id, parts in group.target_assignment_of(classic_member.member_id).items():
            topic = topics.get_by_id(topic_id)
            if topic is not None:
                partitions.append(consumer_protocol.TopicPartitions(topic.name, tuple(sorted(parts))))
        partitions.sort()
        assignment = consumer_protocol.encode_assignment(
            consumer_protocol.Assignment(tuple(partitions)), version
        )
        classic_member.assignment = assignment
        assignments[classic_member.member_id] = assignment
    classic.offsets = group.offsets
    return classic, assignments


UPGRADE_POLICIES = frozenset({"upgrade", "bidirectional"})


def can_upgrade(config: GroupCoordinatorConfig, classic: GroupMetadata) -> bool:
    """Kafka's ``validateOnlineUpgrade``: the policy allows it, the group's members speak the
    embedded consumer protocol, and they fit in group.consumer.max.size."""
    if config.group_consumer_migration_policy.lower() not in UPGRADE_POLICIES:
        return False
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    return classic.size <= config.group_consumer_max_size


def consumer_group_records_from(classic: GroupMetadata, topics: TopicLookup) -> list[ConsumerGroupRecord]:
    """Kafka's ``ConsumerGroup.fromClassicGroup`` and ``createConsumerGroupRecords``: every classic
    member becomes a Stable classic-protocol member at the generation, its last assignment both its
    target and its current assignment; the group and assignment epochs are the generation. Raises
    ConsumerProtocolError if a member's subscription or assignment is malformed."""
    group_id = classic.group_id
    generation = classic.generation_id
    members: list[ConsumerGroupMember] = []
    for member in classic.members:
        metadata = next(
            (p.metadata for p in member.supported_protocols if p.name == classic.protocol_name), b""
        )
        subscription = consumer_protocol.decode_subscription(metadata)
        assignment = consumer_protocol.decode_assignment(member.assignment) if member.assignment else None
        assigned = assignment_of(
            (topic.topic_id, entry.partitions)
            for entry in (assignment.partitions if assignment is not None else ())
            if (topic := topics.get(entry.topic)) is not None
        )
        members.append(
            ConsumerGroupMember(
                member.member_id,
                member_epoch=generation,
                previous_member_epoch=generation,
                state=MemberState.STABLE,
                instance_id=member.group_instance_id,
                rack_id=subscription.rack_id,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=frozenset(subscription.topics),
                assigned_partitions=assigned,
                classic_member_metadata=ClassicMemberMetadata(
                    member.session_timeout_ms,
                    tuple((p.name, bytes(p.metadata)) for p in member.supported_protocols),
                ),
            )
        )
    records: list[ConsumerGroupRecord] = [MemberSubscriptionRecord(group_id, m.member_id, m) for m in members]
    records.append(GroupEpochRecord(group_id, generation))
    records += [TargetAssignmentMemberRecord(group_id, m.member_id, m.assigned_partitions) for m in members]
    records.append(TargetAssignmentEpochRecord(group_id, generation))
    records += [CurrentAssignmentRecord(group_id, m.member_id, m) for m in members]
    return records


__all__ = [
    "DOWNGRADE_POLICIES",
    "UPGRADE_POLICIES",
    "can_downgrade",
    "can_downgrade_with_replaced_member",
    "can_upgrade",
    "classic_group_from",
    "consumer_group_records_from",
]
