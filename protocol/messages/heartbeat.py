"""Heartbeat (key 12): a group member tells the coordinator it is alive and learns of rebalances."""

from protocol.schema import Field, request, response

HEARTBEAT_REQUEST = request(
    12,
    "Heartbeat",
    "0-4",
    "4+",
    Field("group_id", "string", "0+"),
    Field("generation_id", "int32", "0+"),
    Field("member_id", "string", "0+"),
    Field("group_instance_id", "string", "3+", nullable_versions="3+", default=None),
)

HEARTBEAT_RESPONSE = response(
    12,
    "Heartbeat",
    "0-4",
    "4+",
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0+"),
)
