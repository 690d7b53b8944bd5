"""Arrow conversion (exactly Spark's schema) and Kafka-compatible partitioning of written rows."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from client.partitioner import murmur2, partition_for_key  # noqa: E402
from pipeline.arrow import HEADERS_TYPE, RecordBatchBuilder, outgoing_records, source_arrow_schema  # noqa: E402
from protocol.records import CompressionType, Record, TimestampType, build_batch, iter_all_records  # noqa: E402


def test_arrow_schema_is_what_pyspark_derives_from_the_spark_schema() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import to_arrow_schema

    from pipeline.source import spark_schema

    for headers in (False, True):
        assert source_arrow_schema(headers).equals(to_arrow_schema(spark_schema(headers), timezone="UTC"))


def test_builder_converts_records_like_sparks_kafka_source() -> None:
    records = [
        Record(b"v0", b"k0", (("a", b"1"), ("n", None)), timestamp=1_700_000_000_123),
        Record(None, None, (), timestamp=1_700_000_000_124),
    ]
    raw = build_batch(records, base_offset=40, compression=CompressionType.ZSTD)
    raw += build_batch(
        [Record(b"v2", timestamp=5)], base_offset=42, timestamp_type=TimestampType.LOG_APPEND_TIME
    )
    builder = RecordBatchBuilder("topic", 3, include_headers=True)
    for record in iter_all_records(raw):
        builder.append(record)
    assert len(builder) == 3
    batch = builder.flush()
    assert batch is not None and len(builder) == 0 and builder.flush() is None
    assert batch.schema.equals(source_arrow_schema(True))
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [40, 41, 42]
    assert [r["key"] for r in rows] == [b"k0", None, None]
    assert [r["value"] for r in rows] == [b"v0", None, b"v2"]
    assert {r["topic"] for r in rows} == {"topic"} and {r["partition"] for r in rows} == {3}
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000.123)
    assert [r["timestampType"] for r in rows] == [0, 0, 1]
    assert rows[0]["headers"] == [{"key": "a", "value": b"1"}, {"key": "n", "value": None}]
    assert rows[1]["headers"] is None  # Spark's Kafka source: null, not an empty array


def test_builder_without_headers_has_no_headers_column() -> None:
    builder = RecordBatchBuilder("t", 0, include_headers=False)
    for record in iter_all_records(build_batch([Record(b"v", headers=(("h", b"x"),))])):
        builder.append(record)
    batch = builder.flush()
    assert batch is not None and batch.schema.equals(source_arrow_schema(False))


def test_outgoing_records_accept_string_or_binary_columns() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(["k", None], pa.string()),
            "value": pa.array([b"v", None], pa.binary()),
            "partition": pa.array([1, None], pa.int32()),
            "headers": pa.array([[("h", b"1")], None], HEADERS_TYPE),
            "ignored": pa.array([1, 2]),
        }
    )
    rows = list(outgoing_records(batch))
    assert [(r.key, r.value, r.partition, r.topic, r.headers) for r in rows] == [
        (b"k", b"v", 1, None, (("h", b"1"),)),
        (None, None, None, None, ()),
    ]


def test_murmur2_matches_kafkas_test_vectors() -> None:
    """Apache Kafka's UtilsTest.testMurmur2 (signed Java ints)."""
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for data, signed in cases.items():
        assert murmur2(data) == signed & 0xFFFFFFFF


@given(st.binary(max_size=64), st.integers(1, 100))
def test_partition_for_key_matches_kafka_python(key: bytes, partitions: int) -> None:
    from kafka.partitioner.default import murmur2 as kafka_murmur2

    assert murmur2(key) == kafka_murmur2(key)
    assert partition_for_key(key, partitions) == (kafka_murmur2(key) & 0x7FFFFFFF) % partitions
