"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49): the quotas of client entities
(users, client ids, IPs), read with a filter and changed key by key. v1 of both turns flexible."""

from protocol.schema import Field, request, response

_ENTITY = Field(
    "entity",
    "[]EntityData",
    "0+",
    fields=(
        Field("entity_type", "string", "0+"),
        Field("entity_name", "string", "0+", nullable_versions="0+"),
    ),
)

DESCRIBE_CLIENT_QUOTAS_REQUEST = request(
    48,
    "DescribeClientQuotas",
    "0-1",
    "1+",
    Field(
        "components",
        "[]ComponentData",
        "0+",
        fields=(
            Field("entity_type", "string", "0+"),
            Field("match_type", "int8", "0+"),
            Field("match", "string", "0+", nullable_versions="0+"),
        ),
    ),
    Field("strict", "bool", "0+"),
)

DESCRIBE_CLIENT_QUOTAS_RESPONSE = response(
    48,
    "DescribeClientQuotas",
    "0-1",
    "1+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable_versions="0+"),
    Field(
        "entries",
        "[]EntryData",
        "0+",
        nullable_versions="0+",
        fields=(
            _ENTITY,
            Field(
                "values",
                "[]ValueData",
                "0+",
                fields=(Field("key", "string", "0+"), Field("value", "float64", "0+")),
            ),
        ),
    ),
)

ALTER_CLIENT_QUOTAS_REQUEST = request(
    49,
    "AlterClientQuotas",
    "0-1",
    "1+",
    Field(
        "entries",
        "[]EntryData",
        "0+",
        fields=(
            _ENTITY,
            Field(
                "ops",
                "[]OpData",
                "0+",
                fields=(
                    Field("key", "string", "0+"),
                    Field("value", "float64", "0+"),
                    Field("remove", "bool", "0+"),
                ),
            ),
        ),
    ),
    Field("validate_only", "bool", "0+"),
)

ALTER_CLIENT_QUOTAS_RESPONSE = response(
    49,
    "AlterClientQuotas",
    "0-1",
    "1+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "entries",
        "[]EntryData",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable_versions="0+"),
            _ENTITY,
        ),
    ),
)
