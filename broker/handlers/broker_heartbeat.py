"""BrokerHeartbeat (63, v0-1), served on the controller listener: a broker's session keep-alive.

The answer tells the broker whether it is fenced, caught up with the metadata log, and (during a
controlled shutdown) whether it may stop now. The state machine is the controller's.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.controller import QuorumController
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode


class BrokerHeartbeatHandler(Handler):
    api_key = ApiKey.BROKER_HEARTBEAT
    min_version = 0
    max_version = 1

    def __init__(self, controller: QuorumController) -> None:
        self._controller = controller

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        result = self._controller.heartbeat(
            request.broker_id,
            request.broker_epoch,
            request.current_metadata_offset,
            want_fence=request.want_fence,
            want_shutdown=request.want_shut_down,
        )
        return {
            "throttle_time_ms": 0,
            "error_code": int(result.error),
            "is_caught_up": result.is_caught_up,
            "is_fenced": result.is_fenced,
            "should_shut_down": result.should_shutdown,
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {
            "throttle_time_ms": 0,
            "error_code": int(code),
            "is_caught_up": False,
            "is_fenced": True,
            "should_shut_down": False,
        }
