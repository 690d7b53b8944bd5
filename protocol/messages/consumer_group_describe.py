"""ConsumerGroupDescribe (key 69, KIP-848): the state of consumer-protocol groups, with each
member's current and target assignment; the consumer protocol's counterpart of DescribeGroups.

v0 and v1 are those Kafka 4.0 serves; both are flexible. v1 adds each member's MemberType
(KIP-1099: -1 unknown, 0 classic, 1 consumer).
"""

from protocol.schema import Field, request, response

_ASSIGNMENT = (
    Field(
        "topic_partitions",
        "[]TopicPartitions",
        "0+",
        fields=(
            Field("topic_id", "uuid", "0+"),
            Field("topic_name", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ),
    ),
)

CONSUMER_GROUP_DESCRIBE_REQUEST = request(
    69,
    "ConsumerGroupDescribe",
    "0-1",
    "0+",
    Field("group_ids", "[]string", "0+"),
    Field("include_authorized_operations", "bool", "0+"),
)

CONSUMER_GROUP_DESCRIBE_RESPONSE = response(
    69,
    "ConsumerGroupDescribe",
    "0-1",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "groups",
        "[]DescribedGroup",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable_versions="0+", default=None),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("group_epoch", "int32", "0+"),
            Field("assignment_epoch", "int32", "0+"),
            Field("assignor_name", "string", "0+"),
            Field(
                "members",
                "[]Member",
                "0+",
                fields=(
                    Field("member_id", "string", "0+"),
                    Field("instance_id", "string", "0+", nullable_versions="0+", default=None),
                    Field("rack_id", "string", "0+", nullable_versions="0+", default=None),
                    Field("member_epoch", "int32", "0+"),
                    Field("client_id", "string", "0+"),
                    Field("client_host", "string", "0+"),
                    Field("subscribed_topic_names", "[]string", "0+"),
                    Field("subscribed_topic_regex", "string", "0+", nullable_versions="0+", default=None),
                    Field("assignment", "Assignment", "0+", fields=_ASSIGNMENT),
                    Field("target_assignment", "Assignment", "0+", fields=_ASSIGNMENT),
                    Field("member_type", "int8", "1+", default=-1),
                ),
            ),
            Field("authorized_operations", "int32", "0+", default=-2147483648),
        ),
    ),
)
