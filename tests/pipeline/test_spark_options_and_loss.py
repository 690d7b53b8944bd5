"""Through Spark: option errors surface with Spark's Kafka messages, and ``failOnDataLoss`` semantics."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


from client.fetch_session import TopicPartition
from pipeline.cluster import BrokerSession
from pipeline.options import ConnectionSettings, parse_bootstrap
from tests.integration.broker_process import BrokerProcess
from tests.pipeline.helpers import BASE_TIMESTAMP_MS, new_topic, produce

if TYPE_CHECKING:
    from pyspark.sql import DataFrameReader, SparkSession

pytestmark = pytest.mark.slow

MONTH_MS = 30 * 24 * 3600 * 1000


def reader(spark: SparkSession, broker: BrokerProcess, **options: str) -> DataFrameReader:
    r = spark.read.format("kipling").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        r = r.option(key, value)
    return r


def test_option_errors_surface_with_sparks_messages(spark: SparkSession, broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match="Only one of the following options can be specified"):
        reader(spark, broker, subscribe="a", assign='{"a":[0]}').load()
    with pytest.raises(Exception, match="One of the following options must be specified"):
        reader(spark, broker).load()
    with pytest.raises(Exception, match=r"Kafka option 'auto\.offset\.reset' is not supported"):
        reader(spark, broker, subscribe="a", **{"kafka.auto.offset.reset": "earliest"}).load()
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        reader(spark, broker, subscribe="a", startingOffsets="latest").load().collect()
    with pytest.raises(Exception, match="fixed schema"):
        reader(spark, broker, subscribe="a").schema("value binary").load().collect()
    stream = (
        spark.readStream.format("kipling")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "a")
        .option("endingOffsets", "latest")
        .load()
    )
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        stream.writeStream.format("console").start().awaitTermination(30)


@pytest.fixture(scope="module")
def aged_out_topic(broker: BrokerProcess) -> tuple[str, int, int]:
    """A topic whose first records retention deleted: (topic, log start offset, log end offset).

    Old records (a month before the retention limit) go into segments of their own (tiny
    ``segment.bytes``); the broker's retention check, every 200 ms here, deletes them.
    """
    topic = new_topic(broker.bootstrap, "aged", configs={"segment.bytes": "400", "retention.ms": "86400000"})
    for chunk in range(8):  # one batch of 3 records per produce call, one batch per segment
        old = BASE_TIMESTAMP_MS - MONTH_MS if chunk < 4 else BASE_TIMESTAMP_MS
        produce(broker.bootstrap, topic, 3, first=chunk * 3, base_timestamp_ms=old)
    tp = TopicPartition(topic, 0)
    with BrokerSession(ConnectionSettings(parse_bootstrap(broker.bootstrap))) as session:
        # retention may run between the produce calls and delete the old segments one check at a
        # time: wait until all four are gone, or the log start would move under the tests
        deadline = time.monotonic() + 120
        while (start := session.earliest([tp])[tp]) < 12:
            assert time.monotonic() < deadline, f"retention did not delete the old segments (start {start})"
            time.sleep(0.2)
        end = session.latest([tp])[tp]
    assert start == 12 and end == 24
    return topic, start, end


def test_fail_on_data_loss_fails_a_batch_read_below_the_log_start(
    spark: SparkSession, broker: BrokerProcess, aged_out_topic: tuple[str, int, int]
) -> None:
    topic, _, _ = aged_out_topic
    df = reader(spark, broker, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":0}}}}').load()
    with pytest.raises(Exception, match=r"KAFKA_DATA_LOSS.*\[0, 24\)"):
        df.collect()


def test_fail_on_data_loss_false_reads_what_is_left(
    spark: SparkSession, broker: BrokerProcess, aged_out_topic: tuple[str, int, int]
) -> None:
    topic, start, end = aged_out_topic
    df = reader(
        spark, broker, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":0}}}}', failOnDataLoss="false"
    ).load()
    assert sorted(r["offset"] for r in df.collect()) == list(range(start, end))
    earliest = reader(spark, broker, subscribe=topic).load()  # default startingOffsets: earliest
    assert earliest.count() == end - start


def test_stream_with_fail_on_data_loss_false_skips_to_the_log_start(
    spark: SparkSession, broker: BrokerProcess, aged_out_topic: tuple[str, int, int], tmp_path: Path
) -> None:
    topic, start, end = aged_out_topic
    query = (
        spark.readStream.format("kipling")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", f'{{"{topic}":{{"0":0}}}}')
        .option("failOnDataLoss", "false")
        .load()
        .select("offset")
        .writeStream.format("memory")
        .queryName("aged_stream")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(60)
    assert query.exception() is None
    offsets = sorted(r["offset"] for r in spark.sql("SELECT offset FROM aged_stream").collect())
    assert offsets == list(range(start, end))
