"""ListOffsets (key 2, v1-9): a partition's offset for a timestamp or a sentinel.

Sentinels: -1 latest (the high watermark for READ_UNCOMMITTED consumers, the last stable offset
for READ_COMMITTED, the log end offset for followers and the debug replica id), -2 earliest and
-4 earliest local (the log start offset), -3 the record with the largest timestamp, -5 latest
tiered (no tiered storage: -1). Any other value finds the first offset whose record timestamp is
at or after it, or -1/-1 when none is below the last fetchable offset. The broker does not tie
the sentinels to versions (Kafka's clients pick the version that carries them, v7/v8/v9).

replica_id -1 is a consumer (its isolation level applies), -2 a debugging tool (any replica may
answer, up to the log end offset), >= 0 a follower (up to the log end offset). A partition listed
twice in one request answers INVALID_REQUEST for each occurrence, as in Kafka. A consumer's unknown
isolation level makes the whole request INVALID_REQUEST (as Fetch does). With an authorizer, a topic
the requester may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED for each of its partitions.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import structlog

from broker.handlers.authorization import ALLOW_EVERYTHING, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.replication.partition import NOT_FOUND, TimestampAndOffset
from broker.replication.replica_manager import ReplicaManager
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import IsolationLevel

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2

_log = structlog.get_logger("kipling.list_offsets")


class ListOffsetsHandler(Handler):
    api_key = ApiKey.LIST_OFFSETS
    min_version = 1
    max_version = 9

    def __init__(self, replica_manager: ReplicaManager, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._replicas = replica_manager
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        isolation = _isolation(request)
        require_leader = request.replica_id != DEBUGGING_REPLICA_ID
        counts = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
        denied = denied_names(
            self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
        )
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                if topic.name in denied:
                    partitions.append(_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif counts[(topic.name, p.partition_index)] > 1:
                    partitions.append(_error(p.partition_index, ErrorCode.INVALID_REQUEST))
                else:
                    partitions.append(self._lookup(topic.name, p, isolation, require_leader))
            topics.append({"name": topic.name, "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        if request is None:
            return None
        topics = [
            {"name": t.name, "partitions": [_error(p.partition_index, code) for p in t.partitions]}
            for t in request.topics
        ]
        return {"throttle_time_ms": 0, "topics": topics}

    def _lookup(
        self, topic: str, request: MessageData, isolation: IsolationLevel | None, require_leader: bool
    ) -> dict[str, Any]:
        index = request.partition_index
        partition = self._replicas.get_partition(topic, index)
        if partition is None:
            return _error(index, self._replicas.partition_error(topic, index))
        try:
            found = partition.offset_for_timestamp(
                request.timestamp,
                isolation_level=isolation,
                current_leader_epoch=request.current_leader_epoch,
                require_leader=require_leader,
            )
        except KafkaError as exc:
            return _error(index, exc.code)
        except Exception:
            _log.exception("offset lookup failed", topic=topic, partition=index, timestamp=request.timestamp)
            return _error(index, ErrorCode.UNKNOWN_SERVER_ERROR)
        return _found(index, found)


def _isolation(request: MessageData) -> IsolationLevel | None:
    """The isolation level a consumer reads at; None for a follower or the debug replica id, whose
    isolation level is ignored. A consumer's unknown isolation level is INVALID_REQUEST."""
    if request.replica_id != CONSUMER_REPLICA_ID:
        return None
    try:
        return IsolationLevel(request.isolation_level)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"unknown isolation level {request.isolation_level}"
        ) from None


def _found(index: int, found: TimestampAndOffset) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": 0,
        "timestamp": found.timestamp,
        "offset": found.offset,
        "leader_epoch": found.leader_epoch,
    }


def _error(index: int, code: ErrorCode) -> dict[str, Any]:
    return {**_found(index, NOT_FOUND), "error_code": int(code)}
