"""ElectLeaders (key 43): move partition leadership by a preferred (0) or an unclean (1) election.

v1 adds the election type (v0 is always preferred) and the response's top-level error code; v2 turns
flexible. A null ``topic_partitions`` asks for every partition of the cluster.
"""

from protocol.schema import Field, request, response

ELECT_LEADERS_REQUEST = request(
    43,
    "ElectLeaders",
    "0-2",
    "2+",
    Field("election_type", "int8", "1+"),
    Field(
        "topic_partitions",
        "[]TopicPartitions",
        "0+",
        nullable_versions="0+",
        fields=(
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ),
    ),
    Field("timeout_ms", "int32", "0+", default=60000),
)

ELECT_LEADERS_RESPONSE = response(
    43,
    "ElectLeaders",
    "0-2",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "1+"),
    Field(
        "replica_election_results",
        "[]ReplicaElectionResult",
        "0+",
        fields=(
            Field("topic", "string", "0+"),
            Field(
                "partition_result",
                "[]PartitionResult",
                "0+",
                fields=(
                    Field("partition_id", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                    Field("error_message", "string", "0+", nullable_versions="0+"),
                ),
            ),
        ),
    ),
)
