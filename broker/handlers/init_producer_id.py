"""InitProducerId (key 22, v0-5): a producer id and epoch for an idempotent producer.

Without a transactional id Kafka's transaction coordinator "always blindly accepts the request":
it hands out a fresh producer id with epoch 0, whatever producer id and epoch the request carries
(an idempotent producer bumps its epoch itself; KIP-360's bump through this API is for
transactional ids only). So does kipling, which is what @platformatic/kafka's v5 request with
producer id 0 / epoch 0 expects. A request with exactly one of producer id and epoch set to -1 is
INVALID_REQUEST, as in Kafka.

With a transactional id the request goes to the transaction coordinator (this broker must be the
id's coordinator: NOT_COORDINATOR otherwise), which fences the id's earlier producer by an epoch
bump and aborts its open transaction first (:mod:`coordinator.transaction`).

Ids come in blocks from the controller; while a broker has none at hand it answers
COORDINATOR_LOAD_IN_PROGRESS, as Kafka's RPCProducerIdManager does, and the client retries.
"""

from __future__ import annotations

from typing import Any

import structlog

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from broker.produce.producer_ids import ProducerIdGenerator, ProducerIdsUnavailableError
from coordinator.transaction import TransactionCoordinator, error_for_version
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

_log = structlog.get_logger("kipling.init_producer_id")


class InitProducerIdHandler(Handler):
    api_key = ApiKey.INIT_PRODUCER_ID
    min_version = 0
    max_version = 5

    def __init__(
        self,
        producer_ids: ProducerIdGenerator,
        transactions: TransactionCoordinator,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        self._producer_ids = producer_ids
        self._transactions = transactions
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        refusal = self._refusal(ctx, request.transactional_id)
        if refusal is not None:
            return _body(refusal)
        if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
            return _body(ErrorCode.INVALID_REQUEST)
        if request.transactional_id is not None:
            result = await self._transactions.init_producer_id(
                request.transactional_id,
                request.transaction_timeout_ms,
                request.producer_id,
                request.producer_epoch,
            )
            error = error_for_version("InitProducerId", ctx.api_version, result.error)
            return _body(error, result.producer_id, result.producer_epoch)
        try:
            producer_id = self._producer_ids.generate_producer_id()
        except ProducerIdsUnavailableError:  # a cluster broker waiting for its block: retriable
            return _body(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        except Exception:
            _log.exception("producer id allocation failed", peer=ctx.peer)
            return _body(ErrorCode.UNKNOWN_SERVER_ERROR)
        _log.debug("producer id allocated", producer_id=producer_id, client_id=ctx.client_id)
        return _body(ErrorCode.NONE, producer_id, 0)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _body(code)

    def _refusal(self, ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
        """Kafka's checks: a transactional producer needs WRITE on its transactional id
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), an idempotent one IDEMPOTENT_WRITE on the cluster
        or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED)."""
        authorizer = self._authorizer
        if not authorizer.enabled:
            return None
        if transactional_id is not None:
            if allowed(authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                return None
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if cluster_allowed(authorizer, ctx, AclOperation.IDEMPOTENT_WRITE) or authorizer.authorize_any(
            ctx.principal, ctx.client_host, AclOperation.WRITE, ResourceType.TOPIC
        ):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _body(
    code: ErrorCode, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH
) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }
