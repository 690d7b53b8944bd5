"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) on the controller listener.

Thin: the request becomes :class:`~metadata.controller.reassignment_control.ReassignablePartition`
items for the active controller, whose per-partition results (errors with Kafka's messages) are
encoded back. Brokers forward their clients' requests here (broker/handlers/forwarding.py); the
forwarding broker answers once its own metadata shows each accepted target.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.controller import QuorumController
from metadata.controller.reassignment_control import ReassignablePartition
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

__all__ = ["AlterPartitionReassignmentsHandler", "ListPartitionReassignmentsHandler"]


class AlterPartitionReassignmentsHandler(Handler):
    api_key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    min_version = 0
    max_version = 1

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    def _active(self) -> QuorumController:
        return resolve_controller(self._controller)

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        items = [
            ReassignablePartition(
                topic.name, p.partition_index, None if p.replicas is None else tuple(p.replicas)
            )
            for topic in request.topics
            for p in topic.partitions
        ]
        allow = getattr(request, "allow_replication_factor_change", True)
        results = self._active().alter_partition_reassignments(items, allow_replication_factor_change=allow)
        topics: dict[str, list[dict[str, Any]]] = {}
        for result in results:
            topics.setdefault(result.topic, []).append(
                {
                    "partition_index": result.partition,
                    "error_code": int(result.error),
                    "error_message": result.message,
                }
            )
        return {
            "throttle_time_ms": 0,
            "allow_replication_factor_change": allow,
            "error_code": 0,
            "error_message": None,
            "responses": [{"name": name, "partitions": partitions} for name, partitions in topics.items()],
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """The top-level error, repeated on every partition (Kafka's getErrorResponse)."""
        topics = request.topics if request is not None else []
        return {
            "throttle_time_ms": 0,
            "error_code": int(code),
            "error_message": code.description,
            "responses": [
                {
                    "name": topic.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": int(code),
                            "error_message": code.description,
                        }
                        for p in topic.partitions
                    ],
                }
                for topic in topics
            ],
        }


class ListPartitionReassignmentsHandler(Handler):
    api_key = ApiKey.LIST_PARTITION_REASSIGNMENTS
    min_version = 0
    max_version = 0

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        wanted = (
            None
            if request.topics is None
            else [(topic.name, list(topic.partition_indexes)) for topic in request.topics]
        )
        ongoing = resolve_controller(self._controller).list_partition_reassignments(wanted)
        topics: dict[str, list[dict[str, Any]]] = {}
        for entry in ongoing:
            topics.setdefault(entry.topic, []).append(
                {
                    "partition_index": entry.partition,
                    "replicas": list(entry.replicas),
                    "adding_replicas": list(entry.adding),
                    "removing_replicas": list(entry.removing),
                }
            )
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()],
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {
            "throttle_time_ms": 0,
            "error_code": int(code),
            "error_message": code.description,
            "topics": [],
        }
