"""FetchSnapshot (key 59): a metadata-quorum follower downloads a snapshot of the log (KIP-630).

When a follower asks for an offset the leader has already compacted into a snapshot, the Fetch
answer names that snapshot (its end offset and epoch) instead of returning records; the follower
then reads the snapshot in chunks with this API, each chunk starting at a byte position, and
resumes fetching the log after the snapshot's end offset. A chunk need not end on a record
boundary, hence "unaligned" records. The answer also names the current leader (tagged), so a
follower asking a deposed leader learns where to go.

Version 1 (KIP-853) adds the follower's directory id and, in the response, the endpoints of the
leaders it names, both as tagged fields.
"""

from protocol.messages.quorum_fields import NODE_ENDPOINTS
from protocol.schema import Field, request, response

FETCH_SNAPSHOT_REQUEST = request(
    59,
    "FetchSnapshot",
    "0-1",
    "0+",
    Field("cluster_id", "string", "0+", nullable_versions="0+", tagged_versions="0+", tag=0, default=None),
    Field("replica_id", "int32", "0+", default=-1),
    Field("max_bytes", "int32", "0+", default=0x7FFFFFFF),
    Field(
        "topics",
        "[]TopicSnapshot",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]PartitionSnapshot",
                "0+",
                fields=(
                    Field("partition", "int32", "0+"),
                    Field("current_leader_epoch", "int32", "0+"),
                    Field(
                        "snapshot_id",
                        "SnapshotId",
                        "0+",
                        fields=(
                            Field("end_offset", "int64", "0+"),
                            Field("epoch", "int32", "0+"),
                        ),
                    ),
                    Field("position", "int64", "0+"),
                    Field("replica_directory_id", "uuid", "1+", tagged_versions="1+", tag=0),
                ),
            ),
        ),
    ),
)

FETCH_SNAPSHOT_RESPONSE = response(
    59,
    "FetchSnapshot",
    "0-1",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field(
        "topics",
        "[]TopicSnapshot",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]PartitionSnapshot",
                "0+",
                fields=(
                    Field("index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                    Field(
                        "snapshot_id",
                        "SnapshotId",
                        "0+",
                        fields=(
                            Field("end_offset", "int64", "0+"),
                            Field("epoch", "int32", "0+"),
                        ),
                    ),
                    Field(
                        "current_leader",
                        "LeaderIdAndEpoch",
                        "0+",
                        tagged_versions="0+",
                        tag=0,
                        fields=(
                            Field("leader_id", "int32", "0+"),
                            Field("leader_epoch", "int32", "0+"),
                        ),
                    ),
                    Field("size", "int64", "0+"),
                    Field("position", "int64", "0+"),
                    Field("unaligned_records", "records", "0+"),
                ),
            ),
        ),
    ),
    NODE_ENDPOINTS,
)
