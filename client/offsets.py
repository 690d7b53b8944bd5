"""ListOffsets for many partitions in one round trip: earliest, latest, or the offset for a timestamp.

Why a module of its own: :meth:`client.consumer.Consumer.list_offset` asks for one partition per request
and raises on the first error. Planning a Spark micro-batch resolves the earliest, latest or
by-timestamp offset of every partition of a subscription, on every trigger, so it needs one request per
leader carrying all of that leader's partitions, with each partition's error reported rather than raised
(one partition whose leader moved must not hide the others' answers, and only the caller knows whether
to retry).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from client.connection import KafkaConnection
from client.errors import error_code
from client.fetch_session import TopicPartition
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.sentinels import (
    NO_LEADER_EPOCH,
    NO_TIMESTAMP,
    UNKNOWN_OFFSET,
    IsolationLevel,
)

CONSUMER_REPLICA_ID = -1


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """One partition's answer. ``offset`` is ``UNKNOWN_OFFSET`` when a timestamp matched no record."""

    tp: TopicPartition
    error: ErrorCode
    offset: int
    timestamp: int
    leader_epoch: int

    @property
    def ok(self) -> bool:
        return self.error is ErrorCode.NONE


async def list_offsets(
    connection: KafkaConnection,
    timestamps: Mapping[TopicPartition, int],
    *,
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    timeout_s: float | None = None,
) -> dict[TopicPartition, ListedOffset]:
    """Ask the connected broker (the leader of every partition given) for each partition's offset.

    ``timestamps`` maps each partition to ``EARLIEST_TIMESTAMP``, ``LATEST_TIMESTAMP`` (both in
    :mod:`protocol.sentinels`) or a timestamp in ms (the first offset whose record timestamp is at or
    after it). Every partition asked gets an entry; one the response left out carries
    UNKNOWN_SERVER_ERROR. Connection failures raise (see :mod:`client.errors`).
    """
    if not timestamps:
        return {}
    by_topic: dict[str, list[dict[str, int]]] = {}
    for tp, timestamp in timestamps.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "timestamp": timestamp})
    body = {
        "replica_id": CONSUMER_REPLICA_ID,
        "isolation_level": isolation_level,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()],
    }
    version = connection.version_for(ApiKey.LIST_OFFSETS)
    response = await connection.request(ApiKey.LIST_OFFSETS, version, body, timeout_s)
    out: dict[TopicPartition, ListedOffset] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if tp in timestamps:
                out[tp] = ListedOffset(tp, error_code(p.error_code), p.offset, p.timestamp, p.leader_epoch)
    for tp in timestamps:
        if tp not in out:
            out[tp] = ListedOffset(
                tp, ErrorCode.UNKNOWN_SERVER_ERROR, UNKNOWN_OFFSET, NO_TIMESTAMP, NO_LEADER_EPOCH
            )
    return out


__all__ = [
    "ListedOffset",
    "list_offsets",
]
