"""ApiVersions (key 18): which APIs and versions the broker serves."""

from protocol.schema import Field, request, response

API_VERSIONS_REQUEST = request(
    18,
    "ApiVersions",
    "0-4",
    "3+",
    Field("client_software_name", "string", "3+"),
    Field("client_software_version", "string", "3+"),
)

API_VERSIONS_RESPONSE = response(
    18,
    "ApiVersions",
    "0-4",
    "3+",
    Field("error_code", "int16", "0+"),
    Field(
        "api_keys",
        "[]ApiVersion",
        "0+",
        fields=(
            Field("api_key", "int16", "0+"),
            Field("min_version", "int16", "0+"),
            Field("max_version", "int16", "0+"),
        ),
    ),
    Field("throttle_time_ms", "int32", "1+"),
    Field(
        "supported_features",
        "[]SupportedFeatureKey",
        "3+",
        tagged_versions="3+",
        tag=0,
        fields=(
            Field("name", "string", "3+"),
            Field("min_version", "int16", "3+"),
            Field("max_version", "int16", "3+"),
        ),
    ),
    Field("finalized_features_epoch", "int64", "3+", tagged_versions="3+", tag=1, default=-1),
    Field(
        "finalized_features",
        "[]FinalizedFeatureKey",
        "3+",
        tagged_versions="3+",
        tag=2,
        fields=(
            Field("name", "string", "3+"),
            Field("max_version_level", "int16", "3+"),
            Field("min_version_level", "int16", "3+"),
        ),
    ),
    Field("zk_migration_ready", "bool", "3+", tagged_versions="3+", tag=3, default=False),
)
