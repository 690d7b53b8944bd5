"""OffsetDelete (key 47, KIP-496): delete a group's committed offsets of some partitions.

What ``kafka-consumer-groups.sh --delete-offsets`` and the admin client's
``deleteConsumerGroupOffsets`` send. Only v0 exists, and it is not flexible.
"""

from protocol.schema import Field, request, response

OFFSET_DELETE_REQUEST = request(
    47,
    "OffsetDelete",
    "0",
    "none",
    Field("group_id", "string", "0+"),
    Field(
        "topics",
        "[]OffsetDeleteRequestTopic",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]OffsetDeleteRequestPartition",
                "0+",
                fields=(Field("partition_index", "int32", "0+"),),
            ),
        ),
    ),
)

OFFSET_DELETE_RESPONSE = response(
    47,
    "OffsetDelete",
    "0",
    "none",
    Field("error_code", "int16", "0+"),
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "topics",
        "[]OffsetDeleteResponseTopic",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]OffsetDeleteResponsePartition",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                ),
            ),
        ),
    ),
)
