"""AlterPartition (56, v0-3), served on the controller listener: a leader's ISR change proposal.

Partitions are named by topic name in v0-1 and by topic id from v2; v3 gives each new ISR member
with the broker epoch the leader saw (KIP-903). The checks (stale broker epoch, fenced leader
epoch, partition epoch, eligibility of new members) are the controller's.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.controller import QuorumController
from metadata.controller.replication_control import AlterPartitionItem, AlterPartitionResult
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

TOPIC_ID_VERSION = 2
ISR_WITH_EPOCHS_VERSION = 3


class AlterPartitionHandler(Handler):
    api_key = ApiKey.ALTER_PARTITION
    min_version = 0
    max_version = 3

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    def _active(self) -> QuorumController:
        return resolve_controller(self._controller)

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        by_id = ctx.api_version >= TOPIC_ID_VERSION
        items = [
            _item(topic.topic_id if by_id else topic.topic_name, p, ctx.api_version)
            for topic in request.topics
            for p in topic.partitions
        ]
        response = self._active().alter_partition(request.broker_id, request.broker_epoch, items)
        topics: dict[Any, list[dict[str, Any]]] = {}
        for result in response.partitions:
            topics.setdefault(result.topic, []).append(_partition(result, ctx.api_version))
        key = "topic_id" if by_id else "topic_name"
        return {
            "throttle_time_ms": 0,
            "error_code": int(response.error),
            "topics": [{key: topic, "partitions": partitions} for topic, partitions in topics.items()],
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {"throttle_time_ms": 0, "error_code": int(code), "topics": []}


def _item(topic: Any, partition: MessageData, version: int) -> AlterPartitionItem:
    if version >= ISR_WITH_EPOCHS_VERSION:
        members = partition.new_isr_with_epochs
        new_isr = tuple(m.broker_id for m in members)
        epochs: tuple[int, ...] | None = tuple(m.broker_epoch for m in members)
    else:
        new_isr, epochs = tuple(partition.new_isr), None
    return AlterPartitionItem(
        topic, partition.partition_index, partition.leader_epoch, new_isr, partition.partition_epoch, epochs
    )


def _partition(result: AlterPartitionResult, version: int) -> dict[str, Any]:
    error = result.error
    if error is ErrorCode.NEW_LEADER_ELECTED and version < TOPIC_ID_VERSION:
        error = ErrorCode.FENCED_LEADER_EPOCH  # v0-1 predate NEW_LEADER_ELECTED, as in Kafka
    return {
        "partition_index": result.partition,
        "error_code": int(error),
        "leader_id": result.leader_id,
        "leader_epoch": result.leader_epoch,
        "isr": list(result.isr),
        "leader_recovery_state": 0,
        "partition_epoch": result.partition_epoch,
    }
