"""The compiled batch encoder against ``build_batch`` (the oracle) and the reader; its murmur2 against
the partitioner's.

Random rows (null and empty keys and values, sizes up to a few KiB, any timestamps, a random subset
of rows in random order) must encode byte-for-byte as ``build_batch`` encodes the same records, with
every codec and producer fields, and decode back through :mod:`protocol.records.reader`.
"""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("numba")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from client.partitioner import murmur2, partition_for_key  # noqa: E402
from protocol.errors import EncodeError  # noqa: E402
from protocol.records import CompressionType, Record, build_batch  # noqa: E402
from protocol.records.columnar_encoder import (  # noqa: E402
    BinaryColumn,
    ColumnPiece,
    build_batch_columns,
    build_batch_pieces,
    murmur2_column,
)
from protocol.records.reader import iter_records  # noqa: E402

pytestmark = pytest.mark.timeout(180)  # the kernels' first compile (no numba cache yet) takes ~10 s

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
Rows = tuple[list[bytes | None], list[bytes | None], list[int], list[int]]
BLOBS = st.one_of(st.none(), st.just(b""), st.binary(max_size=40), st.binary(min_size=100, max_size=3000))


@st.composite
def rows_and_selection(
    draw: st.DrawFn,
) -> tuple[list[bytes | None], list[bytes | None], list[int], list[int]]:
    count = draw(st.integers(min_value=1, max_value=40))
    keys = draw(st.lists(BLOBS, min_size=count, max_size=count))
    values = draw(st.lists(BLOBS, min_size=count, max_size=count))
    selected = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=60))
    base = draw(st.integers(min_value=-(2**40), max_value=2**42))
    spread = draw(st.sampled_from([0, 1, 1000, 2**20]))
    timestamps = draw(
        st.lists(st.integers(base - spread, base + spread), min_size=len(selected), max_size=len(selected))
    )
    return keys, values, selected, timestamps


@SETTINGS
@given(
    data=rows_and_selection(),
    codec=st.sampled_from(list(CompressionType)),
    producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)),
    base_offset=st.integers(0, 2**40),
)
def test_same_bytes_as_build_batch_and_reads_back(
    data: Rows,
    codec: CompressionType,
    producer: tuple[int, int, int],
    base_offset: int,
) -> None:
    keys, values, selected, timestamps = data
    producer_id, producer_epoch, base_sequence = producer
    records = [Record(values[row], keys[row], (), ts) for row, ts in zip(selected, timestamps, strict=True)]
    expected = build_batch(
        records,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        compression=codec,
    )
    got = build_batch_columns(
        BinaryColumn.from_values(keys),
        BinaryColumn.from_values(values),
        np.array(selected, np.int64),
        np.array(timestamps, np.int64),
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        compression=codec,
    )
    assert got == expected
    decoded = list(iter_records(got))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (base_offset + i, rec.timestamp, rec.key, rec.value, []) for i, rec in enumerate(records)
    ]


@SETTINGS
@given(data=rows_and_selection(), cut=st.integers(0, 60), codec=st.sampled_from(list(CompressionType)))
def test_pieces_make_one_batch(data: Rows, cut: int, codec: CompressionType) -> None:
    """Rows buffered from two inputs (here: two cuts of one selection) encode as one build_batch."""
    keys, values, selected, timestamps = data
    cut = min(cut, len(selected))
    key_column, value_column = BinaryColumn.from_values(keys), BinaryColumn.from_values(values)
    rows, stamps = np.array(selected, np.int64), np.array(timestamps, np.int64)
    pieces = [
        ColumnPiece(key_column, value_column, rows[:cut], stamps[:cut]),
        ColumnPiece(key_column, value_column, rows[cut:], stamps[cut:]),
    ]
    records = [Record(values[row], keys[row], (), ts) for row, ts in zip(selected, timestamps, strict=True)]
    assert build_batch_pieces(pieces, compression=codec) == build_batch(records, compression=codec)


def test_extreme_timestamp_deltas_match() -> None:
    """Deltas that need all ten varlong bytes (and a negative one) encode as build_batch does."""
    values = [b"a", None, b""]
    timestamps = [0, 2**62, -(2**62)]
    records = [Record(v, None, (), ts) for v, ts in zip(values, timestamps, strict=True)]
    got = build_batch_columns(
        BinaryColumn.nulls(3),
        BinaryColumn.from_values(values),
        np.arange(3, dtype=np.int64),
        np.array(timestamps, np.int64),
    )
    assert got == build_batch(records)


def test_empty_batch_is_refused() -> None:
    with pytest.raises(EncodeError):
        build_batch_columns(
            BinaryColumn.nulls(0), BinaryColumn.nulls(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
        )


@SETTINGS
@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=70)), min_size=1, max_size=50))
def test_murmur2_column_is_the_partitioners(keys: list[bytes | None]) -> None:
    hashes = murmur2_column(BinaryColumn.from_values(keys))
    assert hashes.tolist() == [-1 if k is None else murmur2(k) for k in keys]
    for partitions in (1, 3, 7, 100):
        chosen = [(int(h) & 0x7FFFFFFF) % partitions for h in hashes if h >= 0]
        assert chosen == [partition_for_key(k, partitions) for k in keys if k is not None]


def test_murmur2_known_kafka_values() -> None:
    """Values from Kafka's UtilsTest.testMurmur2 (as signed Java ints), through the column kernel."""
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536}
    hashes = murmur2_column(BinaryColumn.from_values(list(cases)))
    assert [int(h) - 2**32 if h >= 2**31 else int(h) for h in hashes] == list(cases.values())
