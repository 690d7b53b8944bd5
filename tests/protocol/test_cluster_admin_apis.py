"""ElectLeaders, DescribeCluster and DescribeTopicPartitions declared as data: hand-assembled bytes,
above all for the nullable struct (DescribeTopicPartitions' ``cursor``), which Kafka writes as an
int8 marker (-1 null, 1 present) before the struct, on both codec paths."""

from __future__ import annotations

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import MessageCodec

DTP_REQUEST = REQUESTS[ApiKey.DESCRIBE_TOPIC_PARTITIONS]
DTP_RESPONSE = RESPONSES[ApiKey.DESCRIBE_TOPIC_PARTITIONS]

# topics ["a"] (compact array of one, compact string "a", no tags), limit 5, then the cursor
NO_CURSOR = bytes.fromhex("02 0261 00 00000005 ff 00")
A_CURSOR = bytes.fromhex("02 0261 00 00000005 01 0261 00000003 00 00")


@pytest.mark.parametrize("compiled", [True, False])
def test_a_null_cursor_is_one_minus_one_byte(compiled: bool) -> None:
    codec = MessageCodec(DTP_REQUEST, 0, compiled=compiled)
    body = {"topics": [{"name": "a"}], "response_partition_limit": 5, "cursor": None}
    assert codec.encode(body) == NO_CURSOR
    assert codec.decode(NO_CURSOR).cursor is None


@pytest.mark.parametrize("compiled", [True, False])
def test_a_present_cursor_follows_a_one_byte(compiled: bool) -> None:
    codec = MessageCodec(DTP_REQUEST, 0, compiled=compiled)
    body = {
        "topics": [{"name": "a"}],
        "response_partition_limit": 5,
        "cursor": {"topic_name": "a", "partition_index": 3},
    }
    assert codec.encode(body) == A_CURSOR
    cursor = codec.decode(A_CURSOR).cursor
    assert (cursor.topic_name, cursor.partition_index) == ("a", 3)


def test_the_cursor_defaults_to_null_and_the_limit_to_2000() -> None:
    codec = DTP_REQUEST.codec(0)
    decoded = codec.decode(codec.encode({"topics": []}))
    assert (decoded.cursor, decoded.response_partition_limit) == (None, 2000)
    response = DTP_RESPONSE.codec(0)
    assert response.decode(response.encode({"topics": []})).next_cursor is None


def test_a_truncated_cursor_marker_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        DTP_REQUEST.codec(0).decode(NO_CURSOR[:-2])


def test_elect_leaders_v0_has_no_election_type_and_a_null_list_means_all() -> None:
    codec = REQUESTS[ApiKey.ELECT_LEADERS].codec(0)
    wire = codec.encode({"election_type": 1, "topic_partitions": None, "timeout_ms": 100})
    assert wire == bytes.fromhex("ffffffff 00000064")
    assert codec.decode(wire).election_type == 0


def test_describe_cluster_v1_carries_the_endpoint_type() -> None:
    codec = REQUESTS[ApiKey.DESCRIBE_CLUSTER].codec(1)
    assert codec.encode({"include_cluster_authorized_operations": True, "endpoint_type": 2}) == bytes.fromhex(
        "01 02 00"
    )
