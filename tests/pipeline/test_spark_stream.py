"""Streaming reads of the ``kipling`` format: availableNow, processing-time triggers, rate limits, restarts.

Output goes to Spark's own parquet sink with a checkpoint, and is read back through Spark (its
``_spark_metadata`` log is what hides files of an unfinished batch, pyspark-notes.md §5), so the
checks are the end-to-end guarantee a job gets: every produced offset exactly once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


from tests.integration.broker_process import BrokerProcess
from tests.pipeline.helpers import new_topic, produce

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

pytestmark = pytest.mark.slow

QUERY_TIMEOUT_S = 60


def start_query(
    spark: SparkSession,
    broker: BrokerProcess,
    topic: str,
    base: Path,
    *,
    trigger: dict[str, object],
    **options: str,
) -> StreamingQuery:
    reader = (
        spark.readStream.format("kipling")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(base / "out"))
        .option("checkpointLocation", str(base / "checkpoint"))
        .trigger(**trigger)
        .start()
    )


def run_available_now(
    spark: SparkSession, broker: BrokerProcess, topic: str, base: Path, **options: str
) -> list[int]:
    """Run one availableNow query to completion; returns each micro-batch's input row count."""
    query = start_query(spark, broker, topic, base, trigger={"availableNow": True}, **options)
    assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return [p["numInputRows"] for p in query.recentProgress]


def sink_rows(spark: SparkSession, base: Path) -> list[tuple[int, int, str]]:
    if not (base / "out" / "_spark_metadata").exists():
        return []
    rows = spark.read.parquet(str(base / "out")).collect()
    return sorted((r["partition"], r["offset"], r["value"]) for r in rows)


def expected(produced: list) -> list[tuple[int, int, str]]:  # type: ignore[type-arg]
    return sorted((p.partition, p.offset, p.value.decode()) for p in produced)


def test_available_now_reads_everything_then_resumes_from_checkpoint(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = new_topic(broker.bootstrap, "stream-now", partitions=2)
    first = produce(broker.bootstrap, topic, 120, partitions=(0, 1), compression="lz4")
    run_available_now(spark, broker, topic, tmp_path, startingOffsets="earliest")
    assert sink_rows(spark, tmp_path) == expected(first)

    second = produce(broker.bootstrap, topic, 80, partitions=(0, 1), first=120, compression="gzip")
    run_available_now(spark, broker, topic, tmp_path, startingOffsets="earliest")
    rows = sink_rows(spark, tmp_path)
    assert len(rows) == len(set(rows)), "duplicates after the restart"
    assert rows == expected(first + second)


def test_max_offsets_per_trigger_splits_the_backlog_proportionally(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = new_topic(broker.bootstrap, "stream-limit", partitions=2)
    produced = produce(broker.bootstrap, topic, 75, partitions=(0, 0, 1))  # 50 in p0, 25 in p1
    batches = run_available_now(
        spark, broker, topic, tmp_path, startingOffsets="earliest", maxOffsetsPerTrigger="30"
    )
    assert [b for b in batches if b] == [30, 30, 15]
    assert sink_rows(spark, tmp_path) == expected(produced)
    offsets = sorted((tmp_path / "checkpoint" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    first_batch_end = json.loads(offsets[0].read_text().splitlines()[-1])
    assert first_batch_end == {topic: {"0": 20, "1": 10}}  # 30 shared 2:1 as the backlogs are


def test_processing_time_trigger_starts_at_latest_and_survives_a_clean_restart(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = new_topic(broker.bootstrap, "stream-live", partitions=2)
    produce(broker.bootstrap, topic, 20, partitions=(0, 1))  # before the query: not read (latest)
    query = start_query(spark, broker, topic, tmp_path, trigger={"processingTime": "1 second"})
    try:
        wait_for(lambda: query.lastProgress is not None, "the first trigger")
        live = produce(broker.bootstrap, topic, 60, partitions=(0, 1), first=20)
        wait_for(lambda: len(sink_rows(spark, tmp_path)) >= len(live), "the live records")
    finally:
        query.stop()
    assert query.exception() is None
    more = produce(broker.bootstrap, topic, 40, partitions=(0, 1), first=80)
    query = start_query(spark, broker, topic, tmp_path, trigger={"processingTime": "1 second"})
    try:
        wait_for(
            lambda: len(sink_rows(spark, tmp_path)) >= len(live) + len(more), "the records after restart"
        )
    finally:
        query.stop()
    rows = sink_rows(spark, tmp_path)
    assert rows == expected(live + more)


def wait_for(condition, what: str, timeout_s: float = QUERY_TIMEOUT_S) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def test_example_job_copies_a_topic_to_parquet(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    """``pipeline.jobs.topic_to_parquet`` in-process (it reuses the session), with availableNow."""
    from pipeline.jobs import topic_to_parquet

    topic = new_topic(broker.bootstrap, "job", partitions=2)
    produced = produce(broker.bootstrap, topic, 40, partitions=(0, 1))
    code = topic_to_parquet.main(
        [
            "--bootstrap",
            broker.bootstrap,
            "--topic",
            topic,
            "--output",
            str(tmp_path / "out"),
            "--checkpoint",
            str(tmp_path / "checkpoint"),
            "--available-now",
        ]
    )
    assert code == 0
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in rows)
    assert got == sorted((p.partition, p.offset, p.key.decode(), p.value) for p in produced)
