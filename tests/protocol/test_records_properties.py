"""Record batch v2 properties: codec round trips, kafka-python as an oracle, malformed-input fuzz.

kafka-python 3.0.12 is an independent implementation of the same format: batches kipling builds
must decode there with the same keys, values, headers, offsets and timestamps, and batches its
DefaultRecordBatchBuilder writes (every codec; snappy through a cramjam stand-in for
python-snappy, kafka-python still doing its own xerial framing) must decode here.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from protocol.errors import CorruptRecordError, ProtocolError
from protocol.records import (
    HEADER_SIZE,
    CompressionType,
    Record,
    build_batch,
    compress,
    decode_varint,
    decode_varlong,
    decompress,
    encode_varint,
    iter_all_records,
    iter_batches,
    iter_records,
    read_header,
    stamp_base_offset,
    stamp_partition_leader_epoch,
    validate_message_set,
    verify_batch,
)
from tests.protocol.records_support import (
    HEADER_LAYOUT,
    kafka_python_snappy,  # noqa: F401 - module fixture used by name
    raw_batch,
    with_new_crc,
)

pytestmark = pytest.mark.usefixtures("kafka_python_snappy")

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CODECS = list(CompressionType)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

# Values are sometimes repetitive so that compression really happens (kafka-python falls back to
# an uncompressed batch when compressing does not pay).
payloads = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=40),
    st.builds(lambda unit, times: unit * times, st.binary(min_size=1, max_size=6), st.integers(1, 200)),
)
headers = st.lists(st.tuples(st.text(max_size=8), payloads), max_size=3)
timestamps = st.integers(-1, 2**50)
records = st.builds(Record, value=payloads, key=payloads, headers=headers, timestamp=timestamps)
record_lists = st.lists(records, max_size=12)
nonempty_record_lists = st.lists(records, min_size=1, max_size=12)
"""For kafka-python: it decompresses even an empty batch's absent payload, which some codecs refuse."""


def _decoded(batch: bytes) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in iter_records(batch)]


def _expected(recs: list[Record], base_offset: int) -> list[tuple[Any, ...]]:
    return [(base_offset + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(recs)]


def _only_protocol_errors(call: Callable[[], object]) -> None:
    """Run ``call``; success is fine, and so is any ProtocolError, but nothing else."""
    with contextlib.suppress(ProtocolError):
        call()


# ----------------------------------------------------------------------------------------- round trips


@FAST
@given(
    recs=record_lists,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    epoch=INT32,
    producer=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**15 - 1), st.integers(-1, 2**30)),
)
def test_every_codec_round_trips(
    recs: list[Record], codec: CompressionType, base_offset: int, epoch: int, producer: tuple[int, int, int]
) -> None:
    producer_id, producer_epoch, base_sequence = producer
    batch = build_batch(
        recs,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    header = verify_batch(batch)
    assert validate_message_set(batch) == [header]
    assert (header.compression, header.records_count, header.partition_leader_epoch) == (
        codec,
        len(recs),
        epoch,
    )
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    if recs:
        assert header.max_timestamp == max(r.timestamp for r in recs)
        assert header.last_offset == base_offset + len(recs) - 1
    assert _decoded(batch) == _expected(recs, base_offset)


@FAST
@given(recs=nonempty_record_lists, codec=st.sampled_from(CODECS), base_offset=st.integers(0, 2**62))
def test_kipling_batches_decode_in_kafka_python(
    recs: list[Record], codec: CompressionType, base_offset: int
) -> None:
    batch = build_batch(recs, base_offset=base_offset, compression=codec)
    oracle = DefaultRecordBatch(batch)
    assert oracle.validate_crc()
    assert (oracle.base_offset, oracle.compression_type, oracle.records_count) == (
        base_offset,
        codec,
        len(recs),
    )
    decoded = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in oracle]
    assert decoded == _expected(recs, base_offset)


@FAST
@given(batches=st.lists(st.tuples(nonempty_record_lists, st.sampled_from(CODECS)), min_size=1, max_size=4))
def test_concatenations_decode_in_kafka_python_memory_records(
    batches: list[tuple[list[Record], CompressionType]],
) -> None:
    built, offset = [], 0
    for recs, codec in batches:
        built.append(build_batch(recs, base_offset=offset, compression=codec))
        offset += len(recs)
    buf = b"".join(built)
    oracle = [(r.offset, r.key, r.value, list(r.headers)) for batch in MemoryRecords(buf) for r in batch]
    ours = [(r.offset, r.key, r.value, r.headers) for r in iter_all_records(buf)]
    assert ours == oracle
    assert [h.base_offset for h in validate_message_set(buf)] == [read_header(b).base_offset for b in built]


@st.composite
def kafka_python_batches(draw: st.DrawFn) -> tuple[bytes, list[tuple[Any, ...]], int]:
    """A batch from kafka-python's builder, with offset gaps, producer state and any codec."""
    codec = draw(st.sampled_from(CODECS))
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    if draw(st.booleans()):
        builder.set_producer_state(
            draw(st.integers(0, 2**62)),
            draw(st.integers(0, 2**15 - 1)),
            draw(st.integers(0, 2**30)),
            draw(st.booleans()),
        )
    expected, offset = [], -1
    for rec in draw(nonempty_record_lists):
        offset += draw(st.integers(1, 3))
        builder.append(
            offset, timestamp=rec.timestamp, key=rec.key, value=rec.value, headers=list(rec.headers)
        )
        expected.append((offset, rec.timestamp, rec.key, rec.value, list(rec.headers)))
    return bytes(builder.build()), expected, codec


@FAST
@given(built=kafka_python_batches())
def test_kafka_python_batches_decode_in_kipling(built: tuple[bytes, list[tuple[Any, ...]], int]) -> None:
    batch, expected, codec = built
    header = verify_batch(batch)
    assert header.compression in (codec, CompressionType.NONE)  # kafka-python drops useless codecs
    assert header.records_count == len(expected)
    assert header.last_offset_delta == expected[-1][0]
    assert _decoded(batch) == expected
    oracle = DefaultRecordBatch(batch)
    decoded = iter_records(batch)
    assert [r.sequence for r in decoded] == [
        -1 if not oracle.has_sequence else oracle.base_sequence + offset for offset, *_ in expected
    ]


def test_kafka_python_builder_really_compresses_with_every_codec() -> None:
    """Guard against the property above only ever seeing kafka-python's uncompressed fallback."""
    for codec in CODECS:
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
        for offset in range(50):
            builder.append(
                offset, timestamp=1000 + offset, key=b"key", value=b"value" * 40, headers=[("h", b"v")]
            )
        batch = bytes(builder.build())
        assert read_header(batch).compression == codec
        assert [r.value for r in iter_records(batch)] == [b"value" * 40] * 50


# ----------------------------------------------------------------------------------------- header view


@FAST
@given(
    fields=st.tuples(
        INT64,
        st.integers(49, 2**31 - 1),
        INT32,
        st.integers(0, 2**32 - 1),
        st.integers(-(2**15), 2**15 - 1),
        st.integers(0, 2**31 - 1),
        INT64,
        INT64,
        INT64,
        st.integers(-(2**15), 2**15 - 1),
        INT32,
        st.integers(0, 2**31 - 1),
    )
)
def test_header_view_reads_any_packed_header(fields: tuple[int, ...]) -> None:
    base_offset, length, epoch, *rest = fields
    buf = HEADER_LAYOUT.pack(base_offset, length, epoch, 2, *rest)
    assert tuple(read_header(buf)) == (base_offset, length, epoch, 2, *rest)


@FAST
@given(recs=record_lists, offset=INT64, epoch=INT32, pad=st.integers(0, 5))
def test_stamping_never_invalidates_the_crc(recs: list[Record], offset: int, epoch: int, pad: int) -> None:
    batch = build_batch(recs)
    buf = bytearray(b"\x00" * pad + batch)
    stamp_base_offset(buf, pad, offset)
    stamp_partition_leader_epoch(memoryview(buf), pad, epoch)
    header = verify_batch(buf, pad)
    assert (header.base_offset, header.partition_leader_epoch) == (offset, epoch)


# --------------------------------------------------------------------------------------------- varints


@FAST
@given(value=INT32)
def test_varint_round_trip(value: int) -> None:
    out = bytearray()
    encode_varint(value, out)
    assert decode_varint(bytes(out), 0) == (value, len(out))


@FAST
@given(value=INT64)
def test_varlong_round_trip(value: int) -> None:
    out = bytearray()
    encode_varint(value, out)
    assert decode_varlong(bytes(out), 0) == (value, len(out))


@FAST
@given(value=st.one_of(st.integers(2**31, 2**63 - 1), st.integers(-(2**63), -(2**31) - 1)))
def test_varint_rejects_values_beyond_int32(value: int) -> None:
    out = bytearray()
    encode_varint(value, out)
    with pytest.raises(CorruptRecordError):
        decode_varint(bytes(out), 0)


# ------------------------------------------------------------------------------------------------ fuzz


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bytes_only_raise_protocol_errors(data: bytes) -> None:
    for call in (
        lambda: read_header(data),
        lambda: verify_batch(data),
        lambda: list(iter_batches(data)),
        lambda: validate_message_set(data),
        lambda: list(iter_records(data)),
        lambda: list(iter_records(data, verify_crc=False)),
        lambda: list(iter_all_records(data, verify_crc=False)),
    ):
        _only_protocol_errors(call)


@FUZZ
@given(
    stream=st.binary(max_size=200),
    attributes=st.integers(0, 0x7F),
    count=st.integers(0, 40),
    base_timestamp=INT64,
)
def test_random_record_streams_behind_a_valid_crc(
    stream: bytes, attributes: int, count: int, base_timestamp: int
) -> None:
    """A correct CRC over garbage: the reader itself must catch every fault, for every codec id."""
    batch = raw_batch(stream, count=count, attributes=attributes, base_timestamp=base_timestamp)
    try:
        decoded = list(iter_records(batch, 1 << 16))
    except CorruptRecordError:
        return
    assert len(decoded) == count


COMPRESSED_PREFIXES = {
    CompressionType.GZIP: b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff",
    CompressionType.SNAPPY: b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01",
    CompressionType.LZ4: b"\x04\x22\x4d\x18\x60\x40\x82",
    CompressionType.ZSTD: b"\x28\xb5\x2f\xfd",
}


@FUZZ
@given(codec=st.sampled_from(CODECS), tail=st.binary(max_size=200), prefixed=st.booleans())
def test_random_compressed_data_only_raises_corrupt_record(
    codec: CompressionType, tail: bytes, prefixed: bool
) -> None:
    data = (COMPRESSED_PREFIXES.get(codec, b"") if prefixed else b"") + tail
    try:
        out = decompress(codec, data, 4096)
    except CorruptRecordError:
        return
    assert len(out) <= 4096


def _sample_batches() -> list[bytes]:
    recs = [
        Record(b"value" * 10, b"key", [("h", b"1"), ("n", None)], 1000),
        Record(None, None, (), 1001),
        Record(b"", b"", [("", b"")], 999),
    ]
    return [build_batch(recs, base_offset=5, compression=codec) for codec in CODECS]


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_of_a_batch_is_corrupt(codec: CompressionType) -> None:
    batch = _sample_batches()[codec]
    for cut in range(len(batch)):
        prefix = batch[:cut]
        with pytest.raises(CorruptRecordError):
            list(iter_records(prefix))
        with pytest.raises(CorruptRecordError):
            validate_message_set(batch + prefix if cut else prefix + b"\x00")
        assert list(iter_batches(batch + prefix)) == [(0, read_header(batch))]


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_of_the_record_stream_is_corrupt(codec: CompressionType) -> None:
    """Cut the payload, then fix BatchLength and the CRC so the reader has to find the damage."""
    batch = _sample_batches()[codec]
    for cut in range(HEADER_SIZE, len(batch)):
        with pytest.raises(CorruptRecordError):
            list(iter_records(with_new_crc(batch[:cut])))


@FUZZ
@given(
    codec=st.sampled_from(CODECS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_corrupted_record_bytes_behind_a_valid_crc(
    codec: CompressionType, edits: list[tuple[int, int]]
) -> None:
    batch = bytearray(_sample_batches()[codec])
    payload_size = len(batch) - HEADER_SIZE
    for position, value in edits:
        batch[HEADER_SIZE + position % payload_size] = value
    _only_protocol_errors(lambda: list(iter_records(with_new_crc(batch), 1 << 16)))


@FUZZ
@given(
    position=st.integers(0, 200),
    run=st.binary(min_size=1, max_size=12).map(lambda b: bytes(x | 0x80 for x in b)),
)
def test_overlong_varints_inserted_into_records(position: int, run: bytes) -> None:
    """Continuation-bit runs spliced into the record stream: too-long varints, lengths past the end."""
    batch = _sample_batches()[CompressionType.NONE]
    cut = HEADER_SIZE + position % (len(batch) - HEADER_SIZE)
    _only_protocol_errors(lambda: list(iter_records(with_new_crc(batch[:cut] + run + batch[cut:]))))


@FAST
@given(count=st.integers(0, 2**31 - 1), codec=st.sampled_from(CODECS))
def test_absurd_record_counts_are_refused_before_decoding(count: int, codec: CompressionType) -> None:
    batch = bytearray(_sample_batches()[codec])
    struct.pack_into(">i", batch, 57, count)
    try:
        decoded = list(iter_records(with_new_crc(batch)))
    except CorruptRecordError:
        return
    assert count == 3 and len(decoded) == 3


@FAST
@given(data=st.binary(max_size=2000), codec=st.sampled_from(CODECS))
def test_decompress_inverts_compress(data: bytes, codec: CompressionType) -> None:
    assert decompress(codec, compress(codec, data), len(data)) == data
