"""ListGroups (key 16): the groups a broker coordinates, optionally filtered by state (v4+)
and type (v5+)."""

from protocol.schema import Field, request, response

LIST_GROUPS_REQUEST = request(
    16,
    "ListGroups",
    "0-5",
    "3+",
    Field("states_filter", "[]string", "4+"),
    Field("types_filter", "[]string", "5+"),
)

LIST_GROUPS_RESPONSE = response(
    16,
    "ListGroups",
    "0-5",
    "3+",
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0+"),
    Field(
        "groups",
        "[]ListedGroup",
        "0+",
        fields=(
            Field("group_id", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("group_state", "string", "4+"),
            Field("group_type", "string", "5+"),
        ),
    ),
)
