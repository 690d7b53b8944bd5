"""The server-side assignors (Kafka's UniformAssignor and RangeAssignor, KIP-848).

An assignor gets a :class:`GroupSpec` (each member's subscribed topic ids, instance id and current
target assignment, and whether all members subscribe to the same topics) and each topic's
partition count, and returns a new target assignment for every member.

* ``uniform`` (the default): balanced and sticky. Every subscribed partition goes to exactly one of
  the members subscribing to its topic, partition counts differ by at most one between members
  with the same subscriptions, and partitions stay where they are unless balance requires a move.
  With identical subscriptions it is Kafka's ``UniformHomogeneousAssignmentBuilder``, with one
  difference: the members allowed one partition above the minimum are the ones that already hold
  the most (Kafka takes them in hash order, which can move partitions for nothing). With different
  subscriptions Kafka's ``UniformHeterogeneousAssignmentBuilder`` is not ported: kipling keeps
  every member's partitions that it still subscribes to, gives each unassigned partition to the
  least loaded subscriber (topics with the fewest subscribers first), then moves partitions from
  a member to a subscriber holding at least two fewer until no such move remains. Each move lowers
  the sum of squared loads, so it ends; the result is balanced in that sense, not necessarily
  partition for partition what Kafka would compute.
* ``range``: Kafka's RangeAssignor: per topic, members sorted (static members by instance id
  first, then the others by member id) get consecutive ranges, the first ``partitions % members``
  one partition more. Not sticky; co-partitions topics with equal partition counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from coordinator.group.consumer.member import Assignment, count_partitions


class PartitionAssignorError(Exception):
    """The assignor could not compute an assignment (a subscribed topic without metadata)."""


class SubscriptionType(Enum):
    HOMOGENEOUS = "homogeneous"
    HETEROGENEOUS = "heterogeneous"


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What the assignor knows of a member."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Assignment
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    members: Mapping[str, MemberSpec]
    subscription_type: SubscriptionType


TopicPartitionCounts = Mapping[uuid.UUID, int]
"""Topic id → its partition count (a topic that is missing has no metadata)."""
GroupAssignment = dict[str, Assignment]


class PartitionAssignor(Protocol):
    name: str

    def assign(self, spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment: ...


def _partition_count(topics: TopicPartitionCounts, topic_id: uuid.UUID) -> int:
    count = topics.get(topic_id)
    if count is None:
        raise PartitionAssignorError(f"Members are subscribed to topic {topic_id} which has no metadata.")
    return count


class UniformAssignor:
    name = "uniform"

    def assign(self, spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment:
        if not spec.members:
            return {}
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return _uniform_homogeneous(spec, topics)
        return _uniform_heterogeneous(spec, topics)


def _uniform_homogeneous(spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment:
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    if not subscribed:
        return {member_id: {} for member_id in spec.members}
    counts = {topic_id: _partition_count(topics, topic_id) for topic_id in subscribed}
    assigned_now = {
        (topic_id, p)
        for member in spec.members.values()
        for topic_id, partitions in member.assignment.items()
        if topic_id in subscribed
        for p in partitions
    }
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for topic_id in sorted(subscribed):
        count = counts[topic_id]
        total += count
        unassigned.extend((topic_id, p) for p in range(count) if (topic_id, p) not in assigned_now)
    minimum, extra = divmod(total, len(spec.members))
    # Those already holding the most keep one partition above the minimum (fewest moves).
    order = sorted(
        spec.members,
        key=lambda m: (-_count_subscribed(spec.members[m].assignment, subscribed), m),
    )
    result: GroupAssignment = {}
    room: list[tuple[str, int]] = []
    for index, member_id in enumerate(order):
        quota = minimum + (1 if index < extra else 0)
        kept: dict[uuid.UUID, frozenset[int]] = {}
        for topic_id in sorted(spec.members[member_id].assignment):
            if topic_id not in subscribed:
                continue
            partitions = sorted(
                p for p in spec.members[member_id].assignment[topic_id] if p < topics[topic_id]
            )
            keep = partitions[:quota]
            quota -= len(keep)
            unassigned.extend((topic_id, p) for p in partitions[len(keep) :])
            if keep:
                kept[topic_id] = frozenset(keep)
        result[member_id] = kept
        if quota > 0:
            room.append((member_id, quota))
    position = 0
    for member_id, quota in room:
        taken = unassigned[position : position + quota]
        position += len(taken)
        _add(result, member_id, taken)
    if position < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return result


def _count_subscribed(assignment: Assignment, subscribed: frozenset[uuid.UUID]) -> int:
    return sum(len(parts) for topic_id, parts in assignment.items() if topic_id in subscribed)


def _add(result: GroupAssignment, member_id: str, partitions: list[tuple[uuid.UUID, int]]) -> None:
    if not partitions:
        return
    merged = {topic_id: set(parts) for topic_id, parts in result[member_id].items()}
    for topic_id, p in partitions:
        merged.setdefault(topic_id, set()).add(p)
    result[member_id] = {topic_id: frozenset(parts) for topic_id, parts in merged.items()}


def _uniform_heterogeneous(spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment:
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load = dict.fromkeys(spec.members, 0)
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(spec.members):
        for topic_id in spec.members[member_id].subscribed_topic_ids:
            subscribers.setdefault(topic_id, []).append(member_id)
    counts = {topic_id: _partition_count(topics, topic_id) for topic_id in subscribers}
    for member_id in sorted(spec.members):
        member = spec.members[member_id]
        for topic_id, partitions in member.assignment.items():
            if topic_id not in member.subscribed_topic_ids:
                continue
            for p in partitions:
                if p < counts[topic_id] and (topic_id, p) not in owner:
                    owner[(topic_id, p)] = member_id
                    load[member_id] += 1
    by_scarcity = sorted(subscribers, key=lambda t: (len(subscribers[t]), str(t)))
    for topic_id in by_scarcity:
        for p in range(counts[topic_id]):
            if (topic_id, p) not in owner:
                chosen = min(subscribers[topic_id], key=lambda m: (load[m], m))
                owner[(topic_id, p)] = chosen
                load[chosen] += 1
    moved = True
    while moved:
        moved = False
        for tp in sorted(owner, key=lambda tp: (str(tp[0]), tp[1])):
            current = owner[tp]
            lightest = min(subscribers[tp[0]], key=lambda m: (load[m], m))
            if load[lightest] + 1 < load[current]:
                owner[tp] = lightest
                load[current] -= 1
                load[lightest] += 1
                moved = True
    result: dict[str, dict[uuid.UUID, set[int]]] = {member_id: {} for member_id in spec.members}
    for (topic_id, p), member_id in owner.items():
        result[member_id].setdefault(topic_id, set()).add(p)
    return {
        member_id: {topic_id: frozenset(parts) for topic_id, parts in topics_of.items()}
        for member_id, topics_of in result.items()
    }


class RangeAssignor:
    name = "range"

    def assign(self, spec: GroupSpec, topics: TopicPartitionCounts) -> GroupAssignment:
        if not spec.members:
            return {}
        order = sorted(spec.members, key=lambda m: _range_order(m, spec.members[m]))
        subscribers: dict[uuid.UUID, int] = {}
        for member_id in order:
            for topic_id in spec.members[member_id].subscribed_topic_ids:
                subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
        next_start = dict.fromkeys(subscribers, 0)
        extra: dict[uuid.UUID, int] = {}
        quota: dict[uuid.UUID, int] = {}
        for topic_id, members in subscribers.items():
            count = _partition_count(topics, topic_id)
            quota[topic_id], extra[topic_id] = divmod(count, members)
        result: GroupAssignment = {}
        for member_id in order:
            assignment: dict[uuid.UUID, frozenset[int]] = {}
            for topic_id in spec.members[member_id].subscribed_topic_ids:
                size = quota[topic_id]
                if extra[topic_id] > 0:
                    size += 1
                    extra[topic_id] -= 1
                start = next_start[topic_id]
                end = min(start + size, topics[topic_id])
                next_start[topic_id] = end
                if start < end:
                    assignment[topic_id] = frozenset(range(start, end))
            result[member_id] = assignment
        return result


def _range_order(member_id: str, member: MemberSpec) -> tuple[int, str]:
    """Static members by instance id first, then the others by member id."""
    if member.instance_id is not None:
        return (0, member.instance_id)
    return (1, member_id)


BUILTIN_ASSIGNORS: Mapping[str, PartitionAssignor] = {
    UniformAssignor.name: UniformAssignor(),
    RangeAssignor.name: RangeAssignor(),
}
KAFKA_CLASS_NAMES: Mapping[str, str] = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UniformAssignor.name,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RangeAssignor.name,
}
"""``group.consumer.assignors`` may name the built-in assignors by Kafka's class names too."""


def assignor_named(name: str) -> PartitionAssignor:
    """The assignor ``group.consumer.assignors`` names (its name or Kafka's class name)."""
    found = BUILTIN_ASSIGNORS.get(KAFKA_CLASS_NAMES.get(name, name))
    if found is None:
        known = ", ".join([*BUILTIN_ASSIGNORS, *KAFKA_CLASS_NAMES])
        raise ValueError(f"unknown consumer group assignor {name!r} (known: {known})")
    return found


__all__ = [
    "BUILTIN_ASSIGNORS",
    "GroupAssignment",
    "GroupSpec",
    "MemberSpec",
    "PartitionAssignor",
    "PartitionAssignorError",
    "RangeAssignor",
    "SubscriptionType",
    "TopicPartitionCounts",
    "UniformAssignor",
    "assignor_named",
    "count_partitions",
]
