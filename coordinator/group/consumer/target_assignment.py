"""Computing a new target assignment (Kafka's TargetAssignmentBuilder).

Every member is given to the assignor with its subscription (topic names resolved to ids through
the subscription metadata) and its current target; the member that changed comes with its new
subscription (a static member replacing another starts from the target of the one it replaces),
a member leaving is left out. The changes are a target-assignment record for every member whose
target differs, then the assignment epoch record.
"""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.group.consumer.assignors import (
    GroupSpec,
    MemberSpec,
    PartitionAssignor,
    SubscriptionType,
)
from coordinator.group.consumer.group import ConsumerGroup, TopicMetadata
from coordinator.group.consumer.member import EMPTY_ASSIGNMENT, Assignment, ConsumerGroupMember
from coordinator.group.consumer.records import (
    ConsumerGroupRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)


def build_target_assignment(
    group: ConsumerGroup,
    group_epoch: int,
    assignor: PartitionAssignor,
    subscription_metadata: Mapping[str, TopicMetadata],
    subscription_type: SubscriptionType,
    updated: Mapping[str, ConsumerGroupMember | None],
) -> tuple[dict[str, Assignment], list[ConsumerGroupRecord]]:
    """The new target of every member, and the records that write it (raises
    PartitionAssignorError). ``updated`` maps member ids to their new version (None: removed)."""
    members: dict[str, MemberSpec] = {
        member_id: _spec(group, member, group.target_assignment_of(member_id), subscription_metadata)
        for member_id, member in group.members.items()
    }
    for member_id, member in updated.items():
        if member is None:
            members.pop(member_id, None)
            continue
        target = group.target_assignment_of(member_id)
        previous = group.static_member_id(member.instance_id)
        if previous is not None and previous != member_id:
            target = group.target_assignment_of(previous)
        members[member_id] = _spec(group, member, target, subscription_metadata)
    partition_counts = {t.topic_id: t.num_partitions for t in subscription_metadata.values()}
    assignment = assignor.assign(GroupSpec(members, subscription_type), partition_counts)
    records: list[ConsumerGroupRecord] = []
    new_targets: dict[str, Assignment] = {}
    for member_id in members:
        new = {
            topic_id: parts
            for topic_id, parts in assignment.get(member_id, EMPTY_ASSIGNMENT).items()
            if parts
        }
        new_targets[member_id] = new
        if member_id not in group.target_assignment or group.target_assignment[member_id] != new:
            records.append(TargetAssignmentMemberRecord(group.group_id, member_id, new))
    records.append(TargetAssignmentEpochRecord(group.group_id, group_epoch))
    return new_targets, records


def _spec(
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    target: Assignment,
    subscription_metadata: Mapping[str, TopicMetadata],
) -> MemberSpec:
    topic_ids = frozenset(
        subscription_metadata[name].topic_id
        for name in group.subscribed_topics_of(member)
        if name in subscription_metadata
    )
    return MemberSpec(topic_ids, target, member.instance_id, member.rack_id)
