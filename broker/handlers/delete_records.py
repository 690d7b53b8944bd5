"""DeleteRecords (key 21, v0-2): move partitions' log start offsets forward (Kafka's
``handleDeleteRecordsRequest``, ``ReplicaManager.deleteRecords``).

Per partition: an internal topic is INVALID_TOPIC_EXCEPTION (Kafka refuses every client's request on
them); a partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; one this broker does not lead
NOT_LEADER_OR_FOLLOWER (KAFKA_STORAGE_ERROR when its log failed here); offset -1 means the high
watermark; a negative offset or one above the high watermark is OFFSET_OUT_OF_RANGE. Otherwise the
leader raises its log start offset (never lowers it) and deletes the segments wholly below it; the
answer's low watermark is the lowest log start offset among the replicas on live brokers, waited for
(in the DeleteRecords purgatory, :mod:`broker.replication.delayed_delete_records`) until it reaches
the offset asked for or ``timeout_ms`` passes (REQUEST_TIMED_OUT).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import structlog

from broker.handlers.authorization import ALLOW_EVERYTHING, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.replication.delayed_delete_records import (
    INVALID_LOW_WATERMARK,
    DelayedDeleteRecords,
    DeleteRecordsPartitionStatus,
)
from broker.replication.replica_manager import ReplicaManager
from metadata import topic_names
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from server_common.purgatory import DelayedOperationPurgatory

_log = structlog.get_logger("kipling.delete_records")


class DeleteRecordsHandler(Handler):
    api_key = ApiKey.DELETE_RECORDS
    min_version = 0
    max_version = 2

    def __init__(
        self,
        replica_manager: ReplicaManager,
        purgatory: DelayedOperationPurgatory,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        """``purgatory`` parks the requests that wait for the followers; the composition root makes
        every partition change re-check them (``check_and_complete(partition.key)``). A topic the
        requester may not DELETE answers TOPIC_AUTHORIZATION_FAILED on each of its partitions."""
        self._replicas = replica_manager
        self._purgatory = purgatory
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        denied = denied_names(
            self._authorizer, ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics)
        )
        statuses = [
            [
                _failed((topic.name, p.partition_index), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if topic.name in denied
                else self._delete(topic.name, p.partition_index, p.offset)
                for p in topic.partitions
            ]
            for topic in request.topics
        ]
        flat = [status for topic in statuses for status in topic]
        if any(status.pending for status in flat):
            await self._wait(request.timeout_ms, flat)
        return {
            "throttle_time_ms": 0,
            "topics": [
                {"name": topic.name, "partitions": [_result(s) for s in topic_statuses]}
                for topic, topic_statuses in zip(request.topics, statuses)
            ],
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        if request is None:
            return None
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": INVALID_LOW_WATERMARK,
                        "error_code": int(code),
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        return {"throttle_time_ms": 0, "topics": topics}

    def _delete(self, topic: str, index: int, offset: int) -> DeleteRecordsPartitionStatus:
        key = (topic, index)
        if topic_names.is_internal(topic):
            return _failed(key, ErrorCode.INVALID_TOPIC_EXCEPTION)
        partition = self._replicas.get_partition(topic, index)
        if partition is None:
            return _failed(key, self._replicas.partition_error(topic, index))
        try:
            requested, low_watermark = partition.delete_records(offset)
        except KafkaError as exc:
            return _failed(key, exc.code)
        except Exception:
            _log.exception("delete records failed", topic=topic, partition=index, offset=offset)
            return _failed(key, ErrorCode.UNKNOWN_SERVER_ERROR)
        _log.info(
            "records deleted",
            topic=topic,
            partition=index,
            log_start_offset=partition.log_start_offset,
            low_watermark=low_watermark,
        )
        return DeleteRecordsPartitionStatus(key, requested, low_watermark)

    async def _wait(self, timeout_ms: int, statuses: Sequence[DeleteRecordsPartitionStatus]) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def respond(_: Sequence[DeleteRecordsPartitionStatus]) -> None:
            if not done.done():
                done.set_result(None)

        operation = DelayedDeleteRecords(
            max(timeout_ms, 0), statuses, respond, get_partition=self._replicas.get_partition_by_key
        )
        self._purgatory.try_complete_else_watch(operation, operation.watch_keys)
        try:
            await done
        except asyncio.CancelledError:
            operation.cancel()
            raise


def _failed(key: tuple[str, int], code: ErrorCode) -> DeleteRecordsPartitionStatus:
    return DeleteRecordsPartitionStatus(key, -1, INVALID_LOW_WATERMARK, code)


def _result(status: DeleteRecordsPartitionStatus) -> dict[str, Any]:
    return {
        "partition_index": status.key[1],
        "low_watermark": status.low_watermark,
        "error_code": int(status.error_code),
    }
