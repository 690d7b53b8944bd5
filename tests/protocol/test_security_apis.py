"""The security APIs, declared as data: SaslHandshake, SaslAuthenticate, DescribeAcls, CreateAcls
and DeleteAcls, with the ACL codes of :mod:`protocol.acl_types`.

Every declared version of each request and response carries a representative body through encode
and decode (compiled and interpreted codecs alike); hand-assembled bodies pin the wire layout where
a version changes it (the pattern type from v1, flexible from v2, the session lifetime from v1);
and every version's bytes agree with kafka-python's own codecs, which derive from Kafka's JSON
independently of kipling's. The schema oracle checks the declarations field by field.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import to_plain
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import MessageSpec
from tests.protocol.strategies import message_strategy, with_defaults

DECLARED = {
    # api key: (declared versions, flexible versions), request and response alike
    ApiKey.SASL_HANDSHAKE: ("0-1", "none"),
    ApiKey.SASL_AUTHENTICATE: ("0-2", "2+"),
    ApiKey.DESCRIBE_ACLS: ("1-3", "2+"),  # Kafka 4 removed v0 (KIP-896)
    ApiKey.CREATE_ACLS: ("1-3", "2+"),
    ApiKey.DELETE_ACLS: ("1-3", "2+"),
}

KAFKA_PYTHON_MODULES = {
    ApiKey.SASL_HANDSHAKE: "kafka.protocol.sasl",
    ApiKey.SASL_AUTHENTICATE: "kafka.protocol.sasl",
    ApiKey.DESCRIBE_ACLS: "kafka.protocol.admin.acl",
    ApiKey.CREATE_ACLS: "kafka.protocol.admin.acl",
    ApiKey.DELETE_ACLS: "kafka.protocol.admin.acl",
}


def _i8(value: int) -> bytes:
    return value.to_bytes(1, "big", signed=True)


def _i16(value: int) -> bytes:
    return value.to_bytes(2, "big", signed=True)


def _i32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def _i64(value: int) -> bytes:
    return value.to_bytes(8, "big", signed=True)


def _str(text: str) -> bytes:
    """Classic string: int16 length, then the bytes."""
    return _i16(len(text)) + text.encode()


def _cstr(text: str) -> bytes:
    """Compact string: unsigned varint length + 1 (every length here fits one byte)."""
    return bytes([len(text) + 1]) + text.encode()


NULL_STR = _i16(-1)
NULL_CSTR = b"\x00"
TAGS = b"\x00"  # an empty tag buffer

TOPIC = int(ResourceType.TOPIC)
PREFIXED = int(PatternType.PREFIXED)
READ = int(AclOperation.READ)
ALLOW = int(AclPermissionType.ALLOW)
DENY = int(AclPermissionType.DENY)

# -- representative bodies: every field of every version, none at its default --------------------

_BINDING = {
    "resource_type": TOPIC,
    "resource_name": "orders",
    "principal": "User:alice",
    "host": "*",
    "operation": READ,
    "permission_type": ALLOW,
}

SAMPLES: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {
    ApiKey.SASL_HANDSHAKE: (
        {"mechanism": "SCRAM-SHA-256"},
        {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]},
    ),
    ApiKey.SASL_AUTHENTICATE: (
        {"auth_bytes": b"\x00alice\x00secret"},
        {
            "error_code": 58,
            "error_message": "Authentication failed",
            "auth_bytes": b"r=nonce,s=salt,i=4096",
            "session_lifetime_ms": 3_600_000,
        },
    ),
    ApiKey.DESCRIBE_ACLS: (
        {
            "resource_type_filter": TOPIC,
            "resource_name_filter": "orders",
            "pattern_type_filter": int(PatternType.MATCH),
            "principal_filter": None,
            "host_filter": "10.0.0.1",
            "operation": int(AclOperation.ANY),
            "permission_type": int(AclPermissionType.ANY),
        },
        {
            "throttle_time_ms": 5,
            "error_code": 0,
            "error_message": None,
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": "orders",
                    "pattern_type": PREFIXED,
                    "acls": [
                        {"principal": "User:a", "host": "*", "operation": READ, "permission_type": ALLOW},
                        {"principal": "User:b", "host": "10.0.0.1", "operation": 4, "permission_type": DENY},
                    ],
                },
                {"resource_type": 4, "resource_name": "kafka-cluster", "pattern_type": 3, "acls": []},
            ],
        },
    ),
    ApiKey.CREATE_ACLS: (
        {"creations": [{**_BINDING, "resource_pattern_type": PREFIXED}]},
        {
            "throttle_time_ms": 5,
            "results": [
                {"error_code": 0, "error_message": None},
                {"error_code": 87, "error_message": "invalid principal"},
            ],
        },
    ),
    ApiKey.DELETE_ACLS: (
        {
            "filters": [
                {
                    "resource_type_filter": int(ResourceType.ANY),
                    "resource_name_filter": None,
                    "pattern_type_filter": PREFIXED,
                    "principal_filter": "User:alice",
                    "host_filter": None,
                    "operation": int(AclOperation.ALL),
                    "permission_type": ALLOW,
                }
            ]
        },
        {
            "throttle_time_ms": 5,
            "filter_results": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [
                        {"error_code": 0, "error_message": None, **_BINDING, "pattern_type": PREFIXED}
                    ],
                },
                {"error_code": 31, "error_message": "not authorized", "matching_acls": []},
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
SPEC_VERSIONS = [(spec, version) for spec, _, version in CASES]


@pytest.mark.parametrize("api_key", list(DECLARED), ids=lambda key: key.message_name)
def test_declared_versions(api_key: ApiKey) -> None:
    valid, flexible = DECLARED[api_key]
    for spec in (REQUESTS[api_key], RESPONSES[api_key]):
        assert spec.api_key == api_key
        assert (spec.valid_versions, spec.flexible_versions) == (valid, flexible), spec.name


@pytest.mark.parametrize(("spec", "sample", "version"), CASES, ids=IDS)
def test_representative_body_round_trips(spec: MessageSpec, sample: dict[str, Any], version: int) -> None:
    compiled = spec.codec(version)
    interpreted = spec.codec(version, compiled=False)
    encoded = compiled.encode(sample)
    assert interpreted.encode(sample) == encoded
    expected = to_plain(with_defaults(spec.fields, version, sample))
    assert to_plain(compiled.decode(encoded)) == expected
    assert to_plain(interpreted.decode(encoded)) == expected
    assert compiled.encode(compiled.decode(encoded)) == encoded


def _check(spec: MessageSpec, version: int, data: dict[str, Any], wire: bytes) -> Any:
    """``data`` encodes to exactly ``wire`` (both codecs) and ``wire`` decodes back to it."""
    assert spec.codec(version).encode(data) == wire
    assert spec.codec(version, compiled=False).encode(data) == wire
    decoded = spec.codec(version).decode(wire)
    assert to_plain(spec.codec(version, compiled=False).decode(wire)) == to_plain(decoded)
    return decoded


# -- SaslHandshake and SaslAuthenticate ------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_handshake_bytes_are_the_same_in_both_versions(version: int) -> None:
    _check(REQUESTS[ApiKey.SASL_HANDSHAKE], version, {"mechanism": "PLAIN"}, _str("PLAIN"))
    wire = _i16(0) + _i32(2) + _str("PLAIN") + _str("SCRAM-SHA-256")
    _check(
        RESPONSES[ApiKey.SASL_HANDSHAKE],
        version,
        {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]},
        wire,
    )


def test_sasl_authenticate_v0_has_no_session_lifetime() -> None:
    data = {"error_code": 0, "error_message": None, "auth_bytes": b"ok"}
    wire = _i16(0) + NULL_STR + _i32(2) + b"ok"
    decoded = _check(RESPONSES[ApiKey.SASL_AUTHENTICATE], 0, data, wire)
    assert decoded.session_lifetime_ms == 0  # no limit
    _check(REQUESTS[ApiKey.SASL_AUTHENTICATE], 0, {"auth_bytes": b"tok"}, _i32(3) + b"tok")


def test_sasl_authenticate_v1_carries_the_session_lifetime() -> None:
    data = {"error_code": 58, "error_message": "bad", "auth_bytes": b"", "session_lifetime_ms": 60_000}
    wire = _i16(58) + _str("bad") + _i32(0) + _i64(60_000)
    _check(RESPONSES[ApiKey.SASL_AUTHENTICATE], 1, data, wire)


def test_sasl_authenticate_v2_is_flexible() -> None:
    _check(REQUESTS[ApiKey.SASL_AUTHENTICATE], 2, {"auth_bytes": b"tok"}, b"\x04tok" + TAGS)
    data = {"error_code": 0, "error_message": None, "auth_bytes": b"ok", "session_lifetime_ms": 7}
    wire = _i16(0) + NULL_CSTR + b"\x03ok" + _i64(7) + TAGS
    _check(RESPONSES[ApiKey.SASL_AUTHENTICATE], 2, data, wire)


# -- the ACL APIs ----------------------------------------------------------------------------------


def test_describe_acls_v1_request_bytes() -> None:
    data = {
        "resource_type_filter": TOPIC,
        "resource_name_filter": None,
        "pattern_type_filter": PREFIXED,
        "principal_filter": "User:a",
        "host_filter": None,
        "operation": READ,
        "permission_type": ALLOW,
    }
    wire = _i8(TOPIC) + NULL_STR + _i8(PREFIXED) + _str("User:a") + NULL_STR + _i8(READ) + _i8(ALLOW)
    _check(REQUESTS[ApiKey.DESCRIBE_ACLS], 1, data, wire)


def test_describe_acls_pattern_type_filter_defaults_to_literal() -> None:
    codec = REQUESTS[ApiKey.DESCRIBE_ACLS].codec(3)
    decoded = codec.decode(codec.encode({"resource_type_filter": TOPIC}))
    assert decoded.pattern_type_filter == PatternType.LITERAL
    assert decoded.resource_name_filter == ""  # nullable, but not null by default (as Kafka)


def test_describe_acls_v2_response_is_flexible() -> None:
    data = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "resources": [
            {
                "resource_type": TOPIC,
                "resource_name": "t",
                "pattern_type": 3,
                "acls": [{"principal": "User:a", "host": "*", "operation": READ, "permission_type": ALLOW}],
            }
        ],
    }
    acl = _cstr("User:a") + _cstr("*") + _i8(READ) + _i8(ALLOW) + TAGS
    resource = _i8(TOPIC) + _cstr("t") + _i8(3) + b"\x02" + acl + TAGS
    wire = _i32(0) + _i16(0) + NULL_CSTR + b"\x02" + resource + TAGS
    _check(RESPONSES[ApiKey.DESCRIBE_ACLS], 2, data, wire)


def test_create_acls_v1_request_bytes() -> None:
    data = {"creations": [{**_BINDING, "resource_pattern_type": PREFIXED}]}
    creation = (
        _i8(TOPIC) + _str("orders") + _i8(PREFIXED) + _str("User:alice") + _str("*") + _i8(READ) + _i8(ALLOW)
    )
    _check(REQUESTS[ApiKey.CREATE_ACLS], 1, data, _i32(1) + creation)


def test_create_acls_resource_pattern_type_defaults_to_literal() -> None:
    codec = REQUESTS[ApiKey.CREATE_ACLS].codec(2)
    decoded = codec.decode(codec.encode({"creations": [_BINDING]}))
    assert decoded.creations[0].resource_pattern_type == PatternType.LITERAL


def test_delete_acls_v3_response_bytes() -> None:
    matching = {"error_code": 0, "error_message": None, **_BINDING, "pattern_type": 3}
    data = {
        "throttle_time_ms": 1,
        "filter_results": [{"error_code": 0, "error_message": None, "matching_acls": [matching]}],
    }
    acl = (
        _i16(0)
        + NULL_CSTR
        + _i8(TOPIC)
        + _cstr("orders")
        + _i8(3)
        + _cstr("User:alice")
        + _cstr("*")
        + _i8(READ)
        + _i8(ALLOW)
        + TAGS
    )
    result = _i16(0) + NULL_CSTR + b"\x02" + acl + TAGS
    _check(RESPONSES[ApiKey.DELETE_ACLS], 3, data, _i32(1) + b"\x02" + result + TAGS)


# -- kafka-python, byte for byte --------------------------------------------------------------------


def _kafka_python_class(spec: MessageSpec) -> Any:
    module = pytest.importorskip(KAFKA_PYTHON_MODULES[ApiKey(spec.api_key)])
    return getattr(module, spec.name)


@pytest.mark.parametrize(("spec", "version"), SPEC_VERSIONS, ids=IDS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_bytes_match_kafka_python(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    """kafka-python decodes kipling's bytes and encodes them back unchanged, and kipling reads
    what kafka-python writes: the two codecs agree on every byte of every version."""
    theirs = _kafka_python_class(spec)
    ours = spec.codec(version)
    wire = ours.encode(data.draw(message_strategy(spec, version)))
    decoded = theirs.decode(wire, version=version)
    assert version == decoded.API_VERSION
    theirs_wire = bytes(decoded.encode())
    assert theirs_wire == wire
    assert ours.encode(ours.decode(theirs_wire)) == wire


# -- the ACL codes ----------------------------------------------------------------------------------


def _kafka_python_acl_enums() -> Any:
    return pytest.importorskip("kafka.admin._acls")


@pytest.mark.parametrize(
    ("ours", "their_name"),
    [
        (ResourceType, "ResourceType"),
        (PatternType, "ACLResourcePatternType"),
        (AclOperation, "ACLOperation"),
        (AclPermissionType, "ACLPermissionType"),
    ],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_acl_codes_agree_with_kafka_python(ours: type[IntEnum], their_name: str) -> None:
    """kafka-python's enums are Kafka's, bar the operations Kafka added since (TWO_PHASE_COMMIT)."""
    theirs = getattr(_kafka_python_acl_enums(), their_name)
    assert {m.name: m.value for m in theirs}.items() <= {m.name: m.value for m in ours}.items()


def test_acl_codes_are_kafkas() -> None:
    assert [(m.name, m.value) for m in ResourceType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("TOPIC", 2),
        ("GROUP", 3),
        ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6),
        ("USER", 7),
    ]
    assert [(m.name, m.value) for m in PatternType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("MATCH", 2),
        ("LITERAL", 3),
        ("PREFIXED", 4),
    ]
    assert [m.value for m in AclOperation] == list(range(16))
    assert (AclOperation.ALL, AclOperation.IDEMPOTENT_WRITE, AclOperation.TWO_PHASE_COMMIT) == (2, 12, 15)
    permissions = [(m.name, m.value) for m in AclPermissionType]
    assert permissions == [("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3)]
