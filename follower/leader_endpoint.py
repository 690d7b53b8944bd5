"""How a fetcher talks to the leader of its partitions: Kafka's LeaderEndPoint, as a Protocol.

The fetcher never touches the network itself. An endpoint turns the fetcher's per-partition
parameters into requests (Fetch, OffsetForLeaderEpoch, ListOffsets) and the answers into the plain
values below, so tests drive the fetcher with an in-memory leader and the network endpoint (over
kipling's client) can add fetch sessions without the fetcher knowing.

Errors: a failure of a whole call (connection lost, timeout, undecodable response) is raised as
any exception; a per-partition error of Fetch or OffsetForLeaderEpoch comes back in the partition's
``error`` field; ListOffsets errors for the single partition asked about are raised as
``protocol.error_codes.KafkaError``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from follower.fetch_state import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpoch,
    Offset,
    TopicPartition,
)
from protocol import sentinels
from protocol.error_codes import ErrorCode

UNKNOWN_OFFSET = Offset(sentinels.UNKNOWN_OFFSET)
"""An absent high watermark / log start offset / last stable offset, as on the wire."""


@dataclass(frozen=True, slots=True)
class FetchPartitionParams:
    """One partition's fields in a follower's Fetch request (kafka-behaviour.md 5.2).

    ``last_fetched_epoch`` is None when the endpoint does not support truncation on fetch, or when
    the local log has no epoch yet; on the wire it is then -1. Two params are equal exactly when
    the partition would be sent unchanged, which is what an incremental fetch session leaves out.
    """

    fetch_offset: Offset
    log_start_offset: Offset
    current_leader_epoch: LeaderEpoch
    last_fetched_epoch: LeaderEpoch | None = None
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class FollowerFetchRequest:
    """A Fetch request an endpoint built, as the fetcher needs to see it.

    ``partitions`` are all the partitions the leader answers for, with the parameters as of this
    request (for a fetch session: every partition in the session). The fetcher checks each response
    partition against them to drop stale answers, so the mapping must not change until the
    response is processed. ``to_send`` are the partitions actually written into the request (all of
    them for a full request, the changed ones for an incremental one) and ``forgotten`` those the
    request removes from the session.
    """

    partitions: Mapping[TopicPartition, FetchPartitionParams]
    to_send: Mapping[TopicPartition, FetchPartitionParams]
    forgotten: frozenset[TopicPartition] = frozenset()


class EpochEndOffset(NamedTuple):
    """Where an epoch ends in the leader's log: an OffsetForLeaderEpoch result or a DivergingEpoch."""

    error: ErrorCode = ErrorCode.NONE
    leader_epoch: LeaderEpoch = UNDEFINED_EPOCH
    end_offset: Offset = UNDEFINED_EPOCH_OFFSET


class OffsetAndEpoch(NamedTuple):
    """A ListOffsets answer: the offset and the leader epoch of the record there (-1 if unknown)."""

    offset: Offset
    leader_epoch: LeaderEpoch = UNDEFINED_EPOCH


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    """One partition of a Fetch response.

    ``records`` are whole batches except possibly a partial last one, which the follower drops.
    ``diverging_epoch`` (fetch v12+) says the follower's log diverges from the leader's: such a
    response carries no records and its high watermark must not be applied.
    """

    error: ErrorCode = ErrorCode.NONE
    high_watermark: Offset = UNKNOWN_OFFSET
    log_start_offset: Offset = UNKNOWN_OFFSET
    records: bytes | bytearray | memoryview = b""
    diverging_epoch: EpochEndOffset | None = None
    last_stable_offset: Offset = UNKNOWN_OFFSET


class LeaderEndpoint(Protocol):
    """The leader of a fetcher's partitions, one per source broker (Kafka's LeaderEndPoint)."""

    # Read-only to the fetcher: an implementation may hold them as plain attributes or properties.
    @property
    def supports_truncation_on_fetch(self) -> bool:
        """The leader answers LastFetchedEpoch with DivergingEpoch (fetch v12+, IBP >= 2.7)."""
        ...

    @property
    def supports_offset_for_leader_epoch(self) -> bool:
        """The leader serves OffsetForLeaderEpoch; without it truncation falls back to the HW."""
        ...

    async def fetch(self, request: FollowerFetchRequest) -> dict[TopicPartition, FetchPartitionData]:
        """Send a Fetch; the result holds the partitions the leader answered for."""
        ...

    async def fetch_epoch_end_offsets(
        self, partitions: Mapping[TopicPartition, tuple[LeaderEpoch, LeaderEpoch]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        """OffsetForLeaderEpoch for {tp: (current leader epoch, epoch to look up)}."""
        ...

    async def fetch_earliest_offset(
        self, tp: TopicPartition, current_leader_epoch: LeaderEpoch
    ) -> OffsetAndEpoch:
        """ListOffsets EARLIEST as a replica: the leader's log start offset."""
        ...

    async def fetch_latest_offset(
        self, tp: TopicPartition, current_leader_epoch: LeaderEpoch
    ) -> OffsetAndEpoch:
        """ListOffsets LATEST as a replica: the leader's log end offset."""
        ...

    def build_fetch(
        self, partitions: Mapping[TopicPartition, FetchPartitionParams], changed: Set[TopicPartition]
    ) -> FollowerFetchRequest | None:
        """The next Fetch request, or None when there is nothing to send.

        ``partitions`` are the partitions ready for fetch, in fetch order (a live read-only view;
        copy what must outlive the call). ``changed`` are those whose parameters changed, that
        joined, or that left ``partitions`` since the previous call: a session-aware endpoint sends
        only these (DESIGN.md "The follower side too"), so building costs O(changed).
        """
        ...


def full_fetch_request(
    partitions: Mapping[TopicPartition, FetchPartitionParams],
) -> FollowerFetchRequest | None:
    """A sessionless request with every ready partition, or None if there is none."""
    if not partitions:
        return None
    snapshot = dict(partitions)
    return FollowerFetchRequest(snapshot, snapshot)


__all__ = [
    "EpochEndOffset",
    "FetchPartitionData",
    "FetchPartitionParams",
    "FollowerFetchRequest",
    "LeaderEndpoint",
    "OffsetAndEpoch",
    "full_fetch_request",
]
