"""DescribeTopicPartitions (key 75, KIP-966): topics and their partitions (leader, epoch, replicas,
ISR, eligible leader replicas, offline replicas), paginated: at most ``response_partition_limit``
partitions per response, resumed from ``cursor`` (a topic name and a partition index), the response
saying where to resume in ``next_cursor`` (null when done). Only v0 exists; it is flexible."""

from protocol.schema import Field, request, response

_CURSOR_FIELDS = (
    Field("topic_name", "string", "0+"),
    Field("partition_index", "int32", "0+"),
)

DESCRIBE_TOPIC_PARTITIONS_REQUEST = request(
    75,
    "DescribeTopicPartitions",
    "0",
    "0+",
    Field("topics", "[]TopicRequest", "0+", fields=(Field("name", "string", "0+"),)),
    Field("response_partition_limit", "int32", "0+", default=2000),
    Field("cursor", "Cursor", "0+", nullable_versions="0+", default=None, fields=_CURSOR_FIELDS),
)

DESCRIBE_TOPIC_PARTITIONS_RESPONSE = response(
    75,
    "DescribeTopicPartitions",
    "0",
    "0+",
    Field("throttle_time_ms", "int32", "0+", ignorable=True),
    Field(
        "topics",
        "[]DescribeTopicPartitionsResponseTopic",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("name", "string", "0+", nullable_versions="0+"),
            Field("topic_id", "uuid", "0+", ignorable=True),
            Field("is_internal", "bool", "0+", default=False, ignorable=True),
            Field(
                "partitions",
                "[]DescribeTopicPartitionsResponsePartition",
                "0+",
                fields=(
                    Field("error_code", "int16", "0+"),
                    Field("partition_index", "int32", "0+"),
                    Field("leader_id", "int32", "0+"),
                    Field("leader_epoch", "int32", "0+", default=-1, ignorable=True),
                    Field("replica_nodes", "[]int32", "0+"),
                    Field("isr_nodes", "[]int32", "0+"),
                    Field("eligible_leader_replicas", "[]int32", "0+", nullable_versions="0+", default=None),
                    Field("last_known_elr", "[]int32", "0+", nullable_versions="0+", default=None),
                    Field("offline_replicas", "[]int32", "0+", ignorable=True),
                ),
            ),
            Field("topic_authorized_operations", "int32", "0+", default=-2147483648),
        ),
    ),
    Field("next_cursor", "Cursor", "0+", nullable_versions="0+", default=None, fields=_CURSOR_FIELDS),
)
