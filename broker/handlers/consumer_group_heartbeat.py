"""ConsumerGroupHeartbeat (key 68, v0-1, KIP-848): a consumer-protocol member joins, heartbeats,
reconciles and leaves; the coordinator answers once the heartbeat's records are written.

Authorization is Kafka 4.0's KafkaApis.handleConsumerGroupHeartbeat: READ on the group
(GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every topic the heartbeat subscribes to by name
(TOPIC_AUTHORIZATION_FAILED if any is denied: a client may not learn of topics it cannot see). The
client host the coordinator records (ConsumerGroupDescribe shows it) is "/" and the peer's address,
as Kafka's ``clientAddress.toString``. Registered only while ``group.coordinator.rebalance.protocols``
lists ``consumer``, so the API is advertised exactly when it is served.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.handlers.join_group import await_callback, client_host
from coordinator.group import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
    GroupCoordinator,
)
from coordinator.group.consumer.api import TopicPartitions
from coordinator.group.consumer.member import Assignment
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class ConsumerGroupHeartbeatHandler(Handler):
    api_key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    min_version = 0
    max_version = 1

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if not allowed(self._authorizer, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = request.subscribed_topic_names
        if names and denied_names(
            self._authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, set(names)
        ):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        heartbeat = ConsumerGroupHeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=None if names is None else tuple(names),
            subscribed_topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor,
            topic_partitions=_owned(request.topic_partitions),
            client_id=ctx.client_id or "",
            client_host=client_host(ctx.peer),
            api_version=ctx.api_version,
        )
        result = await await_callback(self._coordinator.consumer_group_heartbeat, heartbeat)
        return _body(result)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _body(ConsumerGroupHeartbeatResult.failure(code))


def _owned(topic_partitions: list[MessageData] | None) -> TopicPartitions | None:
    if topic_partitions is None:
        return None
    return tuple((tp.topic_id, tuple(tp.partitions)) for tp in topic_partitions)


def _assignment(assignment: Assignment | None) -> dict[str, Any] | None:
    if assignment is None:
        return None
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "partitions": sorted(partitions)}
            for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0]))
        ]
    }


def _body(result: ConsumerGroupHeartbeatResult) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(result.error),
        "error_message": result.error_message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval_ms": result.heartbeat_interval_ms,
        "assignment": _assignment(result.assignment),
    }
