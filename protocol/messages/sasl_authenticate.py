"""SaslAuthenticate (key 36): one round of a SASL exchange, the mechanism's tokens carried as
opaque bytes inside ordinary Kafka frames (KIP-152), after a SaslHandshake v1.

v1 adds the session lifetime (KIP-368: the client must re-authenticate before it ends; 0 means
no limit), v2 turns flexible.
"""

from protocol.schema import Field, request, response

SASL_AUTHENTICATE_REQUEST = request(
    36,
    "SaslAuthenticate",
    "0-2",
    "2+",
    Field("auth_bytes", "bytes", "0+"),
)

SASL_AUTHENTICATE_RESPONSE = response(
    36,
    "SaslAuthenticate",
    "0-2",
    "2+",
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable_versions="0+"),
    Field("auth_bytes", "bytes", "0+"),
    Field("session_lifetime_ms", "int64", "1+", default=0, ignorable=True),
)
