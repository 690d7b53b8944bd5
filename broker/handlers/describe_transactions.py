"""DescribeTransactions (key 65, v0): the state of some transactional ids, asked of their coordinator.

Kafka's ``handleDescribeTransactionsRequest``: one entry per requested id, in request order, each
with its own error. The coordinator (:meth:`TransactionCoordinator.describe_transactions`) decides
it: COORDINATOR_NOT_AVAILABLE while it is not running, INVALID_REQUEST for the empty id,
NOT_COORDINATOR for an id whose ``__transaction_state`` partition this broker does not lead,
COORDINATOR_LOAD_IN_PROGRESS while that partition loads, TRANSACTIONAL_ID_NOT_FOUND for an unknown
(or expiring, Dead) id. A found id carries its state by Kafka's name ("Ongoing", "PrepareCommit",
...), producer id and epoch, timeout, start time (-1 when no transaction ran) and the partitions of
the transaction grouped by topic. There are no ACLs, so no TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, denied_names
from broker.handlers.base import Handler, RequestContext
from coordinator.transaction import DescribedTransaction, TransactionCoordinator
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode


class DescribeTransactionsHandler(Handler):
    api_key = ApiKey.DESCRIBE_TRANSACTIONS
    min_version = 0
    max_version = 0

    def __init__(
        self, coordinator: TransactionCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING
    ) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        ids = list(request.transactional_ids)
        if not self._authorizer.enabled:
            described = self._coordinator.describe_transactions(ids)
            return {"throttle_time_ms": 0, "transaction_states": [_state(d) for d in described]}
        return {"throttle_time_ms": 0, "transaction_states": [_state(d) for d in self._authorized(ctx, ids)]}

    def _authorized(self, ctx: RequestContext, ids: list[str]) -> list[DescribedTransaction]:
        """Kafka's checks: an id the requester may not DESCRIBE is
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the others list only the topics it may DESCRIBE."""
        authorizer = self._authorizer
        denied = denied_names(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, ids)
        permitted = [i for i in ids if i not in denied]
        described = iter(self._coordinator.describe_transactions(permitted) if permitted else ())
        states = []
        for transactional_id in ids:
            if transactional_id in denied:
                states.append(
                    DescribedTransaction(transactional_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                )
                continue
            state = next(described)
            hidden = denied_names(
                authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in state.topics)
            )
            if hidden:
                state = dataclasses.replace(
                    state, topics=tuple(t for t in state.topics if t[0] not in hidden)
                )
            states.append(state)
        return states

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        if request is None:
            return None
        return {
            "throttle_time_ms": 0,
            "transaction_states": [_state(DescribedTransaction(t, code)) for t in request.transactional_ids],
        }


def _state(described: DescribedTransaction) -> dict[str, Any]:
    return {
        "error_code": int(described.error),
        "transactional_id": described.transactional_id,
        "transaction_state": described.state,
        "transaction_timeout_ms": described.transaction_timeout_ms,
        "transaction_start_time_ms": described.transaction_start_time_ms,
        "producer_id": described.producer_id,
        "producer_epoch": described.producer_epoch,
        "topics": [{"topic": topic, "partitions": list(indexes)} for topic, indexes in described.topics],
    }
