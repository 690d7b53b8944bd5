"""SyncGroup (key 14): the group leader hands out assignments; every member receives its own."""

from protocol.schema import Field, request, response

SYNC_GROUP_REQUEST = request(
    14,
    "SyncGroup",
    "0-5",
    "4+",
    Field("group_id", "string", "0+"),
    Field("generation_id", "int32", "0+"),
    Field("member_id", "string", "0+"),
    Field("group_instance_id", "string", "3+", nullable_versions="3+", default=None),
    Field("protocol_type", "string", "5+", nullable_versions="5+", default=None),
    Field("protocol_name", "string", "5+", nullable_versions="5+", default=None),
    Field(
        "assignments",
        "[]SyncGroupRequestAssignment",
        "0+",
        fields=(
            Field("member_id", "string", "0+"),
            Field("assignment", "bytes", "0+"),
        ),
    ),
)

SYNC_GROUP_RESPONSE = response(
    14,
    "SyncGroup",
    "0-5",
    "4+",
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0+"),
    Field("protocol_type", "string", "5+", nullable_versions="5+", default=None),
    Field("protocol_name", "string", "5+", nullable_versions="5+", default=None),
    Field("assignment", "bytes", "0+"),
)
