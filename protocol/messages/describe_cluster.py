"""DescribeCluster (key 60, KIP-700): the cluster id, a controller id and the brokers (with their
rack), as admin clients ask for them instead of Metadata.

v1 (KIP-919) adds the endpoint type: 1 asks a broker about the brokers, 2 asks a controller about
the controllers. Every version is flexible.
"""

from protocol.schema import Field, request, response

DESCRIBE_CLUSTER_REQUEST = request(
    60,
    "DescribeCluster",
    "0-1",
    "0+",
    Field("include_cluster_authorized_operations", "bool", "0+"),
    Field("endpoint_type", "int8", "1+", default=1),
)

DESCRIBE_CLUSTER_RESPONSE = response(
    60,
    "DescribeCluster",
    "0-1",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable_versions="0+", default=None),
    Field("endpoint_type", "int8", "1+", default=1),
    Field("cluster_id", "string", "0+"),
    Field("controller_id", "int32", "0+", default=-1),
    Field(
        "brokers",
        "[]DescribeClusterBroker",
        "0+",
        fields=(
            Field("broker_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "0+", nullable_versions="0+", default=None),
        ),
    ),
    Field("cluster_authorized_operations", "int32", "0+", default=-2147483648),
)
