"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51): the SCRAM
credentials of users (KIP-554), stored in the cluster metadata.

Both have only v0, flexible. A describe lists a user's mechanisms and iteration counts, never its
salt or keys; an alteration carries the client's salt and salted password (never the password),
from which the controller derives what it stores. Mechanisms are Kafka's type bytes
(1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
"""

from protocol.schema import Field, request, response

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = request(
    50,
    "DescribeUserScramCredentials",
    "0",
    "0+",
    # null (or empty) describes every user that has credentials
    Field("users", "[]UserName", "0+", nullable_versions="0+", fields=(Field("name", "string", "0+"),)),
)

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = response(
    50,
    "DescribeUserScramCredentials",
    "0",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable_versions="0+"),
    Field(
        "results",
        "[]DescribeUserScramCredentialsResult",
        "0+",
        fields=(
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable_versions="0+"),
            Field(
                "credential_infos",
                "[]CredentialInfo",
                "0+",
                fields=(Field("mechanism", "int8", "0+"), Field("iterations", "int32", "0+")),
            ),
        ),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = request(
    51,
    "AlterUserScramCredentials",
    "0",
    "0+",
    Field(
        "deletions",
        "[]ScramCredentialDeletion",
        "0+",
        fields=(Field("name", "string", "0+"), Field("mechanism", "int8", "0+")),
    ),
    Field(
        "upsertions",
        "[]ScramCredentialUpsertion",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
            Field("iterations", "int32", "0+"),
            Field("salt", "bytes", "0+"),
            Field("salted_password", "bytes", "0+"),
        ),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = response(
    51,
    "AlterUserScramCredentials",
    "0",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "results",
        "[]AlterUserScramCredentialsResult",
        "0+",
        fields=(
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable_versions="0+"),
        ),
    ),
)
