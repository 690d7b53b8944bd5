"""AlterConfigs (key 33): replace the whole set of config overrides of topics and brokers (the legacy,
non-incremental API: every key not named in the request loses its override)."""

from protocol.schema import Field, request, response

ALTER_CONFIGS_REQUEST = request(
    33,
    "AlterConfigs",
    "0-2",
    "2+",
    Field(
        "resources",
        "[]AlterConfigsResource",
        "0+",
        fields=(
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field(
                "configs",
                "[]AlterableConfig",
                "0+",
                fields=(
                    Field("name", "string", "0+"),
                    Field("value", "string", "0+", nullable_versions="0+"),
                ),
            ),
        ),
    ),
    Field("validate_only", "bool", "0+"),
)

ALTER_CONFIGS_RESPONSE = response(
    33,
    "AlterConfigs",
    "0-2",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "responses",
        "[]AlterConfigsResourceResponse",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable_versions="0+", default=None),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
        ),
    ),
)
