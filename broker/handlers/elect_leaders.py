"""ElectLeaders (43, v0-2): preferred or unclean leader elections, carried out by the controller.

Served on the controller listener (the rules are the controller's,
:mod:`metadata.controller.leader_election`); a broker forwards its clients' requests there and
answers once its own metadata shows the elected leaders (broker/handlers/forwarding.py). v0 has no
election type (always preferred) and no top-level error code; v1+ answer NONE at the top level and
each partition's outcome in its result.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.leader_election import ElectionType, TopicElectionResult
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

ELECTION_TYPE_VERSION = 1


class ElectLeadersHandler(Handler):
    api_key = ApiKey.ELECT_LEADERS
    min_version = 0
    max_version = 2

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        election_type = request.election_type if ctx.api_version >= ELECTION_TYPE_VERSION else 0
        try:
            kind = ElectionType(election_type)
        except ValueError:
            return _response(
                ErrorCode.INVALID_REQUEST,
                _each_partition(request, ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}"),
            )
        requested = (
            None
            if request.topic_partitions is None
            else [(t.topic, list(t.partitions)) for t in request.topic_partitions]
        )
        try:
            results = resolve_controller(self._controller).elect_leaders(kind, requested)
        except KafkaError as exc:
            return self.error_body(ctx, request, exc.code)
        return _response(ErrorCode.NONE, [_topic(r) for r in results])

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """``code`` at the top level (v1+) and for every partition named (Kafka's getErrorResponse)."""
        return _response(code, _each_partition(request, code, None))


def _each_partition(
    request: MessageData | None, code: ErrorCode, message: str | None
) -> list[dict[str, Any]]:
    topics = request.topic_partitions if request is not None and request.topic_partitions else []
    return [
        {
            "topic": t.topic,
            "partition_result": [
                {"partition_id": p, "error_code": int(code), "error_message": message} for p in t.partitions
            ],
        }
        for t in topics
    ]


def _response(code: ErrorCode, results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "replica_election_results": results}


def _topic(result: TopicElectionResult) -> dict[str, Any]:
    return {
        "topic": result.topic,
        "partition_result": [
            {"partition_id": p.partition, "error_code": int(p.error), "error_message": p.message}
            for p in result.partitions
        ],
    }
