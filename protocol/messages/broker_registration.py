"""BrokerRegistration (key 62): a broker introduces itself to the controller (KIP-631).

The controller answers with a broker epoch; every later heartbeat and AlterPartition carries it,
so a broker that restarted (new incarnation id, new epoch) cannot be mistaken for its previous
life. Version 4 has version 3's fields (Kafka bumped it only to allow features whose minimum
supported version is 0); versions 1-3 each add one request field.
"""

from protocol.schema import Field, request, response

BROKER_REGISTRATION_REQUEST = request(
    62,
    "BrokerRegistration",
    "0-4",
    "0+",
    Field("broker_id", "int32", "0+"),
    Field("cluster_id", "string", "0+"),
    Field("incarnation_id", "uuid", "0+"),
    Field(
        "listeners",
        "[]Listener",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field("host", "string", "0+"),
            Field("port", "uint16", "0+"),
            Field("security_protocol", "int16", "0+"),
        ),
    ),
    Field(
        "features",
        "[]Feature",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field("min_supported_version", "int16", "0+"),
            Field("max_supported_version", "int16", "0+"),
        ),
    ),
    Field("rack", "string", "0+", nullable_versions="0+"),
    Field("is_migrating_zk_broker", "bool", "1+", default=False),
    Field("log_dirs", "[]uuid", "2+"),
    Field("previous_broker_epoch", "int64", "3+", default=-1),
)

BROKER_REGISTRATION_RESPONSE = response(
    62,
    "BrokerRegistration",
    "0-4",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("broker_epoch", "int64", "0+", default=-1),
)
