"""Metadata records: every type round-trips, the frame is Kafka's, and bad values only raise DecodeError."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import metadata_records as mr
from protocol.data import MessageData, to_plain
from protocol.errors import DecodeError, EncodeError
from protocol.messages import REQUESTS, RESPONSES
from protocol.metadata_records import (
    METADATA_RECORDS,
    METADATA_RECORDS_BY_NAME,
    MetadataRecordFrame,
    decode_metadata_record,
    encode_metadata_record,
)
from protocol.schema import MessageSpec
from tests.protocol.strategies import message_strategy, with_defaults

SPECS = list(METADATA_RECORDS.values())
TOPIC_ID = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")

# The contract with the domain layer: these names, character for character.
EXPECTED_FIELDS = {
    0: ["broker_id", "incarnation_id", "broker_epoch", "endpoints", "rack", "fenced"],
    1: ["broker_id", "broker_epoch"],
    2: ["name", "topic_id"],
    3: [
        "partition_id",
        "topic_id",
        "replicas",
        "isr",
        "leader",
        "leader_epoch",
        "partition_epoch",
        "removing_replicas",
        "adding_replicas",
    ],
    4: ["resource_type", "resource_name", "name", "value"],
    5: [
        "partition_id",
        "topic_id",
        "replicas",
        "isr",
        "leader",
        "leader_epoch",
        "partition_epoch",
        "removing_replicas",
        "adding_replicas",
    ],
    7: ["broker_id", "broker_epoch"],
    8: ["broker_id", "broker_epoch"],
    9: ["topic_id"],
    11: ["name", "mechanism", "salt", "stored_key", "server_key", "iterations"],
    14: ["entity", "key", "value", "remove"],
    15: ["broker_id", "broker_epoch", "next_producer_id"],
    18: [
        "id",
        "resource_type",
        "resource_name",
        "pattern_type",
        "principal",
        "host",
        "operation",
        "permission_type",
    ],
    19: ["id"],
    22: ["name", "mechanism"],
}


def test_declared_types_and_fields() -> None:
    assert {t: [f.name for f in spec.fields] for t, spec in METADATA_RECORDS.items()} == EXPECTED_FIELDS
    endpoint = next(f for f in METADATA_RECORDS[0].fields if f.name == "endpoints")
    assert [f.name for f in endpoint.fields] == ["name", "host", "port", "security_protocol"]
    for spec in SPECS:
        assert spec.valid_versions == "0" and spec.is_flexible(0)
        assert METADATA_RECORDS_BY_NAME[spec.name] is spec


def test_type_constants_match_kafka_numbering() -> None:
    constants = {
        mr.REGISTER_BROKER_RECORD: "RegisterBrokerRecord",
        mr.UNREGISTER_BROKER_RECORD: "UnregisterBrokerRecord",
        mr.TOPIC_RECORD: "TopicRecord",
        mr.PARTITION_RECORD: "PartitionRecord",
        mr.CONFIG_RECORD: "ConfigRecord",
        mr.PARTITION_CHANGE_RECORD: "PartitionChangeRecord",
        mr.FENCE_BROKER_RECORD: "FenceBrokerRecord",
        mr.UNFENCE_BROKER_RECORD: "UnfenceBrokerRecord",
        mr.REMOVE_TOPIC_RECORD: "RemoveTopicRecord",
        mr.USER_SCRAM_CREDENTIAL_RECORD: "UserScramCredentialRecord",
        mr.CLIENT_QUOTA_RECORD: "ClientQuotaRecord",
        mr.PRODUCER_IDS_RECORD: "ProducerIdsRecord",
        mr.ACCESS_CONTROL_ENTRY_RECORD: "AccessControlEntryRecord",
        mr.REMOVE_ACCESS_CONTROL_ENTRY_RECORD: "RemoveAccessControlEntryRecord",
        mr.REMOVE_USER_SCRAM_CREDENTIAL_RECORD: "RemoveUserScramCredentialRecord",
    }
    assert constants == {t: spec.name for t, spec in METADATA_RECORDS.items()}
    assert list(constants) == [0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 14, 15, 18, 19, 22]


def test_records_stay_out_of_the_message_registry() -> None:
    registered = [*REQUESTS.values(), *RESPONSES.values()]
    assert not any(spec is registered_spec for spec in SPECS for registered_spec in registered)
    assert all(spec.type == "metadata" for spec in SPECS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip(spec: MessageSpec, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(spec, 0))
    value = encode_metadata_record(spec.api_key, obj)
    frame = decode_metadata_record(value)
    assert isinstance(frame, MetadataRecordFrame)
    assert (frame.record_type, frame.version) == (spec.api_key, 0)
    assert isinstance(frame.data, MessageData)
    assert to_plain(frame.data) == to_plain(with_defaults(spec.fields, 0, obj))
    assert encode_metadata_record(frame.record_type, frame.data, frame.version) == value
    assert decode_metadata_record(memoryview(value)) == frame


def test_frame_prefix_and_body_bytes() -> None:
    value = encode_metadata_record(mr.UNREGISTER_BROKER_RECORD, {"broker_id": 1, "broker_epoch": 5})
    assert value == b"\x01\x01\x00" + bytes.fromhex("000000010000000000000005") + b"\x00"
    producer_ids = encode_metadata_record(
        mr.PRODUCER_IDS_RECORD, {"broker_id": 0, "broker_epoch": 0, "next_producer_id": 0}
    )
    assert producer_ids[:3] == b"\x01\x0f\x00"  # frame version 1, type 15, version 0


def test_acl_record_bytes_are_kafkas() -> None:
    """Unlike most kipling records, the ACL records are Kafka's own, field for field."""
    acl_id = uuid.UUID(int=0x2A)
    value = encode_metadata_record(
        mr.ACCESS_CONTROL_ENTRY_RECORD,
        {
            "id": acl_id,
            "resource_type": 2,  # TOPIC
            "resource_name": "t",
            "pattern_type": 3,  # LITERAL
            "principal": "User:a",
            "host": "*",
            "operation": 3,  # READ
            "permission_type": 3,  # ALLOW
        },
    )
    body = acl_id.bytes + b"\x02" + b"\x02t" + b"\x03" + b"\x07User:a" + b"\x02*" + b"\x03\x03" + b"\x00"
    assert value == b"\x01\x12\x00" + body  # frame version 1, type 18, version 0
    removal = encode_metadata_record(mr.REMOVE_ACCESS_CONTROL_ENTRY_RECORD, {"id": acl_id})
    assert removal == b"\x01\x13\x00" + acl_id.bytes + b"\x00"
    assert decode_metadata_record(removal).data.id == acl_id


def test_scram_credential_record_bytes_are_kafkas() -> None:
    """Kafka's UserScramCredentialRecord (type 11) and RemoveUserScramCredentialRecord (type 22)."""
    value = encode_metadata_record(
        mr.USER_SCRAM_CREDENTIAL_RECORD,
        {
            "name": "alice",
            "mechanism": 1,  # SCRAM-SHA-256
            "salt": b"salt",
            "stored_key": b"\x01" * 32,
            "server_key": b"\x02" * 32,
            "iterations": 8192,
        },
    )
    body = b"\x06alice" + b"\x01" + b"\x05salt" + b"\x21" + b"\x01" * 32 + b"\x21" + b"\x02" * 32
    assert value == b"\x01\x0b\x00" + body + (8192).to_bytes(4, "big") + b"\x00"
    removal = encode_metadata_record(
        mr.REMOVE_USER_SCRAM_CREDENTIAL_RECORD, {"name": "alice", "mechanism": 2}
    )
    assert removal == b"\x01\x16\x00" + b"\x06alice" + b"\x02" + b"\x00"
    assert decode_metadata_record(value).data.stored_key == b"\x01" * 32


def test_nested_elements_may_be_plain_dicts() -> None:
    incarnation = uuid.UUID(int=1)
    record = {
        "broker_id": 3,
        "incarnation_id": incarnation,
        "broker_epoch": 12,
        "endpoints": [{"name": "PLAINTEXT", "host": "b3", "port": 9092, "security_protocol": 0}],
        "rack": None,
    }
    value = encode_metadata_record(mr.REGISTER_BROKER_RECORD, record)
    assert value[:3] == b"\x01\x00\x00"
    assert value[3:7] == (3).to_bytes(4, "big")
    assert value[7:23] == incarnation.bytes
    assert value[31:32] == b"\x02"  # compact array of one endpoint
    decoded = decode_metadata_record(value).data
    assert decoded.endpoints[0].host == "b3"
    assert decoded.endpoints[0].port == 9092
    assert decoded.fenced is True  # a broker registers fenced until it catches up


def test_partition_change_carries_the_full_state() -> None:
    state = {
        "partition_id": 2,
        "topic_id": TOPIC_ID,
        "replicas": [1, 2, 3],
        "isr": [1, 3],
        "leader": 3,
        "leader_epoch": 4,
        "partition_epoch": 9,
        "removing_replicas": [2],
        "adding_replicas": [3],
    }
    change = decode_metadata_record(encode_metadata_record(mr.PARTITION_CHANGE_RECORD, state))
    partition = decode_metadata_record(encode_metadata_record(mr.PARTITION_RECORD, state))
    assert change.data == partition.data == state
    assert change.record_type == mr.PARTITION_CHANGE_RECORD


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"", "truncated varint"),
        (b"\x00\x02\x00", "frame version 0"),
        (b"\x02\x02\x00", "frame version 2"),
        (b"\x01\x06\x00", "type 6"),
        (b"\x01\x63\x00", "type 99"),
        (b"\x01\x02\x01", "no version 1"),
        (b"\x01\x02\x80\x80\x80\x80\x01", "no version"),
        (b"\x01\xff\xff\xff\xff\xff", "varint"),
    ],
)
def test_bad_frames_are_decode_errors(value: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode_metadata_record(value)


def test_trailing_bytes_are_refused() -> None:
    value = encode_metadata_record(mr.REMOVE_TOPIC_RECORD, {"topic_id": TOPIC_ID})
    assert decode_metadata_record(value).data.topic_id == TOPIC_ID
    with pytest.raises(DecodeError, match="1 byte"):
        decode_metadata_record(value + b"\x00")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_truncation_is_a_decode_error(spec: MessageSpec, data: st.DataObject) -> None:
    value = encode_metadata_record(spec.api_key, data.draw(message_strategy(spec, 0)))
    for cut in range(len(value)):
        with pytest.raises(DecodeError):
            decode_metadata_record(value[:cut])


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=64))
def test_random_bytes_only_raise_decode_error(garbage: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_metadata_record(garbage)


@settings(max_examples=200, deadline=None)
@given(record_type=st.sampled_from(sorted(METADATA_RECORDS)), body=st.binary(max_size=48))
def test_random_bodies_behind_a_valid_frame_only_raise_decode_error(record_type: int, body: bytes) -> None:
    try:
        frame = decode_metadata_record(bytes((1, record_type, 0)) + body)
    except DecodeError:
        return
    assert frame.record_type == record_type


@pytest.mark.parametrize(("record_type", "version"), [(6, 0), (16, 0), (-1, 0), (2, 1)])
def test_unknown_type_or_version_is_an_encode_error(record_type: int, version: int) -> None:
    with pytest.raises(EncodeError):
        encode_metadata_record(record_type, {}, version)


def test_unencodable_values_are_encode_errors() -> None:
    with pytest.raises(EncodeError):
        encode_metadata_record(mr.TOPIC_RECORD, {"name": "t", "topic_id": "not-a-uuid"})
    with pytest.raises(EncodeError):
        encode_metadata_record(mr.UNREGISTER_BROKER_RECORD, {"broker_id": 2**31, "broker_epoch": 0})
