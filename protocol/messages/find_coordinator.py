"""FindCoordinator (key 10): which broker coordinates a consumer group or a transactional id;
one key per request up to v3, a batch of keys from v4."""

from protocol.schema import Field, request, response

FIND_COORDINATOR_REQUEST = request(
    10,
    "FindCoordinator",
    "0-6",
    "3+",
    Field("key", "string", "0-3"),
    Field("key_type", "int8", "1+", default=0),
    Field("coordinator_keys", "[]string", "4+"),
)

FIND_COORDINATOR_RESPONSE = response(
    10,
    "FindCoordinator",
    "0-6",
    "3+",
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0-3"),
    Field("error_message", "string", "1-3", nullable_versions="1-3"),
    Field("node_id", "int32", "0-3"),
    Field("host", "string", "0-3"),
    Field("port", "int32", "0-3"),
    Field(
        "coordinators",
        "[]Coordinator",
        "4+",
        fields=(
            Field("key", "string", "4+"),
            Field("node_id", "int32", "4+"),
            Field("host", "string", "4+"),
            Field("port", "int32", "4+"),
            Field("error_code", "int16", "4+"),
            Field("error_message", "string", "4+", nullable_versions="4+"),
        ),
    ),
)
