"""ListOffsets (key 2): look up a partition's offset by timestamp (earliest, latest, ...)."""

from protocol.schema import Field, request, response
from protocol.sentinels import NO_LEADER_EPOCH, NO_TIMESTAMP, UNKNOWN_OFFSET

LIST_OFFSETS_REQUEST = request(
    2,
    "ListOffsets",
    "1-9",
    "6+",
    Field("replica_id", "int32", "0+"),
    Field("isolation_level", "int8", "2+"),
    Field(
        "topics",
        "[]ListOffsetsTopic",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]ListOffsetsPartition",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("current_leader_epoch", "int32", "4+", default=NO_LEADER_EPOCH),
                    Field("timestamp", "int64", "0+"),
                ),
            ),
        ),
    ),
)

LIST_OFFSETS_RESPONSE = response(
    2,
    "ListOffsets",
    "1-9",
    "6+",
    Field("throttle_time_ms", "int32", "2+"),
    Field(
        "topics",
        "[]ListOffsetsTopicResponse",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]ListOffsetsPartitionResponse",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                    Field("timestamp", "int64", "1+", default=NO_TIMESTAMP),
                    Field("offset", "int64", "1+", default=UNKNOWN_OFFSET),
                    Field("leader_epoch", "int32", "4+", default=NO_LEADER_EPOCH),
                ),
            ),
        ),
    ),
)
