"""OffsetForLeaderEpoch (key 23, v2-4): where a leader epoch ends in this leader's log.

A follower (or a consumer validating its position after a leader change, KIP-320) asks for epoch E
and learns (the largest epoch <= E this log knows, the offset where it ended), from the leader
epoch cache (kafka-behaviour.md 7.7). An epoch the cache cannot place answers -1/-1 with no error.
Only the leader answers. CurrentLeaderEpoch is checked first (-1 skips the check): older →
FENCED_LEADER_EPOCH, newer → UNKNOWN_LEADER_EPOCH. ReplicaId (v3+) changes nothing in the answer;
Kafka only uses it to pick the ACL to check. With an authorizer, CLUSTER_ACTION on the cluster (a
follower) allows every topic; otherwise each topic needs DESCRIBE, else its partitions answer
TOPIC_AUTHORIZATION_FAILED (KafkaApis.handleOffsetForLeaderEpochRequest).
"""

from __future__ import annotations

from typing import Any

import structlog

from broker.handlers.authorization import ALLOW_EVERYTHING, NOTHING_DENIED, cluster_allowed, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.replication.replica_manager import ReplicaManager
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET

_log = structlog.get_logger("kipling.offset_for_leader_epoch")


class OffsetForLeaderEpochHandler(Handler):
    api_key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    min_version = 2
    max_version = 4

    def __init__(self, replica_manager: ReplicaManager, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._replicas = replica_manager
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        denied = NOTHING_DENIED
        if self._authorizer.enabled and not cluster_allowed(
            self._authorizer, ctx, AclOperation.CLUSTER_ACTION
        ):
            names = (t.topic for t in request.topics)
            denied = denied_names(self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        topics = [
            {
                "topic": t.topic,
                "partitions": [
                    _result(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if t.topic in denied
                    else self._end_offset(t.topic, p)
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        return {"throttle_time_ms": 0, "topics": topics}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        if request is None:
            return None
        topics = [
            {"topic": t.topic, "partitions": [_result(p.partition, code) for p in t.partitions]}
            for t in request.topics
        ]
        return {"throttle_time_ms": 0, "topics": topics}

    def _end_offset(self, topic: str, request: MessageData) -> dict[str, Any]:
        index = request.partition
        partition = self._replicas.get_partition(topic, index)
        if partition is None:
            return _result(index, self._replicas.partition_error(topic, index))
        try:
            epoch, end_offset = partition.last_offset_for_leader_epoch(
                request.current_leader_epoch, request.leader_epoch
            )
        except KafkaError as exc:
            return _result(index, exc.code)
        except Exception:
            _log.exception("epoch lookup failed", topic=topic, partition=index, epoch=request.leader_epoch)
            return _result(index, ErrorCode.UNKNOWN_SERVER_ERROR)
        return _result(index, ErrorCode.NONE, epoch, end_offset)


def _result(
    index: int, code: ErrorCode, epoch: int = NO_LEADER_EPOCH, end_offset: int = UNDEFINED_EPOCH_OFFSET
) -> dict[str, Any]:
    return {"error_code": int(code), "partition": index, "leader_epoch": epoch, "end_offset": end_offset}
