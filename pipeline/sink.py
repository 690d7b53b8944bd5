"""The ``kipling`` sink: batch (``df.write``) and streaming (``df.writeStream``) writes of Arrow batches.

Accepted columns are those of Spark's Kafka sink, checked up front (``KafkaWriter.validateQuery``) so a
wrong DataFrame fails when the write starts, not in a task: ``value`` (required, string or binary),
``key`` (string or binary), ``topic`` (string; required unless the ``topic`` option is set, which then
wins), ``partition`` (int) and ``headers`` (array<struct<key:string,value:binary>>). Other columns are
ignored. Writers are Arrow writers (``DataSourceArrowWriter``): rows never become Python ``Row`` objects.

Delivery is at-least-once, as with Spark's Kafka sink: see :mod:`pipeline.produce`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import structlog
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from pipeline.errors import KiplingOptionError
from pipeline.logs import configure_worker_logging
from pipeline.options import WriteOptions
from pipeline.produce import write_batches

_log = structlog.get_logger("kipling.pipeline.sink")


@dataclass
class KiplingCommitMessage(WriterCommitMessage):
    """What one task wrote, for the driver's log."""

    records: int = 0
    by_partition: dict[str, int] = field(default_factory=dict)


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """Spark's Kafka sink checks, with its messages."""
    fields = {f.name: f.dataType for f in schema.fields}
    if options.topic is None:
        if "topic" not in fields:
            raise KiplingOptionError(
                "topic option required when no 'topic' attribute is present. Use the topic option for "
                "setting a topic."
            )
        if not isinstance(fields["topic"], StringType):
            raise KiplingOptionError("topic attribute type must be a StringType")
    if "key" in fields and not isinstance(fields["key"], StringType | BinaryType):
        raise KiplingOptionError("key attribute type must be a StringType or BinaryType")
    if "value" not in fields:
        raise KiplingOptionError("Required attribute 'value' not found")
    if not isinstance(fields["value"], StringType | BinaryType):
        raise KiplingOptionError("value attribute type must be a StringType or BinaryType")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise KiplingOptionError("partition attribute type must be an IntegerType")
    if "headers" in fields and not _is_headers_type(fields["headers"]):
        raise KiplingOptionError(
            "headers attribute type must be an ArrayType(StructType(StructField(key,StringType,true),"
            "StructField(value,BinaryType,true)))"
        )


def _is_headers_type(data_type: object) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    inner = {f.name: f.dataType for f in data_type.elementType.fields}
    return (
        set(inner) == {"key", "value"}
        and isinstance(inner["key"], StringType)
        and isinstance(inner["value"], BinaryType)
    )


def _write(options: WriteOptions, iterator: Iterator[pa.RecordBatch]) -> KiplingCommitMessage:
    configure_worker_logging()
    summary = write_batches(options, iterator)
    return KiplingCommitMessage(summary.records, summary.by_partition)


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, KiplingCommitMessage))


class KiplingBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kipling")``: each task produces its rows."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KiplingCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log.info("write committed", records=_total(messages), tasks=len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log.warning(
            "write aborted; records already acknowledged stay in the log (at-least-once)",
            records_written=_total(messages),
        )


class KiplingStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kipling")``: each micro-batch's tasks produce their rows."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KiplingCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log.info("micro-batch written", batch_id=batchId, records=_total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log.warning(
            "micro-batch write aborted; records already acknowledged stay in the log (at-least-once)",
            batch_id=batchId,
            records_written=_total(messages),
        )


__all__ = ["KiplingBatchWriter", "KiplingCommitMessage", "KiplingStreamWriter", "check_write_schema"]
