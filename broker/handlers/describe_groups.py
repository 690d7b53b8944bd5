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

from broker.handlers.authorization import ALLOW_EVERYTHING, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from coordinator.group import DescribedGroup, GroupCoordinator
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
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

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        include_ops = ctx.api_version >= FIRST_AUTHORIZED_OPERATIONS_VERSION and bool(
            request.include_authorized_operations
        )
        if not self._authorizer.enabled:
            described = self._coordinator.describe_groups(request.groups, ctx.api_version)
            return {"throttle_time_ms": 0, "groups": [_group(d, include_ops) for d in described]}
        return {"throttle_time_ms": 0, "groups": self._describe_authorized(ctx, request.groups, include_ops)}

    def _describe_authorized(
        self, ctx: RequestContext, group_ids: list[str], include_ops: bool
    ) -> list[dict[str, Any]]:
        """Kafka's checks: a group without DESCRIBE answers GROUP_AUTHORIZATION_FAILED with an
        empty state; the others are described, with the authorizer's operations when asked."""
        authorizer = self._authorizer
        denied = denied_names(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_ids)
        permitted = [g for g in group_ids if g not in denied]
        described = iter(self._coordinator.describe_groups(permitted, ctx.api_version) if permitted else ())
        groups = []
        for group_id in group_ids:
            if group_id in denied:
                refused = DescribedGroup(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, "", "", "")
                groups.append(_group(refused, include_ops=False))
                continue
            d = next(described)
            operations = None
            if include_ops and d.error is ErrorCode.NONE:
                operations = authorizer.authorized_operations(
                    ctx.principal, ctx.client_host, ResourceType.GROUP, d.group_id
                )
            groups.append(_group(d, include_ops, operations))
        return groups

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """DescribeGroupsRequest.getErrorResponse: every group carries the error, with an empty state."""
        groups = request.groups if request is not None else []
        return {
            "throttle_time_ms": 0,
            "groups": [_group(DescribedGroup(g, code, "", "", ""), include_ops=False) for g in groups],
        }


def _group(described: DescribedGroup, include_ops: bool, operations: int | None = None) -> dict[str, Any]:
    with_ops = include_ops and described.error is ErrorCode.NONE
    if operations is None:
        operations = GROUP_AUTHORIZED_OPERATIONS if with_ops else AUTHORIZED_OPERATIONS_OMITTED
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
        "authorized_operations": operations,
    }
