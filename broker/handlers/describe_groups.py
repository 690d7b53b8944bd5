"""DescribeGroups (key 15, v0-5): state, protocol and members of groups.

Each group is answered on its own (errors are per group; there is no top-level error). Members'
metadata and assignments are shown only while the group is Stable; an unknown group is Dead with no
error before v6 (the coordinator decides, given the version).

Authorized operations (v3+, KIP-430): there is no authorizer, so as in Metadata (see
:mod:`broker.handlers.metadata`) a client that asks gets every operation Kafka supports on a group
(READ, DELETE, DESCRIBE: ``AclEntry.supportedOperations(GROUP)``), and only for groups answered
without error (KafkaApis sets them only then); otherwise the INT32_MIN "not computed" sentinel.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import Handler, RequestContext
from broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from coordinator.group import DescribedGroup, GroupCoordinator
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

FIRST_AUTHORIZED_OPERATIONS_VERSION = 3
_GROUP_OPERATIONS = (3, 6, 8)
"""AclOperation codes Kafka supports on a group: READ DELETE DESCRIBE."""
GROUP_AUTHORIZED_OPERATIONS = sum(1 << op for op in _GROUP_OPERATIONS)


class DescribeGroupsHandler(Handler):
    api_key = ApiKey.DESCRIBE_GROUPS
    min_version = 0
    max_version = 5

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        include_ops = ctx.api_version >= FIRST_AUTHORIZED_OPERATIONS_VERSION and bool(
            request.include_authorized_operations
        )
        described = self._coordinator.describe_groups(request.groups, ctx.api_version)
        return {"throttle_time_ms": 0, "groups": [_group(d, include_ops) for d in described]}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """DescribeGroupsRequest.getErrorResponse: every group carries the error, with an empty state."""
        groups = request.groups if request is not None else []
        return {
            "throttle_time_ms": 0,
            "groups": [_group(DescribedGroup(g, code, "", "", ""), include_ops=False) for g in groups],
        }


def _group(described: DescribedGroup, include_ops: bool) -> dict[str, Any]:
    with_ops = include_ops and described.error is ErrorCode.NONE
    return {
        "error_code": int(described.error),
        "error_message": described.error_message,
        "group_id": described.group_id,
        "group_state": described.state,
        "protocol_type": described.protocol_type,
        "protocol_data": described.protocol,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in described.members
        ],
        "authorized_operations": GROUP_AUTHORIZED_OPERATIONS if with_ops else AUTHORIZED_OPERATIONS_OMITTED,
    }
