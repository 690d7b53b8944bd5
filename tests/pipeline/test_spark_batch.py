"""Batch reads of the ``kipling`` format against a real broker process and a local SparkSession."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


from tests.integration.broker_process import BrokerProcess
from tests.integration.secured_broker import SecuredBroker
from tests.pipeline.helpers import Produced, new_topic, produce

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.slow


def read(spark: SparkSession, broker: BrokerProcess, **options: str) -> DataFrame:
    reader = spark.read.format("kipling").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def as_produced(rows: list, *, headers: bool = True) -> list[Produced]:  # type: ignore[type-arg]
    out = []
    for row in rows:
        row_headers = tuple((h["key"], h["value"]) for h in row["headers"] or ()) if headers else ()
        timestamp_ms = int(row["timestamp"].timestamp() * 1000)
        out.append(
            Produced(row["partition"], row["offset"], row["key"], row["value"], row_headers, timestamp_ms)
        )
    return sorted(out, key=lambda p: (p.partition, p.offset))


def test_batch_read_equals_what_was_produced(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, "batch", partitions=3)
    produced = produce(
        broker.bootstrap, topic, 300, partitions=(0, 1, 2), compression="zstd", null_key_every=7
    )
    df = read(spark, broker, subscribe=topic, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    rows = df.collect()
    assert {row["topic"] for row in rows} == {topic}
    assert {row["timestampType"] for row in rows} == {0}
    assert as_produced(rows) == produced


def test_assign_timestamps_ending_offsets_and_min_partitions(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    topic = new_topic(broker.bootstrap, "batch-opts", partitions=2)
    produced = produce(
        broker.bootstrap, topic, 100, partitions=(0, 1), compression="gzip", with_headers=False
    )
    by_offset = {(p.partition, p.offset): p for p in produced}
    # Record i has timestamp BASE + i s; partition 0 holds the even i, so offset o of p0 is i = 2 * o.
    start_ts = produced[0].timestamp_ms + 20_000  # i = 20: offset 10 of p0, the first p1 record after it
    df = read(
        spark,
        broker,
        assign=f'{{"{topic}":[0]}}',
        startingTimestamp=str(start_ts),
        endingOffsets=f'{{"{topic}":{{"0":40}}}}',
        minPartitions="3",
    )
    assert "headers" not in df.columns
    assert df.rdd.getNumPartitions() == 3
    rows = df.collect()
    assert sorted(r["offset"] for r in rows) == list(range(10, 40))
    assert all(r["partition"] == 0 and r["value"] == by_offset[(0, r["offset"])].value for r in rows)


def test_batch_read_over_sasl_ssl(spark: SparkSession, secured_broker: SecuredBroker) -> None:
    """Kafka's security options reach Spark's Python workers (pickled with each task) and log in there."""
    topic = new_topic(secured_broker.process.bootstrap, "batch-secured", partitions=2)
    produced = produce(secured_broker.process.bootstrap, topic, 40, partitions=(0, 1))
    reader = spark.read.format("kipling").option(
        "kafka.bootstrap.servers", secured_broker.address("SASL_SSL")
    )
    for key, value in secured_broker.scram_properties().items():
        reader = reader.option(f"kafka.{key}", value)
    rows = reader.option("subscribe", topic).option("includeHeaders", "true").load().collect()
    assert as_produced(rows) == produced


def test_partition_and_offset_filters_are_pushed_into_the_plan(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    """With ``pushFilters`` (and Spark's pushdown setting), ``partition``/``offset`` predicates leave
    fewer and shorter tasks; the answer is the same as Spark filtering every record."""
    topic = new_topic(broker.bootstrap, "batch-pushdown", partitions=2)
    produced = produce(broker.bootstrap, topic, 60, partitions=(0, 1), with_headers=False)
    expected = sorted(p.offset for p in produced if p.partition == 1 and 10 <= p.offset < 25)
    assert len(expected) == 15
    where = "offset >= 10 AND offset < 25 AND partition = 1"
    plain = read(spark, broker, subscribe=topic, maxRecordsPerPartition="10")
    assert plain.filter(where).count() == 15  # Spark's own filtering, without pushdown
    assert plain.filter(where).rdd.getNumPartitions() == 6  # 2 partitions of 30 offsets, 10 a task
    from pyspark.sql import functions

    conf = "spark.sql.python.filterPushdown.enabled"
    before = spark.conf.get(conf) or "false"
    spark.conf.set(conf, "true")
    try:
        pushed = read(spark, broker, subscribe=topic, pushFilters="true", maxRecordsPerPartition="10")
        filtered = pushed.filter(where)
        assert filtered.count() == 15
        assert sorted(r["offset"] for r in filtered.select("offset").collect()) == expected
        # Only [10, 25) of partition 1 is planned: two tasks, not six.
        assert filtered.rdd.getNumPartitions() == 2
        assert pushed.filter("offset IN (3, 12) AND partition IN (0, 1)").count() == 4
        since_ms = sorted(p.timestamp_ms for p in produced)[20]  # record i has BASE + i s: from i = 20 on
        since = datetime.datetime.fromtimestamp(since_ms / 1000, tz=datetime.UTC)
        late = pushed.filter(functions.col("timestamp") >= functions.lit(since))
        assert sorted(
            (r["partition"], r["offset"]) for r in late.select("partition", "offset").collect()
        ) == sorted((p.partition, p.offset) for p in produced if p.timestamp_ms >= since_ms)
        assert late.rdd.getNumPartitions() == 4  # [10, 30) of both partitions, 10 offsets a task
        nothing = pushed.filter("offset > 1000")  # no range left: Spark's one empty InputPartition(None)
        assert nothing.rdd.getNumPartitions() == 1 and nothing.count() == 0
    finally:
        spark.conf.set(conf, before)
