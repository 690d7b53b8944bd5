"""Tagged fields: defaults are omitted, unknown tags survive, present-at-default tags are kept."""

from __future__ import annotations

import pytest

from protocol.errors import DecodeError
from protocol.messages import REQUESTS, RESPONSES

FETCH_RESPONSE = RESPONSES[1]
FETCH_REQUEST = REQUESTS[1]


def _fetch_response(diverging: dict | None = None) -> dict:
    partition = {"partition_index": 0, "high_watermark": 10, "records": b""}
    if diverging is not None:
        partition["diverging_epoch"] = diverging
    return {"responses": [{"topic": "t", "partitions": [partition]}]}


def test_default_tagged_struct_is_not_written() -> None:
    codec = FETCH_RESPONSE.codec(12)
    plain = codec.encode(_fetch_response())
    with_default = codec.encode(_fetch_response({"epoch": -1, "end_offset": -1}))
    assert plain == with_default
    decoded = codec.decode(plain)
    partition = decoded.responses[0].partitions[0]
    assert partition.diverging_epoch == {"epoch": -1, "end_offset": -1}
    assert partition.present_tags == frozenset()


def test_non_default_tagged_struct_roundtrips() -> None:
    codec = FETCH_RESPONSE.codec(12)
    data = codec.encode(_fetch_response({"epoch": 3, "end_offset": 42}))
    partition = codec.decode(data).responses[0].partitions[0]
    assert partition.diverging_epoch.epoch == 3
    assert partition.diverging_epoch.end_offset == 42
    assert partition.present_tags == frozenset({0})
    assert codec.encode(codec.decode(data)) == data


def _with_tag_section(data: bytes, section: bytes) -> bytes:
    """Replace the (empty) top-level tag section, which is the last byte of the message."""
    assert data[-1] == 0
    return data[:-1] + section


def test_unknown_tag_is_preserved() -> None:
    codec = FETCH_REQUEST.codec(12)
    data = codec.encode({"max_wait_ms": 500, "topics": []})
    tagged = _with_tag_section(data, b"\x01\x63\x03abc")  # one field, tag 99, 3 bytes
    decoded = codec.decode(tagged)
    assert decoded.unknown_tags == {99: b"abc"}
    assert codec.encode(decoded) == tagged


def test_tag_present_with_default_value_is_kept_for_byte_identity() -> None:
    """Some encoders write a tagged field that holds its default; re-encoding keeps it."""
    codec = FETCH_REQUEST.codec(12)
    data = codec.encode({"max_wait_ms": 500, "topics": []})
    tagged = _with_tag_section(data, b"\x01\x00\x01\x00")  # cluster_id (tag 0) = null
    decoded = codec.decode(tagged)
    assert decoded.cluster_id is None
    assert decoded.present_tags == frozenset({0})
    assert codec.encode(decoded) == tagged


@pytest.mark.parametrize(
    ("section", "reason"),
    [
        (b"\x02\x05\x00\x03\x00", "out of order"),
        (b"\x01\x07\x7f", "claims"),
        (b"\x05", "varint"),
    ],
)
def test_malformed_tag_sections(section: bytes, reason: str) -> None:
    codec = FETCH_REQUEST.codec(12)
    data = codec.encode({"max_wait_ms": 500, "topics": []})
    with pytest.raises(DecodeError, match=reason):
        codec.decode(_with_tag_section(data, section))
