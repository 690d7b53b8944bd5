"""DescribeLogDirs (key 35), declared as data: the versions Kafka 4 accepts (v1-v5; v0 removed by
KIP-896), representative bodies of every version through both codecs, and hand-assembled bytes
for v1 (classic) and v5 (flexible, with the top-level error, the volume's sizes and the cordon
flag). The schema oracle checks the declaration against the JSON kafka-python ships."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.data import to_plain
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import MessageSpec
from tests.protocol.strategies import with_defaults

REQUEST = REQUESTS[ApiKey.DESCRIBE_LOG_DIRS]
RESPONSE = RESPONSES[ApiKey.DESCRIBE_LOG_DIRS]


def _i16(value: int) -> bytes:
    return value.to_bytes(2, "big", signed=True)


def _i32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def _i64(value: int) -> bytes:
    return value.to_bytes(8, "big", signed=True)


def _str(text: str) -> bytes:
    return _i16(len(text)) + text.encode()


def _cstr(text: str) -> bytes:
    return bytes([len(text) + 1]) + text.encode()


TAGS = b"\x00"

REQUEST_SAMPLE = {"topics": [{"topic": "t", "partitions": [0, 3]}]}
RESPONSE_SAMPLE: dict[str, Any] = {
    "throttle_time_ms": 7,
    "error_code": 0,
    "results": [
        {
            "error_code": 0,
            "log_dir": "/data/a",
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 3,
                            "partition_size": 1234,
                            "offset_lag": 0,
                            "is_future_key": False,
                        }
                    ],
                }
            ],
            "total_bytes": 10_000,
            "usable_bytes": 4_000,
            "is_cordoned": False,
        },
        {
            "error_code": 56,
            "log_dir": "/data/b",
            "topics": [],
            "total_bytes": -1,
            "usable_bytes": -1,
            "is_cordoned": True,
        },
    ],
}
CASES = [
    (spec, sample, version)
    for spec, sample in ((REQUEST, REQUEST_SAMPLE), (REQUEST, {"topics": None}), (RESPONSE, RESPONSE_SAMPLE))
    for version in spec.version_list()
]


def test_declared_versions() -> None:
    for spec in (REQUEST, RESPONSE):
        assert (spec.valid_versions, spec.flexible_versions) == ("1-5", "2+")


@pytest.mark.parametrize(("spec", "sample", "version"), CASES, ids=[f"{s.name}-v{v}" for s, _, v in CASES])
def test_representative_body_round_trips(spec: MessageSpec, sample: dict[str, Any], version: int) -> None:
    compiled = spec.codec(version)
    interpreted = spec.codec(version, compiled=False)
    encoded = compiled.encode(sample)
    assert interpreted.encode(sample) == encoded
    expected = to_plain(with_defaults(spec.fields, version, sample))
    assert to_plain(compiled.decode(encoded)) == expected
    assert to_plain(interpreted.decode(encoded)) == expected


def test_v1_request_bytes_and_null_topics() -> None:
    wire = _i32(1) + _str("t") + _i32(2) + _i32(0) + _i32(3)
    assert REQUEST.codec(1).encode(REQUEST_SAMPLE) == wire
    assert REQUEST.codec(1).encode({"topics": None}) == _i32(-1)
    assert REQUEST.codec(2).encode({"topics": None}) == b"\x00" + TAGS  # compact null array
    assert REQUEST.codec(1).decode(_i32(-1)).topics is None


def test_v1_response_has_no_top_level_error_nor_volume_sizes() -> None:
    body = {
        "throttle_time_ms": 0,
        "results": [
            {
                "error_code": 0,
                "log_dir": "/d",
                "topics": [
                    {
                        "name": "t",
                        "partitions": [
                            {
                                "partition_index": 1,
                                "partition_size": 99,
                                "offset_lag": 0,
                                "is_future_key": False,
                            }
                        ],
                    }
                ],
            }
        ],
    }
    wire = (
        _i32(0)
        + _i32(1)
        + _i16(0)
        + _str("/d")
        + _i32(1)
        + _str("t")
        + _i32(1)
        + _i32(1)
        + _i64(99)
        + _i64(0)
        + b"\x00"
    )
    assert RESPONSE.codec(1).encode(body) == wire
    decoded = RESPONSE.codec(1).decode(wire)
    assert (decoded.error_code, decoded.results[0].total_bytes, decoded.results[0].usable_bytes) == (
        0,
        -1,
        -1,
    )


def test_v5_response_bytes() -> None:
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "results": [
            {
                "error_code": 56,
                "log_dir": "/b",
                "topics": [],
                "total_bytes": 10,
                "usable_bytes": 4,
                "is_cordoned": True,
            }
        ],
    }
    wire = (
        _i32(0)
        + _i16(0)
        + bytes([2])  # one result
        + _i16(56)
        + _cstr("/b")
        + bytes([1])  # no topics
        + _i64(10)
        + _i64(4)
        + b"\x01"
        + TAGS  # the result's
        + TAGS  # the message's
    )
    assert RESPONSE.codec(5).encode(body) == wire
    assert RESPONSE.codec(5, compiled=False).encode(body) == wire
    assert RESPONSE.codec(5).decode(wire).results[0].is_cordoned is True
