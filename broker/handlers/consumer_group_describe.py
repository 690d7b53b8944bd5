"""ConsumerGroupDescribe (key 69, v0-1, KIP-848): consumer-protocol groups with every member's
subscription, current and target assignment.

Kafka 4.0's KafkaApis.handleConsumerGroupDescribe: a group without DESCRIBE answers
GROUP_AUTHORIZATION_FAILED, and those answers come first, before the described groups, as Kafka
builds its response; a described group whose members subscribe to or are assigned a topic the
requester may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED instead of showing it. Authorized
operations (when asked) are the authorizer's, or every group operation without an authorizer (as
DescribeGroups answers). v1's MemberType is 0 for a classic consumer inside the group (KIP-848's
online migration), 1 for a consumer-protocol member.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, denied_names
from broker.handlers.base import Handler, RequestContext
from broker.handlers.describe_groups import GROUP_AUTHORIZED_OPERATIONS
from broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from coordinator.group import DescribedConsumerGroup, GroupCoordinator
from coordinator.group.consumer.api import DescribedTopicPartitions
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

CONSUMER_MEMBER_TYPE = 1
"""KIP-1099's MemberType of a member using the consumer protocol."""
CLASSIC_MEMBER_TYPE = 0
"""KIP-1099's MemberType of a member using the classic protocol."""
UNAUTHORIZED_TOPICS_MESSAGE = (
    "The group has described topic(s) that the client is not authorized to describe."
)


class ConsumerGroupDescribeHandler(Handler):
    api_key = ApiKey.CONSUMER_GROUP_DESCRIBE
    min_version = 0
    max_version = 1

    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        authorizer = self._authorizer
        group_ids = list(request.group_ids)
        denied = denied_names(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_ids)
        groups = [
            _group(
                DescribedConsumerGroup(g, ErrorCode.GROUP_AUTHORIZATION_FAILED), AUTHORIZED_OPERATIONS_OMITTED
            )
            for g in group_ids
            if g in denied
        ]
        permitted = [g for g in group_ids if g not in denied]
        for described in self._coordinator.consumer_group_describe(permitted):
            operations = AUTHORIZED_OPERATIONS_OMITTED
            if described.error is ErrorCode.NONE:
                if denied_names(
                    authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, _topics(described)
                ):
                    described = DescribedConsumerGroup(
                        described.group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, UNAUTHORIZED_TOPICS_MESSAGE
                    )
                elif request.include_authorized_operations:
                    operations = (
                        authorizer.authorized_operations(
                            ctx.principal, ctx.client_host, ResourceType.GROUP, described.group_id
                        )
                        if authorizer.enabled
                        else GROUP_AUTHORIZED_OPERATIONS
                    )
            groups.append(_group(described, operations))
        return {"throttle_time_ms": 0, "groups": groups}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        group_ids = request.group_ids if request is not None else []
        return {
            "throttle_time_ms": 0,
            "groups": [
                _group(DescribedConsumerGroup(g, code), AUTHORIZED_OPERATIONS_OMITTED) for g in group_ids
            ],
        }


def _topics(described: DescribedConsumerGroup) -> set[str]:
    topics: set[str] = set()
    for member in described.members:
        topics.update(member.subscribed_topic_names)
        topics.update(tp.topic_name for tp in member.assignment)
        topics.update(tp.topic_name for tp in member.target_assignment)
    return topics


def _assignment(partitions: tuple[DescribedTopicPartitions, ...]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": tp.topic_id, "topic_name": tp.topic_name, "partitions": list(tp.partitions)}
            for tp in partitions
        ]
    }


def _group(described: DescribedConsumerGroup, operations: int) -> dict[str, Any]:
    return {
        "error_code": int(described.error),
        "error_message": described.error_message,
        "group_id": described.group_id,
        "group_state": described.state,
        "group_epoch": described.group_epoch,
        "assignment_epoch": described.assignment_epoch,
        "assignor_name": described.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": _assignment(m.assignment),
                "target_assignment": _assignment(m.target_assignment),
                "member_type": CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
            }
            for m in described.members
        ],
        "authorized_operations": operations,
    }
