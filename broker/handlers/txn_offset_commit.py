"""TxnOffsetCommit (key 28, v0-4): a transactional producer commits a consumer group's offsets inside
its transaction (consume-transform-produce, KIP-98); they become visible when the transaction commits.

As for OffsetCommit, partitions of topics the cluster does not have answer UNKNOWN_TOPIC_OR_PARTITION
and the rest go to the group coordinator, written as a transactional batch of the producer. First,
as Kafka's GroupCoordinator does (KIP-890), the transaction coordinator must confirm that the group's
partition of ``__consumer_offsets`` is in the producer's transaction (AddOffsetsToTxn added it), so
that a late TxnOffsetCommit of an aborted transaction cannot open a transaction nobody will end. v3+
(KIP-447) carry the member's generation, member id and instance id, so a consumer that lost its
partitions in a rebalance is fenced (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, NOTHING_DENIED, allowed, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.handlers.join_group import await_callback
from broker.handlers.offset_commit import PartitionExists, commit_response_body
from coordinator.group import GroupCoordinator, OffsetCommitRequest, PartitionCommit, TxnOffsetCommitRequest
from coordinator.group.log import offset_commit_error
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

VerifyOffsetsPartition = Callable[[str, int, int, int], Awaitable[object]]
"""(transactional id, producer id, epoch, partition of __consumer_offsets) -> the partition leader's
guard to append with, or the ErrorCode to answer (not this broker's partition, not in the transaction)."""


class TxnOffsetCommitHandler(Handler):
    api_key = ApiKey.TXN_OFFSET_COMMIT
    min_version = 0
    max_version = 4

    def __init__(
        self,
        coordinator: GroupCoordinator,
        partition_exists: PartitionExists,
        verify: VerifyOffsetsPartition,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        self._coordinator = coordinator
        self._partition_exists = partition_exists
        self._verify = verify
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        errors: dict[tuple[str, int], ErrorCode] = {}
        commits: list[PartitionCommit] = []
        denied = self._denied_topics(ctx, request)
        for topic in request.topics:
            for p in topic.partitions:
                if topic.name in denied:
                    errors[(topic.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self._partition_exists(topic.name, p.partition_index):
                    commits.append(
                        PartitionCommit(
                            topic.name,
                            p.partition_index,
                            p.committed_offset,
                            p.committed_leader_epoch,
                            p.committed_metadata,
                        )
                    )
                else:
                    errors[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if commits:
            verification = await self._verify(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                self._coordinator.partition_for(request.group_id),
            )
            if isinstance(verification, ErrorCode):
                code = offset_commit_error(verification)
                errors.update({(c.topic, c.partition): code for c in commits})
                return commit_response_body(
                    request.topics, lambda topic, partition: errors[(topic, partition)]
                )
            commit = OffsetCommitRequest(
                group_id=request.group_id,
                partitions=tuple(commits),
                member_id=request.member_id,
                generation_id=request.generation_id,
                group_instance_id=request.group_instance_id,
            )
            txn_commit = TxnOffsetCommitRequest(
                commit, request.producer_id, request.producer_epoch, verification
            )
            errors.update(await await_callback(self._coordinator.commit_txn_offsets, txn_commit))
        return commit_response_body(request.topics, lambda topic, partition: errors[(topic, partition)])

    def _denied_topics(self, ctx: RequestContext, request: MessageData) -> frozenset[str]:
        """Kafka's checks: WRITE on the transactional id, READ on the group (each failing the
        whole request), then READ on each topic (the denied ones, answered per partition)."""
        authorizer = self._authorizer
        if not authorizer.enabled:
            return NOTHING_DENIED
        txn_id = request.transactional_id
        if not allowed(authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not allowed(authorizer, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = (t.name for t in request.topics)
        return denied_names(authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, names)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        topics = request.topics if request is not None else []
        return commit_response_body(topics, lambda _topic, _partition: code)
