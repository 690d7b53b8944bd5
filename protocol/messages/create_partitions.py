"""CreatePartitions (key 37): raise the partition count of existing topics, optionally with
the replica assignment of the new partitions."""

from protocol.schema import Field, request, response

CREATE_PARTITIONS_REQUEST = request(
    37,
    "CreatePartitions",
    "0-3",
    "2+",
    Field(
        "topics",
        "[]CreatePartitionsTopic",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field("count", "int32", "0+"),
            Field(
                "assignments",
                "[]CreatePartitionsAssignment",
                "0+",
                nullable_versions="0+",
                fields=(Field("broker_ids", "[]int32", "0+"),),
            ),
        ),
    ),
    Field("timeout_ms", "int32", "0+"),
    Field("validate_only", "bool", "0+"),
)

CREATE_PARTITIONS_RESPONSE = response(
    37,
    "CreatePartitions",
    "0-3",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "results",
        "[]CreatePartitionsTopicResult",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable_versions="0+", default=None),
        ),
    ),
)
