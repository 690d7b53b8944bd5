"""BrokerRegistration (62, v0-4), served on the controller listener: a broker joins the cluster.

The answer is the broker epoch (the offset of the registration in the metadata log). Errors come
from the controller as Kafka's: INCONSISTENT_CLUSTER_ID, DUPLICATE_BROKER_REGISTRATION while
another incarnation of the same id still has a live session.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.controller import QuorumController
from metadata.records import BrokerEndpointRecord
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

NO_BROKER_EPOCH = -1


class BrokerRegistrationHandler(Handler):
    api_key = ApiKey.BROKER_REGISTRATION
    min_version = 0
    max_version = 4

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    def _active(self) -> QuorumController:
        return resolve_controller(self._controller)

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        endpoints = [
            BrokerEndpointRecord(li.name, li.host, li.port, li.security_protocol) for li in request.listeners
        ]
        try:
            epoch = self._active().register_broker(
                request.broker_id, request.incarnation_id, request.cluster_id, endpoints, request.rack
            )
        except KafkaError as exc:
            return _response(exc.code, NO_BROKER_EPOCH)
        return _response(ErrorCode.NONE, epoch)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _response(code, NO_BROKER_EPOCH)


def _response(code: ErrorCode, broker_epoch: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "broker_epoch": broker_epoch}
