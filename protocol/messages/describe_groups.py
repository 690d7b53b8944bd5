"""DescribeGroups (key 15): state, protocol and members (with their metadata and
assignments) of consumer groups."""

from protocol.schema import Field, request, response

DESCRIBE_GROUPS_REQUEST = request(
    15,
    "DescribeGroups",
    "0-5",
    "5+",
    Field("groups", "[]string", "0+"),
    Field("include_authorized_operations", "bool", "3+"),
)

DESCRIBE_GROUPS_RESPONSE = response(
    15,
    "DescribeGroups",
    "0-5",
    "5+",
    Field("throttle_time_ms", "int32", "1+"),
    Field(
        "groups",
        "[]DescribedGroup",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "6+", nullable_versions="6+", default=None),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("protocol_data", "string", "0+"),
            Field(
                "members",
                "[]DescribedGroupMember",
                "0+",
                fields=(
                    Field("member_id", "string", "0+"),
                    Field("group_instance_id", "string", "4+", nullable_versions="4+", default=None),
                    Field("client_id", "string", "0+"),
                    Field("client_host", "string", "0+"),
                    Field("member_metadata", "bytes", "0+"),
                    Field("member_assignment", "bytes", "0+"),
                ),
            ),
            Field("authorized_operations", "int32", "3+", default=-2147483648),
        ),
    ),
)
