"""EndTxn (key 26, v0-5): a transactional producer commits or aborts its ongoing transaction.

The coordinator answers once the PrepareCommit / PrepareAbort state is durable in
``__transaction_state``; the markers follow in the background. From v5 (KIP-890 transactions v2)
every commit or abort bumps the producer epoch and the answer carries the id and epoch to use next.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from coordinator.transaction import TransactionCoordinator, error_for_version
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

TRANSACTIONS_V2_VERSION = 5
"""The first EndTxn version whose client runs transactions v2 (an epoch bump per transaction)."""


class EndTxnHandler(Handler):
    api_key = ApiKey.END_TXN
    min_version = 0
    max_version = 5

    def __init__(
        self, coordinator: TransactionCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING
    ) -> None:
        """With an authorizer the requester needs WRITE on the transactional id."""
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        txn_id = request.transactional_id
        if not allowed(self._authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        result = await self._coordinator.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            transaction_version=2 if ctx.api_version >= TRANSACTIONS_V2_VERSION else 1,
        )
        return {
            "throttle_time_ms": 0,
            "error_code": int(error_for_version("EndTxn", ctx.api_version, result.error)),
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": -1, "producer_epoch": -1}
