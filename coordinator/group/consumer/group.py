"""A consumer-protocol group (Kafka's ConsumerGroup and ModernGroup, KIP-848).

The group is state that records build: it changes only by applying
:mod:`~coordinator.group.consumer.records` (as they are written, and when a partition of
``__consumer_offsets`` is loaded), so what a coordinator holds is always what its log says. What it
holds:

* the **group epoch**, bumped whenever the assignment must be computed again (a member joined, left
  or changed its subscription, or a subscribed topic changed);
* the **members** (by member id; static members also by instance id), and how many members
  subscribe to each topic (by name, or through a regular expression) and ask for each server
  assignor;
* the **subscription metadata**: id and partition count of every subscribed topic that exists;
* the **target assignment** of every member, computed at the **assignment epoch**;
* which member owns each partition at which epoch (a partition is owned from the moment it is in a
  member's current assignment until it leaves it, pending revocation included): no partition is
  ever owned twice, and :meth:`ConsumerGroup.update_member` refuses a change that would do it.

The topics each regular expression resolves to are soft state: the service resolves them from the
broker's topic metadata (:meth:`ConsumerGroup.set_resolved_regexes`) and the counts follow; Kafka
4.0 persists its resolutions as records of their own, kipling resolves again after a load.

Its state is derived, as Kafka's: Empty without members, Assigning while the group epoch is ahead
of the assignment epoch, Reconciling while a member is not yet at the target, else Stable. Offsets
are kept in a :class:`~coordinator.group.offsets.GroupOffsets`, as for classic groups.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from coordinator.group.consumer.assignors import SubscriptionType
from coordinator.group.consumer.member import EMPTY_ASSIGNMENT, Assignment, ConsumerGroupMember
from coordinator.group.offsets import GroupOffsets

CONSUMER_GROUP_TYPE = "consumer"
"""ListGroups' group type (and the protocol type it reports) of these groups."""
NO_ASSIGNMENT_EPOCH = -1


class ConsumerGroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic as the group last saw it."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(slots=True)
class _Hard:
    """Everything the records build (what a failed write must take back)."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    subscribed_topic_names: Counter[str] = field(default_factory=Counter)
    server_assignors: Counter[str] = field(default_factory=Counter)
    partition_epochs: dict[uuid.UUID, dict[int, int]] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)

    def copy(self) -> _Hard:
        return _Hard(
            self.group_epoch,
            self.assignment_epoch,
            dict(self.members),
            dict(self.static_members),
            Counter(self.subscribed_topic_names),
            Counter(self.server_assignors),
            {topic_id: dict(partitions) for topic_id, partitions in self.partition_epochs.items()},
            dict(self.target_assignment),
            dict(self.subscription_metadata),
        )


class ConsumerGroupSnapshot:
    """The group's record-built state at one moment, to go back to if a write fails."""

    __slots__ = ("_hard",)

    def __init__(self, hard: _Hard) -> None:
        self._hard = hard


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self._hard = _Hard()
        self.offsets = GroupOffsets()
        self._resolved_regexes: dict[str, frozenset[str]] = {}
        self.regexes_resolved_ms = -1
        """When the regular expressions were last resolved (-1: never)."""
        self.dead = False
        """Removed from the coordinator (deleted, expired, unloaded, converted): offsets written
        for it meanwhile are not kept."""

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, {self.state.value}, epoch={self.group_epoch}, "
            f"assignment_epoch={self.assignment_epoch}, members={list(self._hard.members)})"
        )

    # -- epochs and state ---------------------------------------------------------------------------

    @property
    def group_epoch(self) -> int:
        return self._hard.group_epoch

    def set_group_epoch(self, epoch: int) -> None:
        self._hard.group_epoch = epoch

    @property
    def assignment_epoch(self) -> int:
        return self._hard.assignment_epoch

    def set_assignment_epoch(self, epoch: int) -> None:
        self._hard.assignment_epoch = epoch

    @property
    def state(self) -> ConsumerGroupState:
        hard = self._hard
        if self.dead:
            return ConsumerGroupState.DEAD
        if not hard.members:
            return ConsumerGroupState.EMPTY
        if hard.group_epoch > hard.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(hard.assignment_epoch) for m in hard.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self._hard.members

    @property
    def is_dead(self) -> bool:
        return self.dead

    # -- members ------------------------------------------------------------------------------------

    @property
    def members(self) -> dict[str, ConsumerGroupMember]:
        """The members by id (a view: not to be changed)."""
        return self._hard.members

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self._hard.members.get(member_id)

    def has_member(self, member_id: str) -> bool:
        return member_id in self._hard.members

    @property
    def num_members(self) -> int:
        return len(self._hard.members)

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self._hard.static_members.get(instance_id)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_member_id(instance_id)
        return None if member_id is None else self._hard.members.get(member_id)

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self._hard.static_members

    @property
    def static_members(self) -> dict[str, str]:
        return self._hard.static_members

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, keeping the counts and partition owners right."""
        hard = self._hard
        old = hard.members.get(member.member_id)
        if old is not None:
            self._remove_partition_epochs(old)
        self._add_partition_epochs(member)
        hard.members[member.member_id] = member
        _count(hard.subscribed_topic_names, old, member, self.subscribed_topics_of)
        _count(hard.server_assignors, old, member, lambda m: _assignor_of(m))
        if member.instance_id is not None:
            hard.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> None:
        hard = self._hard
        old = hard.members.pop(member_id, None)
        if old is None:
            return
        self._remove_partition_epochs(old)
        _count(hard.subscribed_topic_names, old, None, self.subscribed_topics_of)
        _count(hard.server_assignors, old, None, lambda m: _assignor_of(m))
        if old.instance_id is not None and hard.static_members.get(old.instance_id) == member_id:
            del hard.static_members[old.instance_id]

    # -- partition owners ---------------------------------------------------------------------------

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition, -1 when nobody owns it."""
        partitions = self._hard.partition_epochs.get(topic_id)
        return -1 if partitions is None else partitions.get(partition, -1)

    def _add_partition_epochs(self, member: ConsumerGroupMember) -> None:
        epochs = self._hard.partition_epochs
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                owned = epochs.setdefault(topic_id, {})
                for partition in partitions:
                    if partition in owned:
                        raise RuntimeError(
                            f"cannot give {topic_id}-{partition} to {member.member_id} of {self.group_id} "
                            f"at epoch {member.member_epoch}: it is still owned at epoch {owned[partition]}"
                        )
                    owned[partition] = member.member_epoch

    def _remove_partition_epochs(self, member: ConsumerGroupMember) -> None:
        epochs = self._hard.partition_epochs
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                owned = epochs.get(topic_id, {})
                for partition in partitions:
                    owned.pop(partition, None)
                if not owned:
                    epochs.pop(topic_id, None)

    # -- subscriptions ------------------------------------------------------------------------------

    @property
    def subscribed_topic_names(self) -> Counter[str]:
        """How many members subscribe to each topic (a view)."""
        return self._hard.subscribed_topic_names

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self._hard.subscribed_topic_names.get(topic, 0) > 0

    def computed_subscribed_topic_names(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None
    ) -> Counter[str]:
        """The counts if ``old`` were replaced by ``new`` (either may be None)."""
        counts = Counter(self._hard.subscribed_topic_names)
        _count(counts, old, new, self.subscribed_topics_of)
        return counts

    # -- regular expressions ------------------------------------------------------------------------

    def subscribed_topics_of(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The topics a member subscribes to: its names, and what its expression resolves to."""
        regex = member.subscribed_topic_regex
        if regex is None:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | self._resolved_regexes.get(regex, frozenset())

    @property
    def regexes(self) -> frozenset[str]:
        """The regular expressions the members subscribe with."""
        return frozenset(
            m.subscribed_topic_regex for m in self._hard.members.values() if m.subscribed_topic_regex
        )

    def resolved_regex(self, regex: str) -> frozenset[str] | None:
        return self._resolved_regexes.get(regex)

    def set_resolved_regexes(self, resolved: dict[str, frozenset[str]]) -> bool:
        """Take new resolutions (regex → topics) and recount the subscriptions; True if any
        resolution changed."""
        if resolved == self._resolved_regexes:
            return False
        self._resolved_regexes = dict(resolved)
        self._recount()
        return True

    def _recount(self) -> None:
        counts: Counter[str] = Counter()
        for member in self._hard.members.values():
            _count(counts, None, member, self.subscribed_topics_of)
        self._hard.subscribed_topic_names = counts

    @property
    def subscription_metadata(self) -> dict[str, TopicMetadata]:
        return self._hard.subscription_metadata

    def set_subscription_metadata(self, metadata: dict[str, TopicMetadata]) -> None:
        self._hard.subscription_metadata = dict(metadata)

    @property
    def subscription_type(self) -> SubscriptionType:
        return subscription_type(self._hard.subscribed_topic_names, len(self._hard.members))

    def preferred_server_assignor(
        self, old: ConsumerGroupMember | None = None, new: ConsumerGroupMember | None = None
    ) -> str | None:
        """The server assignor most members ask for (with ``old`` replaced by ``new``); None if
        no member names one. Ties go to the name first counted, deterministically."""
        counts = Counter(self._hard.server_assignors)
        _count(counts, old, new, lambda m: _assignor_of(m))
        best = [(count, name) for name, count in counts.items() if count > 0]
        if not best:
            return None
        top = max(count for count, _ in best)
        return next(name for count, name in best if count == top)

    # -- target assignment --------------------------------------------------------------------------

    @property
    def target_assignment(self) -> dict[str, Assignment]:
        return self._hard.target_assignment

    def target_assignment_of(self, member_id: str) -> Assignment:
        return self._hard.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def target_assignment_for(self, member_id: str, instance_id: str | None) -> Assignment:
        """Kafka's ``targetAssignment(memberId, instanceId)``: a static member's target is the one
        of the member its instance id maps to."""
        if instance_id is None:
            return self.target_assignment_of(member_id)
        previous = self.static_member_id(instance_id)
        return EMPTY_ASSIGNMENT if previous is None else self.target_assignment_of(previous)

    def update_target_assignment(self, member_id: str, assignment: Assignment) -> None:
        self._hard.target_assignment[member_id] = assignment

    def remove_target_assignment(self, member_id: str) -> None:
        self._hard.target_assignment.pop(member_id, None)

    # -- reverting a failed write -------------------------------------------------------------------

    def snapshot(self) -> ConsumerGroupSnapshot:
        return ConsumerGroupSnapshot(self._hard.copy())

    def restore(self, snapshot: ConsumerGroupSnapshot) -> None:
        self._hard = snapshot._hard.copy()
        self._recount()


def subscription_type(subscribed: Counter[str], num_members: int) -> SubscriptionType:
    """Homogeneous when every member subscribes to every subscribed topic."""
    if all(count == num_members for count in subscribed.values() if count > 0):
        return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS


def _assignor_of(member: ConsumerGroupMember) -> frozenset[str]:
    return frozenset() if member.server_assignor is None else frozenset((member.server_assignor,))


def _count(
    counts: Counter[str],
    old: ConsumerGroupMember | None,
    new: ConsumerGroupMember | None,
    of: Callable[[ConsumerGroupMember], Iterable[str]],
) -> None:
    if old is not None:
        for name in of(old):
            counts[name] -= 1
            if counts[name] <= 0:
                del counts[name]
    if new is not None:
        for name in of(new):
            counts[name] += 1
