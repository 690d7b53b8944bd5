"""Records ⇄ Arrow: the batches ``read()`` yields and the columns the sink reads.

Why Arrow and not tuples: Spark converts yielded tuples to Arrow in the Python worker anyway, and that
conversion costs about four times the generation itself; yielding ``pyarrow.RecordBatch`` directly was
2 to 3 times faster in the measurements of pyspark-notes.md §6. The price is that a batch's schema must be
*exactly* ``to_arrow_schema`` of the source's Spark schema (int32 for INT, ``string`` not
``large_string``, ``timestamp[us, tz=UTC]``, same names and nullability), or the task fails with
``DATA_SOURCE_RETURN_SCHEMA_MISMATCH``; :func:`source_arrow_schema` is that schema, and a test checks it
against pyspark's own conversion.

Column semantics are those of Spark's Kafka source: ``timestamp`` is the record's timestamp (ms) as a
UTC timestamp, ``timestampType`` 0 for CreateTime and 1 for LogAppendTime, and ``headers`` (only with
``includeHeaders``) is null for a record without headers, as ``KafkaRecordToRowConverter`` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from protocol.records import DecodedRecord

HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_STRUCT))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
US_PER_MS = 1000

_BASE_FIELDS = (
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
)
SOURCE_SCHEMA = pa.schema(_BASE_FIELDS)
SOURCE_SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", HEADERS_TYPE)])

DEFAULT_MAX_ROWS_PER_BATCH = 10_000
"""Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch`` default."""


def source_arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema every batch ``read()`` yields must have."""
    return SOURCE_SCHEMA_WITH_HEADERS if include_headers else SOURCE_SCHEMA


class RecordBatchBuilder:
    """Collect the records of one topic partition column by column, then emit one RecordBatch.

    Columns are plain lists until :meth:`flush`: one ``pa.array`` call per column per batch is far
    cheaper than per-row Arrow appends.
    """

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self._schema = source_arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, record: DecodedRecord) -> None:
        self.keys.append(record.key)
        self.values.append(record.value)
        self.offsets.append(record.offset)
        self.timestamps.append(record.timestamp * US_PER_MS)
        self.timestamp_types.append(record.batch.timestamp_type)
        if self.include_headers:
            self.headers.append(list(record.headers) if record.headers else None)

    def flush(self) -> pa.RecordBatch | None:
        """The collected rows as one batch (None when empty); the builder starts over."""
        count = len(self.offsets)
        if count == 0:
            return None
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * count, pa.string()),
            pa.array([self.partition] * count, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, TIMESTAMP_TYPE),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, HEADERS_TYPE))
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)


# -- the sink's side -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """One row to produce. ``topic``/``partition`` None: the option's topic / the partitioner decides."""

    topic: str | None
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def outgoing_records(batch: pa.RecordBatch) -> Iterator[OutgoingRecord]:
    """Rows of a sink input batch; string keys and values are written as their UTF-8 bytes.

    The columns were checked when the writer was created (:func:`pipeline.sink.check_write_schema`);
    columns other than key, value, topic, partition and headers are ignored, as Spark's Kafka sink does.
    """
    names = batch.schema.names
    count = batch.num_rows
    keys = _bytes_column(batch, "key") if "key" in names else [None] * count
    values = _bytes_column(batch, "value")
    topics: Sequence[str | None] = batch.column("topic").to_pylist() if "topic" in names else [None] * count
    partitions: Sequence[int | None] = (
        batch.column("partition").to_pylist() if "partition" in names else [None] * count
    )
    headers: Sequence[list[dict[str, object]] | None] = (
        batch.column("headers").to_pylist() if "headers" in names else [None] * count
    )
    for index in range(count):
        row_headers = headers[index]
        yield OutgoingRecord(
            topic=topics[index],
            partition=partitions[index],
            key=keys[index],
            value=values[index],
            headers=tuple(_header(h) for h in row_headers) if row_headers else (),
        )


def _bytes_column(batch: pa.RecordBatch, name: str) -> list[bytes | None]:
    column = batch.column(name)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [None if v is None else v.encode() for v in column.to_pylist()]
    return column.to_pylist()


def _header(header: dict[str, object]) -> tuple[str, bytes | None]:
    key = header.get("key")
    value = header.get("value")
    if key is None:
        raise ValueError("a header key must not be null")
    if isinstance(value, str):
        value = value.encode()
    if value is not None and not isinstance(value, bytes):
        raise ValueError(f"a header value must be binary, got {type(value).__name__}")
    return str(key), value


__all__ = [
    "DEFAULT_MAX_ROWS_PER_BATCH",
    "HEADERS_TYPE",
    "OutgoingRecord",
    "RecordBatchBuilder",
    "outgoing_records",
    "source_arrow_schema",
]
