"""The columnar path to Arrow gives exactly the batches the per-record path gives.

The per-record path (``iter_all_records`` → ``RecordBatchBuilder.append`` → ``flush``) is the oracle:
for any mix of batches (codecs, nulls, headers, LogAppendTime, transaction markers) and any offset
range cutting through them, ``append_record_batches`` plus ``take_batch``/``flush`` must produce equal
RecordBatches, cut at the same rows; and ``read_range`` must yield the same batches with either decoder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import pipeline.fetch  # noqa: E402
from pipeline.arrow import RecordBatchBuilder, source_arrow_schema  # noqa: E402
from pipeline.fetch import DECODER_ENV, ReadTask, read_range  # noqa: E402
from pipeline.offsets import OffsetRange  # noqa: E402
from protocol.records import (  # noqa: E402
    CompressionType,
    Record,
    build_batch,
    build_end_txn_marker_batch,
    iter_all_records,
    iter_batches,
    stamp_log_append_time,
)
from protocol.records.columnar import decode_batch_columns  # noqa: E402
from tests.pipeline.test_fetch import SETTINGS, FakeLog, Harness  # noqa: E402

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

payloads = st.one_of(st.none(), st.just(b""), st.binary(max_size=30))
header_lists = st.lists(st.tuples(st.text(max_size=5), payloads), max_size=2)
records = st.builds(
    Record, value=payloads, key=payloads, headers=header_lists, timestamp=st.integers(-1, 2**40)
)
batch_specs = st.tuples(
    st.lists(records, min_size=1, max_size=6),
    st.sampled_from(list(CompressionType)),
    st.sampled_from(["create", "log_append", "marker"]),
)


def encode_log(specs: list[tuple[list[Record], CompressionType, str]], first_offset: int = 100) -> bytes:
    """Consecutive batches from ``first_offset`` on, as a fetched log slice."""
    out = bytearray()
    offset = first_offset
    for recs, codec, kind in specs:
        if kind == "marker":
            out += build_end_txn_marker_batch(
                commit=True,
                producer_id=1,
                producer_epoch=0,
                coordinator_epoch=0,
                timestamp=7,
                base_offset=offset,
            )
            offset += 1
            continue
        batch = bytearray(build_batch(recs, base_offset=offset, compression=codec))
        if kind == "log_append":
            stamp_log_append_time(batch, 0, 1_700_000_000_000 + offset)
        out += batch
        offset += len(recs)
    return bytes(out)


def old_batches(
    raw: bytes, lo: int | None, hi: int | None, include_headers: bool, max_rows: int
) -> list[pa.RecordBatch]:
    """The per-record path as read_range used it: append, flush every ``max_rows`` rows, flush the rest."""
    builder = RecordBatchBuilder("topic", 7, include_headers)
    out = []
    for record in iter_all_records(raw):
        if (
            record.is_control
            or (lo is not None and record.offset < lo)
            or (hi is not None and record.offset >= hi)
        ):
            continue
        builder.append(record)
        if len(builder) >= max_rows:
            out.append(builder.flush())
    out.append(builder.flush())
    return [b for b in out if b is not None]


def new_batches(
    pieces: list[bytes],
    lo: int | None,
    hi: int | None,
    include_headers: bool,
    max_rows: int,
    compiled: bool = True,
) -> list[pa.RecordBatch]:
    """The columnar path as read_range uses it, fed one fetched slice at a time (decoded by the
    compiled kernel, or by the pure-Python walk with numpy's gather)."""
    builder = RecordBatchBuilder("topic", 7, include_headers, compiled=compiled)
    out = []
    for piece in pieces:
        builder.append_record_batches(piece, lo, hi)
        while len(builder) >= max_rows:
            out.append(builder.take_batch(max_rows))
    out.append(builder.flush())
    return [b for b in out if b is not None]


def assert_same(old: list[pa.RecordBatch], new: list[pa.RecordBatch], include_headers: bool) -> None:
    assert [b.num_rows for b in new] == [b.num_rows for b in old]
    for expected, got in zip(old, new, strict=True):
        assert got.schema.equals(source_arrow_schema(include_headers))
        got.validate(full=True)
        assert got.equals(expected), (expected.to_pylist(), got.to_pylist())


@FAST
@given(
    specs=st.lists(batch_specs, min_size=1, max_size=6),
    bounds=st.tuples(st.integers(95, 140), st.integers(0, 40)),
    unbounded=st.booleans(),
    include_headers=st.booleans(),
    max_rows=st.sampled_from([1, 3, 10_000]),
    split=st.integers(0, 6),
    compiled=st.booleans(),
)
def test_the_fast_path_builds_the_same_batches_as_the_record_path(
    specs: list[tuple[list[Record], CompressionType, str]],
    bounds: tuple[int, int],
    unbounded: bool,
    include_headers: bool,
    max_rows: int,
    split: int,
    compiled: bool,
) -> None:
    raw = encode_log(specs)
    lo, hi = (None, None) if unbounded else (bounds[0], bounds[0] + bounds[1])
    batch_ends = [0] + [pos + header.size for pos, header in iter_batches(raw)]
    cut = batch_ends[min(split, len(batch_ends) - 1)]
    pieces = [raw[:cut], raw[cut:]]  # two fetches: pooled rows span separate buffers
    assert_same(
        old_batches(raw, lo, hi, include_headers, max_rows),
        new_batches(pieces, lo, hi, include_headers, max_rows, compiled),
        include_headers,
    )


def test_straddling_batches_are_sliced_to_the_range() -> None:
    recs = [
        Record(f"v{i}".encode(), f"k{i}".encode(), (("i", str(i).encode()),), 1000 + i) for i in range(10)
    ]
    raw = build_batch(recs, base_offset=0, compression=CompressionType.LZ4) + build_batch(
        recs, base_offset=10
    )
    builder = RecordBatchBuilder("t", 0, include_headers=True)
    assert builder.append_record_batches(raw, 7, 13) == 7
    batch = builder.flush()
    assert batch is not None and batch.column("offset").to_pylist() == [7, 8, 9, 10, 11, 12]
    assert batch.column("value").to_pylist() == [b"v7", b"v8", b"v9", b"v0", b"v1", b"v2"]
    assert [h[0]["value"] for h in batch.column("headers").to_pylist()] == [
        b"7",
        b"8",
        b"9",
        b"0",
        b"1",
        b"2",
    ]
    assert builder.append_record_batches(raw, 20, 30) is None and len(builder) == 0


def test_control_batches_add_nothing() -> None:
    marker = build_end_txn_marker_batch(
        commit=False, producer_id=3, producer_epoch=1, coordinator_epoch=0, timestamp=1, base_offset=5
    )
    builder = RecordBatchBuilder("t", 0, include_headers=False)
    header, columns = decode_batch_columns(marker)
    assert builder.append_batch(header, columns) is None
    assert builder.append_record_batches(marker) is None
    assert len(builder) == 0 and builder.flush() is None


def test_both_paths_can_be_mixed_and_keep_the_order() -> None:
    raw = build_batch([Record(b"b", timestamp=2), Record(b"c", timestamp=3)], base_offset=1)
    records = list(iter_all_records(build_batch([Record(b"a", timestamp=1)], base_offset=0)))
    records_after = list(iter_all_records(build_batch([Record(b"d", timestamp=4)], base_offset=3)))
    builder = RecordBatchBuilder("t", 0, include_headers=False)
    builder.append(records[0])
    builder.append_record_batches(raw)
    builder.append(records_after[0])
    assert len(builder) == 4
    first = builder.take_batch(3)
    rest = builder.flush()
    assert first is not None and rest is not None
    assert first.column("value").to_pylist() == [b"a", b"b", b"c"]
    assert rest.column("value").to_pylist() == [b"d"]
    assert rest.column("offset").to_pylist() == [3]
    assert len(builder) == 0 and builder.take_batch(5) is None


def test_timestamps_types_and_null_headers_match_sparks_kafka_source() -> None:
    create = build_batch([Record(b"x", None, (), 1_700_000_000_123)], base_offset=0)
    appended = bytearray(build_batch([Record(b"y", timestamp=1)], base_offset=1))
    stamp_log_append_time(appended, 0, 1_700_000_000_999)
    builder = RecordBatchBuilder("t", 2, include_headers=True)
    builder.append_record_batches(create + bytes(appended))
    rows = builder.flush().to_pylist()
    assert [r["timestampType"] for r in rows] == [0, 1]
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000.123)
    assert rows[1]["timestamp"].timestamp() == pytest.approx(1_700_000_000.999)
    assert [r["headers"] for r in rows] == [None, None]
    assert [r["partition"] for r in rows] == [2, 2] and {r["topic"] for r in rows} == {"t"}


# -- RangeReader and read_range with both decoders ---------------------------------------------------


def _reader_offsets(harness: Harness, start: int, end: int) -> list[int]:
    """Offsets read through RangeReader.append_next (columnar), one builder per call."""
    from pipeline.fetch import RangeReader

    task = ReadTask(OffsetRange("t", 0, start, end), SETTINGS, None, retry_interval_ms=100)
    reader = RangeReader(task, harness.open_consumer, harness.available_range, clock=lambda: harness.now)
    builder = RecordBatchBuilder("t", 0, include_headers=False)

    async def run() -> None:
        while (added := await reader.append_next(builder)) is not None:
            assert added > 0
        await reader.close()

    asyncio.run(run())
    batch = builder.flush()
    return [] if batch is None else batch.column("offset").to_pylist()


def test_range_reader_columnar_path_reads_what_the_record_path_reads() -> None:
    log = FakeLog()
    log.append(10, CompressionType.GZIP)
    log.append(5)
    log.append_marker()  # offset 15
    log.append(10, CompressionType.ZSTD)
    log.append_marker()  # offset 26
    for start, end in ((0, 27), (3, 14), (12, 20), (15, 16), (14, 27), (20, 26)):
        expected = Harness(log).read(start, end)[0]
        assert _reader_offsets(Harness(log, batches_per_fetch=2), start, end) == expected, (start, end)


class _FakeSession:
    """Stands in for BrokerSession inside read_range: runs coroutines, holds no connection."""

    client = None

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._loop = asyncio.new_event_loop()

    def __enter__(self) -> _FakeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.close()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self._loop.run_until_complete(coroutine)


@pytest.mark.parametrize("include_headers", [False, True])
def test_read_range_yields_the_same_batches_with_either_decoder(
    monkeypatch: pytest.MonkeyPatch, include_headers: bool
) -> None:
    log = FakeLog()
    log.append(7, CompressionType.LZ4)
    log.append_marker()
    log.append(30)
    log.batches.append(
        (
            38,
            40,
            build_batch(
                [Record(None, None, (("h", None),), 5)] * 3,
                base_offset=38,
                compression=CompressionType.SNAPPY,
            ),
        )
    )
    log.high_watermark = 41
    harness = Harness(log, batches_per_fetch=2)
    monkeypatch.setattr(pipeline.fetch, "BrokerSession", _FakeSession)
    monkeypatch.setattr(pipeline.fetch, "_consumer_opener", lambda client, task: harness.open_consumer)
    monkeypatch.setattr(pipeline.fetch, "_range_lookup", lambda client, tp: harness.available_range)
    task = ReadTask(OffsetRange("t", 0, 2, 40), SETTINGS, None, include_headers=include_headers)
    results = {}
    for decoder in ("records", "columnar", "python"):
        monkeypatch.setenv(DECODER_ENV, decoder)
        results[decoder] = list(read_range(task, max_rows_per_batch=8))
    assert [b.num_rows for b in results["records"]] == [8, 8, 8, 8, 5]
    assert_same(results["records"], results["columnar"], include_headers)
    assert_same(results["records"], results["python"], include_headers)
    monkeypatch.setenv(DECODER_ENV, "fastest")
    with pytest.raises(ValueError, match="KIPLING_PIPELINE_DECODER"):
        list(read_range(task))
