"""What the coordinator is asked: the decoded content of the group APIs, version differences settled.

Handlers decode a request, fill one of these and call the coordinator. The version rules that are
the handler's to apply (Kafka's KafkaApis does the same):

* JoinGroup v0 has no rebalance timeout: pass the session timeout as ``rebalance_timeout_ms``.
* JoinGroup v4+ sets ``require_known_member_id`` (the two-step join, KIP-394); v9+ sets
  ``support_skipping_assignment`` (KIP-814).
* OffsetCommit v2-4 carries ``retention_time_ms`` (-1 = none, the broker's retention applies);
  a null committed metadata is passed as None and stored as "".
* LeaveGroup v0-2 names one member: pass one :class:`MemberIdentity` with that id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.sentinels import NO_LEADER_EPOCH

UNKNOWN_MEMBER_ID = ""
"""Kafka's ``JoinGroupRequest.UNKNOWN_MEMBER_ID``: a member that has no id yet."""
NO_GENERATION = -1
"""The generation of a consumer that does not use group management (manual assignment)."""
NO_RETENTION_TIME = -1
"""OffsetCommit v2-4's ``DEFAULT_RETENTION_TIME``: use offsets.retention.minutes."""


class JoinProtocol(NamedTuple):
    """One protocol a member supports (an assignor for consumers), with its metadata bytes."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[JoinProtocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    support_skipping_assignment: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: Mapping[str, bytes] = field(default_factory=dict)
    """The leader's assignment per member id; followers send none."""
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """A member leaving (LeaveGroup v3+ batches them); an unknown member id with an instance id
    removes that static member administratively."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    partitions: tuple[PartitionCommit, ...]
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    group_instance_id: str | None = None
    retention_time_ms: int = NO_RETENTION_TIME
    api_version: int | None = None
    """The OffsetCommit (or TxnOffsetCommit) version, for the checks that depend on it (consumer
    groups need v9+; v9+ answers GROUP_ID_NOT_FOUND for a missing group); None skips them."""


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """TxnOffsetCommit: an offset commit written in the transaction of ``producer_id``/``producer_epoch``."""

    commit: OffsetCommitRequest
    producer_id: int
    producer_epoch: int
    verification: object | None = None
    """The broker's guard that the offsets partition is in the transaction (see TxnProducer)."""
