"""CreateAcls (key 30): add ACL bindings, each answered by its own result in request order.

The int8 codes are those of :mod:`protocol.acl_types`. v1 adds the resource pattern type
(KIP-290, LITERAL by default), v2 turns flexible, v3 admits the USER resource type. Kafka 4
removed v0 (KIP-896): v1 is the baseline.
"""

from protocol.schema import Field, request, response

CREATE_ACLS_REQUEST = request(
    30,
    "CreateAcls",
    "1-3",
    "2+",
    Field(
        "creations",
        "[]AclCreation",
        "0+",
        fields=(
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("resource_pattern_type", "int8", "1+", default=3),
            Field("principal", "string", "0+"),
            Field("host", "string", "0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        ),
    ),
)

CREATE_ACLS_RESPONSE = response(
    30,
    "CreateAcls",
    "1-3",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "results",
        "[]AclCreationResult",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable_versions="0+"),
        ),
    ),
)
