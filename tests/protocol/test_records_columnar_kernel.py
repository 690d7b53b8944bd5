"""The compiled record walk against the pure-Python one (and so against the reader).

:func:`decode_batch_arrays` with the kernel must give exactly the arrays the Python walk of
:mod:`protocol.records.columnar` gives, or reject what it rejects (which
``test_records_columnar`` checks against the per-record reader): on built batches of every codec
(nulls, empty values, headers, LogAppendTime, control batches), hand-built streams with varints of
every width, random streams behind a valid CRC, truncations and single-byte edits, and every varint
set to wrong values. The numpy fallback of :func:`gather_spans` is checked against the kernel's.
"""

from __future__ import annotations

from typing import Any

import pytest

np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from protocol.errors import CorruptRecordError  # noqa: E402
from protocol.records import (  # noqa: E402
    HEADER_SIZE,
    CompressionType,
    Record,
    build_batch,
    build_end_txn_marker_batch,
    stamp_log_append_time,
)
from protocol.records.columnar import FIELDS_PER_RECORD, decode_batch_columns  # noqa: E402
from protocol.records.columnar_arrays import (  # noqa: E402
    KERNEL_AVAILABLE,
    as_uint8,
    decode_batch_arrays,
    decode_record_arrays,
    gather_spans,
)
from tests.protocol.records_support import raw_batch, raw_record  # noqa: E402
from tests.protocol.test_records_columnar import (  # noqa: E402
    FIELDS,
    INT64,
    SHAPES,
    _natural_varints,
    edited_streams,
    encode_record,
    raw_records,
    reader_rows,
    record_fields,
    records,
)

pytestmark = [
    pytest.mark.timeout(120),  # the kernel's first compile (no numba cache yet) takes ~10 s
    pytest.mark.skipif(not KERNEL_AVAILABLE, reason="numba is not installed"),
]

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Verdict = tuple[list[Any], ...] | str


def python_walk(batch: bytes, pos: int = 0) -> Verdict:
    """The reference: the pure-Python walk's columns, as lists ("corrupt" if it rejects the batch)."""
    try:
        _, columns = decode_batch_columns(batch, pos)
    except CorruptRecordError:
        return "corrupt"
    fields = [columns.fields[k::FIELDS_PER_RECORD] for k in range(FIELDS_PER_RECORD)]
    return (fields, columns.header_rows, columns.header_counts, columns.header_fields)


def kernel_walk(batch: bytes, pos: int = 0, compiled: bool = True) -> Verdict:
    try:
        _, arrays = decode_batch_arrays(batch, pos, compiled=compiled)
    except CorruptRecordError:
        return "corrupt"
    assert arrays.columns.shape == (FIELDS_PER_RECORD, arrays.count)
    assert arrays.columns.dtype == np.int64 and arrays.columns.flags.c_contiguous
    return (
        arrays.columns.tolist(),
        arrays.header_rows.tolist(),
        arrays.header_counts.tolist(),
        arrays.header_fields.tolist(),
    )


def same_verdict(batch: bytes) -> Verdict:
    expected = python_walk(batch)
    assert kernel_walk(batch) == expected
    assert kernel_walk(batch, compiled=False) == expected
    assert (reader_rows(batch) == "corrupt") == (expected == "corrupt")
    return expected


# ------------------------------------------------------------------------------- well-formed batches


@FAST
@given(
    recs=st.lists(records, max_size=12),
    codec=st.sampled_from(list(CompressionType)),
    base_offset=st.integers(0, 2**62),
    log_append_time=st.one_of(st.none(), st.integers(0, 2**50)),
)
def test_built_batches_decode_like_the_python_walk(
    recs: list[Record], codec: CompressionType, base_offset: int, log_append_time: int | None
) -> None:
    batch = build_batch(recs, base_offset=base_offset, compression=codec)
    if log_append_time is not None:
        stamped = bytearray(batch)
        stamp_log_append_time(stamped, 0, log_append_time)
        batch = bytes(stamped)
    assert same_verdict(batch) != "corrupt"


@FAST
@given(built=raw_records(), base_timestamp=INT64)
def test_any_deltas_and_lengths_decode_like_the_python_walk(
    built: tuple[bytes, int], base_timestamp: int
) -> None:
    stream, count = built
    assert same_verdict(raw_batch(stream, count=count, base_timestamp=base_timestamp)) != "corrupt"


def test_control_batches_and_empty_batches() -> None:
    marker = build_end_txn_marker_batch(
        commit=False, producer_id=3, producer_epoch=1, coordinator_epoch=2, timestamp=9, base_offset=5
    )
    assert same_verdict(marker) != "corrupt"
    for codec in CompressionType:
        assert same_verdict(build_batch([], compression=codec)) == ([[]] * FIELDS_PER_RECORD, [], [], [])


def test_batches_inside_a_buffer_decode_in_place_whatever_the_buffer_type() -> None:
    one = build_batch([Record(b"a", b"k")], base_offset=0)
    two = build_batch([Record(b"bb", None, (("h", b"v"),)), Record(None, b"ccc")], base_offset=1)
    for buf in (one + two, bytearray(one + two), memoryview(one + two)):
        header, arrays = decode_batch_arrays(buf, len(one))
        assert arrays.buffer is buf and header.base_offset == 1
        assert (arrays.start, arrays.end) == (len(one) + HEADER_SIZE, len(buf))
        starts, lengths = arrays.columns[4], arrays.columns[5]
        assert bytes(buf[starts[0] : starts[0] + lengths[0]]) == b"bb" and lengths[1] == -1
        assert arrays.header_rows.tolist() == [0] and arrays.header_counts.tolist() == [1]


def test_ten_thousand_records_with_long_deltas() -> None:
    """Offset deltas of three bytes (from the 8,192nd record on) and values of two-byte lengths."""
    recs = [Record(bytes([i % 251]) * (i % 300), None, (), 1_000_000 + 7 * i) for i in range(10_000)]
    batch = build_batch(recs, compression=CompressionType.ZSTD)
    assert same_verdict(batch) != "corrupt"


# ------------------------------------------------------------------------------------ malformed input


@FUZZ
@given(
    stream=st.binary(max_size=200),
    count=st.integers(0, 40),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
)
def test_random_record_streams_get_the_python_walks_verdict(
    stream: bytes, count: int, codec: CompressionType
) -> None:
    same_verdict(raw_batch(stream, count=count, attributes=codec))


@FUZZ
@given(edited=edited_streams())
def test_edited_record_streams_get_the_python_walks_verdict(edited: tuple[bytes, int]) -> None:
    stream, count = edited
    same_verdict(raw_batch(stream, count=max(count, 0)))


@FUZZ
@given(
    recs=st.lists(record_fields, min_size=1, max_size=3),
    victim=st.integers(0, 2),
    field=st.sampled_from(FIELDS),
    value=st.one_of(st.integers(-3, 3), st.integers(-(2**31), 2**31 - 1), INT64),
)
def test_one_wrong_varint_gets_the_python_walks_verdict(
    recs: list[Any], victim: int, field: str, value: int
) -> None:
    stream = b"".join(
        encode_record(fields, {field: value} if i == victim % len(recs) else {})
        for i, fields in enumerate(recs)
    )
    same_verdict(raw_batch(stream, count=len(recs)))


def test_every_varint_off_by_a_little_gets_the_python_walks_verdict() -> None:
    verdicts = set()
    for shape in SHAPES:
        first = encode_record(shape, {})
        natural = dict(zip(FIELDS, _natural_varints(shape), strict=True))
        for field in FIELDS:
            for value in {*range(-3, 4), *(natural[field] + d for d in range(-3, 4))}:
                stream = first + encode_record(shape, {field: value})
                verdicts.add(same_verdict(raw_batch(stream, count=2)) == "corrupt")
    assert verdicts == {True, False}


@pytest.mark.parametrize(
    "stream",
    [
        b"\x00" * 7,  # an empty record
        raw_record(0, 0, None, b"v", [(b"\xff", b"x")]),  # a header key that is not UTF-8
        raw_record(0, 0, None, b"v", [(b"ok", b"x"), (b"\xc3", None)]),  # the second one
        raw_record(0, 0, None, None)[:-1] + b"\x80\x00",  # header count 0, written in two bytes
        raw_record(0, 2**31 - 1, None, b"v"),  # the widest timestamp deltas: 5 and 10 bytes
        raw_record(0, -(2**63), None, b"v"),
        raw_record(0, 2**63 - 1, None, b"v"),
        raw_record(-(2**31), 0, b"k", None),
    ],
)
def test_edge_records_get_the_python_walks_verdict(stream: bytes) -> None:
    same_verdict(raw_batch(stream, count=1))


def test_varlongs_beyond_64_bits_are_corrupt() -> None:
    for tail in (b"\x02", b"\x7f", b"\x81\x00"):  # the 10th byte carries bits beyond the 64th
        body = b"\x00" + b"\xff" * 9 + tail + b"\x00\x01\x01\x00"
        stream = bytes([len(body) << 1]) + body
        assert same_verdict(raw_batch(stream, count=1)) == "corrupt"


def test_record_count_beyond_the_bytes_is_rejected_before_decoding() -> None:
    with pytest.raises(CorruptRecordError, match="declares 10 records"):
        decode_record_arrays(b"\x00" * 20, 0, 20, 10)


# ------------------------------------------------------------------------------------------ gather


@FAST
@given(
    data=st.binary(min_size=1, max_size=200),
    spans=st.lists(st.tuples(st.integers(0, 199), st.integers(-1, 50)), max_size=20),
    first_row=st.integers(0, 3),
    data_pos=st.integers(0, 5),
)
def test_gather_kernel_and_numpy_fallback_agree(
    data: bytes, spans: list[tuple[int, int]], first_row: int, data_pos: int
) -> None:
    buf = as_uint8(data)
    clipped = [(min(s, len(data)), -1 if n < 0 else min(n, len(data) - min(s, len(data)))) for s, n in spans]
    starts = np.array([s for s, _ in clipped], np.int64)
    lengths = np.array([n for _, n in clipped], np.int64)
    total = data_pos + int(np.maximum(lengths, 0).sum())
    expected = b"".join(data[s : s + n] for s, n in clipped if n > 0)
    results = []
    for compiled in (True, False):
        offsets = np.zeros(first_row + len(spans) + 1, np.int32)
        out = np.zeros(total, np.uint8)
        end = gather_spans(buf, starts, lengths, offsets, out, first_row, data_pos, compiled=compiled)
        assert end == total and out[data_pos:].tobytes() == expected
        results.append(offsets.tolist())
    assert results[0] == results[1]


def test_the_compiled_gather_refuses_spans_outside_its_buffers() -> None:
    buf = as_uint8(b"0123456789")
    for starts, lengths, room in (([8], [3], 10), ([-1], [2], 10), ([0, 5], [5, 5], 9)):
        offsets = np.zeros(len(starts) + 1, np.int32)
        data = np.zeros(room, np.uint8)
        with pytest.raises(IndexError):
            gather_spans(buf, np.array(starts, np.int64), np.array(lengths, np.int64), offsets, data, 0, 0)
