"""A member of a consumer-protocol group (Kafka's ConsumerGroupMember and MemberState), and the
assignments it holds.

A member is an immutable value: every change makes a new one (``dataclasses.replace``), so the
group can compare the member before and after a heartbeat to know which records to write, exactly
as Kafka's builder-made members are compared.

An :data:`Assignment` maps a topic id to the set of partitions of that topic; it is never changed
in place once built.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Topic id → partitions of that topic; topics with no partitions are left out."""
EMPTY_ASSIGNMENT: Assignment = {}

JOIN_GROUP_MEMBER_EPOCH = 0
"""The epoch a member joins (or rejoins, having been fenced) with."""
LEAVE_GROUP_MEMBER_EPOCH = -1
"""The epoch a member leaves with; also a member's epoch once its current assignment is deleted."""
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
"""The epoch a static member leaves with when it means to come back (its instance id stays taken)."""
NO_PREVIOUS_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a classic-protocol member of a consumer group brought in its JoinGroup (Kafka's
    ClassicMemberMetadata of ConsumerGroupMemberMetadataValue, tag 0): its session timeout and its
    (protocol name, metadata) pairs. Kafka 4.0 keeps it for the members of a classic group
    converted into a consumer group (KIP-848's online migration), and needs it to convert the group
    back; a member that speaks ConsumerGroupHeartbeat has none."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...] = ()


class MemberState(IntEnum):
    """Where a member is in reconciling its assignment with its target (the record's int8)."""

    STABLE = 0
    """It owns exactly what it was given at its epoch."""
    UNREVOKED_PARTITIONS = 1
    """It must give up partitions (``partitions_pending_revocation``) before its epoch moves on."""
    UNRELEASED_PARTITIONS = 2
    """It is at the target epoch, but some partitions of its target still belong to others."""
    UNKNOWN = 127
    """A state value this coordinator does not know (a newer coordinator's)."""

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """One member: its subscription (what it asked for) and its current assignment (what it owns).

    ``subscribed_topic_regex`` is None when the member subscribes by names only.
    """

    member_id: str
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    previous_member_epoch: int = NO_PREVIOUS_EPOCH
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic_member_metadata: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        """Kafka's ``useClassicProtocol``: the member joined with JoinGroup, not a consumer heartbeat."""
        return self.classic_member_metadata is not None

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        """Stable at the target epoch: nothing left to reconcile."""
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def same_subscription(self, other: ConsumerGroupMember) -> bool:
        """The fields of the member metadata record are all equal (no record to write)."""
        return (
            self.instance_id == other.instance_id
            and self.rack_id == other.rack_id
            and self.rebalance_timeout_ms == other.rebalance_timeout_ms
            and self.client_id == other.client_id
            and self.client_host == other.client_host
            and self.subscribed_topic_names == other.subscribed_topic_names
            and self.subscribed_topic_regex == other.subscribed_topic_regex
            and self.server_assignor == other.server_assignor
            and self.classic_member_metadata == other.classic_member_metadata
        )

    def same_current_assignment(self, other: ConsumerGroupMember) -> bool:
        """The fields of the current assignment record are all equal (no record to write)."""
        return (
            self.member_epoch == other.member_epoch
            and self.previous_member_epoch == other.previous_member_epoch
            and self.state is other.state
            and self.assigned_partitions == other.assigned_partitions
            and self.partitions_pending_revocation == other.partitions_pending_revocation
        )


def assignment_of(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> dict[uuid.UUID, frozenset[int]]:
    """An assignment from (topic id, partitions) pairs; a topic named twice gets the union."""
    merged: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in pairs:
        merged.setdefault(topic_id, set()).update(partitions)
    return {topic_id: frozenset(parts) for topic_id, parts in merged.items() if parts}


def count_partitions(assignment: Assignment) -> int:
    return sum(len(parts) for parts in assignment.values())


def is_subset(owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None, assignment: Assignment) -> bool:
    """Kafka's ``isSubset``: every owned partition is in ``assignment`` (an unknown owned set is not)."""
    if owned is None:
        return False
    for topic_id, partitions in owned:
        assigned = assignment.get(topic_id)
        if assigned is None or any(p not in assigned for p in partitions):
            return False
    return True
