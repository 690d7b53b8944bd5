"""AllocateProducerIds (67, v0), served on the controller listener: the next block of producer ids.

The controller records the block in the metadata log (a ProducerIdsRecord) before answering, so a
block is never handed out twice, even across a controller restart. A broker epoch that is not the
broker's current one is STALE_BROKER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.controller import QuorumController
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class AllocateProducerIdsHandler(Handler):
    api_key = ApiKey.ALLOCATE_PRODUCER_IDS
    min_version = 0
    max_version = 0

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    def _active(self) -> QuorumController:
        return resolve_controller(self._controller)

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        try:
            block = self._active().allocate_producer_ids(request.broker_id, request.broker_epoch)
        except KafkaError as exc:
            return _response(exc.code)
        return _response(ErrorCode.NONE, block.first_id, block.size)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _response(code)


def _response(code: ErrorCode, start: int = -1, length: int = 0) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "producer_id_start": start,
        "producer_id_len": length,
    }
