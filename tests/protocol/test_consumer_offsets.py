"""``__consumer_offsets`` records: Kafka's bytes, every version round-trips, bad input raises DecodeError."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import consumer_offsets as co
from protocol.data import to_plain
from protocol.errors import DecodeError, EncodeError
from protocol.schema import MessageSpec
from protocol.sentinels import NO_LEADER_EPOCH
from tests.protocol.strategies import message_strategy, with_defaults

VALUE_SPECS = [co.OFFSET_COMMIT_VALUE_SPEC, co.GROUP_METADATA_VALUE_SPEC]
VALUE_CASES = [(spec, version) for spec in VALUE_SPECS for version in spec.version_list()]
DECODERS = {
    co.OFFSET_COMMIT_VALUE_SPEC.name: co.decode_offset_commit_value,
    co.GROUP_METADATA_VALUE_SPEC.name: co.decode_group_metadata_value,
}
ENCODERS = {
    co.OFFSET_COMMIT_VALUE_SPEC.name: co.encode_offset_commit_value,
    co.GROUP_METADATA_VALUE_SPEC.name: co.encode_group_metadata_value,
}


def kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


# -- Kafka's bytes ----------------------------------------------------------------------------------


def test_offset_commit_key_bytes() -> None:
    key = co.encode_offset_commit_key("my-group", "orders", 3)
    assert key == b"\x00\x01" + kafka_string("my-group") + kafka_string("orders") + struct.pack(">i", 3)
    assert co.decode_key(key) == co.OffsetCommitKey("my-group", "orders", 3)


def test_offset_commit_key_version_0_is_read_too() -> None:
    key = b"\x00\x00" + kafka_string("g") + kafka_string("t") + struct.pack(">i", 1)
    assert co.decode_key(key) == co.OffsetCommitKey("g", "t", 1)


def test_group_metadata_key_bytes() -> None:
    key = co.encode_group_metadata_key("my-group")
    assert key == b"\x00\x02" + kafka_string("my-group")
    assert co.decode_key(key) == co.GroupMetadataKey("my-group")


def test_unknown_key_versions_are_reported_not_refused() -> None:
    """Versions 9 and up are share and streams groups' records, which kipling does not keep."""
    assert co.decode_key(b"\x00\x0aanything") == co.UnknownKey(10)
    with pytest.raises(DecodeError):
        co.decode_key(b"\x00")


def test_offset_commit_value_version_3_bytes() -> None:
    value = co.encode_offset_commit_value(
        {"offset": 42, "leader_epoch": 5, "metadata": "m", "commit_timestamp": 1000, "expire_timestamp": -1}
    )
    assert value == (b"\x00\x03" + struct.pack(">qi", 42, 5) + kafka_string("m") + struct.pack(">q", 1000))


def test_offset_commit_value_with_an_expire_timestamp_is_version_1() -> None:
    value = co.encode_offset_commit_value(
        {"offset": 42, "leader_epoch": 5, "metadata": "", "commit_timestamp": 1000, "expire_timestamp": 2000}
    )
    assert value == b"\x00\x01" + struct.pack(">q", 42) + kafka_string("") + struct.pack(">qq", 1000, 2000)
    decoded = co.decode_offset_commit_value(value)
    assert decoded.version == 1 and decoded.data.leader_epoch == NO_LEADER_EPOCH


def test_group_metadata_value_version_3_bytes() -> None:
    value = co.encode_group_metadata_value(
        {
            "protocol_type": "consumer",
            "generation": 7,
            "protocol": "range",
            "leader": "m-1",
            "current_state_timestamp": 123,
            "members": [
                {
                    "member_id": "m-1",
                    "group_instance_id": None,
                    "client_id": "c",
                    "client_host": "/10.0.0.1",
                    "rebalance_timeout": 300000,
                    "session_timeout": 45000,
                    "subscription": b"S",
                    "assignment": b"AA",
                }
            ],
        }
    )
    expected = (
        b"\x00\x03"
        + kafka_string("consumer")
        + struct.pack(">i", 7)
        + kafka_string("range")
        + kafka_string("m-1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + kafka_string("m-1")
        + b"\xff\xff"  # null group instance id
        + kafka_string("c")
        + kafka_string("/10.0.0.1")
        + struct.pack(">ii", 300000, 45000)
        + struct.pack(">i", 1)
        + b"S"
        + struct.pack(">i", 2)
        + b"AA"
    )
    assert value == expected


def test_an_empty_group_has_null_protocol_and_leader() -> None:
    value = co.encode_group_metadata_value(
        {"protocol_type": "consumer", "generation": 2, "protocol": None, "leader": None, "members": []}
    )
    assert value == (
        b"\x00\x03"
        + kafka_string("consumer")
        + struct.pack(">i", 2)
        + b"\xff\xff\xff\xff"
        + struct.pack(">qi", -1, 0)
    )


def test_version_4_is_flexible() -> None:
    value = co.encode_group_metadata_value(
        {"protocol_type": "c", "generation": 1, "protocol": None, "leader": None, "members": []}, version=4
    )
    assert (
        value
        == b"\x00\x04" + b"\x02c" + struct.pack(">i", 1) + b"\x00\x00" + struct.pack(">q", -1) + b"\x01\x00"
    )
    assert co.decode_group_metadata_value(value).version == 4


def test_unknown_value_versions_are_refused() -> None:
    with pytest.raises(DecodeError):
        co.decode_offset_commit_value(b"\x00\x05" + b"\x00" * 30)
    with pytest.raises(DecodeError):
        co.decode_group_metadata_value(b"\xff\xff")
    with pytest.raises(EncodeError):
        co.encode_group_metadata_value({}, version=5)


def test_versions_and_constants_are_kafkas() -> None:
    assert co.OFFSET_COMMIT_KEY_SPEC.valid_versions == "0-1"
    assert co.GROUP_METADATA_KEY_SPEC.valid_versions == "2"
    assert co.OFFSET_COMMIT_VALUE_SPEC.valid_versions == "0-4" and co.OFFSET_COMMIT_VALUE_SPEC.is_flexible(4)
    assert (
        co.GROUP_METADATA_VALUE_SPEC.valid_versions == "0-4"
        and not co.GROUP_METADATA_VALUE_SPEC.is_flexible(3)
    )
    assert co.offset_commit_value_version(-1) == 3 and co.offset_commit_value_version(0) == 1


# -- round trips ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "version"), VALUE_CASES, ids=lambda v: getattr(v, "name", str(v)))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_values_round_trip(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(spec, version))
    value = ENCODERS[spec.name](obj, version)
    assert value[:2] == struct.pack(">h", version)
    decoded = DECODERS[spec.name](value)
    assert decoded.version == version
    assert to_plain(decoded.data) == to_plain(with_defaults(spec.fields, version, obj))
    assert ENCODERS[spec.name](decoded.data, version) == value


@given(group=st.text(max_size=20), topic=st.text(max_size=20), partition=st.integers(-(2**31), 2**31 - 1))
def test_keys_round_trip(group: str, topic: str, partition: int) -> None:
    assert co.decode_key(co.encode_offset_commit_key(group, topic, partition)) == (group, topic, partition)
    assert co.decode_key(co.encode_group_metadata_key(group)) == co.GroupMetadataKey(group)


@given(st.binary(max_size=64))
def test_garbage_only_raises_decode_error(garbage: bytes) -> None:
    for decode in (co.decode_key, co.decode_offset_commit_value, co.decode_group_metadata_value):
        with contextlib.suppress(DecodeError):
            decode(garbage)
