"""What the coordinator answers: one small immutable result per API, in Kafka's terms.

Handlers encode these into the response of the version the client spoke.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.group.requests import UNKNOWN_MEMBER_ID
from protocol.error_codes import ErrorCode
from protocol.sentinels import NO_LEADER_EPOCH, UNKNOWN_OFFSET

TopicPartition = tuple[str, int]
NO_LEADER = ""
"""Kafka's ``GroupCoordinator.NoLeader``."""
CLASSIC_GROUP_TYPE = "classic"
"""ListGroups v5's group type for every group of this coordinator."""


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """The JoinGroup response; only the leader receives ``members`` (to run the assignor)."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()

    @classmethod
    def failure(cls, member_id: str, error: ErrorCode) -> JoinGroupResult:
        """Kafka's ``JoinGroupResult(memberId, error)``: no generation, no protocol, no leader."""
        return cls(error, member_id)


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """A top-level error (then no members), or one result per member in request order."""

    error: ErrorCode
    members: tuple[MemberLeaveResult, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    """One partition of an OffsetFetch answer; offset UNKNOWN_OFFSET (Kafka's
    ``OffsetFetchResponse.INVALID_OFFSET``) means no committed offset, leader epoch -1 none."""

    offset: int = UNKNOWN_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    """A group's committed offsets, or a group-level error (then no partitions)."""

    group_id: str
    error: ErrorCode
    partitions: dict[TopicPartition, PartitionOffset]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    """OffsetDelete's answer: a group-level error (then no partitions, as Kafka's response to a
    failed request has none), or each requested partition's error in request order."""

    error: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: ErrorCode
    groups: tuple[GroupOverview, ...] = ()


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """DescribeGroups' answer for one group. ``protocol`` is DescribeGroups' ProtocolData."""

    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...] = ()
    error_message: str | None = None


__all__ = [
    "CLASSIC_GROUP_TYPE",
    "NO_LEADER",
    "UNKNOWN_MEMBER_ID",
    "DescribedGroup",
    "GroupOverview",
    "JoinGroupMember",
    "JoinGroupResult",
    "LeaveGroupResult",
    "ListGroupsResult",
    "MemberLeaveResult",
    "MemberSummary",
    "OffsetDeleteResult",
    "OffsetFetchResult",
    "PartitionOffset",
    "SyncGroupResult",
    "TopicPartition",
]
