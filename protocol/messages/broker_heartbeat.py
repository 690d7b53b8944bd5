"""BrokerHeartbeat (key 63): a registered broker's lease with the controller (KIP-631).

The broker reports how far it has read the metadata log and whether it wants to be fenced or
to shut down; the controller answers whether it is caught up, fenced, and may finish shutting
down. A broker whose heartbeats stop is fenced, so leadership moves away from it. Version 1 adds
the failed log directories as a tagged field, so a version 0 body is also a valid version 1 body.
"""

from protocol.schema import Field, request, response

BROKER_HEARTBEAT_REQUEST = request(
    63,
    "BrokerHeartbeat",
    "0-1",
    "0+",
    Field("broker_id", "int32", "0+"),
    Field("broker_epoch", "int64", "0+", default=-1),
    Field("current_metadata_offset", "int64", "0+"),
    Field("want_fence", "bool", "0+"),
    Field("want_shut_down", "bool", "0+"),
    Field("offline_log_dirs", "[]uuid", "1+", tagged_versions="1+", tag=0),
)

BROKER_HEARTBEAT_RESPONSE = response(
    63,
    "BrokerHeartbeat",
    "0-1",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("is_caught_up", "bool", "0+", default=False),
    Field("is_fenced", "bool", "0+", default=True),
    Field("should_shut_down", "bool", "0+"),
)
