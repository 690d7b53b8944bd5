"""One member of a classic group (Kafka's MemberMetadata).

A member is parked in at most one of two places at a time: awaiting its JoinGroup answer (while the
group prepares a rebalance) or its SyncGroup answer (while the leader's assignment is awaited). The
callbacks stored here are those answers; the group invokes each exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from coordinator.group.requests import JoinProtocol
from coordinator.group.results import JoinGroupResult, MemberSummary, SyncGroupResult

JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


@dataclass(slots=True, eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: tuple[JoinProtocol, ...]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    is_new: bool = False
    """Set while a member's first JoinGroup waits: its liveness is then bounded by
    NewMemberJoinTimeoutMs rather than by rejoining (Kafka's ``isNew``)."""
    heartbeat_satisfied: bool = False
    last_heartbeat_ms: int | None = field(default=None)
    """When the coordinator last heard from the member (a heartbeat or any request proving it alive)."""

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(protocol.name for protocol in self.supported_protocols)

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: a new member must heartbeat (it may be expired while waiting to join); a
        member parked in a rebalance is alive by definition; anyone else needs its next heartbeat."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def matches(self, protocols: Sequence[JoinProtocol]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return tuple(protocols) == self.supported_protocols

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of the candidate protocols")

    def summary(self, protocol: str | None) -> MemberSummary:
        """DescribeGroups' member: metadata and assignment only once the group is Stable."""
        metadata = self.metadata(protocol) if protocol is not None else b""
        assignment = self.assignment if protocol is not None else b""
        return MemberSummary(
            self.member_id, self.group_instance_id, self.client_id, self.client_host, metadata, assignment
        )
