"""DescribeProducers (key 61, v0): the active producers of some partitions this broker leads.

Kafka's ``handleDescribeProducersRequest`` and ``ReplicaManager.activeProducerState``, per topic
then per partition, each partition with its own error:

* a topic name that is not a legal one: INVALID_TOPIC_EXCEPTION (with the reason as message) for
  each of its partitions; a topic the metadata does not know: UNKNOWN_TOPIC_OR_PARTITION;
* a partition the metadata does not know: UNKNOWN_TOPIC_OR_PARTITION; one whose log failed here:
  KAFKA_STORAGE_ERROR; one led elsewhere: NOT_LEADER_OR_FOLLOWER. Kafka also answers from a
  follower's log; here the logs of followed partitions belong to the follower processes, so a
  follower answers NOT_LEADER_OR_FOLLOWER, as Kafka does for a replica without a log;
* otherwise every producer the partition's producer state holds (Kafka's ``activeProducers``):
  its id, epoch (an int32 in this API), last sequence, last timestamp, the coordinator epoch of
  its last marker (-1 before any), and the first offset of its open transaction (-1 when none).

There are no ACLs, so no TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from metadata import topic_names
from metadata.authorizer.standard import Authorizer
from metadata.topics import TopicLookup
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

NO_TXN_START_OFFSET = -1


class DescribeProducersHandler(Handler):
    api_key = ApiKey.DESCRIBE_PRODUCERS
    min_version = 0
    max_version = 0

    def __init__(
        self, replicas: ReplicaManager, topics: TopicLookup, authorizer: Authorizer = ALLOW_EVERYTHING
    ) -> None:
        """With an authorizer a valid topic the requester may not READ is TOPIC_AUTHORIZATION_FAILED."""
        self._replicas = replicas
        self._topics = topics
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        return {"throttle_time_ms": 0, "topics": [self._topic(t, ctx) for t in request.topics]}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        if request is None:
            return None
        return {
            "throttle_time_ms": 0,
            "topics": [
                {"name": t.name, "partitions": [_error(i, code) for i in t.partition_indexes]}
                for t in request.topics
            ],
        }

    def _topic(self, request: MessageData, ctx: RequestContext) -> dict[str, Any]:
        name = request.name
        error: KafkaError | None = None
        try:
            topic_names.validate(name)
        except KafkaError as exc:
            error = exc
        if error is None and not allowed(self._authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, name):
            error = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if error is None and self._topics.get(name) is None:
            error = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if error is not None:
            partitions = [_error(i, error.code, error.message) for i in request.partition_indexes]
        else:
            partitions = [self._partition(name, i) for i in request.partition_indexes]
        return {"name": name, "partitions": partitions}

    def _partition(self, topic: str, index: int) -> dict[str, Any]:
        partition = self._replicas.get_partition(topic, index)
        if partition is None:
            return _error(index, self._replicas.partition_error(topic, index))
        if partition.is_offline:
            return _error(index, ErrorCode.KAFKA_STORAGE_ERROR)
        if not partition.is_leader:
            return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return {
            "partition_index": index,
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
            "active_producers": active_producers(partition),
        }


def active_producers(partition: Partition) -> list[dict[str, Any]]:
    """Kafka's ``UnifiedLog.activeProducers``: one entry per producer id the partition remembers."""
    return [
        {
            "producer_id": producer_id,
            "producer_epoch": entry.producer_epoch,
            "last_sequence": entry.last_seq,
            "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": (
                NO_TXN_START_OFFSET
                if entry.current_txn_first_offset is None
                else entry.current_txn_first_offset
            ),
        }
        for producer_id, entry in partition.producer_state.producers.items()
    ]


def _error(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": int(code),
        "error_message": message,
        "active_producers": [],
    }
