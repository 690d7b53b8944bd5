"""OffsetCommit (key 8): a consumer stores its committed offsets with the group coordinator.

Kafka's specification also has a commit timestamp per partition, but only in v1, which it no
longer lists as valid; kipling declares v2 and up, so that field is left out.
"""

from protocol.schema import Field, request, response
from protocol.sentinels import NO_LEADER_EPOCH

OFFSET_COMMIT_REQUEST = request(
    8,
    "OffsetCommit",
    "2-9",
    "8+",
    Field("group_id", "string", "0+"),
    Field("generation_id_or_member_epoch", "int32", "1+", default=-1),
    Field("member_id", "string", "1+"),
    Field("group_instance_id", "string", "7+", nullable_versions="7+", default=None),
    Field("retention_time_ms", "int64", "2-4", default=-1),
    Field(
        "topics",
        "[]OffsetCommitRequestTopic",
        "0+",
        fields=(
            Field("name", "string", "0-9"),
            Field(
                "partitions",
                "[]OffsetCommitRequestPartition",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("committed_offset", "int64", "0+"),
                    Field("committed_leader_epoch", "int32", "6+", default=NO_LEADER_EPOCH),
                    Field("committed_metadata", "string", "0+", nullable_versions="0+"),
                ),
            ),
        ),
    ),
)

OFFSET_COMMIT_RESPONSE = response(
    8,
    "OffsetCommit",
    "2-9",
    "8+",
    Field("throttle_time_ms", "int32", "3+"),
    Field(
        "topics",
        "[]OffsetCommitResponseTopic",
        "0+",
        fields=(
            Field("name", "string", "0-9"),
            Field(
                "partitions",
                "[]OffsetCommitResponsePartition",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                ),
            ),
        ),
    ),
)
