"""The records of __transaction_state, against bytes worked out by hand from Kafka's schemas."""

from __future__ import annotations

from dataclasses import replace

import pytest

from protocol import transaction_log as tl
from protocol.errors import DecodeError

ONGOING = tl.TransactionLogValue(
    producer_id=5,
    producer_epoch=1,
    transaction_timeout_ms=60_000,
    transaction_status=1,
    partitions=(("a", (0, 2)),),
    last_update_timestamp_ms=1000,
    start_timestamp_ms=900,
)
EMPTY = tl.TransactionLogValue(
    producer_id=5,
    producer_epoch=1,
    transaction_timeout_ms=60_000,
    transaction_status=0,
    partitions=None,
    last_update_timestamp_ms=1000,
    start_timestamp_ms=-1,
)

# The body both versions share up to the partitions: producer id, epoch, timeout, status.
HEAD = "000000000000000500010000ea6001"
TIMES = "00000000000003e80000000000000384"  # last update 1000, start 900


def test_key_version_0() -> None:
    expected = bytes.fromhex("0000000374786e")  # version 0, int16 length 3, "txn"
    assert tl.encode_key("txn") == expected
    assert tl.decode_key(expected) == tl.TransactionLogKey("txn")


def test_an_unknown_key_version_is_reported_not_raised() -> None:
    assert tl.decode_key(bytes.fromhex("0001000374786e")) == tl.UnknownTransactionLogKey(1)


def test_value_version_0() -> None:
    expected = bytes.fromhex(
        "0000"  # version 0
        + HEAD
        + "00000001"  # one topic
        + "0001"
        + "61"  # "a"
        + "00000002"
        + "00000000"
        + "00000002"  # partitions [0, 2]
        + TIMES
    )
    assert tl.encode_value(ONGOING, 0) == expected
    assert tl.decode_value(expected) == ONGOING


def test_value_version_0_of_an_empty_transaction_has_a_null_array() -> None:
    expected = bytes.fromhex(
        "0000" + "000000000000000500010000ea6000" + "ffffffff" + "00000000000003e8ffffffffffffffff"
    )
    assert tl.encode_value(EMPTY, 0) == expected
    assert tl.decode_value(expected) == EMPTY


def test_value_version_0_drops_the_tagged_fields() -> None:
    tagged = replace(ONGOING, client_transaction_version=2, previous_producer_id=3)
    assert tl.encode_value(tagged, 0) == tl.encode_value(ONGOING, 0)


def test_value_version_1_is_flexible_with_the_client_transaction_version_tagged() -> None:
    value = replace(ONGOING, client_transaction_version=2)
    expected = bytes.fromhex(
        "0001"  # version 1
        + HEAD
        + "02"  # compact array: one topic
        + "02"
        + "61"  # compact string "a"
        + "03"
        + "00000000"
        + "00000002"  # compact array of two partitions
        + "00"  # the topic's tagged fields: none
        + TIMES
        + "01"  # one tagged field
        + "02"
        + "02"
        + "0002"  # tag 2 (ClientTransactionVersion), 2 bytes, 2
    )
    assert tl.encode_value(value, 1) == expected
    assert tl.decode_value(expected) == value


def test_value_version_1_leaves_default_tagged_fields_out() -> None:
    expected = bytes.fromhex(
        "0001" + "000000000000000500010000ea6000" + "00" + "00000000000003e8ffffffffffffffff" + "00"
    )
    assert tl.encode_value(EMPTY, 1) == expected
    assert tl.decode_value(expected) == EMPTY


def test_value_version_1_with_previous_and_next_producer_ids() -> None:
    value = replace(EMPTY, previous_producer_id=7, next_producer_id=9)
    expected = bytes.fromhex(
        "0001" + "0000000000000005"
        "0001"
        "0000ea60"
        "00" + "00" + "00000000000003e8"
        "ffffffffffffffff"
        + "02"  # two tagged fields, in tag order
        + "00"
        + "08"
        + "0000000000000007"  # tag 0: PreviousProducerId
        + "01"
        + "08"
        + "0000000000000009"  # tag 1: NextProducerId
    )
    assert tl.encode_value(value, 1) == expected
    assert tl.decode_value(expected) == value


def test_a_tombstone_decodes_to_none() -> None:
    assert tl.decode_value(None) is None


@pytest.mark.parametrize("raw", ["0002" + HEAD, "ffff", "00", "0000" + HEAD])
def test_unknown_or_truncated_values_raise(raw: str) -> None:
    with pytest.raises(DecodeError):
        tl.decode_value(bytes.fromhex(raw))


def test_value_version_follows_the_transaction_version_feature() -> None:
    assert [tl.value_version_for(level) for level in (0, 1, 2)] == [0, 1, 1]


def test_partitions_are_grouped_by_topic_and_sorted() -> None:
    grouped = tl.group_partitions([("b", 1), ("a", 3), ("b", 0), ("a", 3)])
    assert grouped == (("a", (3,)), ("b", (0, 1)))
    value = replace(ONGOING, partitions=grouped)
    assert value.topic_partitions() == {("a", 3), ("b", 0), ("b", 1)}
