"""Windowed aggregates of JSON events from a kipling topic, to Parquet and back to a kipling topic.

    python -m pipeline.jobs.event_aggregates --bootstrap 127.0.0.1:9092 \\
        --input-topic events --output-topic event-aggregates \\
        --parquet /data/event-aggregates --checkpoint /data/event-aggregates-checkpoint \\
        [--window "1 minute"] [--watermark "2 minutes"] [--trigger-seconds 5 | --available-now]

Input: one JSON object per record value, e.g.
``{"event_time": "2024-05-01T12:00:05Z", "user": "u-17", "kind": "click", "amount": 0.25}``, where
``event_time`` is ISO-8601 (a time without an offset is read in the session time zone, UTC here) or
epoch milliseconds (a JSON number or a string of digits). Output: for every ``window`` of event time and
every ``kind``, the number of events, the sum and mean of ``amount`` and an approximate count of
distinct users, emitted once, when the watermark (the largest event time seen minus ``--watermark``)
passes the end of the window: append output mode. Out-of-order events count as long as their window is
open; an event whose window was already emitted (its end at or before the previous micro-batch's
watermark) is dropped by Spark, so no window is ever emitted twice. (Spark's contract for data behind
the watermark is "may or may not be aggregated": one whose window is still open is counted.)

**One query, two sinks, through foreachBatch.** The aggregation runs once, in one query with one
checkpoint, and each micro-batch's finalized windows are written to both sinks by
:class:`AggregateBatchWriter`. The alternative, two queries on the same source with separate
checkpoints, would not give the same results in both sinks: each query has its own micro-batch
boundaries and so its own watermark history, and whether a late event is dropped depends on the
watermark at the moment its batch runs, so the two outputs could disagree on the counts of a window (and
the aggregation, its state and the topic read would all be paid twice). With foreachBatch, Spark's
micro-batch protocol gives what the sinks need: a batch's offsets are written to the checkpoint before
it runs, and a batch that did not finish (crash, kill, stop) is run again on restart with the same
batch id, the same input and the same state store version and watermark, so it produces the same rows.

- **Parquet, exactly once.** Each batch's rows go to ``<parquet>/aggregates/batch_id=<N>/``, written
  with mode overwrite, so a batch run again replaces its own earlier, possibly partial, output.
  ``spark.read.parquet("<parquet>/aggregates")`` returns every finalized window once, with the batch
  id as a partition column.
- **kipling topic, at-least-once.** The rows are produced as JSON values keyed by window and kind, with
  a ``batch_id`` header, by the ``kipling`` sink, whose delivery is at-least-once as Spark's Kafka
  sink is: a batch run again after a failure that happened after some of its records were acknowledged
  produces them again. Such duplicates are byte-identical (same key, value and header) and append mode
  emits every (window, kind) once otherwise, so a consumer that keeps the last value per key (or a
  compacted topic) sees each window exactly once.

Parquet is written before the topic, so the topic never announces a window that Parquet lacks.

**Malformed events are kept aside, never fatal.** A value that is not a JSON object, or whose
``event_time`` is missing or unreadable, or whose ``user``, ``kind`` or numeric ``amount`` is missing,
is not aggregated: it is written, with its topic, partition, offset and an ``error`` saying why, to
``<parquet>/malformed`` by a second, stateless query (checkpoint ``<checkpoint>/malformed``, Spark's
file sink: exactly once when read with Spark). A second query is right here and wrong for the
aggregates: whether a record is malformed depends on that record alone, not on batch boundaries, so
both queries classify every record the same way; it costs a second read of the topic, not a second
aggregation. Its progress reports the count as the observed metric ``malformed.events``, which the job
logs per batch.

**Stopping.** SIGTERM or Ctrl-C (SIGINT) lets the micro-batch that is running finish (up to
``--stop-timeout`` seconds), then stops the queries; the checkpoint makes the next start continue where
this one stopped, and a batch cut short is simply run again. A second signal stops at once.

The query-building functions (:func:`start`, :func:`parse_events`, :func:`window_aggregates`, ...) take
a SparkSession and :class:`JobOptions`, so tests and :mod:`pipeline.jobs.demo` run the job in-process.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import structlog

from pipeline.logs import LOG_LEVEL_ENV, WORKER_DEFAULT_LEVEL, configure_logging

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

_log = structlog.get_logger("kipling.pipeline.jobs.event_aggregates")

DEFAULT_WINDOW = "1 minute"
DEFAULT_WATERMARK = "2 minutes"
DEFAULT_TRIGGER_SECONDS = 5.0
DEFAULT_STOP_TIMEOUT_S = 30.0
DEFAULT_SHUFFLE_PARTITIONS = 2
"""Partitions of the aggregation's state store. Spark's default, 200, means 200 state-store tasks per
micro-batch, far too many for a small job; the number is fixed in the checkpoint at the first start."""

EVENT_DDL = "event_time STRING, user STRING, kind STRING, amount DOUBLE"
"""The explicit ``from_json`` schema. ``event_time`` is read as a string so that one field accepts both
ISO-8601 text and epoch milliseconds (Spark's JSON reader renders a number as its text)."""

EPOCH_MS_PATTERN = r"^-?[0-9]{1,15}$"
"""Digits that are epoch milliseconds; longer runs would overflow a timestamp and count as malformed."""

AGGREGATE_COLUMNS = (
    "window_start",
    "window_end",
    "kind",
    "events",
    "amount_sum",
    "amount_avg",
    "users_approx",
)
MALFORMED_COLUMNS = ("topic", "partition", "offset", "timestamp", "value", "error")
JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ssXXX", "timeZone": "UTC"}
"""How timestamps appear in the JSON keys and values: ISO-8601 in UTC whatever the session time zone,
so that a window's key is the same bytes on every run (the deduplication key of the output topic).
Second precision: window lengths are whole seconds."""

AGGREGATES_QUERY = "event-aggregates"
MALFORMED_QUERY = "event-aggregates-malformed"
MALFORMED_METRIC = "malformed"


@dataclass(frozen=True, slots=True)
class JobOptions:
    """Everything the job needs; the CLI's flags one to one."""

    bootstrap: str
    input_topic: str
    output_topic: str
    parquet_dir: str
    checkpoint_dir: str
    window: str = DEFAULT_WINDOW
    watermark: str = DEFAULT_WATERMARK
    available_now: bool = False
    trigger_seconds: float = DEFAULT_TRIGGER_SECONDS
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    source_options: dict[str, str] = field(default_factory=dict)
    """Extra options of the ``kipling`` source (``kafka.client.id``, ``failOnDataLoss``, ...)."""

    @property
    def aggregates_path(self) -> str:
        return str(Path(self.parquet_dir) / "aggregates")

    @property
    def malformed_path(self) -> str:
        return str(Path(self.parquet_dir) / "malformed")

    @property
    def aggregates_checkpoint(self) -> str:
        return str(Path(self.checkpoint_dir) / "aggregates")

    @property
    def malformed_checkpoint(self) -> str:
        return str(Path(self.checkpoint_dir) / "malformed")


# -- the query, piece by piece ---------------------------------------------------------------------


def read_events(spark: SparkSession, options: JobOptions) -> DataFrame:
    """The input topic as a stream, with the columns of Spark's Kafka source."""
    reader = (
        spark.readStream.format("kipling")
        .option("kafka.bootstrap.servers", options.bootstrap)
        .option("subscribe", options.input_topic)
        .option("startingOffsets", options.starting_offsets)
    )
    if options.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(options.max_offsets_per_trigger))
    for key, value in options.source_options.items():
        reader = reader.option(key, value)
    return reader.load()


def event_time_column(text: Column) -> Column:
    """``event_time`` as a timestamp: epoch milliseconds or ISO-8601; null when it is neither.

    ``try_*`` functions, because with ANSI mode (Spark 4's default) a failed cast raises and would fail
    the whole micro-batch over one bad record.
    """
    from pyspark.sql import functions as F

    millis = F.timestamp_millis(text.try_cast("bigint"))
    return F.when(text.rlike(EPOCH_MS_PATTERN), millis).otherwise(F.try_to_timestamp(text))


def parse_events(raw: DataFrame) -> DataFrame:
    """Parse every record: the event's fields, plus ``error``, null for a valid event.

    Columns: topic, partition, offset, timestamp (the record's), value (the raw text), event_time, user,
    kind, amount, error. ``from_json`` is permissive: an unparseable value gives nulls, never an
    exception, so a bad record can only ever end up in the malformed output.
    """
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    parsed = raw.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        text.alias("value"),
        F.from_json(text, EVENT_DDL).alias("e"),
    )
    event_time = event_time_column(F.col("e.event_time"))
    no_fields = F.col("e.event_time").isNull() & F.col("e.user").isNull() & F.col("e.kind").isNull()
    no_fields &= F.col("e.amount").isNull()
    error = (
        F.when(F.col("value").isNull() | (F.trim(F.col("value")) == ""), F.lit("empty value"))
        .when(F.col("e").isNull() | no_fields, F.lit("not a JSON event object"))
        .when(F.col("e.event_time").isNull(), F.lit("missing event_time"))
        .when(event_time.isNull(), F.lit("event_time is neither ISO-8601 nor epoch milliseconds"))
        .when(F.col("e.user").isNull(), F.lit("missing user"))
        .when(F.col("e.kind").isNull() | (F.col("e.kind") == ""), F.lit("missing kind"))
        .when(F.col("e.amount").isNull(), F.lit("amount missing or not a number"))
    )
    return parsed.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        "value",
        event_time.alias("event_time"),
        F.col("e.user").alias("user"),
        F.col("e.kind").alias("kind"),
        F.col("e.amount").alias("amount"),
        error.alias("error"),
    )


def valid_events(parsed: DataFrame) -> DataFrame:
    return parsed.where("error IS NULL").select("event_time", "user", "kind", "amount")


def malformed_events(parsed: DataFrame) -> DataFrame:
    return parsed.where("error IS NOT NULL").select(*MALFORMED_COLUMNS)


def window_aggregates(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Per (event-time window, kind): count, sum and mean of amount, approximate distinct users."""
    from pyspark.sql import functions as F

    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window), "kind")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.sum("amount").alias("amount_sum"),
            F.avg("amount").alias("amount_avg"),
            F.approx_count_distinct("user").alias("users_approx"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            *AGGREGATE_COLUMNS[2:],
        )
    )


def to_records(aggregates: DataFrame, batch_id: int) -> DataFrame:
    """The sink's columns: a JSON key {window_start, kind}, the whole row as JSON, a batch_id header."""
    from pyspark.sql import functions as F

    key = F.to_json(F.struct("window_start", "kind"), JSON_OPTIONS)
    value = F.to_json(F.struct(*AGGREGATE_COLUMNS), JSON_OPTIONS)
    header = F.struct(F.lit("batch_id").alias("key"), F.lit(str(batch_id)).cast("binary").alias("value"))
    return aggregates.orderBy("window_start", "kind").select(
        key.alias("key"), value.alias("value"), F.array(header).alias("headers")
    )


class AggregateBatchWriter:
    """The ``foreachBatch`` function: one micro-batch's finalized windows to Parquet, then to the topic.

    Runs on the driver (classic PySpark calls it back through py4j), once per micro-batch, and again
    with the same ``batch_id`` and the same rows when a batch is redone after a restart.
    """

    def __init__(self, options: JobOptions) -> None:
        self.options = options

    def batch_path(self, batch_id: int) -> str:
        return str(Path(self.options.aggregates_path) / f"batch_id={batch_id}")

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        batch.persist()  # two writes below; without it the micro-batch would be computed twice
        try:
            rows = batch.count()
            if rows == 0:  # a batch that only moved the watermark or held no complete window
                _log.debug("no finalized windows", batch_id=batch_id)
                return
            batch.write.mode("overwrite").parquet(self.batch_path(batch_id))
            to_records(batch, batch_id).write.format("kipling").option(
                "kafka.bootstrap.servers", self.options.bootstrap
            ).option("topic", self.options.output_topic).mode("append").save()
            _log.info("windows written", batch_id=batch_id, windows=rows, topic=self.options.output_topic)
        finally:
            batch.unpersist()


# -- running ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class EventAggregatesJob:
    """The two running queries; :meth:`stop` stops both, letting running micro-batches finish first."""

    aggregates: StreamingQuery
    malformed: StreamingQuery
    _logged: dict[str, int] = field(default_factory=dict)

    @property
    def queries(self) -> tuple[StreamingQuery, StreamingQuery]:
        return (self.aggregates, self.malformed)

    @property
    def active(self) -> bool:
        return any(q.isActive for q in self.queries)

    def failure(self) -> Exception | None:
        for query in self.queries:
            error = query.exception()
            if error is not None:
                return error
        return None

    def log_progress(self) -> None:
        """One log line per finished micro-batch of either query (since the last call)."""
        for query in self.queries:
            name = query.name or str(query.id)
            for progress in query.recentProgress:
                batch_id = int(progress["batchId"])
                if batch_id <= self._logged.get(name, -1):
                    continue
                self._logged[name] = batch_id
                metrics = progress.get("observedMetrics") or {}
                malformed = metrics.get(MALFORMED_METRIC)
                _log.info(
                    "micro-batch done",
                    query=name,
                    batch_id=batch_id,
                    input_rows=progress.get("numInputRows"),
                    watermark=(progress.get("eventTime") or {}).get("watermark"),
                    malformed=malformed["events"] if malformed else None,
                    duration_ms=(progress.get("durationMs") or {}).get("triggerExecution"),
                )

    def wait(self, stop: threading.Event, timeout_s: float | None = None, poll_s: float = 0.5) -> bool:
        """Until both queries end (availableNow), one fails, ``stop`` is set (a signal) or the timeout.

        Returns whether the queries ended (or failed) by themselves.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.active and self.failure() is None:
            if stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                self.log_progress()
                return False
            stop.wait(poll_s)
            self.log_progress()
        self.log_progress()
        return True

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """Stop both queries, each once its running micro-batch (if any) is done or ``timeout_s`` passed.

        Stopping in the middle of a batch is safe too (the restart redoes it); waiting only saves the
        work.
        """
        deadline = time.monotonic() + timeout_s
        for query in self.queries:
            while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
                time.sleep(0.1)
            query.stop()
        self.log_progress()


@contextmanager
def _session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Set a SQL conf while queries start (each query copies the session's conf at its start)."""
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def start(spark: SparkSession, options: JobOptions) -> EventAggregatesJob:
    """Start the aggregation query and the malformed-events query (``pipeline.register`` done)."""
    from pyspark.sql import functions as F

    parsed = parse_events(read_events(spark, options))
    aggregates = window_aggregates(valid_events(parsed), options.window, options.watermark)
    malformed = malformed_events(parsed).observe(MALFORMED_METRIC, F.count(F.lit(1)).alias("events"))
    trigger: dict[str, Any] = (
        {"availableNow": True}
        if options.available_now
        else {"processingTime": f"{options.trigger_seconds} seconds"}
    )
    # Windows are emitted when the watermark passes their end; without no-data micro-batches that
    # happens only when later data arrives, so an availableNow run would stop with closed windows unsent.
    with _session_conf(spark, "spark.sql.streaming.noDataMicroBatches.enabled", "true"):
        aggregates_query = (
            aggregates.writeStream.queryName(AGGREGATES_QUERY)
            .outputMode("append")
            .foreachBatch(AggregateBatchWriter(options))
            .option("checkpointLocation", options.aggregates_checkpoint)
            .trigger(**trigger)
            .start()
        )
        try:
            malformed_query = (
                malformed.writeStream.queryName(MALFORMED_QUERY)
                .format("parquet")
                .option("path", options.malformed_path)
                .option("checkpointLocation", options.malformed_checkpoint)
                .trigger(**trigger)
                .start()
            )
        except Exception:
            aggregates_query.stop()
            raise
    _log.info(
        "queries started",
        input_topic=options.input_topic,
        output_topic=options.output_topic,
        parquet=options.parquet_dir,
        window=options.window,
        watermark=options.watermark,
        trigger=trigger,
    )
    return EventAggregatesJob(aggregates_query, malformed_query)


def run(spark: SparkSession, options: JobOptions, stop: threading.Event, stop_timeout_s: float) -> int:
    """Start the job and wait for it; returns the exit status (0, or 1 if a query failed)."""
    job = start(spark, options)
    try:
        job.wait(stop)
    finally:
        job.stop(stop_timeout_s)
    error = job.failure()
    if error is not None:
        _log.error("query failed", error=str(error))
        return 1
    return 0


# -- process setup ---------------------------------------------------------------------------------


def spark_session(
    master: str,
    app_name: str,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession whose Python workers run this interpreter (which has pyarrow and kipling).

    Spark would otherwise start ``python3`` from PATH for its workers, which need not be this venv's.
    ``conf`` (``--spark-conf KEY=VALUE``) goes to the builder, so JVM settings such as
    ``spark.driver.memory`` still apply: PySpark starts the JVM with them.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import pipeline

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    # the workers of a non-local master do not inherit this process's environment
    worker_level = os.environ.get(LOG_LEVEL_ENV, WORKER_DEFAULT_LEVEL)
    builder = builder.config(f"spark.executorEnv.{LOG_LEVEL_ENV}", worker_level)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    pipeline.register(spark)
    return spark


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by the first SIGTERM or SIGINT; a second one raises KeyboardInterrupt at once.

    Installed after the SparkContext exists, replacing PySpark's SIGINT handler, which cancels every
    running job and so would fail the micro-batch instead of letting it finish.
    """
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        _log.info("stopping after the running micro-batch", signal=signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", required=True, help="kafka.bootstrap.servers, host:port[,host:port]")
    parser.add_argument("--input-topic", required=True, help="topic of JSON events")
    parser.add_argument("--output-topic", required=True, help="topic the aggregates are produced to")
    parser.add_argument("--parquet", required=True, help="directory of the Parquet output")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (one per job)")
    parser.add_argument("--window", default=DEFAULT_WINDOW, help="window length (default: %(default)s)")
    parser.add_argument(
        "--watermark", default=DEFAULT_WATERMARK, help="allowed event-time lateness (default: %(default)s)"
    )
    trigger = parser.add_mutually_exclusive_group()
    trigger.add_argument(
        "--trigger-seconds",
        type=float,
        default=DEFAULT_TRIGGER_SECONDS,
        help="processing-time trigger interval (default: %(default)s)",
    )
    trigger.add_argument(
        "--available-now", action="store_true", help="process what the topic holds now, then stop"
    )
    parser.add_argument("--starting-offsets", default="earliest", help="earliest, latest or Kafka JSON")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--stop-timeout", type=float, default=DEFAULT_STOP_TIMEOUT_S)
    parser.add_argument("--shuffle-partitions", type=int, default=DEFAULT_SHUFFLE_PARTITIONS)
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[2]"))
    add_spark_conf_argument(parser)
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def add_spark_conf_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=_key_value,
        help="a Spark setting for the session (repeatable), e.g. spark.driver.memory=2g",
    )


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def options_from_args(args: argparse.Namespace) -> JobOptions:
    return JobOptions(
        bootstrap=args.bootstrap,
        input_topic=args.input_topic,
        output_topic=args.output_topic,
        parquet_dir=args.parquet,
        checkpoint_dir=args.checkpoint,
        window=args.window,
        watermark=args.watermark,
        available_now=args.available_now,
        trigger_seconds=args.trigger_seconds,
        starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    spark = spark_session(
        args.master, "kipling-event-aggregates", args.shuffle_partitions, dict(args.spark_conf)
    )
    try:
        with stop_on_signals() as stop:
            return run(spark, options_from_args(args), stop, args.stop_timeout)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
