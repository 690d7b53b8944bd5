"""The ``kipling-segments`` format through Spark: a live broker's log dir, and crafted log dirs.

The live tests produce with librdkafka (keys, headers, several codecs, a topic with a tiny
``segment.bytes`` so it has many segments) and read the broker's log directory while the broker runs,
so the reader meets what it will meet in production: a growing active segment with a preallocated
index, and a high watermark checkpointed every few seconds. The crafted tests use storage's own writer
and checkpoint code where a deterministic high watermark is needed.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pipeline.source import spark_schema
from storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from tests.integration.broker_process import BrokerProcess
from tests.pipeline.helpers import (
    Produced,
    append_records,
    new_topic,
    open_partition_log,
    produce,
    write_offsets_checkpoint,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

pytestmark = pytest.mark.slow

HW_CHECKPOINT_TIMEOUT_S = 20.0
"""The broker checkpoints high watermarks every 5 s by default (replica.high.watermark.checkpoint...)."""


@dataclass(frozen=True)
class LiveTopic:
    topic: str
    log_dir: Path
    produced: list[Produced]

    def segments(self, partition: int) -> list[int]:
        directory = self.log_dir / f"{self.topic}-{partition}"
        return sorted(int(p.name[:20]) for p in directory.glob("*.log"))


def read(spark: SparkSession, path: Path | str, **options: str) -> DataFrame:
    reader = spark.read.format("kipling-segments")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(str(path))


def as_tuples(rows: list[Row]) -> list[tuple[Any, ...]]:
    """(partition, offset, key, value, headers, timestamp ms), sorted, from rows with headers."""
    out = []
    for row in rows:
        headers = tuple((h["key"], h["value"]) for h in row["headers"] or ())
        timestamp_ms = int(row["timestamp"].timestamp() * 1000)
        out.append((row["partition"], row["offset"], row["key"], row["value"], headers, timestamp_ms))
    return sorted(out)


def produced_tuples(produced: list[Produced]) -> list[tuple[Any, ...]]:
    return sorted((p.partition, p.offset, p.key, p.value, p.headers, p.timestamp_ms) for p in produced)


def wait_for_high_watermarks(log_dir: Path, wanted: dict[tuple[str, int], int]) -> None:
    checkpoint = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT)
    deadline = time.monotonic() + HW_CHECKPOINT_TIMEOUT_S
    while True:
        found = checkpoint.read()
        if all(found.get(tp, -1) >= offset for tp, offset in wanted.items()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"high watermarks {wanted} not checkpointed in time: {found}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def live(broker: BrokerProcess) -> LiveTopic:
    """A 2-partition topic of small segments, written in 8 rounds with changing codecs; HW checkpointed."""
    topic = new_topic(broker.bootstrap, "segments", partitions=2, configs={"segment.bytes": "1500"})
    produced: list[Produced] = []
    for round_number, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd", "lz4", "none", "gzip"]):
        produced += produce(
            broker.bootstrap,
            topic,
            25,
            partitions=(0, 1),
            compression=codec,
            first=round_number * 25,
            null_key_every=6,
        )
    log_dir = broker.data_dir / "logs"
    ends = {(topic, p): max(x.offset for x in produced if x.partition == p) + 1 for p in (0, 1)}
    wait_for_high_watermarks(log_dir, ends)
    return LiveTopic(topic, log_dir, sorted(produced, key=lambda p: (p.partition, p.offset)))


def test_reads_a_running_brokers_log_dir_like_a_consumer(spark: SparkSession, live: LiveTopic) -> None:
    df = read(spark, live.log_dir, subscribe=live.topic, includeHeaders="true")
    assert df.schema == spark_schema(include_headers=True)
    expected_tasks = sum(len(live.segments(p)) for p in (0, 1))
    assert expected_tasks >= 6, "the topic should have rolled several segments per partition"
    assert df.rdd.getNumPartitions() == expected_tasks  # one task per segment, none for empty ones
    rows = df.collect()
    assert as_tuples(rows) == produced_tuples(live.produced)
    assert {r["topic"] for r in rows} == {live.topic} and {r["timestampType"] for r in rows} == {0}


def test_the_same_rows_as_the_kipling_format(
    spark: SparkSession, broker: BrokerProcess, live: LiveTopic
) -> None:
    from_disk = read(spark, live.log_dir, subscribePattern="segments-.*", includeHeaders="true")
    from_broker = (
        spark.read.format("kipling")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", live.topic)
        .option("includeHeaders", "true")
        .load()
    )
    assert from_disk.schema == from_broker.schema
    query = "SELECT partition, offset, CAST(key AS STRING) AS k, value FROM {df} WHERE partition = 1"
    disk_rows = spark.sql(query, df=from_disk.where(from_disk.topic == live.topic)).collect()
    broker_rows = spark.sql(query, df=from_broker).collect()
    assert sorted(disk_rows) == sorted(broker_rows)
    assert len(disk_rows) == sum(1 for p in live.produced if p.partition == 1)


def test_starting_and_ending_offsets_select_segments(spark: SparkSession, live: LiveTopic) -> None:
    bases = live.segments(0)
    start, end = bases[1] + 2, bases[2] + 1  # inside the second segment to just into the third
    df = read(
        spark,
        live.log_dir,
        assign=f'{{"{live.topic}":[0]}}',
        startingOffsets=f'{{"{live.topic}":{{"0":{start}}}}}',
        endingOffsets=f'{{"{live.topic}":{{"0":{end}}}}}',
    )
    assert "headers" not in df.columns
    assert df.rdd.getNumPartitions() == 2
    assert sorted(r["offset"] for r in df.collect()) == list(range(start, end))


def test_reading_while_the_broker_appends(spark: SparkSession, broker: BrokerProcess) -> None:
    """A producer keeps writing while Spark plans and reads: rows are a gap-free prefix of the log."""
    topic = new_topic(broker.bootstrap, "segments-busy", partitions=2, configs={"segment.bytes": "4000"})
    produced = produce(broker.bootstrap, topic, 60, partitions=(0, 1), compression="lz4")
    stop = threading.Event()
    failures: list[BaseException] = []

    def keep_producing() -> None:
        first = 60
        try:
            while not stop.is_set():
                produced.extend(produce(broker.bootstrap, topic, 10, partitions=(0, 1), first=first))
                first += 10
                stop.wait(0.05)  # a steady trickle; a busy loop would starve the 2-core test box
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    try:
        time.sleep(0.3)
        rows = read(spark, broker.data_dir / "logs", subscribe=topic, includeUncommitted="true").collect()
    finally:
        stop.set()
        writer.join(30)
    assert not failures, failures
    by_offset = {(p.partition, p.offset): p.value for p in produced}
    for partition in (0, 1):
        offsets = sorted(r["offset"] for r in rows if r["partition"] == partition)
        assert offsets == list(range(len(offsets))) and len(offsets) >= 30
    assert all(r["value"] == by_offset[(r["partition"], r["offset"])] for r in rows)


@pytest.fixture
def crafted(tmp_path: Path) -> Iterator[tuple[Path, list[Any]]]:
    """A log dir with one partition of 4 segments (HW at 25 of 40) plus a -delete and a -stray copy."""
    log = open_partition_log(tmp_path, "crafted", 0, segment_bytes=900)
    written = append_records(log, 40, per_batch=5, control_after_each_batch=True)
    write_offsets_checkpoint(tmp_path, REPLICATION_OFFSET_CHECKPOINT, {("crafted", 0): 25})
    assert len(log.segments()) >= 3
    for suffix in ("-delete", "-stray"):
        shutil.copytree(tmp_path / "crafted-0", tmp_path / f"crafted-0.{'ab' * 16}{suffix}")
    yield tmp_path, written
    log.close()


def test_include_uncommitted_false_stops_at_the_high_watermark(
    spark: SparkSession, crafted: tuple[Path, list[Any]]
) -> None:
    log_dir, written = crafted
    committed = read(spark, log_dir, subscribe="crafted").collect()
    everything = read(spark, log_dir, subscribe="crafted", includeUncommitted="true").collect()
    assert sorted(r["offset"] for r in committed) == [w.offset for w in written if w.offset < 25]
    assert sorted(r["offset"] for r in everything) == [w.offset for w in written]  # no copies, no markers
    by_offset = {w.offset: w for w in written}
    assert all(r["value"] == by_offset[r["offset"]].value for r in everything)


def test_option_errors_reach_the_user_at_load(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="needs a path: the broker's log directory"):
        spark.read.format("kipling-segments").option("subscribe", "t").load()
    with pytest.raises(Exception, match="Unknown option 'colour'"):
        read(spark, tmp_path, subscribe="t", colour="red")
    with pytest.raises(Exception, match=r"includeUncommitted must be|'includeuncommitted' must be"):
        read(spark, tmp_path, subscribe="t", includeUncommitted="maybe")
    with pytest.raises(Exception, match="does not exist in the log directories"):
        read(spark, tmp_path, subscribe="t").collect()
    stream = spark.readStream.format("kipling-segments").option("subscribe", "t").load(str(tmp_path))
    query = stream.writeStream.format("noop").start()
    with pytest.raises(Exception, match="reads segment files in batch only"):
        query.awaitTermination(60)
    query.stop()


def test_a_pattern_matching_nothing_reads_no_rows(spark: SparkSession, live: LiveTopic) -> None:
    df = read(spark, live.log_dir, subscribePattern="no-such-topic-.*")
    assert df.count() == 0
