"""DescribeTopicPartitions (75, v0, KIP-966): topics and their partitions, paginated.

Kafka's ``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache
.getTopicMetadataForDescribeTopicResponse``, on this broker's metadata image:

* The topics are the ones named (each once), or every topic when the list is empty; with a
  ``cursor``, only those whose name sorts at or after the cursor's topic, and a named list must
  contain the cursor's topic (else INVALID_REQUEST for every topic named). They are answered in
  name order.
* At most ``min(response_partition_limit, 2000)`` partitions (2000 is Kafka's
  ``max.request.partition.size.limit``) per response. The cursor's topic starts at the cursor's
  partition index, every other topic at 0. A topic cut short by the limit ends the response with
  ``next_cursor`` at its first partition left out; when the limit is used up exactly at a topic's
  end, ``next_cursor`` names the next topic at partition 0 (whether it exists or not); when
  everything fitted, ``next_cursor`` is null.
* A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name), without partitions and without using the limit; when describing all topics there
  is none.
* Per partition: the leader (-1 when it is not a registered broker with this listener), leader
  epoch, replicas, ISR and offline replicas (replicas not registered, fenced, or without this
  listener). Kipling has no eligible leader replicas (KIP-966's ELR is not implemented: its
  controller elects from the ISR only), so ``eligible_leader_replicas`` and ``last_known_elr`` are
  empty lists, as Kafka answers with ELR disabled.
* Authorization (Kafka's handler): topics the requester may not DESCRIBE are left out; named ones
  are answered TOPIC_AUTHORIZATION_FAILED after the others (zero topic id, whether they exist or
  not). ``topic_authorized_operations`` is the authorizer's bit field for the requester, or every
  operation Kafka supports on a topic when there is no authorizer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed
from broker.handlers.base import Handler, RequestContext
from broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED, TOPIC_AUTHORIZED_OPERATIONS
from metadata import topic_names
from metadata.authorizer.standard import Authorizer
from metadata.image import MetadataImage
from metadata.topics import NO_LEADER, PartitionState, TopicState
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID

DESCRIBE = AclOperation.DESCRIBE
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
"""Kafka's ``max.request.partition.size.limit`` default: the most partitions one response carries."""


class DescribeTopicPartitionsHandler(Handler):
    api_key = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    min_version = 0
    max_version = 0

    def __init__(self, image: MetadataImage, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._image = image
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        cursor = request.cursor
        cursor_topic = cursor.topic_name if cursor is not None else ""
        fetch_all = not request.topics
        if fetch_all:
            names = {t.name for t in self._image.all() if t.name >= cursor_topic}
        else:
            names = {t.name for t in request.topics if t.name >= cursor_topic}
            if cursor is not None and cursor.topic_name not in names:
                return self.error_response(ctx, request, ErrorCode.INVALID_REQUEST)
        limit = min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit)
        denied: list[str] = []
        if self._authorizer.enabled:
            denied = sorted(
                n for n in names if not allowed(self._authorizer, ctx, DESCRIBE, ResourceType.TOPIC, n)
            )
            names -= set(denied)
        topics, next_cursor = self._describe(
            sorted(names),
            lambda name: cursor.partition_index if cursor is not None and name == cursor_topic else 0,
            limit,
            ctx.listener,
            fetch_all,
        )
        if self._authorizer.enabled:
            for topic in topics:
                topic["topic_authorized_operations"] = self._authorizer.authorized_operations(
                    ctx.principal, ctx.client_host, ResourceType.TOPIC, topic["name"]
                )
            if not fetch_all:
                topics.extend(_denied_topic(name) for name in denied)
        return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every topic named carries ``code`` (Kafka's getErrorResponse)."""
        named = request.topics if request is not None else []
        return {
            "throttle_time_ms": 0,
            "topics": [_error_topic(code, t.name, AUTHORIZED_OPERATIONS_OMITTED) for t in named],
            "next_cursor": None,
        }

    def _describe(
        self,
        names: Iterable[str],
        start_of: Callable[[str], int],
        limit: int,
        listener: str,
        fetch_all: bool,
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        remaining = limit
        topics: list[dict[str, Any]] = []
        for name in names:
            if remaining == 0:
                return topics, {"topic_name": name, "partition_index": 0}
            if remaining < 0:
                break
            topic = self._image.get(name)
            if topic is None:
                if not fetch_all:
                    code = (
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        if topic_names.is_valid(name)
                        else ErrorCode.INVALID_TOPIC_EXCEPTION
                    )
                    topics.append(_error_topic(code, name))
                continue
            start = start_of(name)
            upper = min(len(topic.partitions), start + remaining)
            partitions = [
                self._partition(topic.partitions[i], listener)
                for i in range(start, upper)
                if i in topic.partitions
            ]
            topics.append(_topic(topic, partitions))
            if upper < len(topic.partitions):
                return topics, {"topic_name": name, "partition_index": upper}
            remaining -= len(partitions)
        return topics, None

    def _partition(self, partition: PartitionState, listener: str) -> dict[str, Any]:
        leader = partition.leader_id if self._reachable(partition.leader_id, listener) else NO_LEADER
        return {
            "error_code": 0,
            "partition_index": partition.partition,
            "leader_id": leader,
            "leader_epoch": partition.leader_epoch,
            "replica_nodes": list(partition.replicas),
            "isr_nodes": list(partition.isr),
            # no ELR in kipling (see the module docstring): empty, as Kafka with ELR disabled
            "eligible_leader_replicas": [],
            "last_known_elr": [],
            "offline_replicas": [r for r in partition.replicas if not self._online(r, listener)],
        }

    def _reachable(self, broker_id: int, listener: str) -> bool:
        """Registered with an endpoint on ``listener`` (Kafka's getAliveEndpoint)."""
        registration = self._image.broker(broker_id)
        return registration is not None and any(e.name == listener for e in registration.endpoints)

    def _online(self, broker_id: int, listener: str) -> bool:
        registration = self._image.broker(broker_id)
        return registration is not None and not registration.fenced and self._reachable(broker_id, listener)


def _topic(topic: TopicState, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic_names.is_internal(topic.name),
        "partitions": partitions,
        "topic_authorized_operations": TOPIC_AUTHORIZED_OPERATIONS,
    }


def _denied_topic(name: str) -> dict[str, Any]:
    """A named topic the requester may not DESCRIBE: nothing about it is disclosed."""
    return {
        **_error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, AUTHORIZED_OPERATIONS_OMITTED),
        "is_internal": False,
    }


def _error_topic(code: ErrorCode, name: str, operations: int = TOPIC_AUTHORIZED_OPERATIONS) -> dict[str, Any]:
    return {
        "error_code": int(code),
        "name": name,
        "topic_id": ZERO_UUID,
        "is_internal": topic_names.is_internal(name),
        "partitions": [],
        "topic_authorized_operations": operations,
    }
