"""SyncGroup (key 14, v0-5): the leader hands out assignments; every member receives its own.

Kafka's KafkaApis.handleSyncGroupRequest, version by version:

* v3+ carries the group instance id of a static member.
* v5 makes the protocol type and name mandatory (``areMandatoryProtocolTypeAndNamePresent``): a v5
  request without both answers INCONSISTENT_GROUP_PROTOCOL without reaching the coordinator; a
  present one must match the group's (the coordinator checks it). The response carries them (v5+).
* The leader's assignments become a map by member id (a member listed twice keeps its last one).

The coordinator answers through a callback: at once, or once the leader's assignment is durable.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from broker.handlers.join_group import await_callback
from coordinator.group import GroupCoordinator, SyncGroupRequest, SyncGroupResult
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

FIRST_MANDATORY_PROTOCOL_VERSION = 5


class SyncGroupHandler(Handler):
    api_key = ApiKey.SYNC_GROUP
    min_version = 0
    max_version = 5

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if ctx.api_version >= FIRST_MANDATORY_PROTOCOL_VERSION and (
            request.protocol_type is None or request.protocol_name is None
        ):
            return _body(SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if not allowed(self._authorizer, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        sync = SyncGroupRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
            group_instance_id=request.group_instance_id,
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
        )
        result = await await_callback(self._coordinator.sync_group, sync)
        return _body(result)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _body(SyncGroupResult(code))


def _body(result: SyncGroupResult) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }
