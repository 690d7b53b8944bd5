"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, used to truncate a diverged log."""

from protocol.schema import Field, request, response
from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET

OFFSET_FOR_LEADER_EPOCH_REQUEST = request(
    23,
    "OffsetForLeaderEpoch",
    "2-4",
    "4+",
    Field("replica_id", "int32", "3+", default=-2),
    Field(
        "topics",
        "[]OffsetForLeaderTopic",
        "0+",
        fields=(
            Field("topic", "string", "0+"),
            Field(
                "partitions",
                "[]OffsetForLeaderPartition",
                "0+",
                fields=(
                    Field("partition", "int32", "0+"),
                    Field("current_leader_epoch", "int32", "2+", default=NO_LEADER_EPOCH),
                    Field("leader_epoch", "int32", "0+"),
                ),
            ),
        ),
    ),
)

OFFSET_FOR_LEADER_EPOCH_RESPONSE = response(
    23,
    "OffsetForLeaderEpoch",
    "2-4",
    "4+",
    Field("throttle_time_ms", "int32", "2+"),
    Field(
        "topics",
        "[]OffsetForLeaderTopicResult",
        "0+",
        fields=(
            Field("topic", "string", "0+"),
            Field(
                "partitions",
                "[]EpochEndOffset",
                "0+",
                fields=(
                    Field("error_code", "int16", "0+"),
                    Field("partition", "int32", "0+"),
                    Field("leader_epoch", "int32", "1+", default=NO_LEADER_EPOCH),
                    Field("end_offset", "int64", "0+", default=UNDEFINED_EPOCH_OFFSET),
                ),
            ),
        ),
    ),
)
