"""Batch and streaming writes of the ``kipling`` format, read back through the source."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


from pipeline.produce import partition_for_key
from tests.integration.broker_process import BrokerProcess
from tests.pipeline.helpers import new_topic, produce

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow


def read_back(spark: SparkSession, broker: BrokerProcess, topic: str) -> list:  # type: ignore[type-arg]
    return (
        spark.read.format("kipling")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .orderBy("partition", "offset")
        .collect()
    )


def test_batch_write_then_read_back(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, "write", partitions=2)
    rows = [
        (
            f"key-{i}",
            f"value-{i}".encode(),
            i % 2,
            [("n", str(i).encode()), ("none", None)] if i % 3 else None,
        )
        for i in range(50)
    ]
    df = spark.createDataFrame(
        rows, "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    df.write.format("kipling").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", topic
    ).option("kafka.compression.type", "zstd").mode("append").save()

    back = read_back(spark, broker, topic)
    assert len(back) == 50
    for partition in (0, 1):
        got = [r for r in back if r["partition"] == partition]
        want = [row for row in rows if row[2] == partition]
        assert [r["offset"] for r in got] == list(range(len(want)))  # written in row order
        assert [(r["key"].decode(), r["value"]) for r in got] == [(w[0], w[1]) for w in want]
        assert [[(h["key"], h["value"]) for h in r["headers"]] if r["headers"] else None for r in got] == [
            w[3] for w in want
        ]


def test_write_routes_by_topic_column_and_key_hash(spark: SparkSession, broker: BrokerProcess) -> None:
    first = new_topic(broker.bootstrap, "route-a", partitions=3)
    second = new_topic(broker.bootstrap, "route-b", partitions=3)
    rows = [(first if i % 2 else second, f"k{i}" if i % 5 else None, f"v{i}") for i in range(60)]
    df = spark.createDataFrame(rows, "topic string, key string, value string")
    df.write.format("kipling").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()

    for topic in (first, second):
        back = read_back(spark, broker, topic)
        want = sorted(v for t, _, v in rows if t == topic)
        assert sorted(r["value"].decode() for r in back) == want
        for r in back:
            if r["key"] is not None:  # keyed rows land where Kafka's default partitioner puts them
                assert r["partition"] == partition_for_key(r["key"], 3)


def test_streaming_write_copies_a_topic(spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    source = new_topic(broker.bootstrap, "copy-from", partitions=2)
    target = new_topic(broker.bootstrap, "copy-to", partitions=1)
    produced = produce(broker.bootstrap, source, 90, partitions=(0, 1), compression="snappy")
    query = (
        spark.readStream.format("kipling")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .select("key", "value", "headers")
        .writeStream.format("kipling")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(60)
    assert query.exception() is None
    back = read_back(spark, broker, target)
    got = sorted((r["key"], r["value"], tuple((h["key"], h["value"]) for h in r["headers"])) for r in back)
    assert got == sorted((p.key, p.value, p.headers) for p in produced)


def test_write_without_value_column_fails_with_sparks_message(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.write.format("kipling").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", "never-created"
        ).mode("append").save()
