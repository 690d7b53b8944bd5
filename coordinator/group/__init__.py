"""The group coordinator of Kafka's classic consumer-group protocol and of consumer-protocol groups
(KIP-848, :mod:`coordinator.group.consumer`), as a pure domain.

No sockets, no files, no asyncio: time comes from an injected clock, timers from the injected
purgatories (their scheduler), and every write to ``__consumer_offsets`` goes through an injected
:class:`~coordinator.group.log.GroupLog`. Handlers decode a request into one of
:mod:`~coordinator.group.requests`, call :class:`~coordinator.group.coordinator.GroupCoordinator` and
encode the :mod:`~coordinator.group.results` it answers with. The record formats of
``__consumer_offsets`` are in :mod:`protocol.consumer_offsets`.

Modules: :mod:`~coordinator.group.state` (states and transitions), :mod:`~coordinator.group.member` and
:mod:`~coordinator.group.group` (MemberMetadata, GroupMetadata), :mod:`~coordinator.group.offsets`
(committed offsets, expiry rules), :mod:`~coordinator.group.rebalance` (join and sync phases, sessions,
timers in :mod:`~coordinator.group.delayed`), :mod:`~coordinator.group.join` and
:mod:`~coordinator.group.static_members` (JoinGroup), :mod:`~coordinator.group.membership` (SyncGroup,
Heartbeat, LeaveGroup), :mod:`~coordinator.group.offset_service` (OffsetCommit, OffsetFetch),
:mod:`~coordinator.group.cleanup` (DeleteGroups, OffsetDelete, expiry, deleted topics),
:mod:`~coordinator.group.records`, :mod:`~coordinator.group.store`, :mod:`~coordinator.group.log` and
:mod:`~coordinator.group.loader` (``__consumer_offsets``), :mod:`~coordinator.group.catalog` (groups and
partitions held, request checks)."""

from coordinator.group.catalog import partition_for
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer.api import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
    DescribedConsumerGroup,
)
from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.log import GroupLog, InMemoryGroupLog, LoggedRecord, OffsetsRecord
from coordinator.group.requests import (
    JoinGroupRequest,
    JoinProtocol,
    MemberIdentity,
    OffsetCommitRequest,
    PartitionCommit,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from coordinator.group.results import (
    DescribedGroup,
    GroupOverview,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    ListGroupsResult,
    MemberLeaveResult,
    MemberSummary,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionOffset,
    SyncGroupResult,
)
from coordinator.group.state import GroupState

__all__ = [
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResult",
    "DescribedConsumerGroup",
    "DescribedGroup",
    "GroupCoordinator",
    "GroupCoordinatorConfig",
    "GroupLog",
    "GroupOverview",
    "GroupState",
    "InMemoryGroupLog",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResult",
    "JoinProtocol",
    "LeaveGroupResult",
    "ListGroupsResult",
    "LoggedRecord",
    "MemberIdentity",
    "MemberLeaveResult",
    "MemberSummary",
    "OffsetCommitRequest",
    "OffsetDeleteResult",
    "OffsetFetchResult",
    "OffsetsRecord",
    "PartitionCommit",
    "PartitionOffset",
    "SyncGroupRequest",
    "SyncGroupResult",
    "TxnOffsetCommitRequest",
    "partition_for",
]
