"""ListTransactions (key 66, v0-1): the transactions this broker coordinates, optionally filtered.

Kafka's ``handleListTransactionsRequest`` over the coordinator's
:meth:`TransactionCoordinator.list_transactions`: an empty state filter lists every state, a
non-empty one the states it names (Kafka's names, "Ongoing", "PrepareCommit", ...; a name that is
no state matches nothing and is echoed back in ``unknown_state_filters``); an empty producer id
filter lists every producer; v1's ``duration_filter`` (KIP-994; -1, the default and v0's, turns it
off) keeps the transactions that started more than that many milliseconds ago. Dead entries are
never listed. The whole answer is COORDINATOR_LOAD_IN_PROGRESS while any partition of
``__transaction_state`` loads here, COORDINATOR_NOT_AVAILABLE while the coordinator is not running.
A broker that coordinates nothing answers an empty list (an admin client asks every broker).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, denied_names
from broker.handlers.base import Handler, RequestContext
from coordinator.transaction import ListTransactionsResult, TransactionCoordinator
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

FIRST_DURATION_FILTER_VERSION = 1
NO_DURATION_FILTER = -1


class ListTransactionsHandler(Handler):
    api_key = ApiKey.LIST_TRANSACTIONS
    min_version = 0
    max_version = 1

    def __init__(
        self, coordinator: TransactionCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING
    ) -> None:
        """With an authorizer only the transactional ids the requester may DESCRIBE are listed."""
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        duration = (
            request.duration_filter
            if ctx.api_version >= FIRST_DURATION_FILTER_VERSION
            else NO_DURATION_FILTER
        )
        result = self._coordinator.list_transactions(
            list(dict.fromkeys(request.state_filters)), set(request.producer_id_filters), duration
        )
        if self._authorizer.enabled:
            ids = (t.transactional_id for t in result.transactions)
            hidden = denied_names(
                self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, ids
            )
            if hidden:
                kept = tuple(t for t in result.transactions if t.transactional_id not in hidden)
                result = dataclasses.replace(result, transactions=kept)
        return _body(result)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _body(ListTransactionsResult(code))


def _body(result: ListTransactionsResult) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "unknown_state_filters": list(result.unknown_state_filters),
        "transaction_states": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state,
            }
            for t in result.transactions
        ],
    }
