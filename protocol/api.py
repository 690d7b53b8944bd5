"""Whole request and response bodies: header + message, decoded and encoded by (key, version).

This is the codec's front door for the broker, the client and the tools. It looks up the
declared message for an API key, picks the header version by Kafka's rule and keeps any bytes
a client left after the last field (librdkafka does): brokers ignore them, tools report them.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO
from typing import Any

from protocol import wire
from protocol.data import MessageData
from protocol.errors import DecodeError, UnsupportedVersionError
from protocol.headers import (
    REQUEST_HEADER,
    RESPONSE_HEADER,
    peek_api,
    request_header_version,
    response_header_version,
)
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import MessageSpec
from protocol.wire import FrameReader


@dataclass(slots=True)
class Request:
    """A decoded request: its header, its body and what trailed the body."""

    api_key: int
    api_version: int
    header: MessageData
    body: MessageData
    trailing: bytes = b""

    @property
    def correlation_id(self) -> int:
        correlation_id: int = self.header["correlation_id"]
        return correlation_id


@dataclass(slots=True)
class Response:
    header: MessageData
    body: MessageData
    trailing: bytes = b""


def request_spec(api_key: int) -> MessageSpec:
    spec = REQUESTS.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"unknown api key {api_key}")
    return spec


def response_spec(api_key: int) -> MessageSpec:
    spec = RESPONSES.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"unknown api key {api_key}")
    return spec


def read_request_header(frame: bytes | bytearray | memoryview) -> tuple[MessageData, BytesIO]:
    """Decode a request's header; the returned stream is positioned at the body.

    Works for any version of a known API, even one kipling does not declare (so that the
    broker can answer UNSUPPORTED_VERSION to the right correlation id).
    """
    api = peek_api(frame)
    if api is None:
        raise DecodeError("request frame shorter than its api key and version")
    spec = request_spec(api[0])
    io = FrameReader(frame)
    header = REQUEST_HEADER.codec(request_header_version(api[0], api[1], spec.flexible_versions)).read(io)
    return header, io


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode a whole request frame (without its size prefix)."""
    header, io = read_request_header(frame)
    key, version = header["request_api_key"], header["request_api_version"]
    body = request_spec(key).codec(version).read(io)
    return Request(key, version, header, body, io.read())


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    spec = request_spec(api_key)
    io = BytesIO()
    header = {
        "request_api_key": api_key,
        "request_api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    REQUEST_HEADER.codec(request_header_version(api_key, api_version, spec.flexible_versions)).write(
        header, io
    )
    spec.codec(api_version).write(body, io)
    return io.getvalue()


def reencode_request(request: Request) -> bytes:
    """The bytes of a decoded request, trailing bytes included: equal to the input if lossless."""
    spec = request_spec(request.api_key)
    io = BytesIO()
    version = request_header_version(request.api_key, request.api_version, spec.flexible_versions)
    REQUEST_HEADER.codec(version).write(request.header, io)
    spec.codec(request.api_version).write(request.body, io)
    io.write(request.trailing)
    return io.getvalue()


def decode_response(frame: bytes | bytearray | memoryview, api_key: int, api_version: int) -> Response:
    spec = response_spec(api_key)
    io = BytesIO(frame)
    header = RESPONSE_HEADER.codec(
        response_header_version(api_key, api_version, spec.flexible_versions)
    ).read(io)
    body = spec.codec(api_version).read(io)
    return Response(header, body, io.read())


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Any, trailing: bytes = b""
) -> bytes:
    """A response frame body (without the size prefix)."""
    spec = response_spec(api_key)
    io = BytesIO()
    header = getattr(body, "_header", None) or {"correlation_id": correlation_id}
    RESPONSE_HEADER.codec(response_header_version(api_key, api_version, spec.flexible_versions)).write(
        header, io
    )
    spec.codec(api_version).write(body, io)
    io.write(trailing)
    return io.getvalue()


def reencode_response(response: Response, api_key: int, api_version: int) -> bytes:
    spec = response_spec(api_key)
    io = BytesIO()
    version = response_header_version(api_key, api_version, spec.flexible_versions)
    RESPONSE_HEADER.codec(version).write(response.header, io)
    spec.codec(api_version).write(response.body, io)
    io.write(response.trailing)
    return io.getvalue()


__all__ = [
    "Request",
    "Response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "read_request_header",
    "reencode_request",
    "reencode_response",
    "wire",
]
