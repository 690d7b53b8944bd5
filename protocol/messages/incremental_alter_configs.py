"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from individual config
overrides of topics and brokers (KIP-339), leaving the other overrides as they are."""

from protocol.schema import Field, request, response

INCREMENTAL_ALTER_CONFIGS_REQUEST = request(
    44,
    "IncrementalAlterConfigs",
    "0-1",
    "1+",
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
                    Field("config_operation", "int8", "0+"),
                    Field("value", "string", "0+", nullable_versions="0+"),
                ),
            ),
        ),
    ),
    Field("validate_only", "bool", "0+"),
)

INCREMENTAL_ALTER_CONFIGS_RESPONSE = response(
    44,
    "IncrementalAlterConfigs",
    "0-1",
    "1+",
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
