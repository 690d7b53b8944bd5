"""The partition leader's question to the transaction coordinator before a transactional append
(KIP-890): is this partition part of the producer's ongoing transaction?

A producer adds partitions to its transaction (AddPartitionsToTxn) before writing to them. A batch
that arrives for a partition the transaction never added (a client bug, or a late retry of a batch
whose transaction has already been aborted) would otherwise open a transaction no coordinator will
ever end: a hanging transaction that pins the partition's last stable offset forever. So the leader
asks the coordinator, with an AddPartitionsToTxn v4+ ``verify_only`` request when the coordinator
is another broker, or directly when it is this one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog

from broker.handlers.metadata import BrokerEndpoint
from client.connection_pool import ConnectionPool
from coordinator.transaction import TransactionCoordinator
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode

VERIFY_VERSION = 4

TopicPartition = tuple[str, int]
CoordinatorLookup = Callable[[str], Awaitable[tuple[ErrorCode, BrokerEndpoint | None]]]
"""transactional id -> (NONE, its coordinator on the inter-broker listener) or the lookup's error."""

_log = structlog.get_logger("kipling.transactions.verification")


class TransactionVerifier:
    """Asks the transactional id's coordinator, local or remote, to verify partitions."""

    def __init__(
        self,
        node_id: int,
        coordinator: TransactionCoordinator,
        lookup: CoordinatorLookup,
        pool: ConnectionPool,
    ) -> None:
        self._node_id = node_id
        self._coordinator = coordinator
        self._lookup = lookup
        self._pool = pool

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        code, node = await self._lookup(transactional_id)
        if code is not ErrorCode.NONE or node is None:
            return dict.fromkeys(
                partitions, code if code is not ErrorCode.NONE else ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        if node.node_id == self._node_id:
            return await self._coordinator.add_partitions(
                transactional_id, producer_id, producer_epoch, partitions, verify_only=True
            )
        return await self._verify_remotely(node, transactional_id, producer_id, producer_epoch, partitions)

    async def _verify_remotely(
        self,
        node: BrokerEndpoint,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        body = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "verify_only": True,
                    "topics": [{"name": name, "partitions": indexes} for name, indexes in by_topic.items()],
                }
            ]
        }
        try:
            connection = await self._pool.shared(node.host, node.port)
            response = await connection.request(ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, body)
        except Exception as exc:
            _log.debug("transaction verification failed", coordinator=node.node_id, error=str(exc))
            self._pool.forget_address(node.host, node.port)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        top_level = ErrorCode(response.error_code)
        if top_level is not ErrorCode.NONE:
            return dict.fromkeys(partitions, top_level)
        errors = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    errors[(topic.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return errors
