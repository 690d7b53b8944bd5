"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), declared as data.

Each declared version (only v0, flexible) carries a representative body through both codecs;
hand-assembled bytes pin the layout (compact strings and bytes, a null users array, tag buffers);
and kafka-python's codecs, derived from Kafka's JSON independently of kipling's, read kipling's
bytes and write them back unchanged. tests/protocol/test_schema_oracle.py checks the fields one by one.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.api_keys import ApiKey
from protocol.data import to_plain
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import MessageSpec
from tests.protocol.strategies import message_strategy, with_defaults

pytestmark = pytest.mark.timeout(60)

KEYS = (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
TAGS = b"\x00"
NULL_CSTR = b"\x00"


def _i16(value: int) -> bytes:
    return value.to_bytes(2, "big", signed=True)


def _i32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def _compact(data: bytes) -> bytes:
    """Compact string or bytes: unsigned varint length + 1 (every length here fits one byte)."""
    return bytes([len(data) + 1]) + data


SAMPLES: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
        {"users": [{"name": "alice"}, {"name": "bob"}]},
        {
            "throttle_time_ms": 3,
            "error_code": 0,
            "error_message": None,
            "results": [
                {
                    "user": "alice",
                    "error_code": 0,
                    "error_message": None,
                    "credential_infos": [
                        {"mechanism": 1, "iterations": 8192},
                        {"mechanism": 2, "iterations": 4096},
                    ],
                },
                {
                    "user": "bob",
                    "error_code": 91,
                    "error_message": "Attempt to describe a user credential that does not exist",
                    "credential_infos": [],
                },
            ],
        },
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (
        {
            "deletions": [{"name": "bob", "mechanism": 2}],
            "upsertions": [
                {
                    "name": "alice",
                    "mechanism": 1,
                    "iterations": 8192,
                    "salt": b"salt",
                    "salted_password": bytes(range(32)),
                }
            ],
        },
        {
            "throttle_time_ms": 3,
            "results": [
                {"user": "alice", "error_code": 0, "error_message": None},
                {"user": "bob", "error_code": 91, "error_message": "no such credential"},
            ],
        },
    ),
}

CASES = [
    (spec, sample, version)
    for key, samples in SAMPLES.items()
    for spec, sample in zip((REQUESTS[key], RESPONSES[key]), samples)
    for version in spec.version_list()
]
IDS = [f"{spec.name}-v{version}" for spec, _, version in CASES]


@pytest.mark.parametrize("api_key", KEYS, ids=lambda key: key.message_name)
def test_declared_versions(api_key: ApiKey) -> None:
    for spec in (REQUESTS[api_key], RESPONSES[api_key]):
        assert spec.api_key == api_key
        assert (spec.valid_versions, spec.flexible_versions) == ("0", "0+"), spec.name


@pytest.mark.parametrize(("spec", "sample", "version"), CASES, ids=IDS)
def test_representative_body_round_trips(spec: MessageSpec, sample: dict[str, Any], version: int) -> None:
    compiled = spec.codec(version)
    interpreted = spec.codec(version, compiled=False)
    encoded = compiled.encode(sample)
    assert interpreted.encode(sample) == encoded
    expected = to_plain(with_defaults(spec.fields, version, sample))
    assert to_plain(compiled.decode(encoded)) == expected
    assert to_plain(interpreted.decode(encoded)) == expected


def _check(spec: MessageSpec, data: dict[str, Any], wire: bytes) -> Any:
    """``data`` encodes to exactly ``wire`` (both codecs) and ``wire`` decodes back to it."""
    assert spec.codec(0).encode(data) == wire
    assert spec.codec(0, compiled=False).encode(data) == wire
    decoded = spec.codec(0).decode(wire)
    assert to_plain(spec.codec(0, compiled=False).decode(wire)) == to_plain(decoded)
    return decoded


def test_describe_request_null_users_means_all() -> None:
    spec = REQUESTS[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS]
    assert _check(spec, {"users": None}, b"\x00" + TAGS).users is None
    wire = b"\x02" + _compact(b"alice") + TAGS + TAGS
    assert [u.name for u in _check(spec, {"users": [{"name": "alice"}]}, wire).users] == ["alice"]


def test_describe_response_bytes() -> None:
    data = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "results": [
            {
                "user": "a",
                "error_code": 0,
                "error_message": None,
                "credential_infos": [{"mechanism": 2, "iterations": 4096}],
            }
        ],
    }
    info = b"\x02" + _i32(4096) + TAGS
    result = _compact(b"a") + _i16(0) + NULL_CSTR + b"\x02" + info + TAGS
    wire = _i32(0) + _i16(0) + NULL_CSTR + b"\x02" + result + TAGS
    _check(RESPONSES[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS], data, wire)


def test_alter_request_bytes() -> None:
    data = {
        "deletions": [{"name": "b", "mechanism": 1}],
        "upsertions": [
            {"name": "a", "mechanism": 2, "iterations": 4096, "salt": b"s", "salted_password": b"pw"}
        ],
    }
    deletion = _compact(b"b") + b"\x01" + TAGS
    upsertion = _compact(b"a") + b"\x02" + _i32(4096) + _compact(b"s") + _compact(b"pw") + TAGS
    wire = b"\x02" + deletion + b"\x02" + upsertion + TAGS
    _check(REQUESTS[ApiKey.ALTER_USER_SCRAM_CREDENTIALS], data, wire)


def test_alter_response_bytes() -> None:
    data = {"throttle_time_ms": 0, "results": [{"user": "a", "error_code": 93, "error_message": "x"}]}
    result = _compact(b"a") + _i16(93) + _compact(b"x") + TAGS
    _check(RESPONSES[ApiKey.ALTER_USER_SCRAM_CREDENTIALS], data, _i32(0) + b"\x02" + result + TAGS)


@pytest.mark.parametrize(("spec", "version"), [(s, v) for s, _, v in CASES], ids=IDS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_bytes_match_kafka_python(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    """kafka-python decodes kipling's bytes and encodes them back unchanged, and kipling reads
    what kafka-python writes."""
    module = pytest.importorskip("kafka.protocol.admin")
    theirs = getattr(module, spec.name)
    ours = spec.codec(version)
    wire = ours.encode(data.draw(message_strategy(spec, version)))
    decoded = theirs.decode(wire, version=version)
    assert version == decoded.API_VERSION
    theirs_wire = bytes(decoded.encode())
    assert theirs_wire == wire
    assert ours.encode(ours.decode(theirs_wire)) == wire
