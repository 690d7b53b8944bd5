"""The ``kipling`` Spark data source: batch and micro-batch streaming reads, batch and streaming writes.

Where each piece runs (pyspark-notes.md §3.1), and why the classes are shaped as they are:

* :class:`KiplingDataSource` is pickled to every Python worker; it holds only the option strings.
* Batch: a planner worker calls :meth:`KiplingBatchReader.partitions` after the reader was pickled,
  so state set there never reaches ``read()``. Offsets are resolved there and every task's range, leader
  hint and read settings travel in its :class:`KiplingInputPartition`.
* Streaming: one long-lived driver process serves ``initialOffset``, ``latestOffset``, ``partitions`` and
  ``commit`` for the whole query; a separate, pickled reader instance runs ``read()`` in executors. The
  reader keeps no connection between calls (each call opens a :class:`BrokerSession`), so it pickles
  cleanly. Offsets are Spark's Kafka JSON, ``{"topic": {"0": 42}}``, checkpointed by Spark: a query
  restarted from its checkpoint re-plans the same ranges for an unfinished batch and continues after
  the last committed one, which is what makes output to Spark's own sinks exactly-once.

The option handling and planning live in :mod:`pipeline.options` and :mod:`pipeline.offsets` (pure);
the task side in :mod:`pipeline.fetch`; the sink in :mod:`pipeline.sink`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import structlog
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client.errors import KafkaResponseError
from client.fetch_session import TopicPartition
from pipeline.cluster import BrokerSession
from pipeline.errors import KiplingOptionError
from pipeline.fetch import ReadTask, read_range
from pipeline.logs import configure_worker_logging
from pipeline.offsets import (
    DataLossReporter,
    OffsetRange,
    PartitionOffsets,
    offsets_from_json,
    offsets_to_json,
    plan_batch,
    plan_stream_ranges,
    rate_limit,
    resolve,
    split_ranges,
)
from pipeline.options import Assign, BrokerAddress, ReadOptions, parse_read_options, parse_write_options
from pipeline.pushdown import PushedBounds, narrow_to_timestamp, push_filters
from protocol.error_codes import ErrorCode

FORMAT = "kipling"

_log = structlog.get_logger("kipling.pipeline.source")

HEADERS_SPARK_TYPE = ArrayType(
    StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]), True
)


def spark_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``KafkaRecordToRowConverter.kafkaSchema``)."""
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_SPARK_TYPE, True))
    return StructType(fields)


class KiplingInputPartition(InputPartition):
    """One Spark task: its :class:`ReadTask` (range, leader hint, read settings) as the value."""

    def __init__(self, task: ReadTask) -> None:
        super().__init__(task)
        self.task = task


class KiplingDataSource(DataSource):
    """``spark.read.format("kipling")`` and friends; options as Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        """Called at ``load()``: validates what batch and streaming reads share, like Spark does there."""
        configure_worker_logging()
        options = parse_read_options(self.options, "any")
        return spark_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        configure_worker_logging()
        options = parse_read_options(self.options, "batch")
        _check_schema(schema, options)
        if options.push_filters:
            return KiplingFilteringBatchReader(options)
        return KiplingBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        configure_worker_logging()
        options = parse_read_options(self.options, "stream")
        _check_schema(schema, options)
        return KiplingStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        configure_worker_logging()
        from pipeline.sink import KiplingBatchWriter, check_write_schema

        if overwrite:
            raise KiplingOptionError(
                "Save mode Overwrite not allowed for kipling. Use mode('append'): a log cannot be "
                "overwritten, and pyspark's Python data sources refuse ErrorIfExists, which Spark's "
                "Kafka sink also accepts."
            )
        options = parse_write_options(self.options)
        check_write_schema(schema, options)
        return KiplingBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        configure_worker_logging()
        from pipeline.sink import KiplingStreamWriter, check_write_schema

        options = parse_write_options(self.options)
        check_write_schema(schema, options)
        return KiplingStreamWriter(options)


class KiplingBatchReader(DataSourceReader):
    """Reads the resolved [startingOffsets, endingOffsets) of every subscribed partition."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.bounds = PushedBounds()
        """What pushed filters allow (:class:`KiplingFilteringBatchReader`); everything otherwise."""

    def partitions(self) -> list[InputPartition]:
        options = self.options
        with _session(options) as session:
            tps = session.partitions(options.subscription, missing_topics="error")
            ranges = plan_batch(tps, options.starting, options.ending, session)
            ranges = narrow_to_timestamp(self.bounds.narrow(ranges), self.bounds.since_ms, session)
            ranges = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
            leaders = _leaders(session, ranges)
        _log.info("batch planned", tasks=len(ranges), offsets=sum(r.size for r in ranges))
        return [KiplingInputPartition(_task(options, r, leaders)) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(partition)


class KiplingFilteringBatchReader(KiplingBatchReader):
    """The batch reader with ``pushFilters``: ``partition`` and ``offset`` predicates narrow the plan.

    A separate class because Spark fails any reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false (the default): the ``pushFilters`` option
    chooses it (:mod:`pipeline.pushdown`).
    """

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.bounds, left = push_filters(filters)
        _log.info("filters pushed", bounds=str(self.bounds), left=len(left), pushed=len(filters) - len(left))
        return left


class KiplingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reads with Kafka's offset JSON, ``maxOffsetsPerTrigger`` and ``availableNow``."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._available_now = False
        self._available_now_target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts (``startingOffsets``, default latest); a restart uses its checkpoint."""
        options = self.options
        with _session(options) as session:
            tps = session.partitions(options.subscription, missing_topics="ignore")
            offsets = resolve(options.starting, tps, session, starting=True)
        _log.info("stream starts", offsets=offsets_to_json(offsets))
        return offsets_to_json(offsets)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: the latest offsets, capped by the target and the limit."""
        begin = offsets_from_json(start)
        with _session(self.options) as session:
            if self._available_now:
                if self._available_now_target is None:
                    self._available_now_target = self._fetch_latest(session)
                latest = dict(self._available_now_target)
            else:
                latest = self._fetch_latest(session)
            self._latest = latest
            if isinstance(limit, ReadMaxRows):
                new = [tp for tp in latest if tp not in begin]
                earliest_new = _earliest_of_new(session, new)
                latest = rate_limit(limit.max_rows, begin, latest, earliest_new)
            elif not isinstance(limit, ReadAllAvailable):
                raise KiplingOptionError(f"The kipling source does not support the read limit {limit!r}")
        return offsets_to_json(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        if begin == until:
            return []
        options = self.options
        with _session(options) as session:
            earliest_new = _earliest_of_new(session, [tp for tp in until if tp not in begin])
            ranges = plan_stream_ranges(
                begin, until, earliest_new, DataLossReporter(options.fail_on_data_loss)
            )
            ranges = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
            leaders = _leaders(session, ranges)
        return [KiplingInputPartition(_task(options, r, leaders)) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the checkpoint is the only record of progress (no consumer group)."""
        _log.debug("batch committed", end=end)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._latest) if self._latest else None

    def prepareForTriggerAvailableNow(self) -> None:
        """Read up to the offsets that are latest at the first ``latestOffset`` call, then stop."""
        self._available_now = True
        self._available_now_target = None

    def _fetch_latest(self, session: BrokerSession) -> PartitionOffsets:
        tps = session.partitions(self.options.subscription, missing_topics="ignore")
        return session.latest(tps)


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    configure_worker_logging()
    task = getattr(partition, "value", None)
    if task is None:  # Spark turns an empty plan into one InputPartition(None)
        return
    if not isinstance(task, ReadTask):
        raise TypeError(f"not a kipling input partition: {partition!r}")
    yield from read_range(task)


def _session(options: ReadOptions) -> BrokerSession:
    return BrokerSession(
        options.connection,
        retries=options.fetch_offset_num_retries,
        retry_interval_ms=options.fetch_offset_retry_interval_ms,
        isolation_level=options.isolation_level,
    )


def _task(options: ReadOptions, r: OffsetRange, leaders: Mapping[TopicPartition, BrokerAddress]) -> ReadTask:
    return ReadTask(
        range=r,
        connection=options.connection,
        leader=leaders.get(r.tp),
        fail_on_data_loss=options.fail_on_data_loss,
        include_headers=options.include_headers,
        poll_timeout_ms=options.poll_timeout_ms,
        max_partition_fetch_bytes=options.max_partition_fetch_bytes,
        fetch_max_wait_ms=options.fetch_max_wait_ms,
        isolation_level=options.isolation_level,
        retries=options.fetch_offset_num_retries,
        retry_interval_ms=options.fetch_offset_retry_interval_ms,
    )


def _leaders(session: BrokerSession, ranges: list[OffsetRange]) -> dict[TopicPartition, BrokerAddress]:
    """Leader hints for the tasks; a failed lookup only costs each task its own Metadata request."""
    try:
        return session.leaders(sorted({r.tp for r in ranges}))
    except KafkaResponseError as exc:
        _log.info("no leader hints for the tasks", error=str(exc))
        return {}


def _earliest_of_new(session: BrokerSession, new: list[TopicPartition]) -> PartitionOffsets:
    """Earliest offsets of newly seen partitions; one deleted again in between is left out."""
    if not new:
        return {}
    try:
        return session.earliest(new)
    except KafkaResponseError as exc:
        if exc.code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise
    existing = set(session.partitions(Assign(tuple(new)), missing_topics="ignore"))
    return session.earliest([tp for tp in new if tp in existing])


def _check_schema(schema: StructType, options: ReadOptions) -> None:
    expected = spark_schema(options.include_headers)
    if schema != expected:
        raise KiplingOptionError(
            "The kipling source has a fixed schema and cannot be set with a custom one "
            f"(expected {expected.simpleString()}, got {schema.simpleString()})"
        )


__all__ = [
    "FORMAT",
    "KiplingBatchReader",
    "KiplingDataSource",
    "KiplingInputPartition",
    "KiplingStreamReader",
    "spark_schema",
]
