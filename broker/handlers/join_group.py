"""JoinGroup (key 11, v0-9): a member joins a classic group; the answer comes when the join phase ends.

Version rules are Kafka's KafkaApis.handleJoinGroupRequest and JoinGroupRequest's:

* v0 has no rebalance timeout: the session timeout stands in for it (JoinGroupRequest's constructor).
* v4+ with no group instance id must make a new member come back with the id it is given
  (``requireKnownMemberId = version >= 4 && groupInstanceId.isEmpty``, KIP-394): the first join
  answers MEMBER_ID_REQUIRED with the member id. Before v4 the member joins in one step.
* v9 tells the coordinator the leader can skip the assignment (``supportSkippingAssignment``, KIP-814).
* v8+ carries a reason, which goes to the coordinator's log.
* The protocol name is a string up to v6 ("" when there is none) and nullable from v7 (null when there
  is none; JoinGroupResponse's constructor maps "" to null), as is the protocol type (v7+).

The client host the coordinator records (DescribeGroups shows it) is Kafka's
``clientAddress.toString``: "/" followed by the peer's address.

The coordinator answers through a callback, usually later (when the join phase completes, from a
timer); :func:`await_callback` turns that into an awaited future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from coordinator.group import GroupCoordinator, JoinGroupRequest, JoinGroupResult, JoinProtocol
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

R = TypeVar("R")
T = TypeVar("T")

UNKNOWN_MEMBER_ID = ""
NO_PROTOCOL_NAME = ""
"""Kafka's ``GroupCoordinator.NoProtocol``: the protocol name of versions where it is not nullable."""
FIRST_NULLABLE_PROTOCOL_VERSION = 7
FIRST_TWO_STEP_JOIN_VERSION = 4
FIRST_SKIP_ASSIGNMENT_VERSION = 9


async def await_callback(start: Callable[[R, Callable[[T], None]], None], request: R) -> T:
    """Call ``start(request, callback)`` and wait for the value the callback is called with.

    ``start`` is a coordinator method taking a request and the callback that answers it, so the
    answer's type comes from the method's signature (a lambda wrapping it would leave it unknown).

    The group coordinator answers JoinGroup, SyncGroup, OffsetCommit and DeleteGroups exactly once
    through a callback, possibly before ``start`` returns. The callback never raises: it ignores an
    answer that comes after the request was cancelled (the connection went away) or after an
    earlier answer, so the coordinator is never disturbed by what happened to the client.
    """
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def answer(value: T) -> None:
        if not future.done():
            future.set_result(value)

    start(request, answer)
    return await future


def client_host(peer: str) -> str:
    """Kafka's ``InetAddress.toString`` of the client, "/127.0.0.1", from a "host:port" peer."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return f"/{host}" if host and host != "?" else ""


class JoinGroupHandler(Handler):
    api_key = ApiKey.JOIN_GROUP
    min_version = 0
    max_version = 9

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if not allowed(self._authorizer, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        join = _join_request(ctx, request)
        result = await await_callback(self._coordinator.join_group, join)
        return _body(ctx.api_version, result)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """JoinGroupRequest.getErrorResponse: no generation, no protocol, no leader, no member id."""
        return _body(ctx.api_version, JoinGroupResult.failure(UNKNOWN_MEMBER_ID, code))


def _join_request(ctx: RequestContext, request: MessageData) -> JoinGroupRequest:
    version = ctx.api_version
    rebalance_timeout = request.session_timeout_ms if version == 0 else request.rebalance_timeout_ms
    instance_id = request.group_instance_id
    return JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=tuple(JoinProtocol(p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout,
        group_instance_id=instance_id,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx.peer),
        require_known_member_id=version >= FIRST_TWO_STEP_JOIN_VERSION and instance_id is None,
        support_skipping_assignment=version >= FIRST_SKIP_ASSIGNMENT_VERSION,
        reason=request.reason,
    )


def _body(version: int, result: JoinGroupResult) -> dict[str, Any]:
    protocol_name = result.protocol_name or None
    if version < FIRST_NULLABLE_PROTOCOL_VERSION:
        protocol_name = protocol_name or NO_PROTOCOL_NAME
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in result.members
        ],
    }
