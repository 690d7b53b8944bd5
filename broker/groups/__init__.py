"""The group coordinator of Kafka's classic consumer-group protocol, as a pure domain.

No sockets, no files, no asyncio: time comes from an injected clock, timers from the injected
purgatories (their scheduler), and every write to ``__consumer_offsets`` goes through an injected
:class:`~broker.groups.log.GroupLog`. Handlers decode a request into one of
:mod:`~broker.groups.requests`, call :class:`~broker.groups.coordinator.GroupCoordinator` and encode
the :mod:`~broker.groups.results` it answers with. The record formats of ``__consumer_offsets`` are in
:mod:`protocol.consumer_offsets`.

Modules: :mod:`~broker.groups.state` (states and transitions), :mod:`~broker.groups.member` and
:mod:`~broker.groups.group` (MemberMetadata, GroupMetadata), :mod:`~broker.groups.offsets` (committed
offsets, expiry rules), :mod:`~broker.groups.rebalance` (join and sync phases, sessions, timers in
:mod:`~broker.groups.delayed`), :mod:`~broker.groups.join` and :mod:`~broker.groups.static_members`
(JoinGroup), :mod:`~broker.groups.membership` (SyncGroup, Heartbeat, LeaveGroup),
:mod:`~broker.groups.offset_service` (OffsetCommit, OffsetFetch), :mod:`~broker.groups.cleanup`
(DeleteGroups, expiry, deleted topics), :mod:`~broker.groups.records`, :mod:`~broker.groups.store`,
:mod:`~broker.groups.log` and :mod:`~broker.groups.loader` (``__consumer_offsets``),
:mod:`~broker.groups.catalog` (groups and partitions held, request checks).
"""

from broker.groups.catalog import partition_for
from broker.groups.config import GroupCoordinatorConfig
from broker.groups.coordinator import GroupCoordinator
from broker.groups.log import GroupLog, InMemoryGroupLog, LoggedRecord, OffsetsRecord
from broker.groups.requests import (
    JoinGroupRequest,
    JoinProtocol,
    MemberIdentity,
    OffsetCommitRequest,
    PartitionCommit,
    SyncGroupRequest,
)
from broker.groups.results import (
    DescribedGroup,
    GroupOverview,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    ListGroupsResult,
    MemberLeaveResult,
    MemberSummary,
    OffsetFetchResult,
    PartitionOffset,
    SyncGroupResult,
)
from broker.groups.state import GroupState

__all__ = [
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
    "OffsetFetchResult",
    "OffsetsRecord",
    "PartitionCommit",
    "PartitionOffset",
    "SyncGroupRequest",
    "SyncGroupResult",
    "partition_for",
]
