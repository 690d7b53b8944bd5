"""Partition reassignment on the controller (KIP-455 in KRaft): the rules, as pure functions.

Kafka's PartitionReassignmentReplicas, PartitionReassignmentRevert and the reassignment part of
PartitionChangeBuilder. A reassignment of a partition from its current replicas to a target list
goes through three steps:

1. AlterPartitionReassignments writes one PartitionChangeRecord: ``replicas`` becomes the target
   followed by the replicas being removed (the union), ``adding_replicas`` = target - current,
   ``removing_replicas`` = current - target. The ISR is unchanged. The brokers of the adding
   replicas create their logs and follow the leader.
2. The leader adds the new replicas to the ISR as they catch up, through AlterPartition.
3. The change that makes the ISR hold every target replica *completes* the reassignment in the
   same record: ``replicas`` := target, ISR := ISR - removing, both lists emptied. A leader that is
   being removed is replaced by the first target replica in the ISR that may lead, and a change
   that drops replicas bumps the leader epoch, so that the remaining followers fence the old
   assignment.

Steps 1 and 3 happen in one record when the ISR already holds the whole target (a reorder, or a
shrink of the replication factor). A reassignment in progress may be given a new target: the current
``replicas`` (the union) is then the starting point, as in Kafka. ``replicas: null`` cancels one:
the replicas being added are dropped again (from the ISR too) and the original list restored; if
that would leave the ISR empty, only an unclean election can revert it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from metadata.records import PartitionChangeRecord
from metadata.topics import NO_LEADER, PartitionState
from protocol.error_codes import ErrorCode, KafkaError

__all__ = [
    "CompletedReassignment",
    "ReassignmentReplicas",
    "RevertedReassignment",
    "build_change",
    "maybe_complete",
    "plan",
    "retarget",
    "revert",
    "validate_target",
]


@dataclass(frozen=True, slots=True)
class ReassignmentReplicas:
    """The replica lists of a reassignment in progress (Kafka's PartitionReassignmentReplicas)."""

    replicas: tuple[int, ...]
    removing: tuple[int, ...]
    adding: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CompletedReassignment:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RevertedReassignment:
    """What cancelling leaves: the original replicas, the ISR without the added ones, and whether
    that ISR had to be made up (every in-sync replica was an added one: an unclean election)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    unclean: bool


def validate_target(target: Sequence[int], registered: Collection[int]) -> None:
    """Kafka's validateManualPartitionAssignment: INVALID_REPLICA_ASSIGNMENT with its messages."""
    if not target:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous: int | None = None
    for broker_id in sorted(target):
        if broker_id not in registered:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is "
                "registered.",
            )
        if broker_id == previous:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {previous} more than once.",
            )
        previous = broker_id


def plan(current: Sequence[int], target: Sequence[int]) -> ReassignmentReplicas:
    """The lists of a reassignment from ``current`` to ``target``: the target, then the removed
    replicas (ascending); removing and adding ascending, as Kafka's sets sort them."""
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return ReassignmentReplicas((*target, *removing), removing, adding)


def retarget(partition: PartitionState, target: Sequence[int]) -> ReassignmentReplicas:
    """The lists after AlterPartitionReassignments gives ``partition`` the ``target`` replicas.

    From the current ``replicas`` (the union, during a reassignment), as Kafka plans it. One
    deliberate deviation for a reassignment in progress: Kafka keeps the old adding (removing)
    list whenever the new plan's is empty, which can leave a replica both adding and removing
    (``[0,3,4]`` then ``[0,3]``: 4 still adding, now also removing) or a target replica removing.
    Here removing is the plan's, and adding is the plan's plus the old adding replicas that stay
    in the target (they still have to join the ISR).
    """
    planned = plan(partition.replicas, target)
    still_adding = set(partition.adding_replicas) & set(target)
    adding = tuple(sorted(set(planned.adding) | still_adding))
    return ReassignmentReplicas(planned.replicas, planned.removing, adding)


def maybe_complete(
    replicas: Sequence[int], removing: Sequence[int], adding: Sequence[int], isr: Sequence[int]
) -> CompletedReassignment | None:
    """The final replicas and ISR if a reassignment with these lists is complete at ``isr``, else
    None (no reassignment, or the ISR lacks a target replica)."""
    if not removing and not adding:
        return None
    new_isr = tuple(r for r in isr if r not in removing)
    new_replicas = tuple(r for r in replicas if r not in removing)
    if not new_isr or not new_replicas:
        return None
    if not set(new_replicas) <= set(new_isr):
        return None
    return CompletedReassignment(new_replicas, new_isr)


def revert(partition: PartitionState) -> RevertedReassignment:
    """What cancelling the partition's reassignment leaves (Kafka's PartitionReassignmentRevert)."""
    adding = set(partition.adding_replicas)
    replicas = tuple(r for r in partition.replicas if r not in adding)
    isr = tuple(r for r in partition.isr if r not in adding)
    if isr:
        return RevertedReassignment(replicas, isr, unclean=False)
    if not replicas:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Invalid replica assignment: addingReplicas contains all replicas.",
        )
    return RevertedReassignment(replicas, (replicas[0],), unclean=True)


def build_change(
    topic_id: uuid.UUID,
    old: PartitionState,
    *,
    acceptable: Callable[[int], bool],
    isr: Sequence[int] | None = None,
    replicas: Sequence[int] | None = None,
    removing: Sequence[int] | None = None,
    adding: Sequence[int] | None = None,
    unclean: bool = False,
) -> PartitionChangeRecord | None:
    """The record taking ``old`` to the given lists (None: unchanged), completing a reassignment
    the new ISR allows and electing a leader where the current one can no longer lead; None if
    nothing changes (Kafka's PartitionChangeBuilder.build, online or unclean election).

    ``acceptable(broker)`` says whether a replica may lead (registered, unfenced, not shutting down).
    """
    target_isr = tuple(old.isr if isr is None else isr)
    target_replicas = tuple(old.replicas if replicas is None else replicas)
    target_removing = tuple(old.removing_replicas if removing is None else removing)
    target_adding = tuple(old.adding_replicas if adding is None else adding)
    completed = maybe_complete(target_replicas, target_removing, target_adding, target_isr)
    if completed is not None:
        target_replicas, target_isr = completed.replicas, completed.isr
        target_removing = target_adding = ()
    leader = _elect(old.leader_id, target_replicas, target_isr, acceptable)
    if leader == NO_LEADER and unclean:
        leader = next((r for r in target_replicas if acceptable(r)), NO_LEADER)
        if leader != NO_LEADER:
            target_isr = (leader,)
    leader_changed = leader != old.leader_id
    replicas_dropped = not set(old.replicas) <= set(target_replicas)
    if (
        not leader_changed
        and target_isr == tuple(old.isr)
        and target_replicas == tuple(old.replicas)
        and target_removing == tuple(old.removing_replicas)
        and target_adding == tuple(old.adding_replicas)
    ):
        return None
    return PartitionChangeRecord(
        partition_id=old.partition,
        topic_id=topic_id,
        replicas=target_replicas,
        isr=target_isr,
        leader=leader,
        leader_epoch=old.leader_epoch + 1 if leader_changed or replicas_dropped else old.leader_epoch,
        partition_epoch=old.partition_epoch + 1,
        removing_replicas=target_removing,
        adding_replicas=target_adding,
    )


def _elect(
    current: int, replicas: Sequence[int], isr: Sequence[int], acceptable: Callable[[int], bool]
) -> int:
    """Keep the current leader while it is in the ISR and may lead; else the first replica, in
    assignment order, that is in the ISR and may lead; else NO_LEADER."""
    if current in isr and current in replicas and acceptable(current):
        return current
    return next((r for r in replicas if r in isr and acceptable(r)), NO_LEADER)
