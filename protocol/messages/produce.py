"""Produce (key 0): a producer appends record batches to partitions and learns their offsets."""

from protocol.schema import Field, request, response
from protocol.sentinels import NO_LEADER_EPOCH, NO_TIMESTAMP, UNKNOWN_OFFSET

PRODUCE_REQUEST = request(
    0,
    "Produce",
    "3-11",
    "9+",
    Field("transactional_id", "string", "3+", nullable_versions="3+", default=None),
    Field("acks", "int16", "0+"),
    Field("timeout_ms", "int32", "0+"),
    Field(
        "topic_data",
        "[]TopicProduceData",
        "0+",
        fields=(
            Field("name", "string", "0-12"),
            Field(
                "partition_data",
                "[]PartitionProduceData",
                "0+",
                fields=(
                    Field("index", "int32", "0+"),
                    Field("records", "records", "0+", nullable_versions="0+"),
                ),
            ),
        ),
    ),
)

PRODUCE_RESPONSE = response(
    0,
    "Produce",
    "3-11",
    "9+",
    Field(
        "responses",
        "[]TopicProduceResponse",
        "0+",
        fields=(
            Field("name", "string", "0-12"),
            Field(
                "partition_responses",
                "[]PartitionProduceResponse",
                "0+",
                fields=(
                    Field("index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                    Field("base_offset", "int64", "0+"),
                    Field("log_append_time_ms", "int64", "2+", default=NO_TIMESTAMP),
                    Field("log_start_offset", "int64", "5+", default=UNKNOWN_OFFSET),
                    Field(
                        "record_errors",
                        "[]BatchIndexAndErrorMessage",
                        "8+",
                        fields=(
                            Field("batch_index", "int32", "8+"),
                            Field(
                                "batch_index_error_message",
                                "string",
                                "8+",
                                nullable_versions="8+",
                                default=None,
                            ),
                        ),
                    ),
                    Field("error_message", "string", "8+", nullable_versions="8+", default=None),
                    Field(
                        "current_leader",
                        "LeaderIdAndEpoch",
                        "10+",
                        tagged_versions="10+",
                        tag=0,
                        fields=(
                            Field("leader_id", "int32", "10+", default=-1),
                            Field("leader_epoch", "int32", "10+", default=NO_LEADER_EPOCH),
                        ),
                    ),
                ),
            ),
        ),
    ),
    Field("throttle_time_ms", "int32", "1+", default=0),
    Field(
        "node_endpoints",
        "[]NodeEndpoint",
        "10+",
        tagged_versions="10+",
        tag=0,
        fields=(
            Field("node_id", "int32", "10+"),
            Field("host", "string", "10+"),
            Field("port", "int32", "10+"),
            Field("rack", "string", "10+", nullable_versions="10+", default=None),
        ),
    ),
)
