"""DeleteGroups (key 42, v0-2): delete empty groups with their committed offsets.

Each group has its own result (NON_EMPTY_GROUP for a group with members, GROUP_ID_NOT_FOUND for one
that does not exist...); a group named twice is answered once, as Kafka's KafkaApis dedupes the names.
The coordinator answers through a callback once the tombstones are written.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.handlers.join_group import await_callback
from coordinator.group import GroupCoordinator
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode


class DeleteGroupsHandler(Handler):
    api_key = ApiKey.DELETE_GROUPS
    min_version = 0
    max_version = 2

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        group_ids = list(dict.fromkeys(request.groups_names))
        denied = denied_names(self._authorizer, ctx, AclOperation.DELETE, ResourceType.GROUP, group_ids)
        permitted = [g for g in group_ids if g not in denied]
        errors = await await_callback(self._coordinator.delete_groups, permitted) if permitted else {}
        return _body(
            {
                group_id: ErrorCode.GROUP_AUTHORIZATION_FAILED if group_id in denied else errors[group_id]
                for group_id in group_ids
            }
        )

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """DeleteGroupsRequest.getErrorResponse: every group carries the error."""
        names = request.groups_names if request is not None else []
        return _body(dict.fromkeys(names, code))


def _body(errors: dict[str, ErrorCode]) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "results": [{"group_id": group_id, "error_code": int(code)} for group_id, code in errors.items()],
    }
