"""Moving a member's current assignment towards its target, one safe step at a time (Kafka's
CurrentAssignmentBuilder).

The rule that keeps a partition from being consumed by two members: a partition moves to a member
only once no member owns it any more. So a member first gives up what its target no longer has
(UNREVOKED_PARTITIONS: it stays at its epoch and must heartbeat without those partitions), then
takes what its target adds and nobody owns; what someone else still owns it waits for
(UNRELEASED_PARTITIONS, already at the target epoch). ``partition_epoch`` says who owns what: the
epoch of the member owning a partition, -1 if nobody does; partitions pending revocation count as
owned.

``owned`` is the member's report of what it owns (the request's TopicPartitions): None when the
heartbeat did not carry it, which counts as still owning everything.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from coordinator.group.consumer.member import Assignment, ConsumerGroupMember, MemberState
from protocol.error_codes import ErrorCode, KafkaError

PartitionEpoch = Callable[[uuid.UUID, int], int]
OwnedPartitions = Sequence[tuple[uuid.UUID, Iterable[int]]] | None
NO_OWNER = -1


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: OwnedPartitions,
) -> ConsumerGroupMember:
    """The member's next state towards ``target`` at ``target_epoch`` (the member itself if no
    step is possible yet). Raises KafkaError(FENCED_MEMBER_EPOCH) for a member in a state this
    coordinator does not know that still claims partitions."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or any(True for _ in owned):
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all its "
            "partitions and rejoin.",
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: OwnedPartitions, assignment: Assignment) -> bool:
    """Whether the member still reports any partition of ``assignment`` (unknown: it does)."""
    if owned is None:
        return True
    for topic_id, partitions in owned:
        pending = assignment.get(topic_id)
        if pending and any(p in pending for p in partitions):
            return True
    return False


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: OwnedPartitions,
) -> ConsumerGroupMember:
    """Kafka's ``computeNextAssignment``: keep what is in both, revoke what left the target, add
    what the target adds and nobody owns."""
    current = member.assigned_partitions
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    adding: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in target.keys() | current.keys():
        wanted = target.get(topic_id, frozenset())
        had = current.get(topic_id, frozenset())
        kept = had & wanted
        gone = had - kept
        free = set()
        for partition in wanted - kept:
            if partition_epoch(topic_id, partition) == NO_OWNER:
                free.add(partition)
            else:
                unreleased = True
        if kept:
            assigned[topic_id] = kept
        if gone:
            revoking[topic_id] = gone
        if free:
            adding[topic_id] = frozenset(free)
    if revoking and _owns_any(owned, revoking):
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            member_epoch=member_epoch,
            previous_member_epoch=member.member_epoch,
            assigned_partitions=assigned,
            partitions_pending_revocation=revoking,
        )
    for topic_id, partitions in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    return replace(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch,
        assigned_partitions=assigned,
        partitions_pending_revocation={},
    )
