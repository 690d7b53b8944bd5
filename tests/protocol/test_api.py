"""Request/response front door: header versions, unknown APIs, trailing bytes."""

from __future__ import annotations

import pytest

from protocol.api import decode_request, decode_response, encode_request, encode_response, read_request_header
from protocol.errors import DecodeError, UnsupportedVersionError
from protocol.headers import request_header_version, response_header_version


def test_header_version_rules() -> None:
    assert request_header_version(1, 11, "12+") == 1
    assert request_header_version(1, 12, "12+") == 2
    assert request_header_version(7, 0, "3+") == 0  # ControlledShutdown v0 has no client id
    assert response_header_version(1, 12, "12+") == 1
    assert response_header_version(18, 3, "3+") == 0  # ApiVersions responses always use v0


def test_request_roundtrip_with_flexible_header() -> None:
    body = {"client_software_name": "kipling-test", "client_software_version": "1"}
    frame = encode_request(18, 3, 7, "client-a", body)
    request = decode_request(frame)
    assert request.correlation_id == 7
    assert request.header.client_id == "client-a"
    assert request.body == body


def test_trailing_bytes_are_kept_not_fatal() -> None:
    """librdkafka sometimes leaves bytes after the last field; brokers ignore them."""
    frame = encode_request(3, 12, 1, "rdkafka", {"topics": None}) + b"\x00\x00\x01"
    request = decode_request(frame)
    assert request.body.topics is None
    assert request.trailing == b"\x00\x00\x01"


def test_unknown_api_key() -> None:
    with pytest.raises(UnsupportedVersionError):
        decode_request(b"\x7f\x00\x00\x01\x00\x00\x00\x01\x00\x00")


def test_unsupported_version_still_yields_the_header() -> None:
    """A version kipling does not declare: the header decodes (to answer the right correlation
    id), the body raises UnsupportedVersionError."""
    frame = encode_request(18, 3, 42, "c", {})
    frame = frame[:2] + (99).to_bytes(2, "big") + frame[4:]
    header, _ = read_request_header(frame)
    assert header.correlation_id == 42
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)


def test_short_frame() -> None:
    with pytest.raises(DecodeError):
        decode_request(b"\x00")


def test_response_roundtrip() -> None:
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": 1, "min_version": 4, "max_version": 17}],
        "throttle_time_ms": 0,
    }
    frame = encode_response(18, 3, 9, body)
    response = decode_response(frame, 18, 3)
    assert response.header.correlation_id == 9
    assert response.body.api_keys[0].max_version == 17
