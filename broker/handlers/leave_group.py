"""LeaveGroup (key 13, v0-5): members leave a classic group.

v0-2 name one member by id; v3+ name a batch of members, each by member id and group instance id
(KIP-345: an empty member id with an instance id removes that static member), with a reason in v5.

The response follows Kafka's LeaveGroupResponse constructor: from v3 the top-level error is the
coordinator's and every member has its own result; v0-2 have only the top-level error, which is the
coordinator's error if there is one, else the first member's error (``getError``), so that an unknown
member still hears UNKNOWN_MEMBER_ID. The coordinator answers at once.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from coordinator.group import GroupCoordinator, LeaveGroupResult, MemberIdentity
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

FIRST_BATCH_VERSION = 3


class LeaveGroupHandler(Handler):
    api_key = ApiKey.LEAVE_GROUP
    min_version = 0
    max_version = 5

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if not allowed(self._authorizer, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if ctx.api_version < FIRST_BATCH_VERSION:
            members = [MemberIdentity(request.member_id)]
        else:
            members = [MemberIdentity(m.member_id, m.group_instance_id, m.reason) for m in request.members]
        result = self._coordinator.leave_group(request.group_id, members)
        return _body(ctx.api_version, result)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """LeaveGroupRequest.getErrorResponse: the top-level error alone, no members."""
        return _body(ctx.api_version, LeaveGroupResult(code))


def _body(version: int, result: LeaveGroupResult) -> dict[str, Any]:
    if version < FIRST_BATCH_VERSION:
        error = result.error
        if error is ErrorCode.NONE:
            error = next((m.error for m in result.members if m.error is not ErrorCode.NONE), ErrorCode.NONE)
        return {"throttle_time_ms": 0, "error_code": int(error)}
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": int(m.error)}
            for m in result.members
        ],
    }
