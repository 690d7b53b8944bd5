"""AddPartitionsToTxn (key 24, v0-5): partitions join a producer's ongoing transaction.

v0-3 come from a transactional producer, one transaction per request: partitions of topics the
cluster does not have answer UNKNOWN_TOPIC_OR_PARTITION and, as in Kafka, the others then answer
OPERATION_NOT_ATTEMPTED (nothing is added); otherwise the coordinator adds them all or none.

v4+ come from partition leaders (KIP-890), several transactions per request: with
``verify_only`` the coordinator only says whether each partition is already in the transaction
(the leader's defence against a produce outside any transaction); without it the partitions are
added, on behalf of a transactions-v2 producer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, cluster_allowed, denied_names
from broker.handlers.base import Handler, RequestContext
from coordinator.transaction import TransactionCoordinator, error_for_version
from metadata import topic_names
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

BATCHED_VERSION = 4

TopicPartition = tuple[str, int]
PartitionExists = Callable[[str, int], bool]


class AddPartitionsToTxnHandler(Handler):
    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    min_version = 0
    max_version = 5

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        partition_exists: PartitionExists,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        self._coordinator = coordinator
        self._partition_exists = partition_exists
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        authorizer = self._authorizer
        if ctx.api_version < BATCHED_VERSION:
            if authorizer.enabled:
                refused = self._refused(
                    ctx, request.v3_and_below_transactional_id, request.v3_and_below_topics
                )
                if refused is not None:
                    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(refused)}
            errors = await self._add(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                _partitions(request.v3_and_below_topics),
                verify_only=False,
            )
            errors = {
                tp: error_for_version("AddPartitionsToTxn", ctx.api_version, e) for tp, e in errors.items()
            }
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(errors)}
        # v4+ come from brokers (transaction verification): Kafka's CLUSTER_ACTION
        if authorizer.enabled and not cluster_allowed(authorizer, ctx, AclOperation.CLUSTER_ACTION):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        results = []
        for txn in request.transactions:
            errors = await self._add(
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                _partitions(txn.topics),
                verify_only=txn.verify_only,
            )
            results.append(
                {"transactional_id": txn.transactional_id, "topic_results": _topic_results(errors)}
            )
        return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}

    async def _add(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        verify_only: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        unknown = [tp for tp in partitions if not self._partition_exists(*tp)]
        if unknown:
            errors = dict.fromkeys(partitions, ErrorCode.OPERATION_NOT_ATTEMPTED)
            errors.update(dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            return errors
        return await self._coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, verify_only=verify_only
        )

    def _refused(
        self, ctx: RequestContext, transactional_id: str, topics: Iterable[MessageData]
    ) -> dict[TopicPartition, ErrorCode] | None:
        """A client's (v0-3) request: WRITE on the transactional id (else every partition
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic but the internal ones (else
        TOPIC_AUTHORIZATION_FAILED, and OPERATION_NOT_ATTEMPTED for the others); None when allowed."""
        partitions = _partitions(topics)
        if not allowed(
            self._authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        names = (topic for topic, _ in partitions if not topic_names.is_internal(topic))
        denied = denied_names(self._authorizer, ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
        if not denied:
            return None
        errors = dict.fromkeys(partitions, ErrorCode.OPERATION_NOT_ATTEMPTED)
        for tp in partitions:
            if tp[0] in denied:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not self._partition_exists(*tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return errors

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        if ctx.api_version >= BATCHED_VERSION:
            return {"throttle_time_ms": 0, "error_code": int(code), "results_by_transaction": []}
        topics = request.v3_and_below_topics if request is not None else []
        return {
            "throttle_time_ms": 0,
            "results_by_topic_v3_and_below": _topic_results(dict.fromkeys(_partitions(topics), code)),
        }


def _partitions(topics: Iterable[MessageData]) -> list[TopicPartition]:
    return [(topic.name, index) for topic in topics for index in topic.partitions]


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, index), code in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "partition_error_code": int(code)})
    return [{"name": name, "results_by_partition": results} for name, results in by_topic.items()]
