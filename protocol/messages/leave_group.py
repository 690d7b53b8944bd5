"""LeaveGroup (key 13): one member (v0-2) or several (v3+) leave a consumer group."""

from protocol.schema import Field, request, response

LEAVE_GROUP_REQUEST = request(
    13,
    "LeaveGroup",
    "0-5",
    "4+",
    Field("group_id", "string", "0+"),
    Field("member_id", "string", "0-2"),
    Field(
        "members",
        "[]MemberIdentity",
        "3+",
        fields=(
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable_versions="3+", default=None),
            Field("reason", "string", "5+", nullable_versions="5+", default=None),
        ),
    ),
)

LEAVE_GROUP_RESPONSE = response(
    13,
    "LeaveGroup",
    "0-5",
    "4+",
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0+"),
    Field(
        "members",
        "[]MemberResponse",
        "3+",
        fields=(
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable_versions="3+"),
            Field("error_code", "int16", "3+"),
        ),
    ),
)
