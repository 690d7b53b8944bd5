"""TxnOffsetCommit (key 28): a transactional producer stages consumer-group offsets with the group
coordinator; they become visible only when the transaction commits. From v3 it carries the
member's generation and ids so that a fenced or stale consumer cannot commit."""

from protocol.schema import Field, request, response
from protocol.sentinels import NO_LEADER_EPOCH

TXN_OFFSET_COMMIT_REQUEST = request(
    28,
    "TxnOffsetCommit",
    "0-4",
    "3+",
    Field("transactional_id", "string", "0+"),
    Field("group_id", "string", "0+"),
    Field("producer_id", "int64", "0+"),
    Field("producer_epoch", "int16", "0+"),
    Field("generation_id", "int32", "3+", default=-1),
    Field("member_id", "string", "3+", default=""),
    Field("group_instance_id", "string", "3+", nullable_versions="3+", default=None),
    Field(
        "topics",
        "[]TxnOffsetCommitRequestTopic",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]TxnOffsetCommitRequestPartition",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("committed_offset", "int64", "0+"),
                    Field("committed_leader_epoch", "int32", "2+", default=NO_LEADER_EPOCH),
                    Field("committed_metadata", "string", "0+", nullable_versions="0+"),
                ),
            ),
        ),
    ),
)

TXN_OFFSET_COMMIT_RESPONSE = response(
    28,
    "TxnOffsetCommit",
    "0-4",
    "3+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "topics",
        "[]TxnOffsetCommitResponseTopic",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]TxnOffsetCommitResponsePartition",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                ),
            ),
        ),
    ),
)
