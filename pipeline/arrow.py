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

Two ways in. :meth:`RecordBatchBuilder.append` takes one :class:`DecodedRecord` at a time into Python
lists (simple; for offline readers). The fast path, :meth:`RecordBatchBuilder.append_batch` (and
:meth:`~RecordBatchBuilder.append_record_batches` for a fetched slice), takes whole record batches
decoded by :mod:`protocol.records.columnar_arrays` into int64 numpy columns of deltas and
(start, length) spans (the compiled kernel walks the records), and builds every Arrow column with a
handful of vectorized calls per output batch: no Python work per record at all. Keys and values are
copied once, by the compiled gather, from the fetched (or decompressed) buffers straight into the
Arrow data buffers. Records of several small batches are pooled before any Arrow call, because each
Arrow call costs microseconds: building per batch cost ~90 µs, which for 16 KiB batches (~140 records
of 100 bytes, the Java producer's default) doubled the cost per record.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from protocol.records import DEFAULT_MAX_DECOMPRESSED_SIZE, DecodedRecord, RecordBatchHeader, iter_batches
from protocol.records.aborted import AbortedTransactionFilter
from protocol.records.columnar import (
    FIELDS_PER_HEADER,
    KEY_LENGTH,
    KEY_START,
    OFFSET_DELTA,
    TIMESTAMP_DELTA,
    VALUE_LENGTH,
    VALUE_START,
    RecordColumns,
)
from protocol.records.columnar_arrays import (
    Int64Array,
    RecordArrays,
    arrays_from_columns,
    as_uint8,
    decode_batch_arrays,
    gather_spans,
)

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
    """Collect the records of one topic partition column by column, then emit RecordBatches.

    Rows come in through :meth:`append` (one decoded record; plain lists until :meth:`flush`, since one
    ``pa.array`` call per column per batch is far cheaper than per-row Arrow appends) or through the
    fast path :meth:`append_batch` / :meth:`append_record_batches` (whole batches as columns), and
    come out in the order they came in, whichever mix of the two was used: converted batches first,
    then the pooled fast-path rows, then the listed ones (appending a batch after listed records
    converts what is held first, so that order always holds).
    """

    def __init__(self, topic: str, partition: int, include_headers: bool, *, compiled: bool = True) -> None:
        """``compiled``: decode and gather with the compiled kernel (when numba is installed; see
        :mod:`protocol.records.columnar_arrays`), else with the pure-Python walk and numpy."""
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self._schema = source_arrow_schema(include_headers)
        self._ready: list[pa.RecordBatch] = []
        """Rows already converted, oldest first."""
        self._ready_rows = 0
        self._pool = _ColumnPool(compiled)
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []

    def __len__(self) -> int:
        return self._ready_rows + self._pool.rows + len(self.offsets)

    def append(self, record: DecodedRecord) -> None:
        self.keys.append(record.key)
        self.values.append(record.value)
        self.offsets.append(record.offset)
        self.timestamps.append(record.timestamp * US_PER_MS)
        self.timestamp_types.append(record.batch.timestamp_type)
        if self.include_headers:
            self.headers.append(list(record.headers) if record.headers else None)

    def append_batch(
        self,
        header: RecordBatchHeader,
        columns: RecordArrays | RecordColumns,
        first_offset: int | None = None,
        end_offset: int | None = None,
    ) -> int | None:
        """Add the records of one decoded batch whose offsets lie in [first_offset, end_offset).

        ``columns`` comes from :func:`protocol.records.columnar_arrays.decode_batch_arrays` (or
        :func:`protocol.records.columnar.decode_batch_columns`) for the batch whose header is
        ``header``. A control batch (transaction markers) adds nothing, as Spark's
        Kafka source skips them. Returns the offset of the first record added, or None.

        A batch is taken whole when its header's offset range lies inside the bounds (record offsets
        are trusted to lie within [base offset, last offset], as the header declares); only a batch
        straddling a bound has its records' offsets compared one by one.
        """
        if header.is_control or columns.count == 0:
            return None
        if self.offsets:
            self._seal()  # listed rows came first: convert them before pooling later ones
        if isinstance(columns, RecordColumns):
            columns = arrays_from_columns(columns)
        return self._pool.add(header, columns, first_offset, end_offset, self.include_headers)

    def append_record_batches(
        self,
        buf: bytes | bytearray | memoryview,
        first_offset: int | None = None,
        end_offset: int | None = None,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        aborted: AbortedTransactionFilter | None = None,
    ) -> int | None:
        """Add the records in [first_offset, end_offset) of every complete batch in ``buf`` (a fetched
        log slice); returns the offset of the first record added, or None.

        Batches outside the bounds and control batches are skipped by their header, without
        decoding; the others are CRC-checked and decoded (a malformed one raises
        :class:`~protocol.errors.CorruptRecordError`). A partial trailing batch is ignored, as a
        consumer does with a fetch response. With ``aborted`` (read_committed) the batches of aborted
        transactions are skipped too.
        """
        first: int | None = None
        view = memoryview(buf)
        for pos, header in iter_batches(view):
            if (
                aborted.skip(header, view[pos : pos + header.size])
                if aborted is not None
                else header.is_control
            ):
                continue
            if first_offset is not None and header.last_offset < first_offset:
                continue
            if end_offset is not None and header.base_offset >= end_offset:
                continue
            _, columns = decode_batch_arrays(buf, pos, max_decompressed_size, compiled=self._pool.compiled)
            added = self.append_batch(header, columns, first_offset, end_offset)
            if first is None:
                first = added
        return first

    def flush(self) -> pa.RecordBatch | None:
        """The collected rows as one batch (None when empty); the builder starts over."""
        if not self._ready and not self._pool.rows:
            return self._flush_lists()
        self._seal()
        batches, self._ready, self._ready_rows = self._ready, [], 0
        return batches[0] if len(batches) == 1 else pa.concat_batches(batches)

    def take_batch(self, max_rows: int) -> pa.RecordBatch | None:
        """The first ``max_rows`` collected rows (all of them if fewer) as one batch; the rest stay.

        With ``len(builder) >= max_rows`` checked after every append, this cuts batches exactly where
        appending records one by one and flushing at ``max_rows`` would.
        """
        self._seal()
        parts: list[pa.RecordBatch] = []
        taken = 0
        while self._ready and taken < max_rows:
            batch = self._ready[0]
            wanted = max_rows - taken
            if batch.num_rows <= wanted:
                parts.append(self._ready.pop(0))
                taken += batch.num_rows
            else:
                parts.append(batch.slice(0, wanted))
                self._ready[0] = batch.slice(wanted)
                taken += wanted
        self._ready_rows -= taken
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else pa.concat_batches(parts)

    def _seal(self) -> None:
        """Convert pooled, then listed rows into ready batches (the order they arrived in)."""
        if self._pool.rows:
            batch = self._pool.build(self.topic, self.partition, self._schema, self.include_headers)
            self._ready.append(batch)
            self._ready_rows += batch.num_rows
        if self.offsets:
            listed = self._flush_lists()
            if listed is not None:
                self._ready.append(listed)
                self._ready_rows += listed.num_rows

    def _flush_lists(self) -> pa.RecordBatch | None:
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


# -- the fast path's pool -----------------------------------------------------------------------

_Buffer = bytes | bytearray | memoryview
_INT64 = pa.int64()
_EMPTY: Int64Array = np.empty(0, np.int64)
_MAX_BINARY_BYTES = 2**31 - 1
"""A ``binary`` column's 32-bit offsets bound its bytes."""


class _Segment:
    """A buffer, the part of it [start, end) that the spans of some pooled batches lie in, and a
    uint8 view of it for the gather."""

    __slots__ = ("buffer", "end", "start", "view")

    def __init__(self, buffer: _Buffer, start: int, end: int) -> None:
        self.buffer = buffer
        self.start = start
        self.end = end
        self.view = as_uint8(buffer)


class _Pooled:
    """One pooled batch: its kept records' fields (as decoded: a (6, rows) int64 array, spans into
    its segment), their headers (rows numbered within the batch) and what the header says per batch."""

    __slots__ = (
        "base",
        "columns",
        "factor",
        "header_counts",
        "header_fields",
        "header_rows",
        "rows",
        "segment",
        "timestamp_base",
        "timestamp_type",
    )

    def __init__(
        self,
        columns: Int64Array,
        header_rows: Int64Array,
        header_counts: Int64Array,
        header_fields: Int64Array,
        header: RecordBatchHeader,
        segment: int,
    ) -> None:
        self.columns = columns
        self.rows = columns.shape[1]
        self.header_rows = header_rows
        self.header_counts = header_counts
        self.header_fields = header_fields
        self.base = header.base_offset
        if header.is_log_append_time:  # every record's timestamp is the batch's MaxTimestamp
            self.timestamp_base, self.factor, self.timestamp_type = header.max_timestamp, 0, 1
        else:
            self.timestamp_base, self.factor, self.timestamp_type = header.base_timestamp, 1, 0
        self.segment = segment


class _ColumnPool:
    """Records of several batches as numpy columns, plus the buffers their spans index.

    Nothing is per record in Python: each batch's decoded (6, rows) array is kept as it is (sliced by
    a numpy mask for a batch straddling a bound), with what its header says per batch (base offset,
    timestamp base, timestamp type). :meth:`build` concatenates them, expands the per-batch values
    with ``numpy.repeat``, and gathers keys and values into Arrow's offsets and data buffers with the
    compiled gather, once per *segment*: consecutive batches decoded in place in one fetched buffer
    share a segment, a decompressed batch is its own.
    """

    __slots__ = ("batches", "compiled", "rows", "segments")

    def __init__(self, compiled: bool) -> None:
        self.compiled = compiled
        self.clear()

    def clear(self) -> None:
        self.rows = 0
        self.batches: list[_Pooled] = []
        self.segments: list[_Segment] = []

    def add(
        self,
        header: RecordBatchHeader,
        records: RecordArrays,
        first_offset: int | None,
        end_offset: int | None,
        include_headers: bool,
    ) -> int | None:
        columns = records.columns
        base = header.base_offset
        lo = base if first_offset is None else first_offset
        hi = header.last_offset + 1 if end_offset is None else end_offset
        if include_headers:
            header_rows, header_counts, header_fields = (
                records.header_rows,
                records.header_counts,
                records.header_fields,
            )
        else:
            header_rows = header_counts = header_fields = _EMPTY
        if base < lo or header.last_offset >= hi:
            offsets = columns[OFFSET_DELTA] + base
            keep = (offsets >= lo) & (offsets < hi)
            if not keep.any():
                return None
            columns = np.ascontiguousarray(columns[:, keep])  # fancy indexing may give Fortran order
            if len(header_rows):
                header_rows, header_counts, header_fields = _select_headers(
                    keep, header_rows, header_counts, header_fields
                )
        segment = self._segment(records)
        self.batches.append(_Pooled(columns, header_rows, header_counts, header_fields, header, segment))
        self.rows += columns.shape[1]
        return base + int(columns[OFFSET_DELTA, 0])

    def _segment(self, records: RecordArrays) -> int:
        """The segment holding ``records``' spans: the last one when the batch follows it in the same
        buffer (spans then keep increasing), else a new one."""
        if self.segments:
            last = self.segments[-1]
            if last.buffer is records.buffer and records.start >= last.end:
                last.end = records.end
                return len(self.segments) - 1
        self.segments.append(_Segment(records.buffer, records.start, records.end))
        return len(self.segments) - 1

    def build(self, topic: str, partition: int, schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
        """All pooled rows as one RecordBatch; the pool is emptied."""
        n = self.rows
        batches = self.batches
        if len(batches) == 1:
            columns = np.ascontiguousarray(batches[0].columns)
        else:
            columns = np.ascontiguousarray(np.concatenate([pooled.columns for pooled in batches], axis=1))
        counts = [pooled.rows for pooled in batches]
        offsets = pc.add_checked(
            _int64(columns[OFFSET_DELTA]), _per_row([p.base for p in batches], counts, np.int64)
        )
        timestamp_deltas = _int64(columns[TIMESTAMP_DELTA])
        if any(pooled.factor != 1 for pooled in batches):
            timestamp_deltas = pc.multiply(
                timestamp_deltas, _per_row([p.factor for p in batches], counts, np.int64)
            )
        millis = pc.add_checked(
            timestamp_deltas, _per_row([p.timestamp_base for p in batches], counts, np.int64)
        )
        timestamps = pc.multiply_checked(millis, US_PER_MS).view(TIMESTAMP_TYPE)
        timestamp_types = _per_row([p.timestamp_type for p in batches], counts, np.int32)
        segment_rows = self._segment_ranges([(p.segment, p.rows) for p in batches])
        arrays = [
            self._gather(columns[KEY_START], columns[KEY_LENGTH], segment_rows, pa.binary()),
            self._gather(columns[VALUE_START], columns[VALUE_LENGTH], segment_rows, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            offsets,
            timestamps,
            timestamp_types if isinstance(timestamp_types, pa.Array) else pa.repeat(timestamp_types, n),
        ]
        if include_headers:
            arrays.append(self._headers(n))
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        self.clear()
        return batch

    def _segment_ranges(self, sizes: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """(segment, first, end) ranges of consecutive items, from (segment, size) per batch."""
        ranges: list[tuple[int, int, int]] = []
        position = 0
        for segment, size in sizes:
            if ranges and ranges[-1][0] == segment:
                ranges[-1] = (segment, ranges[-1][1], position + size)
            else:
                ranges.append((segment, position, position + size))
            position += size
        return ranges

    def _gather(
        self,
        starts: Int64Array,
        lengths: Int64Array,
        ranges: list[tuple[int, int, int]],
        type_: pa.DataType,
    ) -> pa.Array:
        """A binary (or string) column of the spans (start, length; -1 null) of the segments' buffers:
        the bytes copied once, straight into Arrow's data buffer."""
        n = len(starts)
        sizes = np.maximum(lengths, 0)
        total = int(sizes.sum())
        if total > _MAX_BINARY_BYTES:
            raise ValueError(f"{total} bytes of {type_} in one batch: more than a binary column holds")
        offsets = np.empty(n + 1, np.int32)
        offsets[0] = 0
        data = np.empty(total, np.uint8)
        position = 0
        for segment, first, end in ranges:
            position = gather_spans(
                self.segments[segment].view,
                starts[first:end],
                lengths[first:end],
                offsets,
                data,
                first,
                position,
                compiled=self.compiled,
            )
        validity = None
        if n and int(lengths.min()) < 0:
            validity = pa.py_buffer(np.packbits(lengths >= 0, bitorder="little"))
        return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])

    def _headers(self, n: int) -> pa.Array:
        """The headers column: list<struct<key, value>> per row, null for a row without headers."""
        batches = self.batches
        rows: list[Int64Array] = []
        row_base = 0
        for pooled in batches:
            if len(pooled.header_rows):
                rows.append(pooled.header_rows + row_base)
            row_base += pooled.rows
        if not rows:
            return pa.nulls(n, HEADERS_TYPE)
        counts = np.zeros(n + 1, np.int32)
        counts[np.concatenate(rows) + 1] = np.concatenate([p.header_counts for p in batches])
        list_offsets = np.cumsum(counts, dtype=np.int32)
        spans = np.concatenate([p.header_fields for p in batches]).reshape(-1, FIELDS_PER_HEADER).T
        spans = np.ascontiguousarray(spans)
        ranges = self._segment_ranges(
            [(p.segment, len(p.header_fields) // FIELDS_PER_HEADER) for p in batches]
        )
        pairs = pa.StructArray.from_arrays(
            [
                self._gather(spans[0], spans[1], ranges, pa.string()),
                self._gather(spans[2], spans[3], ranges, pa.binary()),
            ],
            fields=list(HEADER_STRUCT),
        )
        no_headers = pa.array(counts[1:] == 0)
        return pa.ListArray.from_arrays(pa.array(list_offsets), pairs, type=HEADERS_TYPE, mask=no_headers)


def _select_headers(
    keep: npt.NDArray[np.bool_], rows: Int64Array, counts: Int64Array, fields: Int64Array
) -> tuple[Int64Array, Int64Array, Int64Array]:
    """The headers of the kept records, with row indexes renumbered among the kept ones."""
    kept = keep[rows]
    renumber = np.cumsum(keep) - 1
    spans = fields.reshape(-1, FIELDS_PER_HEADER)[np.repeat(kept, counts)].reshape(-1)
    return renumber[rows[kept]], counts[kept], spans


def _int64(values: Int64Array) -> pa.Array:
    return pa.Array.from_buffers(_INT64, len(values), [None, pa.py_buffer(values)])


def _per_row(values: list[int], counts: list[int], dtype: type[np.generic]) -> pa.Array | pa.Scalar:
    """A per-batch value for every row: a scalar when all batches agree (the usual case), else an
    array (``numpy.repeat``)."""
    type_ = pa.from_numpy_dtype(dtype)
    first = values[0]
    if all(value == first for value in values):
        return pa.scalar(first, type_)
    repeated = np.repeat(np.array(values, dtype), counts)
    return pa.Array.from_buffers(type_, len(repeated), [None, pa.py_buffer(repeated)])


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
    values: list[bytes | None] = column.to_pylist()
    return values


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
