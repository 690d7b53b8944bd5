"""DeleteAcls (key 31): remove the ACLs matching each filter; each filter's result lists the
ACLs it matched, each with its own deletion error.

The int8 codes are those of :mod:`protocol.acl_types`; a filter's null strings match anything.
v1 adds the resource pattern type (KIP-290, LITERAL by default), v2 turns flexible, v3 admits
the USER resource type. Kafka 4 removed v0 (KIP-896): v1 is the baseline.
"""

from protocol.schema import Field, request, response

DELETE_ACLS_REQUEST = request(
    31,
    "DeleteAcls",
    "1-3",
    "2+",
    Field(
        "filters",
        "[]DeleteAclsFilter",
        "0+",
        fields=(
            Field("resource_type_filter", "int8", "0+"),
            Field("resource_name_filter", "string", "0+", nullable_versions="0+"),
            Field("pattern_type_filter", "int8", "1+", default=3),
            Field("principal_filter", "string", "0+", nullable_versions="0+"),
            Field("host_filter", "string", "0+", nullable_versions="0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        ),
    ),
)

DELETE_ACLS_RESPONSE = response(
    31,
    "DeleteAcls",
    "1-3",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "filter_results",
        "[]DeleteAclsFilterResult",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable_versions="0+"),
            Field(
                "matching_acls",
                "[]DeleteAclsMatchingAcl",
                "0+",
                fields=(
                    Field("error_code", "int16", "0+"),
                    Field("error_message", "string", "0+", nullable_versions="0+"),
                    Field("resource_type", "int8", "0+"),
                    Field("resource_name", "string", "0+"),
                    Field("pattern_type", "int8", "1+", default=3),
                    Field("principal", "string", "0+"),
                    Field("host", "string", "0+"),
                    Field("operation", "int8", "0+"),
                    Field("permission_type", "int8", "0+"),
                ),
            ),
        ),
    ),
)
