"""SaslHandshake (key 17): a client names the SASL mechanism it wants and learns the ones the
listener enables.

v0 is followed by raw, length-prefixed SASL tokens outside the Kafka framing; v1 (KIP-152) by
SaslAuthenticate requests instead. Both versions share one layout, and the API never turned
flexible: clients up to 2.4 negotiate its version wrongly, so Kafka cannot bump it.
"""

from protocol.schema import Field, request, response

SASL_HANDSHAKE_REQUEST = request(
    17,
    "SaslHandshake",
    "0-1",
    "none",
    Field("mechanism", "string", "0+"),
)

SASL_HANDSHAKE_RESPONSE = response(
    17,
    "SaslHandshake",
    "0-1",
    "none",
    Field("error_code", "int16", "0+"),
    Field("mechanisms", "[]string", "0+"),
)
