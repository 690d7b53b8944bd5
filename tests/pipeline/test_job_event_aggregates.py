"""The event-aggregates example job: exact windowed aggregates, late and malformed events, restarts, demo.

The main test drives the job's own query-building function (:func:`event_aggregates.start`) on the
session's SparkSession with hand-written events whose aggregates are worked out below, batch by batch.
``maxOffsetsPerTrigger=6`` on a one-partition topic fixes the micro-batch boundaries, and with them the
watermark each batch sees, so which late events Spark drops is exact, not "may or may not".

Spark's rules, as observed with pyspark 4.3 and used for the expectations: micro-batch N evicts and emits
the windows whose end is at or before W(N) = (largest event time in batches < N) - watermark delay; it
drops an input event whose window end is at or before W(N-1), the watermark of the previous batch (the
window was emitted already). An event older than the watermark whose window is still open is counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pipeline.jobs import event_aggregates
from pipeline.jobs.event_aggregates import JobOptions
from pipeline.jobs.generate_events import (
    JITTER_MS,
    MIN_LATENESS_MS,
    EventSettings,
    GeneratedEvent,
    generate_events,
    produce_events,
)
from tests.integration.broker_process import BrokerProcess
from tests.pipeline.conftest import ROOT, SPARK_CONF, spark_environment
from tests.pipeline.helpers import new_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
DEMO_TIMEOUT_S = 400
QUERY_TIMEOUT_S = 60
BASE = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def at(minute: int, second: int) -> datetime:
    return BASE + timedelta(minutes=minute, seconds=second)


def event(minute: int, second: int, user: str, kind: str, amount: float, spelling: str = "iso") -> bytes:
    """One valid event at 12:mm:ss, its time spelled as the job must accept it."""
    moment = at(minute, second)
    millis = int(moment.timestamp() * 1000)
    times: dict[str, object] = {
        "iso": moment.isoformat().replace("+00:00", "Z"),
        "iso-millis": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "offset": moment.astimezone(timezone(timedelta(hours=2))).isoformat(),
        "epoch": millis,
        "epoch-text": str(millis),
    }
    return json.dumps({"event_time": times[spelling], "user": user, "kind": kind, "amount": amount}).encode()


# Run 1: three micro-batches of six records (maxOffsetsPerTrigger=6, one partition).
RUN_1 = [
    # batch 0: W(0) = 0, nothing emitted; largest event time 12:05:30, so W(1) = 12:03:30
    event(0, 5, "u1", "click", 1.0),
    event(0, 40, "u2", "click", 2.0, "epoch"),
    b"not json",  # offset 2
    event(1, 15, "u1", "view", 0.5, "offset"),
    json.dumps({"event_time": "soon", "user": "u2", "kind": "view", "amount": 1.0}).encode(),  # offset 4
    event(5, 30, "u3", "purchase", 10.0, "iso-millis"),
    # batch 1: late filter W(0) = 0 drops nothing; emits windows ending <= 12:03:30 (12:00, 12:01, 12:02);
    # largest event time 12:07:10, so W(2) = 12:05:10
    event(1, 50, "u2", "view", 0.25, "epoch-text"),  # out of order, its window still open: counted
    event(2, 10, "u1", "click", 1.5),
    event(3, 45, "u3", "purchase", 20.0),
    event(7, 10, "u1", "click", 0.5),
    json.dumps({"user": "u1", "kind": "click", "amount": 1.0}).encode(),  # offset 10
    event(4, 20, "u2", "view", 0.75),
    # batch 2: late filter W(1) = 12:03:30; emits windows ending <= 12:05:10 (12:03, 12:04)
    event(2, 30, "u3", "click", 5.0),  # late: window 12:02 was emitted in batch 1, dropped
    event(0, 50, "u4", "view", 9.0),  # late: dropped
    event(3, 20, "u4", "purchase", 30.0),  # behind the watermark, but window 12:03 is open: counted
    event(5, 5, "u1", "purchase", 5.0),
    json.dumps(
        {"event_time": "2024-05-01T12:05:06Z", "user": "u1", "kind": "click", "amount": "12,50"}
    ).encode(),  # offset 16
    event(6, 0, "u2", "view", 1.0),
]
# Run 2, from the same checkpoint: batch 3 (data; late filter W(2) = 12:05:10), then a no-data batch 4
# with W(4) = 12:10:30 - 2 min = 12:08:30, which emits 12:05, 12:06 and 12:07.
RUN_2 = [
    event(4, 50, "u3", "view", 2.0),  # late: window 12:04 was emitted in batch 2; must not reappear
    event(5, 40, "u2", "purchase", 15.0),
    b"",  # offset 20
    event(10, 30, "u1", "click", 2.0),
]

# (minute of window start, kind, events, amount_sum, amount_avg, users_approx, batch that emitted it)
EXPECTED_RUN_1 = [
    (0, "click", 2, 3.0, 1.5, 2, 1),
    (1, "view", 2, 0.75, 0.375, 2, 1),
    (2, "click", 1, 1.5, 1.5, 1, 1),
    (3, "purchase", 2, 50.0, 25.0, 2, 2),
    (4, "view", 1, 0.75, 0.75, 1, 2),
]
EXPECTED_RUN_2 = [
    (5, "purchase", 3, 30.0, 10.0, 3, 4),
    (6, "view", 1, 1.0, 1.0, 1, 4),
    (7, "click", 1, 0.5, 0.5, 1, 4),
]
MALFORMED_RUN_1 = [
    (2, "not a JSON event object"),
    (4, "event_time is neither ISO-8601 nor epoch milliseconds"),
    (10, "missing event_time"),
    (16, "amount missing or not a number"),
]
MALFORMED_RUN_2 = [(20, "empty value")]


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def expected(rows: list[tuple[int, str, int, float, float, int, int]]) -> list[tuple[dict[str, Any], int]]:
    """What both sinks must hold: the JSON value of each window, and the batch that emitted it."""
    return [
        (
            {
                "window_start": iso(at(minute, 0)),
                "window_end": iso(at(minute + 1, 0)),
                "kind": kind,
                "events": events,
                "amount_sum": amount_sum,
                "amount_avg": amount_avg,
                "users_approx": users,
            },
            batch_id,
        )
        for minute, kind, events, amount_sum, amount_avg, users, batch_id in rows
    ]


def produce_values(bootstrap: str, topic: str, values: list[bytes]) -> None:
    events = [GeneratedEvent(None, value, 0.0, None) for value in values]
    asyncio.run(produce_events(bootstrap, topic, events, partitions=1))


def run_job(spark: SparkSession, options: JobOptions) -> None:
    job = event_aggregates.start(spark, options)
    try:
        finished = job.wait(threading.Event(), timeout_s=QUERY_TIMEOUT_S, poll_s=0.1)
    finally:
        job.stop()
    assert finished, "the availableNow run did not finish in time"
    assert job.failure() is None, job.failure()


def parquet_windows(spark: SparkSession, options: JobOptions) -> list[tuple[dict[str, Any], int]]:
    """The Parquet output as the same JSON the topic carries (one formatting, whatever the time zone)."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(options.aggregates_path)
    value = F.to_json(F.struct(*event_aggregates.AGGREGATE_COLUMNS), event_aggregates.JSON_OPTIONS)
    rows = df.select(value.alias("value"), "batch_id").collect()
    return sorted(((json.loads(r["value"]), r["batch_id"]) for r in rows), key=_order)


Record = tuple[bytes, bytes, tuple[tuple[str, bytes], ...]]


def topic_records(spark: SparkSession, bootstrap: str, topic: str) -> list[Record]:
    """The output topic's records as (key, value, headers) bytes."""
    rows = (
        spark.read.format("kipling")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    return [
        (bytes(r["key"]), bytes(r["value"]), tuple((h["key"], bytes(h["value"])) for h in r["headers"]))
        for r in rows
    ]


def windows(records: list[Record]) -> list[tuple[dict[str, Any], int]]:
    """Each record's value and batch_id header; checks the key is the value's window and kind."""
    out = []
    for key, value, headers in records:
        window = json.loads(value)
        assert json.loads(key) == {"window_start": window["window_start"], "kind": window["kind"]}
        out.append((window, int(dict(headers)["batch_id"])))
    return sorted(out, key=_order)


def _order(item: tuple[dict[str, Any], int]) -> tuple[str, str]:
    return (item[0]["window_start"], item[0]["kind"])


def malformed_rows(spark: SparkSession, options: JobOptions) -> list[tuple[int, str]]:
    rows = spark.read.parquet(options.malformed_path).collect()
    return sorted((r["offset"], r["error"]) for r in rows)


def test_exact_aggregates_late_and_malformed_events_restart_and_redone_batch(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    input_topic = new_topic(broker.bootstrap, "events", partitions=1)
    output_topic = new_topic(broker.bootstrap, "aggregates", partitions=1)
    options = JobOptions(
        bootstrap=broker.bootstrap,
        input_topic=input_topic,
        output_topic=output_topic,
        parquet_dir=str(tmp_path / "parquet"),
        checkpoint_dir=str(tmp_path / "checkpoint"),
        window="1 minute",
        watermark="2 minutes",
        available_now=True,
        max_offsets_per_trigger=6,
    )
    before = spark.conf.get(NO_DATA_BATCHES)

    produce_values(broker.bootstrap, input_topic, RUN_1)
    run_job(spark, options)
    assert parquet_windows(spark, options) == expected(EXPECTED_RUN_1)
    assert windows(topic_records(spark, broker.bootstrap, output_topic)) == expected(EXPECTED_RUN_1)
    assert malformed_rows(spark, options) == MALFORMED_RUN_1
    assert spark.conf.get(NO_DATA_BATCHES) == before  # the job's setting did not leak into the session

    produce_values(broker.bootstrap, input_topic, RUN_2)
    run_job(spark, options)
    everything = expected(EXPECTED_RUN_1 + EXPECTED_RUN_2)
    assert parquet_windows(spark, options) == everything
    # each window once: no re-emission of run 1's windows, no second row for a late event's window
    assert windows(topic_records(spark, broker.bootstrap, output_topic)) == everything
    assert malformed_rows(spark, options) == MALFORMED_RUN_1 + MALFORMED_RUN_2

    # A crash after batch 4 wrote its output but before Spark recorded it as committed: the restart
    # redoes batch 4 with the same rows. Parquet (overwrite of batch_id=4) stays exact; the topic gets
    # byte-identical copies (at-least-once), so the last value per key is still exactly the windows.
    commits = Path(options.aggregates_checkpoint) / "commits"
    for name in ("4", ".4.crc"):  # the local file system's checksum file would block the rewrite
        (commits / name).unlink()
    run_job(spark, options)
    assert parquet_windows(spark, options) == everything
    copies = Counter(topic_records(spark, broker.bootstrap, output_topic))
    assert windows(list(copies)) == everything
    assert {dict(record[2])["batch_id"]: n for record, n in copies.items() if n > 1} == {b"4": 2}
    assert sum(copies.values()) == len(everything) + len(EXPECTED_RUN_2)


def test_generated_events_are_reproducible_and_as_described() -> None:
    settings = EventSettings(events=2000, rate=10, late_fraction=0.1, malformed_fraction=0.05, seed=7)
    end_ms = int(BASE.timestamp() * 1000)
    events = generate_events(settings, end_ms=end_ms)
    assert events == generate_events(settings, end_ms=end_ms)
    assert len(events) == 2000
    assert 50 <= sum(e.malformed for e in events) <= 150
    assert 120 <= sum(e.late for e in events) <= 290
    start_ms = end_ms - 200_000
    for i, e in enumerate(events):
        nominal = start_ms + i * 100
        if e.malformed:
            assert e.event_time_ms is None
            continue
        body = json.loads(e.value)
        assert set(body) == {"event_time", "user", "kind", "amount"} and e.key == body["user"].encode()
        assert e.event_time_ms is not None
        lateness = nominal - e.event_time_ms
        assert MIN_LATENESS_MS <= lateness <= 300_000 if e.late else 0 <= lateness <= JITTER_MS


def test_demo_command_end_to_end(broker: BrokerProcess, tmp_path: Path) -> None:
    """``python -m pipeline.jobs.demo`` as a user runs it, in its own process and JVM."""
    input_topic = new_topic(broker.bootstrap, "demo-events", partitions=3)
    output_topic = new_topic(broker.bootstrap, "demo-aggregates", partitions=1)
    command = [
        sys.executable,
        "-m",
        "pipeline.jobs.demo",
        "--bootstrap",
        broker.bootstrap,
        "--workdir",
        str(tmp_path / "demo"),
        "--input-topic",
        input_topic,
        "--output-topic",
        output_topic,
        "--events",
        "600",
        "--rate",
        "2",
        "--seed",
        "11",
        "--max-offsets-per-trigger",
        "100000",
        "--master",
        "local[1]",
        "--spark-conf",
        f"spark.driver.extraJavaOptions={SPARK_CONF['spark.driver.extraJavaOptions']}",
    ]
    env = {**os.environ, **spark_environment()}
    result = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out = result.stdout
    # the result is not buried: Spark's Python workers log at WARNING, on stderr, never on stdout
    assert "[debug" not in out + result.stderr and "[info" not in out, out[:4000]
    produced = re.search(
        r"produced 600 events to \S+ \(3 partitions\) in [\d.]+ s: (\d+) late, (\d+) malformed", out
    )
    assert produced, out
    finalized = re.search(r"(\d+) windows finalized by the watermark were produced to", out)
    assert finalized and int(finalized.group(1)) > 0, out
    table = [line for line in out.splitlines() if re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:00Z ", line)]
    assert len(table) == int(finalized.group(1))
    parquet = re.search(r"parquet: (\d+) aggregate rows in .*, (\d+) malformed events in", out)
    assert parquet, out
    assert int(parquet.group(1)) == len(table)  # a fresh workdir: Parquet holds exactly what was produced
    assert int(parquet.group(2)) == int(produced.group(2))  # every generated malformed event kept aside
