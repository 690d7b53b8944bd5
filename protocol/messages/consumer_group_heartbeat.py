"""ConsumerGroupHeartbeat (key 68, KIP-848): a member of a consumer-protocol group joins, stays,
reconciles its assignment and leaves through this one request.

v0 and v1 are those Kafka 4.0 serves; both are flexible. v1 adds SubscribedTopicRegex and requires
the member to generate its own member id (KIP-1082): the coordinator generates one only for a v0
member that joins with an empty id. Most request fields are null when unchanged since the member's
last heartbeat; a full request (on join, or after an error) sets them all.
"""

from protocol.schema import Field, request, response

_TOPIC_PARTITIONS = (
    Field("topic_id", "uuid", "0+"),
    Field("partitions", "[]int32", "0+"),
)

CONSUMER_GROUP_HEARTBEAT_REQUEST = request(
    68,
    "ConsumerGroupHeartbeat",
    "0-1",
    "0+",
    Field("group_id", "string", "0+"),
    Field("member_id", "string", "0+"),
    Field("member_epoch", "int32", "0+"),
    Field("instance_id", "string", "0+", nullable_versions="0+", default=None),
    Field("rack_id", "string", "0+", nullable_versions="0+", default=None),
    Field("rebalance_timeout_ms", "int32", "0+", default=-1),
    Field("subscribed_topic_names", "[]string", "0+", nullable_versions="0+", default=None),
    Field("subscribed_topic_regex", "string", "1+", nullable_versions="1+", default=None),
    Field("server_assignor", "string", "0+", nullable_versions="0+", default=None),
    Field(
        "topic_partitions",
        "[]TopicPartitions",
        "0+",
        nullable_versions="0+",
        default=None,
        fields=_TOPIC_PARTITIONS,
    ),
)

CONSUMER_GROUP_HEARTBEAT_RESPONSE = response(
    68,
    "ConsumerGroupHeartbeat",
    "0-1",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable_versions="0+", default=None),
    Field("member_id", "string", "0+", nullable_versions="0+", default=None),
    Field("member_epoch", "int32", "0+"),
    Field("heartbeat_interval_ms", "int32", "0+"),
    Field(
        "assignment",
        "Assignment",
        "0+",
        nullable_versions="0+",
        default=None,
        fields=(Field("topic_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),),
    ),
)
