"""Metadata records through record batches: every record type survives the wire unchanged."""

from __future__ import annotations

import uuid

import pytest

from metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpointRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from metadata.serde import decode_metadata_batches, encode_metadata_batch, record_from_wire
from protocol.errors import ProtocolError
from protocol.records import stamp_base_offset

TOPIC_ID = uuid.UUID("6d3f1a55-4c1e-4f0a-9d55-0a1b2c3d4e5f")

ALL_RECORDS: list[MetadataRecord] = [
    RegisterBrokerRecord(
        2,
        uuid.UUID(int=7),
        41,
        (
            BrokerEndpointRecord("PLAINTEXT", "127.0.0.1", 9093, 0),
            BrokerEndpointRecord("INTERNAL", "b2", 19092, 0),
        ),
        None,
        True,
    ),
    RegisterBrokerRecord(3, uuid.UUID(int=8), 42, (), "rack-a", False),
    UnregisterBrokerRecord(3, 42),
    TopicRecord("orders", TOPIC_ID),
    PartitionRecord(0, TOPIC_ID, (1, 2, 3), (1, 2, 3), 1, 0, 0),
    ConfigRecord(2, "orders", "retention.ms", "1000"),
    ConfigRecord(2, "orders", "retention.ms", None),
    PartitionChangeRecord(0, TOPIC_ID, (1, 2, 3), (2, 3), 2, 1, 1),
    FenceBrokerRecord(1, 40),
    UnfenceBrokerRecord(1, 40),
    RemoveTopicRecord(TOPIC_ID),
    ProducerIdsRecord(1, 40, 2000),
    AccessControlEntryRecord(uuid.UUID(int=9), 2, "orders", 4, "User:alice", "*", 3, 3),
    RemoveAccessControlEntryRecord(uuid.UUID(int=9)),
    UserScramCredentialRecord("alice", 1, b"salt", b"\x01" * 32, b"\x02" * 32, 4096),
    RemoveUserScramCredentialRecord("alice", 2),
]


def test_every_record_type_round_trips_through_one_batch() -> None:
    batch = bytearray(encode_metadata_batch(ALL_RECORDS, epoch=5, timestamp_ms=1_700_000_000_000))
    stamp_base_offset(batch, 0, 100)
    [decoded] = list(decode_metadata_batches(bytes(batch)))
    assert decoded.epoch == 5
    assert decoded.last_offset == 100 + len(ALL_RECORDS) - 1
    assert [offset for offset, _ in decoded.records] == list(range(100, 100 + len(ALL_RECORDS)))
    assert [record for _, record in decoded.records] == ALL_RECORDS


def test_a_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    first = encode_metadata_batch(ALL_RECORDS[:2], epoch=1, timestamp_ms=0)
    second = encode_metadata_batch(ALL_RECORDS[2:], epoch=1, timestamp_ms=0)
    decoded = list(decode_metadata_batches(first + second[:-3]))
    assert len(decoded) == 1
    assert [record for _, record in decoded[0].records] == ALL_RECORDS[:2]


def test_a_value_that_is_not_a_metadata_record_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        record_from_wire(b"\x01\x63\x00")
    with pytest.raises(ProtocolError):
        record_from_wire(None)
