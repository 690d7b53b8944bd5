"""Fetch (key 1): consumers and follower replicas read record batches from partition leaders."""

from protocol.schema import Field, request, response
from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET, UNKNOWN_OFFSET

FETCH_REQUEST = request(
    1,
    "Fetch",
    "4-17",
    "12+",
    Field("cluster_id", "string", "12+", nullable_versions="12+", tagged_versions="12+", tag=0, default=None),
    Field("replica_id", "int32", "0-14", default=-1),
    Field(
        "replica_state",
        "ReplicaState",
        "15+",
        tagged_versions="15+",
        tag=1,
        fields=(
            Field("replica_id", "int32", "15+", default=-1),
            Field("replica_epoch", "int64", "15+", default=-1),
        ),
    ),
    Field("max_wait_ms", "int32", "0+"),
    Field("min_bytes", "int32", "0+"),
    Field("max_bytes", "int32", "3+", default=2147483647),
    Field("isolation_level", "int8", "4+", default=0),
    Field("session_id", "int32", "7+", default=0),
    Field("session_epoch", "int32", "7+", default=-1),
    Field(
        "topics",
        "[]FetchTopic",
        "0+",
        fields=(
            Field("topic", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field(
                "partitions",
                "[]FetchPartition",
                "0+",
                fields=(
                    Field("partition", "int32", "0+"),
                    Field("current_leader_epoch", "int32", "9+", default=NO_LEADER_EPOCH),
                    Field("fetch_offset", "int64", "0+"),
                    Field("last_fetched_epoch", "int32", "12+", default=NO_LEADER_EPOCH),
                    Field("log_start_offset", "int64", "5+", default=UNKNOWN_OFFSET),
                    Field("partition_max_bytes", "int32", "0+"),
                    Field("replica_directory_id", "uuid", "17+", tagged_versions="17+", tag=0),
                ),
            ),
        ),
    ),
    Field(
        "forgotten_topics_data",
        "[]ForgottenTopic",
        "7+",
        fields=(
            Field("topic", "string", "7-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partitions", "[]int32", "7+"),
        ),
    ),
    Field("rack_id", "string", "11+", default=""),
)

FETCH_RESPONSE = response(
    1,
    "Fetch",
    "4-17",
    "12+",
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "7+"),
    Field("session_id", "int32", "7+", default=0),
    Field(
        "responses",
        "[]FetchableTopicResponse",
        "0+",
        fields=(
            Field("topic", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field(
                "partitions",
                "[]PartitionData",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                    Field("high_watermark", "int64", "0+"),
                    Field("last_stable_offset", "int64", "4+", default=UNKNOWN_OFFSET),
                    Field("log_start_offset", "int64", "5+", default=UNKNOWN_OFFSET),
                    Field(
                        "diverging_epoch",
                        "EpochEndOffset",
                        "12+",
                        tagged_versions="12+",
                        tag=0,
                        fields=(
                            Field("epoch", "int32", "12+", default=NO_LEADER_EPOCH),
                            Field("end_offset", "int64", "12+", default=UNDEFINED_EPOCH_OFFSET),
                        ),
                    ),
                    Field(
                        "current_leader",
                        "LeaderIdAndEpoch",
                        "12+",
                        tagged_versions="12+",
                        tag=1,
                        fields=(
                            Field("leader_id", "int32", "12+", default=-1),
                            Field("leader_epoch", "int32", "12+", default=NO_LEADER_EPOCH),
                        ),
                    ),
                    Field(
                        "snapshot_id",
                        "SnapshotId",
                        "12+",
                        tagged_versions="12+",
                        tag=2,
                        fields=(
                            Field("end_offset", "int64", "0+", default=-1),
                            Field("epoch", "int32", "0+", default=-1),
                        ),
                    ),
                    Field(
                        "aborted_transactions",
                        "[]AbortedTransaction",
                        "4+",
                        nullable_versions="4+",
                        fields=(
                            Field("producer_id", "int64", "4+"),
                            Field("first_offset", "int64", "4+"),
                        ),
                    ),
                    Field("preferred_read_replica", "int32", "11+", default=-1),
                    Field("records", "records", "0+", nullable_versions="0+"),
                ),
            ),
        ),
    ),
    Field(
        "node_endpoints",
        "[]NodeEndpoint",
        "16+",
        tagged_versions="16+",
        tag=0,
        fields=(
            Field("node_id", "int32", "16+"),
            Field("host", "string", "16+"),
            Field("port", "int32", "16+"),
            Field("rack", "string", "16+", nullable_versions="16+", default=None),
        ),
    ),
)

FETCH_TOPIC_ID_VERSION = 13
"""First Fetch version that names topics by id (KIP-516): the ``topic_id`` fields above."""
FETCH_NODE_ENDPOINTS_VERSION = 16
"""First Fetch response version with NodeEndpoints (KIP-951)."""
