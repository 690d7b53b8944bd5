"""The columnar record decoder against the per-record reader, which is the oracle here.

``decode_batch_columns`` skips most of the reader's per-field checks (it relies on every field
moving the position forward and on each record ending exactly at its declared length), so the
property that matters is that both give the same verdict on every input: the same records, or both
a :class:`CorruptRecordError`. Well-formed batches come from ``build_batch`` (every codec, nulls,
headers, LogAppendTime) and from hand-built record streams with arbitrary deltas and long fields
(varints of every width); malformed ones are random streams behind a valid CRC, truncations and
single-byte edits of valid streams.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptRecordError
from protocol.records import (
    HEADER_SIZE,
    CompressionType,
    Record,
    TimestampType,
    build_batch,
    iter_records,
    stamp_log_append_time,
)
from protocol.records.columnar import (
    FIELDS_PER_HEADER,
    FIELDS_PER_RECORD,
    KEY_LENGTH,
    KEY_START,
    OFFSET_DELTA,
    TIMESTAMP_DELTA,
    VALUE_LENGTH,
    VALUE_START,
    RecordColumns,
    decode_batch_columns,
    decode_record_columns,
)
from tests.protocol.records_support import raw_batch, raw_record, zigzag

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CODECS = list(CompressionType)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

payloads = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=40),
    # 2- and 3-byte length varints (lengths up to ~20 KB), repetitive so that codecs compress
    st.builds(lambda unit, times: unit * times, st.binary(min_size=1, max_size=8), st.integers(1, 2500)),
)
header_lists = st.lists(st.tuples(st.text(max_size=8), payloads), max_size=3)
records = st.builds(
    Record, value=payloads, key=payloads, headers=header_lists, timestamp=st.integers(-1, 2**50)
)

Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def reader_rows(batch: bytes) -> list[Row] | str:
    """The oracle: what the per-record reader makes of ``batch`` ("corrupt" if it rejects it)."""
    try:
        return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in iter_records(batch)]
    except CorruptRecordError:
        return "corrupt"


def columnar_rows(batch: bytes, pos: int = 0) -> list[Row] | str:
    """The same rows rebuilt from the columns and spans (timestamps as the reader reports them)."""
    try:
        header, columns = decode_batch_columns(batch, pos)
    except CorruptRecordError:
        return "corrupt"
    return rows_of(
        columns, header.base_offset, header.base_timestamp, header.max_timestamp, header.is_log_append_time
    )


def rows_of(
    columns: RecordColumns, base_offset: int, base_timestamp: int, max_timestamp: int, log_append_time: bool
) -> list[Row]:
    offsets, timestamps, key_starts, key_lengths, value_starts, value_lengths = columns.columns()
    assert len(columns.fields) == FIELDS_PER_RECORD * columns.count == FIELDS_PER_RECORD * len(offsets)
    headers: dict[int, list[tuple[str, bytes | None]]] = {}
    position = 0
    for row, count in zip(columns.header_rows, columns.header_counts, strict=True):
        assert count > 0
        found = []
        for _ in range(count):
            key_start, key_length, value_start, value_length = columns.header_fields[
                position : position + FIELDS_PER_HEADER
            ]
            key = columns.span_bytes(key_start, key_length)
            assert key is not None
            found.append((key.decode(), columns.span_bytes(value_start, value_length)))
            position += FIELDS_PER_HEADER
        headers[row] = found
    assert position == len(columns.header_fields)
    assert columns.header_rows == sorted(set(columns.header_rows))
    rows: list[Row] = []
    for i in range(columns.count):
        for start, length in ((key_starts[i], key_lengths[i]), (value_starts[i], value_lengths[i])):
            assert length >= -1
            assert columns.start <= start and start + max(length, 0) <= columns.end
        rows.append(
            (
                base_offset + offsets[i],
                max_timestamp if log_append_time else base_timestamp + timestamps[i],
                columns.span_bytes(key_starts[i], key_lengths[i]),
                columns.span_bytes(value_starts[i], value_lengths[i]),
                headers.get(i, []),
            )
        )
    return rows


def same_verdict(batch: bytes) -> list[Row] | str:
    expected = reader_rows(batch)
    assert columnar_rows(batch) == expected
    return expected


# ------------------------------------------------------------------------------- well-formed batches


@FAST
@given(
    recs=st.lists(records, max_size=12),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    log_append_time=st.one_of(st.none(), st.integers(0, 2**50)),
)
def test_built_batches_decode_like_the_reader(
    recs: list[Record], codec: CompressionType, base_offset: int, log_append_time: int | None
) -> None:
    batch = build_batch(recs, base_offset=base_offset, compression=codec)
    if log_append_time is not None:
        stamped = bytearray(batch)
        stamp_log_append_time(stamped, 0, log_append_time)
        batch = bytes(stamped)
    rows = same_verdict(batch)
    assert rows != "corrupt" and len(rows) == len(recs)


@st.composite
def raw_records(draw: st.DrawFn) -> tuple[bytes, int]:
    """Hand-built records with any deltas (varints of every width), as a producer could write them."""
    count = draw(st.integers(0, 8))
    stream = b"".join(
        raw_record(
            draw(INT32),
            draw(INT64),
            draw(payloads),
            draw(payloads),
            draw(st.lists(st.tuples(st.text(max_size=6).map(str.encode), payloads), max_size=2)),
        )
        for _ in range(count)
    )
    return stream, count


@FAST
@given(built=raw_records(), base_timestamp=INT64, base_offset=st.integers(0, 2**62))
def test_any_deltas_and_lengths_decode_like_the_reader(
    built: tuple[bytes, int], base_timestamp: int, base_offset: int
) -> None:
    stream, count = built
    batch = raw_batch(stream, count=count, base_offset=base_offset, base_timestamp=base_timestamp)
    rows = same_verdict(batch)
    assert rows != "corrupt" and len(rows) == count


def test_nulls_are_length_minus_one_and_spans_index_the_buffer() -> None:
    batch = build_batch(
        [Record(None, b"k", timestamp=10), Record(b"v", None, (("h", None),), timestamp=7)], base_offset=3
    )
    header, columns = decode_batch_columns(batch)
    assert columns.buffer is batch and (columns.start, columns.end) == (HEADER_SIZE, len(batch))
    first, second = (
        columns.fields[i * FIELDS_PER_RECORD : (i + 1) * FIELDS_PER_RECORD] for i in range(columns.count)
    )
    assert (first[OFFSET_DELTA], first[TIMESTAMP_DELTA], first[VALUE_LENGTH]) == (0, 0, -1)
    assert batch[first[KEY_START] : first[KEY_START] + first[KEY_LENGTH]] == b"k"
    assert (second[OFFSET_DELTA], second[TIMESTAMP_DELTA], second[KEY_LENGTH]) == (1, -3, -1)
    assert batch[second[VALUE_START] : second[VALUE_START] + second[VALUE_LENGTH]] == b"v"
    assert (columns.header_rows, columns.header_counts) == ([1], [1])
    key_start, key_length, _, value_length = columns.header_fields
    assert batch[key_start : key_start + key_length] == b"h" and value_length == -1
    assert header.base_offset == 3


def test_a_batch_inside_a_concatenation_is_decoded_in_place() -> None:
    one = build_batch([Record(b"a")], base_offset=0)
    two = build_batch([Record(b"bb"), Record(b"ccc")], base_offset=1)
    zipped = build_batch([Record(b"dddd")], base_offset=3, compression=CompressionType.GZIP)
    buf = one + two + zipped + two[:20]
    header, columns = decode_batch_columns(buf, len(one))
    assert header.base_offset == 1 and columns.buffer is buf
    assert columns_values(columns) == [b"bb", b"ccc"]
    header, columns = decode_batch_columns(buf, len(one) + len(two))
    assert columns.buffer is not buf and columns_values(columns) == [b"dddd"]
    with pytest.raises(CorruptRecordError):
        decode_batch_columns(buf, len(one) + len(two) + len(zipped))  # the partial tail


def columns_values(columns: RecordColumns) -> list[bytes | None]:
    _, _, _, _, starts, lengths = columns.columns()
    return [columns.span_bytes(s, n) for s, n in zip(starts, lengths, strict=True)]


def test_empty_batches_and_empty_compacted_compressed_batches() -> None:
    for codec in CODECS:
        _, columns = decode_batch_columns(build_batch([], compression=codec))
        assert columns.count == 0 and columns.fields == [] and all(len(c) == 0 for c in columns.columns())


def test_decompression_is_capped_and_the_crc_checked() -> None:
    batch = build_batch([Record(b"x" * 10_000)], compression=CompressionType.LZ4)
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        decode_batch_columns(batch, max_decompressed_size=1000)
    broken = bytearray(batch)
    broken[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch_columns(bytes(broken))


# ------------------------------------------------------------------------------------ malformed input


@FUZZ
@given(
    stream=st.binary(max_size=200),
    count=st.integers(0, 40),
    base_timestamp=INT64,
    codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
)
def test_random_record_streams_behind_a_valid_crc_get_the_readers_verdict(
    stream: bytes, count: int, base_timestamp: int, codec: CompressionType
) -> None:
    batch = raw_batch(stream, count=count, attributes=codec, base_timestamp=base_timestamp)
    same_verdict(batch)


SMALL_VARINTS = [0, 1, 2, 3, 4, 5, 0x7F, 0x80, 0xFF]
"""Edits that hit a length field with these make the interesting faults: -2, -3, +2, -1, 0, ..."""


@st.composite
def edited_streams(draw: st.DrawFn) -> tuple[bytes, int]:
    """A valid record stream with one edit: cut short, a byte changed, a byte inserted or removed,
    or a wrong record count, so that the fault sits somewhere inside otherwise good records."""
    stream, count = draw(raw_records().filter(lambda built: built[1] > 0))
    where = draw(st.integers(0, len(stream) - 1))
    edit = draw(st.sampled_from(["cut", "change", "insert", "remove", "count"]))
    byte = bytes([draw(st.one_of(st.sampled_from(SMALL_VARINTS), st.integers(0, 255)))])
    if edit == "cut":
        return stream[:where], count
    if edit == "change":
        return stream[:where] + byte + stream[where + 1 :], count
    if edit == "insert":
        return stream[:where] + byte + stream[where:], count
    if edit == "remove":
        return stream[:where] + stream[where + 1 :], count
    return stream, count + draw(st.sampled_from([-1, 1]))


@FUZZ
@given(edited=edited_streams())
def test_edited_record_streams_get_the_readers_verdict(edited: tuple[bytes, int]) -> None:
    stream, count = edited
    same_verdict(raw_batch(stream, count=max(count, 0)))


FIELDS = [
    "length",
    "timestamp",
    "offset",
    "key_length",
    "value_length",
    "header_count",
    "header_key_length",
    "header_value_length",
]


def encode_record(
    fields: tuple[int, int, bytes | None, bytes | None, list[tuple[bytes, bytes | None]]],
    override: dict[str, int],
) -> bytes:
    """A record as raw_record writes it, except that the varints named in ``override`` get its value."""
    body = record_body(fields, override)
    return zigzag(override.get("length", len(body))) + body


def record_body(
    fields: tuple[int, int, bytes | None, bytes | None, list[tuple[bytes, bytes | None]]],
    override: dict[str, int],
) -> bytes:
    timestamp, offset, key, value, headers = fields

    def varint(name: str, natural: int) -> bytes:
        return zigzag(override.get(name, natural))

    body = b"\x00" + varint("timestamp", timestamp) + varint("offset", offset)
    body += varint("key_length", -1 if key is None else len(key)) + (key or b"")
    body += varint("value_length", -1 if value is None else len(value)) + (value or b"")
    body += varint("header_count", len(headers))
    for name, data in headers:
        body += varint("header_key_length", len(name)) + name
        body += varint("header_value_length", -1 if data is None else len(data)) + (data or b"")
    return body


small_payloads = st.one_of(st.none(), st.binary(max_size=12))
record_fields = st.tuples(
    st.integers(-3, 300),
    st.integers(0, 300),
    small_payloads,
    small_payloads,
    st.lists(st.tuples(st.binary(max_size=4), small_payloads), max_size=2),
)


@FUZZ
@given(
    recs=st.lists(record_fields, min_size=1, max_size=3),
    victim=st.integers(0, 2),
    field=st.sampled_from(FIELDS),
    value=st.one_of(st.integers(-3, 3), st.integers(-(2**31), 2**31 - 1), INT64),
)
def test_one_wrong_varint_gets_the_readers_verdict(
    recs: list[Any], victim: int, field: str, value: int
) -> None:
    """Every length, count and delta of one record set to a small, a 32-bit or a 64-bit value (often
    just off by one or two, or -1 where null is not allowed): valid or not, the reader's verdict."""
    stream = b"".join(
        encode_record(fields, {field: value} if i == victim % len(recs) else {})
        for i, fields in enumerate(recs)
    )
    same_verdict(raw_batch(stream, count=len(recs)))


SHAPES = [
    (timestamp, offset, key, value, headers)
    for timestamp, offset in ((0, 0), (-70, 9000))
    for key in (None, b"", b"key")
    for value in (None, b"value")
    for headers in ([], [(b"h", None), (b"", b"x")])
]


def test_every_varint_off_by_a_little_gets_the_readers_verdict() -> None:
    """Exhaustively, for the second of two records of every shape: each varint set to -3..3 or to its
    right value plus -3..3 (null where it is not allowed, off by one or two, negative lengths)."""
    verdicts = set()
    for shape in SHAPES:
        first = encode_record(shape, {})
        natural = dict(zip(FIELDS, _natural_varints(shape), strict=True))
        for field in FIELDS:
            for value in {*range(-3, 4), *(natural[field] + d for d in range(-3, 4))}:
                stream = first + encode_record(shape, {field: value})
                verdicts.add(same_verdict(raw_batch(stream, count=2)) == "corrupt")
    assert verdicts == {True, False}


def _natural_varints(shape: tuple[int, int, bytes | None, bytes | None, list[Any]]) -> list[int]:
    """The right value of each of FIELDS in a record of this shape (its first header's, for headers)."""
    timestamp, offset, key, value, headers = shape
    header_key, header_value = headers[0] if headers else (b"", None)
    return [
        len(record_body(shape, {})),
        timestamp,
        offset,
        -1 if key is None else len(key),
        -1 if value is None else len(value),
        len(headers),
        len(header_key),
        -1 if header_value is None else len(header_value),
    ]


@pytest.mark.parametrize(
    ("stream", "count"),
    [
        (raw_record(0, 0, b"k", b"v"), 2),  # fewer records than declared
        (raw_record(0, 0, b"k", b"v") * 2, 1),  # bytes left over
        (raw_record(0, 0, b"k", b"v")[:-1], 1),  # truncated
        (zigzag(0) + b"\x00" * 6, 1),  # an empty record
        (zigzag(-5) + b"\x00" * 6, 1),  # a negative record length
        (zigzag(6) + b"\x00" + zigzag(0) + zigzag(0) + zigzag(-2) + zigzag(-1) + zigzag(0), 1),  # key -2
        (zigzag(6) + b"\x00" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(50) + zigzag(0), 1),  # value past
        (zigzag(11) + b"\x00" + zigzag(0) + b"\xff" * 5 + b"\x01" + b"\x01\x01\x00", 1),  # 6-byte varint
        (zigzag(10) + b"\x00" + zigzag(0) + b"\xff\xff\xff\xff\x7f" + b"\x01\x01\x00", 1),  # > 32 bits
        (raw_record(0, 0, None, b"v", [(None, b"x")]), 1),  # a null header key
        (raw_record(0, 0, None, b"v", [(b"\xff", b"x")]), 1),  # a header key that is not UTF-8
        (raw_record(0, 0, None, None)[:-1] + zigzag(-1), 1),  # a negative header count
        (raw_record(0, 0, None, None)[:-1] + zigzag(3), 1),  # more headers than bytes
    ],
)
def test_malformed_records_are_rejected_like_the_reader(stream: bytes, count: int) -> None:
    batch = raw_batch(stream, count=count)
    assert reader_rows(batch) == "corrupt"
    assert columnar_rows(batch) == "corrupt"


def test_record_count_beyond_the_bytes_is_rejected_before_decoding() -> None:
    with pytest.raises(CorruptRecordError, match="declares 10 records"):
        decode_record_columns(b"\x00" * 20, 0, 20, 10)


def test_every_truncation_is_corrupt_for_every_codec() -> None:
    recs = [Record(b"value" * 30, b"key", [("h", b"1")], 1000), Record(None, None, (), 1001)]
    for codec in CODECS:
        batch = build_batch(recs, compression=codec)
        for cut in range(len(batch)):
            with pytest.raises(CorruptRecordError):
                decode_batch_columns(batch[:cut])


def test_log_append_time_batches_report_the_batch_time_as_the_reader_does() -> None:
    batch = build_batch(
        [Record(b"a", timestamp=5), Record(b"b", timestamp=9)], timestamp_type=TimestampType.LOG_APPEND_TIME
    )
    stamped = bytearray(batch)
    stamp_log_append_time(stamped, 0, 1234)
    rows: Any = same_verdict(bytes(stamped))
    assert [row[1] for row in rows] == [1234, 1234]
