"""The consumer-protocol group's records of ``__consumer_offsets`` (KIP-848), byte by byte.

Kafka 4.0's ``group-coordinator/src/main/resources/common/message/ConsumerGroup*.json``: keys at
versions 3 to 8 in the classic encoding, values at version 0 in the flexible one.
"""

from __future__ import annotations

import uuid

import pytest

from protocol import consumer_group_records as cgr
from protocol import consumer_offsets as co
from protocol.data import to_plain

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def _string(text: str) -> bytes:
    return len(text).to_bytes(2, "big") + text.encode()


def _compact(text: str) -> bytes:
    return bytes([len(text) + 1]) + text.encode()


def _i32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


@pytest.mark.parametrize(
    ("key", "wire"),
    [
        (cgr.ConsumerGroupMetadataKey("g"), b"\x00\x03" + _string("g")),
        (cgr.ConsumerGroupPartitionMetadataKey("g"), b"\x00\x04" + _string("g")),
        (cgr.ConsumerGroupMemberMetadataKey("g", "m"), b"\x00\x05" + _string("g") + _string("m")),
        (cgr.ConsumerGroupTargetAssignmentMetadataKey("g"), b"\x00\x06" + _string("g")),
        (cgr.ConsumerGroupTargetAssignmentMemberKey("g", "m"), b"\x00\x07" + _string("g") + _string("m")),
        (cgr.ConsumerGroupCurrentMemberAssignmentKey("g", "m"), b"\x00\x08" + _string("g") + _string("m")),
    ],
)
def test_key_bytes(key: cgr.ConsumerGroupKey, wire: bytes) -> None:
    assert cgr.encode_key(key) == wire
    assert co.decode_key(wire) == key
    assert type(co.decode_key(wire)) is type(key)


def test_group_epoch_value_bytes() -> None:
    key = cgr.ConsumerGroupMetadataKey("g")
    value = cgr.encode_value(key, {"epoch": 7})
    assert value == b"\x00\x00" + _i32(7) + b"\x00"
    assert co.decode_consumer_group_value(key, value).data.epoch == 7


def test_member_metadata_value_bytes() -> None:
    key = cgr.ConsumerGroupMemberMetadataKey("g", "m")
    data = {
        "instance_id": None,
        "rack_id": "r",
        "client_id": "c",
        "client_host": "/h",
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "rebalance_timeout_ms": 300_000,
        "server_assignor": "range",
        "classic_member_metadata": None,
    }
    wire = b"".join(
        [
            b"\x00\x00",  # value version 0
            b"\x00",  # instance_id: null
            _compact("r"),
            _compact("c"),
            _compact("/h"),
            b"\x02" + _compact("t"),
            b"\x00",  # subscribed_topic_regex: null
            _i32(300_000),
            _compact("range"),
            b"\x00",  # no tagged fields (ClassicMemberMetadata is null)
        ]
    )
    assert cgr.encode_value(key, data) == wire
    assert to_plain(co.decode_consumer_group_value(key, wire).data) == data


def test_member_metadata_value_written_by_kafka_for_a_classic_member_is_read() -> None:
    """Tag 0 carries a classic member's session timeout and protocols (a nullable struct: its
    presence byte, then its fields); reading it must not fail."""
    key = cgr.ConsumerGroupMemberMetadataKey("g", "m")
    classic = b"\x01" + _i32(45_000) + b"\x02" + _compact("range") + b"\x02\x01" + b"\x00" + b"\x00"
    wire = b"\x00\x00\x00\x00" + _compact("c") + _compact("h") + b"\x01\x00" + _i32(-1) + b"\x00"
    wire += b"\x01" + b"\x00" + bytes([len(classic)]) + classic
    decoded = co.decode_consumer_group_value(key, wire).data
    assert decoded.classic_member_metadata.session_timeout_ms == 45_000
    assert decoded.classic_member_metadata.supported_protocols[0].metadata == b"\x01"


def test_current_assignment_value_bytes() -> None:
    key = cgr.ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    data = {
        "member_epoch": 3,
        "previous_member_epoch": 2,
        "state": 1,
        "assigned_partitions": [{"topic_id": TOPIC_ID, "partitions": [0]}],
        "partitions_pending_revocation": [{"topic_id": TOPIC_ID, "partitions": [1]}],
    }
    wire = b"".join(
        [
            b"\x00\x00",
            _i32(3),
            _i32(2),
            b"\x01",  # state: UNREVOKED_PARTITIONS
            b"\x02" + TOPIC_ID.bytes + b"\x02" + _i32(0) + b"\x00",
            b"\x02" + TOPIC_ID.bytes + b"\x02" + _i32(1) + b"\x00",
            b"\x00",
        ]
    )
    assert cgr.encode_value(key, data) == wire
    assert to_plain(co.decode_consumer_group_value(key, wire).data) == data


def test_partition_metadata_and_target_assignment_values_bytes() -> None:
    key = cgr.ConsumerGroupPartitionMetadataKey("g")
    topic = {"topic_id": TOPIC_ID, "topic_name": "t", "num_partitions": 3, "partition_metadata": []}
    data = {"topics": [topic]}
    wire = b"\x00\x00" + b"\x02" + TOPIC_ID.bytes + _compact("t") + _i32(3) + b"\x01" + b"\x00" + b"\x00"
    assert cgr.encode_value(key, data) == wire
    target = cgr.ConsumerGroupTargetAssignmentMemberKey("g", "m")
    assert cgr.encode_value(target, {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [2]}]}) == (
        b"\x00\x00" + b"\x02" + TOPIC_ID.bytes + b"\x02" + _i32(2) + b"\x00" + b"\x00"
    )
    epoch = cgr.ConsumerGroupTargetAssignmentMetadataKey("g")
    assert cgr.encode_value(epoch, {"assignment_epoch": 4}) == b"\x00\x00" + _i32(4) + b"\x00"
