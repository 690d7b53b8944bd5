"""The controller APIs, byte by byte: BrokerRegistration, BrokerHeartbeat, AlterPartition,
AllocateProducerIds.

kafka-python ships no JSON for these controller-only APIs, so the schema oracle skips them; these
hand-assembled bodies pin what Apache Kafka's message files say instead (field order, compact
encodings, the uint16 port, tagged fields, and the fields that change between versions).
"""

from __future__ import annotations

import uuid

import pytest

from protocol.api_keys import ApiKey
from protocol.data import to_plain
from protocol.errors import DecodeError, EncodeError
from protocol.messages import REQUESTS, RESPONSES

REGISTRATION = REQUESTS[ApiKey.BROKER_REGISTRATION]
HEARTBEAT = REQUESTS[ApiKey.BROKER_HEARTBEAT]
ALTER_PARTITION = REQUESTS[ApiKey.ALTER_PARTITION]

INCARNATION = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_ID = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
LOG_DIR = uuid.UUID(int=7)


def _registration(**extra: object) -> dict[str, object]:
    return {
        "broker_id": 1,
        "cluster_id": "c",
        "incarnation_id": INCARNATION,
        "listeners": [{"name": "L", "host": "h", "port": 9092, "security_protocol": 0}],
        "features": [{"name": "f", "min_supported_version": 0, "max_supported_version": 3}],
        "rack": None,
        **extra,
    }


REGISTRATION_V0 = b"".join(
    [
        bytes.fromhex("00000001"),  # broker_id
        b"\x02c",  # cluster_id: compact string, length + 1
        INCARNATION.bytes,  # incarnation_id: 16 raw bytes, big-endian
        b"\x02",  # listeners: compact array of 1
        b"\x02L\x02h",  # name, host
        bytes.fromhex("2384"),  # port 9092 as uint16
        bytes.fromhex("0000"),  # security_protocol
        b"\x00",  # listener's tag buffer
        b"\x02",  # features: compact array of 1
        b"\x02f" + bytes.fromhex("0000 0003") + b"\x00",
        b"\x00",  # rack: null compact string
        b"\x00",  # top-level tag buffer
    ]
)


def test_broker_registration_v0_bytes() -> None:
    codec = REGISTRATION.codec(0)
    assert codec.encode(_registration()) == REGISTRATION_V0
    decoded = codec.decode(REGISTRATION_V0)
    assert decoded.incarnation_id == INCARNATION
    assert decoded.listeners[0].port == 9092
    assert decoded.rack is None
    assert decoded.previous_broker_epoch == -1  # absent before v3: the declared default
    assert decoded.log_dirs == []


def test_broker_registration_later_versions_append_fields() -> None:
    data = _registration(is_migrating_zk_broker=True, log_dirs=[LOG_DIR], previous_broker_epoch=41)
    v1 = REGISTRATION.codec(1).encode(data)
    v2 = REGISTRATION.codec(2).encode(data)
    v3 = REGISTRATION.codec(3).encode(data)
    body = REGISTRATION_V0[:-1]  # everything up to the top-level tag buffer
    assert v1 == body + b"\x01" + b"\x00"
    assert v2 == body + b"\x01" + b"\x02" + LOG_DIR.bytes + b"\x00"
    assert v3 == v2[:-1] + (41).to_bytes(8, "big") + b"\x00"
    assert REGISTRATION.codec(4).encode(data) == v3  # v4 only relaxed a rule on features
    assert to_plain(REGISTRATION.codec(3).decode(v3)) == to_plain({**data, "log_dirs": [LOG_DIR]})


@pytest.mark.parametrize(("port", "wire"), [(0, b"\x00\x00"), (443, b"\x01\xbb"), (65535, b"\xff\xff")])
def test_listener_port_is_unsigned_16_bit(port: int, wire: bytes) -> None:
    data = _registration(listeners=[{"name": "L", "host": "h", "port": port, "security_protocol": 0}])
    encoded = REGISTRATION.codec(0).encode(data)
    assert encoded[: len(REGISTRATION_V0)] == REGISTRATION_V0.replace(bytes.fromhex("2384"), wire, 1)
    assert REGISTRATION.codec(0).decode(encoded).listeners[0].port == port
    assert REGISTRATION.codec(0, compiled=False).decode(encoded).listeners[0].port == port


@pytest.mark.parametrize("port", [-1, 65536])
@pytest.mark.parametrize("compiled", [True, False])
def test_listener_port_out_of_range_is_an_encode_error(port: int, compiled: bool) -> None:
    data = _registration(listeners=[{"name": "L", "host": "h", "port": port, "security_protocol": 0}])
    with pytest.raises(EncodeError):
        REGISTRATION.codec(0, compiled=compiled).encode(data)


def test_broker_registration_response_default_epoch() -> None:
    codec = RESPONSES[ApiKey.BROKER_REGISTRATION].codec(0)
    encoded = codec.encode({"throttle_time_ms": 0, "error_code": 0})
    assert encoded == bytes.fromhex("00000000 0000 ffffffffffffffff 00")
    assert codec.decode(encoded).broker_epoch == -1


HEARTBEAT_V0 = bytes.fromhex(
    "00000002"  # broker_id
    "0000000000000009"  # broker_epoch
    "0000000000000064"  # current_metadata_offset 100
    "00"  # want_fence
    "01"  # want_shut_down
    "00"  # tag buffer
)
HEARTBEAT_DATA = {
    "broker_id": 2,
    "broker_epoch": 9,
    "current_metadata_offset": 100,
    "want_fence": False,
    "want_shut_down": True,
}


def test_broker_heartbeat_offline_log_dirs_is_tag_0() -> None:
    assert HEARTBEAT.codec(0).encode(HEARTBEAT_DATA) == HEARTBEAT_V0
    # No offline directory: nothing tagged, so v1 is byte-identical to v0.
    assert HEARTBEAT.codec(1).encode({**HEARTBEAT_DATA, "offline_log_dirs": []}) == HEARTBEAT_V0
    encoded = HEARTBEAT.codec(1).encode({**HEARTBEAT_DATA, "offline_log_dirs": [LOG_DIR]})
    tagged = b"\x01" + b"\x00" + b"\x11" + b"\x02" + LOG_DIR.bytes  # 1 field, tag 0, 17 bytes
    assert encoded == HEARTBEAT_V0[:-1] + tagged
    decoded = HEARTBEAT.codec(1).decode(encoded)
    assert decoded.offline_log_dirs == [LOG_DIR]
    assert decoded.present_tags == frozenset({0})
    assert HEARTBEAT.codec(1).encode(decoded) == encoded


def test_broker_heartbeat_response_defaults_to_fenced() -> None:
    codec = RESPONSES[ApiKey.BROKER_HEARTBEAT].codec(1)
    encoded = codec.encode({"throttle_time_ms": 0, "error_code": 0})
    assert encoded == bytes.fromhex("00000000 0000 00 01 00 00")
    decoded = codec.decode(encoded)
    assert (decoded.is_caught_up, decoded.is_fenced, decoded.should_shut_down) == (False, True, False)


def _alter_partition(version: int) -> dict[str, object]:
    topic: dict[str, object] = {"topic_name": "t"} if version < 2 else {"topic_id": TOPIC_ID}
    partition = {
        "partition_index": 0,
        "leader_epoch": 5,
        "new_isr": [1, 2],
        "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 10}, {"broker_id": 2, "broker_epoch": 11}],
        "leader_recovery_state": 0,
        "partition_epoch": 7,
    }
    return {"broker_id": 1, "broker_epoch": 10, "topics": [{**topic, "partitions": [partition]}]}


ALTER_PARTITION_HEAD = bytes.fromhex("00000001 000000000000000a 02")  # broker, epoch, 1 topic
PARTITION_HEAD = b"\x02" + bytes.fromhex("00000000 00000005")  # 1 partition: index, leader_epoch
PARTITION_TAIL = bytes.fromhex("00 00000007 00 00")  # recovery state, epoch, 2 tag buffers


def test_alter_partition_v1_names_topics_v2_identifies_them() -> None:
    v1 = ALTER_PARTITION.codec(1).encode(_alter_partition(1))
    v2 = ALTER_PARTITION.codec(2).encode(_alter_partition(2))
    isr = b"\x03" + bytes.fromhex("00000001 00000002")
    assert v1 == ALTER_PARTITION_HEAD + b"\x02t" + PARTITION_HEAD + isr + PARTITION_TAIL + b"\x00"
    assert v2 == ALTER_PARTITION_HEAD + TOPIC_ID.bytes + PARTITION_HEAD + isr + PARTITION_TAIL + b"\x00"
    assert ALTER_PARTITION.codec(2).decode(v2).topics[0].topic_name == ""


def test_alter_partition_v3_sends_isr_with_broker_epochs() -> None:
    v2 = ALTER_PARTITION.codec(2).encode(_alter_partition(2))
    v3 = ALTER_PARTITION.codec(3).encode(_alter_partition(3))
    members = b"\x03" + bytes.fromhex("00000001 000000000000000a 00  00000002 000000000000000b 00")
    assert v3 == ALTER_PARTITION_HEAD + TOPIC_ID.bytes + PARTITION_HEAD + members + PARTITION_TAIL + b"\x00"
    assert len(v3) - len(v2) == 2 * (8 + 1)  # per member: its epoch and its own tag buffer
    p2 = ALTER_PARTITION.codec(2).decode(v2).topics[0].partitions[0]
    p3 = ALTER_PARTITION.codec(3).decode(v3).topics[0].partitions[0]
    assert (p2.new_isr, p2.new_isr_with_epochs) == ([1, 2], [])
    assert p3.new_isr == []
    assert [(m.broker_id, m.broker_epoch) for m in p3.new_isr_with_epochs] == [(1, 10), (2, 11)]


def test_alter_partition_response_v2_roundtrip() -> None:
    codec = RESPONSES[ApiKey.ALTER_PARTITION].codec(2)
    partition = {
        "partition_index": 3,
        "error_code": 0,
        "leader_id": 1,
        "leader_epoch": 5,
        "isr": [1, 2, 3],
        "leader_recovery_state": 1,
        "partition_epoch": 8,
    }
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "topics": [{"topic_id": TOPIC_ID, "partitions": [partition]}],
    }
    encoded = codec.encode(body)
    assert encoded[6:23] == b"\x02" + TOPIC_ID.bytes
    decoded = codec.decode(encoded)
    assert to_plain(decoded.topics[0].partitions[0]) == partition
    assert codec.encode(decoded) == encoded


@pytest.mark.parametrize("compiled", [True, False])
def test_truncated_controller_bodies_are_decode_errors(compiled: bool) -> None:
    """Including the cut that removes only the last tag buffer, whose previous byte is 0."""
    for spec, version, encoded in [
        (REGISTRATION, 0, REGISTRATION_V0),
        (HEARTBEAT, 1, HEARTBEAT_V0),
        (ALTER_PARTITION, 3, ALTER_PARTITION.codec(3).encode(_alter_partition(3))),
    ]:
        for cut in range(len(encoded)):
            with pytest.raises(DecodeError):
                spec.codec(version, compiled=compiled).decode(encoded[:cut])


# -- AllocateProducerIds ---------------------------------------------------------------------------


def test_allocate_producer_ids_request_v0_bytes() -> None:
    codec = REQUESTS[ApiKey.ALLOCATE_PRODUCER_IDS].codec(0)
    wire = bytes.fromhex("00000002") + bytes.fromhex("000000000000002a") + b"\x00"
    assert codec.encode({"broker_id": 2, "broker_epoch": 42}) == wire
    assert to_plain(codec.decode(wire)) == {"broker_id": 2, "broker_epoch": 42}


def test_allocate_producer_ids_response_v0_bytes() -> None:
    codec = RESPONSES[ApiKey.ALLOCATE_PRODUCER_IDS].codec(0)
    body = {"throttle_time_ms": 0, "error_code": 0, "producer_id_start": 3000, "producer_id_len": 1000}
    wire = bytes.fromhex("00000000 0000 0000000000000bb8 000003e8") + b"\x00"
    assert codec.encode(body) == wire
    assert to_plain(codec.decode(wire)) == body
    with pytest.raises(DecodeError):
        codec.decode(wire[:-2])
