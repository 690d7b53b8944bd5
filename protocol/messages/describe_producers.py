"""DescribeProducers (key 61): an admin client asks a partition leader for the producers that
have state on its partitions: their ids, epochs, last sequence and any open transaction."""

from protocol.schema import Field, request, response

DESCRIBE_PRODUCERS_REQUEST = request(
    61,
    "DescribeProducers",
    "0",
    "0+",
    Field(
        "topics",
        "[]TopicRequest",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ),
    ),
)

DESCRIBE_PRODUCERS_RESPONSE = response(
    61,
    "DescribeProducers",
    "0",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "topics",
        "[]TopicResponse",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]PartitionResponse",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                    Field("error_message", "string", "0+", nullable_versions="0+", default=None),
                    Field(
                        "active_producers",
                        "[]ProducerState",
                        "0+",
                        fields=(
                            Field("producer_id", "int64", "0+"),
                            # int32 in Kafka's own declaration, unlike the int16 epoch elsewhere
                            Field("producer_epoch", "int32", "0+"),
                            Field("last_sequence", "int32", "0+", default=-1),
                            Field("last_timestamp", "int64", "0+", default=-1),
                            Field("coordinator_epoch", "int32", "0+"),
                            Field("current_txn_start_offset", "int64", "0+", default=-1),
                        ),
                    ),
                ),
            ),
        ),
    ),
)
