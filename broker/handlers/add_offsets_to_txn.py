"""AddOffsetsToTxn (key 25, v0-4): the transaction will commit offsets of a consumer group, so the
partition of ``__consumer_offsets`` that holds the group joins the transaction (and gets its marker)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from coordinator.transaction import TransactionCoordinator, error_for_version
from metadata.authorizer.standard import Authorizer
from metadata.topic_names import GROUP_METADATA_TOPIC
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class AddOffsetsToTxnHandler(Handler):
    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    min_version = 0
    max_version = 4

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        group_partition: Callable[[str], int],
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        """``group_partition(group id)`` is the group's partition of ``__consumer_offsets``. With an
        authorizer the requester needs WRITE on the transactional id, then READ on the group."""
        self._coordinator = coordinator
        self._group_partition = group_partition
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if self._authorizer.enabled:
            txn_id, group_id = request.transactional_id, request.group_id
            if not allowed(self._authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
                raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            if not allowed(self._authorizer, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
                raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        partition = (GROUP_METADATA_TOPIC, self._group_partition(request.group_id))
        error = await self._coordinator.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, partition
        )
        return {
            "throttle_time_ms": 0,
            "error_code": int(error_for_version("AddOffsetsToTxn", ctx.api_version, error)),
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {"throttle_time_ms": 0, "error_code": int(code)}
