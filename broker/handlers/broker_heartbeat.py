"""BrokerHeartbeat (63, v0-1), served on the controller listener: a broker's session keep-alive.

The answer tells the broker whether it is fenced, caught up with the metadata log, and (during a
controlled shutdown) whether it may stop now. The state machine is the controller's.

:class:`HeartbeatConnections` remembers which broker incarnation heartbeats on which connection of
the controller listener: when that connection closes (the broker process died), the controller
ends the broker's session after a short grace instead of a whole session timeout.
"""

from __future__ import annotations

import contextlib
from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.controller import QuorumController
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class HeartbeatConnections:
    """Which broker (id, epoch) heartbeats on which connection of the controller listener."""

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller
        self._brokers: dict[int, tuple[int, int]] = {}

    def _active(self) -> QuorumController:
        return resolve_controller(self._controller)

    def heartbeat(self, connection_id: int, broker_id: int, broker_epoch: int) -> None:
        self._brokers[connection_id] = (broker_id, broker_epoch)

    def closed(self, connection_id: int) -> None:
        """The listener's callback for a closed connection."""
        broker = self._brokers.pop(connection_id, None)
        if broker is not None and broker not in self._brokers.values():  # not also on another one
            # not the active controller (any more): the next one starts every session afresh
            with contextlib.suppress(KafkaError):
                self._active().broker_connection_lost(*broker)


class BrokerHeartbeatHandler(Handler):
    api_key = ApiKey.BROKER_HEARTBEAT
    min_version = 0
    max_version = 1

    def __init__(self, controller: ControllerRef, connections: HeartbeatConnections | None = None) -> None:
        self._controller = controller
        self._connections = connections

    def _active(self) -> QuorumController:
        return resolve_controller(self._controller)

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        result = self._active().heartbeat(  # NOT_CONTROLLER first when this node does not lead
            request.broker_id,
            request.broker_epoch,
            request.current_metadata_offset,
            want_fence=request.want_fence,
            want_shutdown=request.want_shut_down,
        )
        if self._connections is not None:  # only the active controller's connections count
            self._connections.heartbeat(ctx.connection_id, request.broker_id, request.broker_epoch)
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
