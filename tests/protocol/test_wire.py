"""Primitive wire types: varints, strings, bytes, arrays, UUIDs — values and malformed input."""

from __future__ import annotations

import uuid
from io import BytesIO

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import wire
from protocol.errors import DecodeError, EncodeError


def _write(fn, value) -> bytes:  # type: ignore[no-untyped-def]
    io = BytesIO()
    fn(io, value)
    return io.getvalue()


@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(value: int) -> None:
    data = _write(wire.write_uvarint, value)
    assert len(data) <= 5
    io = BytesIO(data)
    assert wire.read_uvarint(io) == value
    assert io.tell() == len(data)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(value: int) -> None:
    assert wire.read_varint(BytesIO(_write(wire.write_varint, value))) == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(value: int) -> None:
    data = _write(wire.write_varlong, value)
    assert len(data) <= 10
    assert wire.read_varlong(BytesIO(data)) == value


def test_zigzag_examples() -> None:
    assert _write(wire.write_varint, 0) == b"\x00"
    assert _write(wire.write_varint, -1) == b"\x01"
    assert _write(wire.write_varint, 1) == b"\x02"
    assert _write(wire.write_varint, -64) == b"\x7f"
    assert _write(wire.write_varint, 64) == b"\x80\x01"


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80\x80\x01"],
    ids=["empty", "truncated", "truncated2", "six-bytes"],
)
def test_bad_uvarints(data: bytes) -> None:
    with pytest.raises(DecodeError):
        wire.read_uvarint(BytesIO(data))


def test_out_of_range_varints_refuse_to_encode() -> None:
    with pytest.raises(EncodeError):
        _write(wire.write_varint, 2**31)
    with pytest.raises(EncodeError):
        _write(wire.write_uvarint, -1)


@settings(max_examples=50)
@given(st.text(max_size=40))
def test_strings(value: str) -> None:
    for write, read in [
        (wire.write_string, wire.read_string),
        (wire.write_compact_string, wire.read_compact_string),
        (wire.write_nullable_string, wire.read_nullable_string),
        (wire.write_compact_nullable_string, wire.read_compact_nullable_string),
    ]:
        assert read(BytesIO(_write(write, value))) == value


def test_null_strings_and_bytes() -> None:
    assert _write(wire.write_nullable_string, None) == b"\xff\xff"
    assert _write(wire.write_compact_nullable_string, None) == b"\x00"
    assert wire.read_nullable_string(BytesIO(b"\xff\xff")) is None
    assert wire.read_compact_nullable_bytes(BytesIO(b"\x00")) is None
    with pytest.raises(DecodeError):
        wire.read_string(BytesIO(b"\xff\xff"))
    with pytest.raises(DecodeError):
        wire.read_compact_string(BytesIO(b"\x00"))
    with pytest.raises(DecodeError):
        wire.read_nullable_bytes(BytesIO(b"\xff\xff\xff\xfe"))  # -2 is not null
    with pytest.raises(EncodeError):
        _write(wire.write_string, None)


def test_lengths_past_the_end_are_refused_before_reading() -> None:
    with pytest.raises(DecodeError, match="exceeds"):
        wire.read_bytes(BytesIO(b"\x7f\xff\xff\xff" + b"x" * 10))
    with pytest.raises(DecodeError, match="exceeds"):
        wire.read_compact_string(BytesIO(b"\xff\xff\xff\xff\x07abc"))


def test_invalid_utf8() -> None:
    with pytest.raises(DecodeError, match="UTF-8"):
        wire.read_string(BytesIO(b"\x00\x02\xff\xfe"))


@given(st.binary(max_size=64))
def test_bytes(value: bytes) -> None:
    assert wire.read_compact_bytes(BytesIO(_write(wire.write_compact_bytes, value))) == value
    assert wire.read_bytes(BytesIO(_write(wire.write_bytes, memoryview(value)))) == value


def test_uuid() -> None:
    u = uuid.uuid4()
    assert wire.read_uuid(BytesIO(_write(wire.write_uuid, u))) == u
    with pytest.raises(DecodeError):
        wire.read_uuid(BytesIO(b"\x00" * 15))


def test_array_counts_checked_against_remaining_bytes() -> None:
    with pytest.raises(DecodeError, match="array count"):
        wire.read_array_count(BytesIO(b"\x00\x00\x00\x05" + b"\x00" * 19), 4)
    assert wire.read_array_count(BytesIO(b"\x00\x00\x00\x05" + b"\x00" * 20), 4) == 5
    assert wire.read_compact_array_count(BytesIO(b"\x00"), 4) == -1


def test_external_bytes_are_not_copied_into_the_encoding() -> None:
    """A fetch response's records stay where they are: the codec writes only their length."""
    from protocol.messages import RESPONSES

    slice_a, slice_b = object(), object()
    body = {
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": 0, "records": wire.ExternalBytes(5, slice_a)},
                    {"partition_index": 1, "records": wire.ExternalBytes(7, slice_b)},
                ],
            }
        ]
    }
    for version in (11, 12):
        codec = RESPONSES[1].codec(version)
        parts, size = codec.encode_parts(body)
        assert slice_a in parts and slice_b in parts
        joined = b"".join(
            b"A" * 5 if p is slice_a else b"B" * 7 if p is slice_b else p  # type: ignore[misc]
            for p in parts
        )
        assert len(joined) == size
        real = {
            "responses": [
                {
                    "topic": "t",
                    "partitions": [
                        {"partition_index": 0, "records": b"A" * 5},
                        {"partition_index": 1, "records": b"B" * 7},
                    ],
                }
            ]
        }
        assert joined == codec.encode(real)
    with pytest.raises(EncodeError):
        RESPONSES[1].codec(12).encode(body)
