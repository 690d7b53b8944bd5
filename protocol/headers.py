"""Request and response headers, and the rule that picks their version.

A request header is v2 (v1 plus tagged fields) when the request's own version is flexible,
else v1; v0 (no client id) only for ControlledShutdown v0. A response header is v1 (tagged
fields) for flexible versions, else v0, except ApiVersions responses, which always use v0 so
that a client can read the answer whatever version it asked for.
"""

from __future__ import annotations

from io import BytesIO

from protocol.data import MessageData
from protocol.schema import Field, MessageSpec, Versions

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

REQUEST_HEADER = MessageSpec(
    -1,
    "RequestHeader",
    "header",
    "0-2",
    "2+",
    (
        Field("request_api_key", "int16", "0+"),
        Field("request_api_version", "int16", "0+"),
        Field("correlation_id", "int32", "0+"),
        Field("client_id", "string", "1+", nullable_versions="1+", default=None, flexible_versions="none"),
    ),
)

RESPONSE_HEADER = MessageSpec(
    -1,
    "ResponseHeader",
    "header",
    "0-1",
    "1+",
    (Field("correlation_id", "int32", "0+"),),
)


def request_header_version(api_key: int, api_version: int, flexible_versions: str) -> int:
    """Header version of a request, given its API's flexible version range."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if api_version in Versions.parse(flexible_versions) else 1


def response_header_version(api_key: int, api_version: int, flexible_versions: str) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if api_version in Versions.parse(flexible_versions) else 0


def peek_api(frame: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """(api key, api version) of a request frame, readable before the header version is known."""
    if len(frame) < 4:
        return None
    return int.from_bytes(frame[0:2], "big", signed=True), int.from_bytes(frame[2:4], "big", signed=True)


def read_request_header(io: BytesIO, version: int) -> MessageData:
    return REQUEST_HEADER.codec(version).read(io)
