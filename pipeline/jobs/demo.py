"""The event-aggregates example end to end, with one command, against a running broker.

    python -m pipeline.jobs.demo --bootstrap 127.0.0.1:9092 --workdir /tmp/kipling-demo

1. creates the topics ``demo-events`` (3 partitions) and ``demo-event-aggregates`` (1 partition, so
   the aggregates read back in order) if they are missing;
2. produces ``--events`` JSON events (:mod:`pipeline.jobs.generate_events`) covering the last
   ``events / rate`` seconds of event time, some late, a few malformed;
3. runs :mod:`pipeline.jobs.event_aggregates` once with the availableNow trigger and
   ``maxOffsetsPerTrigger``, so that the backlog is read in several micro-batches and the watermark
   advances between them as it would on a live stream (late events then really get dropped);
4. prints to stdout the aggregates this run produced to the output topic (read back with
   ``spark.read.format("kipling")``) and the row counts of the Parquet output.

Checkpoint and Parquet live in ``--workdir``. Running the demo again continues from the checkpoint: the
new events close the windows the previous run left open (the last ``--watermark`` of event time), and
events older than what was already emitted are dropped as late. Delete the workdir (and use new topic
names) to start from scratch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from pipeline.cluster import BrokerSession
from pipeline.jobs import event_aggregates, generate_events
from pipeline.logs import configure_logging
from pipeline.options import ConnectionSettings, Subscribe, parse_bootstrap

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = structlog.get_logger("kipling.pipeline.jobs.demo")

TABLE_COLUMNS = (
    ("window_start", 20),
    ("window_end", 20),
    ("kind", 9),
    ("events", 7),
    ("amount_sum", 11),
    ("amount_avg", 11),
    ("users_approx", 12),
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="default: %(default)s")
    parser.add_argument("--workdir", default="/tmp/kipling-demo", help="checkpoint and Parquet output")
    parser.add_argument("--input-topic", default="demo-events")
    parser.add_argument("--output-topic", default="demo-event-aggregates")
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=10.0, help="events per second of event time")
    parser.add_argument("--late-fraction", type=float, default=0.05)
    parser.add_argument("--malformed-fraction", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--window", default=event_aggregates.DEFAULT_WINDOW)
    parser.add_argument("--watermark", default=event_aggregates.DEFAULT_WATERMARK)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=1000)
    parser.add_argument("--master", default="local[2]")
    event_aggregates.add_spark_conf_argument(parser)
    parser.add_argument("--log-level", default="WARNING", help="of the demo's and the job's own lines")
    return parser.parse_args(argv)


def end_offsets(bootstrap: str, topic: str) -> dict[str, int]:
    """The topic's current end offsets, Spark-JSON style ({"0": 42}): where this run's output starts."""
    with BrokerSession(ConnectionSettings(parse_bootstrap(bootstrap))) as session:
        tps = session.partitions(Subscribe((topic,)), missing_topics="error")
        latest = session.latest(tps)
    return {str(tp.partition): offset for tp, offset in sorted(latest.items())}


def read_back(spark: SparkSession, bootstrap: str, topic: str, start: dict[str, int]) -> list[dict[str, Any]]:
    """The aggregates produced to ``topic`` from offsets ``start`` on, as dicts, in window order."""
    rows = (
        spark.read.format("kipling")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: start}))
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .collect()
    )
    values = [json.loads(r["value"]) for r in rows]
    return sorted(values, key=lambda v: (v["window_start"], v["kind"]))


def parquet_rows(spark: SparkSession, path: str) -> int:
    return spark.read.parquet(path).count() if Path(path).exists() else 0


def format_table(aggregates: list[dict[str, Any]]) -> str:
    header = "  ".join(name.ljust(width) for name, width in TABLE_COLUMNS)
    lines = [header, "-" * len(header)]
    for row in aggregates:
        cells = []
        for name, width in TABLE_COLUMNS:
            value = row.get(name)
            text = f"{value:.2f}" if isinstance(value, float) else str(value)
            cells.append(text.rjust(width) if isinstance(value, int | float) else text.ljust(width))
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    workdir = Path(args.workdir)
    options = event_aggregates.JobOptions(
        bootstrap=args.bootstrap,
        input_topic=args.input_topic,
        output_topic=args.output_topic,
        parquet_dir=str(workdir / "parquet"),
        checkpoint_dir=str(workdir / "checkpoint"),
        window=args.window,
        watermark=args.watermark,
        available_now=True,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )
    generate_events.ensure_topics(args.bootstrap, {args.input_topic: 3, args.output_topic: 1})
    start = end_offsets(args.bootstrap, args.output_topic)

    settings = generate_events.EventSettings(
        events=args.events,
        rate=args.rate,
        late_fraction=args.late_fraction,
        malformed_fraction=args.malformed_fraction,
        seed=args.seed,
    )
    events = generate_events.generate_events(settings, end_ms=int(time.time() * 1000))
    summary = asyncio.run(generate_events.produce_events(args.bootstrap, args.input_topic, events))
    print(summary.describe(), flush=True)

    conf = {"spark.ui.enabled": "false", **dict(args.spark_conf)}  # a demo needs no web UI
    spark = event_aggregates.spark_session(args.master, "kipling-demo", conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with event_aggregates.stop_on_signals() as stop:
            started = time.monotonic()
            status = event_aggregates.run(spark, options, stop, event_aggregates.DEFAULT_STOP_TIMEOUT_S)
            elapsed = time.monotonic() - started
        if status != 0:
            return status
        aggregates = read_back(spark, args.bootstrap, args.output_topic, start)
        print(
            f"\njob ran in {elapsed:.1f} s (availableNow); {len(aggregates)} windows finalized by the "
            f"watermark were produced to {args.output_topic}:\n"
        )
        print(format_table(aggregates))
        print(
            f"\nparquet: {parquet_rows(spark, options.aggregates_path)} aggregate rows in "
            f"{options.aggregates_path}, {parquet_rows(spark, options.malformed_path)} malformed events in "
            f"{options.malformed_path} (all runs with this workdir)"
        )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
