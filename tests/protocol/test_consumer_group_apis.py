"""KIP-848's APIs, byte by byte: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

kafka-python ships neither JSON, so the schema oracle skips them (NOT_IN_ORACLE); these
hand-assembled bodies pin what Apache Kafka 4.0's message files say: both flexible from v0,
Heartbeat v1 adding SubscribedTopicRegex after SubscribedTopicNames, Describe v1 adding each
member's MemberType after its TargetAssignment, the nullable fields and their null defaults. Every
version of each is also swept by the generic round-trip, truncation and unknown-key tests.
"""

from __future__ import annotations

import uuid

import pytest

from protocol.api_keys import ApiKey
from protocol.data import to_plain
from protocol.messages import REQUESTS, RESPONSES

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
HEARTBEAT = REQUESTS[ApiKey.CONSUMER_GROUP_HEARTBEAT]
HEARTBEAT_RESPONSE = RESPONSES[ApiKey.CONSUMER_GROUP_HEARTBEAT]
DESCRIBE = REQUESTS[ApiKey.CONSUMER_GROUP_DESCRIBE]
DESCRIBE_RESPONSE = RESPONSES[ApiKey.CONSUMER_GROUP_DESCRIBE]


def _i32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def _s(text: str) -> bytes:
    """A compact string: its length + 1 as one varint byte (short strings only), then UTF-8."""
    return bytes([len(text) + 1]) + text.encode()


@pytest.mark.parametrize("api_key", [ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE])
def test_kafka_4_versions(api_key: ApiKey) -> None:
    for spec in (REQUESTS[api_key], RESPONSES[api_key]):
        assert (spec.valid_versions, spec.flexible_versions) == ("0-1", "0+"), spec.name
        assert spec.name.startswith(api_key.message_name)


JOIN = {
    "group_id": "g",
    "member_id": "m",
    "member_epoch": 0,
    "instance_id": None,
    "rack_id": None,
    "rebalance_timeout_ms": 300_000,
    "subscribed_topic_names": ["t"],
    "subscribed_topic_regex": None,
    "server_assignor": "uniform",
    "topic_partitions": [],
}
JOIN_V0 = b"".join(
    [
        _s("g"),
        _s("m"),
        _i32(0),  # member_epoch
        b"\x00",  # instance_id: null
        b"\x00",  # rack_id: null
        _i32(300_000),  # rebalance_timeout_ms
        b"\x02" + _s("t"),  # subscribed_topic_names: compact array of 1
        _s("uniform"),  # server_assignor
        b"\x01",  # topic_partitions: compact array of 0
        b"\x00",  # tag buffer
    ]
)


def test_heartbeat_join_request_v0_and_v1_bytes() -> None:
    assert HEARTBEAT.codec(0).encode(JOIN) == JOIN_V0
    v1 = HEARTBEAT.codec(1).encode({**JOIN, "subscribed_topic_regex": "^t.*"})
    names = b"\x02" + _s("t")
    assert v1 == JOIN_V0.replace(names, names + _s("^t.*"))
    assert to_plain(HEARTBEAT.codec(1).decode(v1)) == {**JOIN, "subscribed_topic_regex": "^t.*"}
    assert HEARTBEAT.codec(0).decode(JOIN_V0).subscribed_topic_regex is None


def test_heartbeat_request_defaults_are_nulls_and_minus_one() -> None:
    """A steady heartbeat sends only group, member and epoch: the rest is null or -1."""
    nulls = b"\x00" * 4  # subscribed names, regex, server assignor, owned partitions
    body = _s("g") + _s("m") + _i32(3) + b"\x00\x00" + _i32(-1) + nulls + b"\x00"
    decoded = HEARTBEAT.codec(1).decode(body)
    assert decoded.member_epoch == 3
    assert decoded.rebalance_timeout_ms == -1
    assert decoded.subscribed_topic_names is None
    assert decoded.topic_partitions is None
    assert HEARTBEAT.codec(1).encode({"group_id": "g", "member_id": "m", "member_epoch": 3}) == body


def test_heartbeat_response_with_assignment_bytes() -> None:
    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": "m",
        "member_epoch": 5,
        "heartbeat_interval_ms": 5000,
        "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 2]}]},
    }
    wire = b"".join(
        [
            _i32(0),
            b"\x00\x00",  # error_code
            b"\x00",  # error_message: null
            _s("m"),
            _i32(5),
            _i32(5000),
            b"\x01",  # assignment: present (nullable struct marker)
            b"\x02",  # topic_partitions: compact array of 1
            TOPIC_ID.bytes,
            b"\x03" + _i32(0) + _i32(2),  # partitions: compact array of 2
            b"\x00",  # topic partition's tag buffer
            b"\x00",  # assignment's tag buffer
            b"\x00",  # response tag buffer
        ]
    )
    for version in (0, 1):
        assert HEARTBEAT_RESPONSE.codec(version).encode(response) == wire
        assert to_plain(HEARTBEAT_RESPONSE.codec(version).decode(wire)) == response


def test_heartbeat_response_without_assignment() -> None:
    wire = HEARTBEAT_RESPONSE.codec(1).encode(
        {"error_code": 110, "error_message": "fenced", "member_epoch": -1, "heartbeat_interval_ms": 0}
    )
    assert wire == _i32(0) + b"\x00\x6e" + _s("fenced") + b"\x00" + _i32(-1) + _i32(0) + b"\xff" + b"\x00"


def _described(member_type: int = 1) -> dict[str, object]:
    assignment = {"topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "t", "partitions": [1]}]}
    return {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": 0,
                "error_message": None,
                "group_id": "g",
                "group_state": "Stable",
                "group_epoch": 3,
                "assignment_epoch": 3,
                "assignor_name": "uniform",
                "members": [
                    {
                        "member_id": "m",
                        "instance_id": None,
                        "rack_id": None,
                        "member_epoch": 3,
                        "client_id": "c",
                        "client_host": "/h",
                        "subscribed_topic_names": ["t"],
                        "subscribed_topic_regex": None,
                        "assignment": assignment,
                        "target_assignment": assignment,
                        "member_type": member_type,
                    }
                ],
                "authorized_operations": -2147483648,
            }
        ],
    }


def test_describe_response_v0_and_v1_bytes() -> None:
    topic_partitions = b"\x02" + TOPIC_ID.bytes + _s("t") + b"\x02" + _i32(1) + b"\x00"
    assignment = topic_partitions + b"\x00"
    member_v0 = b"".join(
        [
            _s("m"),
            b"\x00\x00",  # instance_id, rack_id: null
            _i32(3),
            _s("c"),
            _s("/h"),
            b"\x02" + _s("t"),
            b"\x00",  # subscribed_topic_regex: null
            assignment,
            assignment,
        ]
    )
    group_head = b"\x00\x00" + b"\x00" + _s("g") + _s("Stable") + _i32(3) + _i32(3) + _s("uniform")
    tail = _i32(-2147483648) + b"\x00" + b"\x00"  # authorized ops, group tags, response tags
    v0 = _i32(0) + b"\x02" + group_head + b"\x02" + member_v0 + b"\x00" + tail
    v1 = _i32(0) + b"\x02" + group_head + b"\x02" + member_v0 + b"\x01" + b"\x00" + tail
    assert DESCRIBE_RESPONSE.codec(0).encode(_described()) == v0
    assert DESCRIBE_RESPONSE.codec(1).encode(_described()) == v1
    assert to_plain(DESCRIBE_RESPONSE.codec(1).decode(v1)) == _described()
    assert DESCRIBE_RESPONSE.codec(0).decode(v0).groups[0].members[0].member_type == -1


def test_describe_request_bytes() -> None:
    wire = b"\x03" + _s("a") + _s("b") + b"\x01" + b"\x00"
    for version in (0, 1):
        codec = DESCRIBE.codec(version)
        assert codec.encode({"group_ids": ["a", "b"], "include_authorized_operations": True}) == wire
        assert codec.decode(wire).group_ids == ["a", "b"]
