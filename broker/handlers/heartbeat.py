"""Heartbeat (key 12, v0-4): a member tells the coordinator it is alive and learns of rebalances.

The answer is a single error code (REBALANCE_IN_PROGRESS asks the member to rejoin); v3+ carries the
group instance id of a static member. The coordinator answers at once.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from coordinator.group import GroupCoordinator
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class HeartbeatHandler(Handler):
    api_key = ApiKey.HEARTBEAT
    min_version = 0
    max_version = 4

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if not allowed(self._authorizer, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error = self._coordinator.heartbeat(
            request.group_id, request.member_id, request.generation_id, request.group_instance_id
        )
        return _body(error)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _body(code)


def _body(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code)}
