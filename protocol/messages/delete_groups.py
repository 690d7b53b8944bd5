"""DeleteGroups (key 42): delete consumer groups that have no members, with their committed offsets."""

from protocol.schema import Field, request, response

DELETE_GROUPS_REQUEST = request(
    42,
    "DeleteGroups",
    "0-2",
    "2+",
    Field("groups_names", "[]string", "0+"),
)

DELETE_GROUPS_RESPONSE = response(
    42,
    "DeleteGroups",
    "0-2",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "results",
        "[]DeletableGroupResult",
        "0+",
        fields=(
            Field("group_id", "string", "0+"),
            Field("error_code", "int16", "0+"),
        ),
    ),
)
