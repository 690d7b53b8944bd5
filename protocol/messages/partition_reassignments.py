"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), KIP-455.

An admin client moves partitions to new replicas (``replicas`` null cancels a reassignment in
progress) and lists the reassignments in progress. Both are flexible from v0; AlterPartitionReassignments
v1 (KIP-860) lets the request forbid a change of the replication factor.
"""

from protocol.schema import Field, request, response

ALTER_PARTITION_REASSIGNMENTS_REQUEST = request(
    45,
    "AlterPartitionReassignments",
    "0-1",
    "0+",
    Field("timeout_ms", "int32", "0+", default=60000),
    Field("allow_replication_factor_change", "bool", "1+", default=True),
    Field(
        "topics",
        "[]ReassignableTopic",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]ReassignablePartition",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("replicas", "[]int32", "0+", nullable_versions="0+", default=None),
                ),
            ),
        ),
    ),
)

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = response(
    45,
    "AlterPartitionReassignments",
    "0-1",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("allow_replication_factor_change", "bool", "1+", default=True, ignorable=True),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable_versions="0+"),
    Field(
        "responses",
        "[]ReassignableTopicResponse",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]ReassignablePartitionResponse",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                    Field("error_message", "string", "0+", nullable_versions="0+"),
                ),
            ),
        ),
    ),
)

LIST_PARTITION_REASSIGNMENTS_REQUEST = request(
    46,
    "ListPartitionReassignments",
    "0",
    "0+",
    Field("timeout_ms", "int32", "0+", default=60000),
    # null lists every reassignment in progress
    Field(
        "topics",
        "[]ListPartitionReassignmentsTopics",
        "0+",
        nullable_versions="0+",
        default=None,
        fields=(
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ),
    ),
)

LIST_PARTITION_REASSIGNMENTS_RESPONSE = response(
    46,
    "ListPartitionReassignments",
    "0",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable_versions="0+"),
    Field(
        "topics",
        "[]OngoingTopicReassignment",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]OngoingPartitionReassignment",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("replicas", "[]int32", "0+"),
                    Field("adding_replicas", "[]int32", "0+"),
                    Field("removing_replicas", "[]int32", "0+"),
                ),
            ),
        ),
    ),
)
