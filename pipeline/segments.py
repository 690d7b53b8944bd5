"""The ``kipling-segments`` Spark data source: batch reads of a broker's log directories, from disk.

    spark.read.format("kipling-segments")
        .option("subscribe", "events")            # or subscribePattern / assign, as for "kipling"
        .option("startingOffsets", "earliest")    # earliest / JSON; endingOffsets latest / JSON
        .option("includeHeaders", "true")
        .load("/var/lib/kipling/logs")            # log.dirs: one or several, comma-separated

For backfills and forensics without a broker (or beside a running one, which it never disturbs: files
are only ever opened read-only, see :mod:`pipeline.segment_files`). Rows have the schema of the
``kipling`` format, so the same queries run on either. The options and what "earliest"/"latest" mean
are in :mod:`pipeline.segment_plan`; by default only committed records (below the checkpointed high
watermark) are read, like a consumer; ``includeUncommitted=true`` reads everything in the segments.

Where each piece runs (pyspark-notes.md §3.1): a planner worker on the driver scans the log dirs in
:meth:`SegmentsBatchReader.partitions` and makes one task per segment file; each task's
:class:`~pipeline.segment_files.SegmentTask` travels inside its InputPartition, because the reader is
pickled before ``partitions()`` runs. Executors then read their segment's byte range with ``pread``.
On a cluster every executor must see the log dirs at the same path (a shared file system): the Python
data source API has no locality hook to send a task to the node that holds the files.

Batch only: a stream of a live log is what the ``kipling`` format is for.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pipeline.errors import KiplingOptionError
from pipeline.logs import configure_worker_logging
from pipeline.segment_files import SegmentTask, read_segment_batches
from pipeline.segment_plan import FORMAT, SegmentReadOptions, parse_segment_options, plan_segment_tasks
from pipeline.source import spark_schema


class SegmentInputPartition(InputPartition):
    """One Spark task: one segment file's offset range, as a :class:`SegmentTask` value."""

    def __init__(self, task: SegmentTask) -> None:
        super().__init__(task)
        self.task = task


class KiplingSegmentsDataSource(DataSource):
    """``spark.read.format("kipling-segments")``: holds only the option strings, so it pickles."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        """Called at ``load()``: every option is validated there, before any job runs."""
        configure_worker_logging()
        return spark_schema(parse_segment_options(self.options).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        configure_worker_logging()
        options = parse_segment_options(self.options)
        expected = spark_schema(options.include_headers)
        if schema != expected:
            raise KiplingOptionError(
                f"The {FORMAT} source has a fixed schema and cannot be set with a custom one "
                f"(expected {expected.simpleString()}, got {schema.simpleString()})"
            )
        return SegmentsBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        configure_worker_logging()
        raise KiplingOptionError(
            f"The {FORMAT} source reads segment files in batch only; stream a topic with the kipling format"
        )


class SegmentsBatchReader(DataSourceReader):
    """Plans one task per needed segment file and reads each with ``pread``."""

    def __init__(self, options: SegmentReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [SegmentInputPartition(task) for task in plan_segment_tasks(self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        configure_worker_logging()
        task = getattr(partition, "value", None)
        if task is None:  # Spark turns an empty plan into one InputPartition(None)
            return
        if not isinstance(task, SegmentTask):
            raise TypeError(f"not a {FORMAT} input partition: {partition!r}")
        yield from read_segment_batches(task)


__all__ = ["KiplingSegmentsDataSource", "SegmentInputPartition", "SegmentsBatchReader"]
