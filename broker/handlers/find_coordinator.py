"""FindCoordinator (key 10, v0-6): which broker coordinates a consumer group or a transactional id.

Shapes (Kafka's KafkaApis.handleFindCoordinatorRequest): v0-3 ask for one ``key`` (v0 has no key
type: a group) and answer at the top level, with an error message from v1; v4+ ask for a batch of
``coordinator_keys`` of one key type and answer one coordinator per key, each with its own error.

Key types (Kafka's CoordinatorType):

* 0, a group: the broker leading the group's partition of ``__consumer_offsets``, with its address on
  the listener the request came in on, from the :class:`CoordinatorLocator`. COORDINATOR_NOT_AVAILABLE
  while that cannot be told (the topic is being created, the partition has no leader). Kafka does not
  check the group id here: an empty one is hashed like any other and answered.
* 1, a transactional id: the broker leading the id's partition of ``__transaction_state``, from the
  :class:`TransactionCoordinatorLocator`, with the same rules (the first lookup creates the topic).
* Anything else (2, share groups, KIP-932; unknown numbers): INVALID_REQUEST, as Kafka answers an
  unknown coordinator type (and a share key while share groups are disabled).

A failed lookup answers node id -1, host "" and port -1 (Kafka's ``Node.noNode``). Error messages are
Kafka's ``Errors.message()``: the exception's default message, and "NONE" on success in v1-3 (Kafka
sets the message unconditionally there). In v4+ Kafka leaves the message of a found coordinator null;
so does this handler, and it gives the message of a failed key as Kafka's error response does.
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from broker.handlers.metadata import BrokerEndpoint
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
FIRST_BATCHED_VERSION = 4
NO_NODE = BrokerEndpoint(-1, "", -1)
"""Kafka's ``Node.noNode()``: what a failed lookup answers."""

_KAFKA_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.NONE: "NONE",
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the "
    "client library or the message was sent to an incompatible broker. See the broker logs for more details.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    ErrorCode.UNSUPPORTED_VERSION: "The version of API is not supported.",
}
"""Kafka's ``Errors.message()`` for the errors FindCoordinator answers."""

_log = structlog.get_logger("kipling.find_coordinator")


class CoordinatorLocator(Protocol):
    async def find_group_coordinator(
        self, group_id: str, listener: str
    ) -> tuple[ErrorCode, BrokerEndpoint | None]:
        """NONE and the coordinator's endpoint on ``listener``; or COORDINATOR_NOT_AVAILABLE (topic
        being created, no leader) etc."""
        ...


class TransactionCoordinatorLocator(Protocol):
    async def find_transaction_coordinator(
        self, transactional_id: str, listener: str
    ) -> tuple[ErrorCode, BrokerEndpoint | None]: ...


def kafka_message(code: ErrorCode) -> str:
    """Kafka's ``Errors.message()`` ("NONE" for no error), kipling's description for the others."""
    return _KAFKA_MESSAGES.get(code, code.description)


class FindCoordinatorHandler(Handler):
    api_key = ApiKey.FIND_COORDINATOR
    min_version = 0
    max_version = 6

    def __init__(
        self,
        locator: CoordinatorLocator,
        transactions: TransactionCoordinatorLocator,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        self._locator = locator
        self._transactions = transactions
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        key_type = request.key_type
        if ctx.api_version < FIRST_BATCHED_VERSION:
            code, node = await self._find(ctx, key_type, request.key)
            return _single(code, node)
        coordinators = []
        for key in request.coordinator_keys:
            code, node = await self._find(ctx, key_type, key)
            coordinators.append(_coordinator(key, code, node))
        return {"throttle_time_ms": 0, "coordinators": coordinators}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """FindCoordinatorRequest.getErrorResponse: the error at the top level (v0-3) or on every
        key (v4+), with no node."""
        if ctx.api_version < FIRST_BATCHED_VERSION:
            return _single(code, NO_NODE)
        keys = request.coordinator_keys if request is not None else []
        return {
            "throttle_time_ms": 0,
            "coordinators": [_coordinator(k, code, NO_NODE) for k in keys],
        }

    async def _find(self, ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, BrokerEndpoint]:
        if key_type == GROUP_KEY_TYPE and not allowed(
            self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key
        ):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, NO_NODE
        if key_type == TRANSACTION_KEY_TYPE and not allowed(
            self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_NODE
        if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
            return ErrorCode.INVALID_REQUEST, NO_NODE
        try:
            if key_type == GROUP_KEY_TYPE:
                code, node = await self._locator.find_group_coordinator(key, ctx.listener)
            else:
                code, node = await self._transactions.find_transaction_coordinator(key, ctx.listener)
        except KafkaError as exc:
            code, node = exc.code, None
        if code is not ErrorCode.NONE or node is None:
            _log.debug(
                "no coordinator found", key=key, key_type=key_type, listener=ctx.listener, error=code.name
            )
            return (ErrorCode.COORDINATOR_NOT_AVAILABLE if code is ErrorCode.NONE else code), NO_NODE
        return ErrorCode.NONE, node


def _single(code: ErrorCode, node: BrokerEndpoint) -> dict[str, Any]:
    """The v0-3 answer; the message field exists from v1."""
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "error_message": kafka_message(code),
        "node_id": node.node_id,
        "host": node.host,
        "port": node.port,
    }


def _coordinator(key: str, code: ErrorCode, node: BrokerEndpoint) -> dict[str, Any]:
    """One key's answer (v4+): Kafka leaves the message of a found coordinator null."""
    message = kafka_message(code) if code is not ErrorCode.NONE else None
    return {
        "key": key,
        "node_id": node.node_id,
        "host": node.host,
        "port": node.port,
        "error_code": int(code),
        "error_message": message,
    }
