"""ListGroups (key 16, v0-5): the groups this broker coordinates.

v4+ filters by state (KIP-518; case-insensitive, an empty filter lists every state) and v5+ by
type (KIP-848). Kafka parses each type with ``GroupType.parse``, where an unknown name becomes
UNKNOWN and matches no group; every group here is "classic", so a type filter lists groups only if
it names "classic" (any case) — "consumer" names KIP-848 groups, which kipling does not have. The
coordinator applies both filters; the handler passes them on only in the versions that have them.

The state (v4+) and type (v5+) of each group are in the response. While a partition of
``__consumer_offsets`` loads, the groups known so far are listed with COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from coordinator.group import GroupCoordinator, ListGroupsResult
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

FIRST_STATES_FILTER_VERSION = 4
FIRST_TYPES_FILTER_VERSION = 5


class ListGroupsHandler(Handler):
    api_key = ApiKey.LIST_GROUPS
    min_version = 0
    max_version = 5

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        version = ctx.api_version
        states = request.states_filter if version >= FIRST_STATES_FILTER_VERSION else []
        types = request.types_filter if version >= FIRST_TYPES_FILTER_VERSION else []
        result = self._coordinator.list_groups(states or (), types or ())
        authorizer = self._authorizer
        if authorizer.enabled and not cluster_allowed(authorizer, ctx, AclOperation.DESCRIBE):
            # Kafka's rule: DESCRIBE on the cluster lists every group, else only the groups described
            kept = tuple(
                g
                for g in result.groups
                if allowed(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
            )
            result = dataclasses.replace(result, groups=kept)
        return _body(result)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _body(ListGroupsResult(code))


def _body(result: ListGroupsResult) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in result.groups
        ],
    }
