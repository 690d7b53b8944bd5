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
decoded by :mod:`protocol.records.columnar` into flat int columns of deltas and (start, length) spans,
and builds every Arrow column with a handful of vectorized calls per output batch: no Python object
per record at all after the decode loop. Records of several small batches are pooled before any Arrow
call, because each Arrow call costs microseconds: building per batch cost ~90 µs, which for
16 KiB batches (~140 records of 100 bytes, the Java producer's default) doubled the cost per record.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from protocol.records import DEFAULT_MAX_DECOMPRESSED_SIZE, DecodedRecord, RecordBatchHeader, iter_batches
from protocol.records.aborted import AbortedTransactionFilter
from protocol.records.columnar import (
    FIELDS_PER_HEADER,
    FIELDS_PER_RECORD,
    KEY_LENGTH,
    KEY_START,
    OFFSET_DELTA,
    TIMESTAMP_DELTA,
    VALUE_LENGTH,
    VALUE_START,
    RecordColumns,
    decode_batch_columns,
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

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self._schema = source_arrow_schema(include_headers)
        self._ready: list[pa.RecordBatch] = []
        """Rows already converted, oldest first."""
        self._ready_rows = 0
        self._pool = _ColumnPool()
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
        columns: RecordColumns,
        first_offset: int | None = None,
        end_offset: int | None = None,
    ) -> int | None:
        """Add the records of one decoded batch whose offsets lie in [first_offset, end_offset).

        ``columns`` comes from :func:`protocol.records.columnar.decode_batch_columns` for the batch
        whose header is ``header``. A control batch (transaction markers) adds nothing, as Spark's
        Kafka source skips them. Returns the offset of the first record added, or None.

        A batch is taken whole when its header's offset range lies inside the bounds (record offsets
        are trusted to lie within [base offset, last offset], as the header declares); only a batch
        straddling a bound has its records' offsets compared one by one.
        """
        if header.is_control or columns.count == 0:
            return None
        if self.offsets:
            self._seal()  # listed rows came first: convert them before pooling later ones
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
            _, columns = decode_batch_columns(buf, pos, max_decompressed_size)
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
_Run = tuple[int, int, int, int, int, int]
"""Per pooled batch: (rows, base offset, timestamp base, delta factor, timestamp type, segment index)."""
_INT64 = pa.int64()


class _Segment:
    """A buffer and the part of it [start, end) that the spans of some pooled batches lie in."""

    __slots__ = ("buffer", "end", "start")

    def __init__(self, buffer: _Buffer, start: int, end: int) -> None:
        self.buffer = buffer
        self.start = start
        self.end = end


class _ColumnPool:
    """Records of several batches as one flat int list, plus the buffers their spans index.

    Everything per record stays in C-level containers: the decoder's flat fields are concatenated
    (sliced for a straddling batch), and what is per batch (base offset, timestamp base, timestamp
    type, where its buffer lands) is kept as one *run* per batch and expanded to per-row columns by
    ``array`` repetition at :meth:`build`. Spans index *segments*: consecutive batches decoded in
    place in one fetched buffer share a segment (nothing is copied before the gather); a
    decompressed batch is its own segment, and several segments are joined into one buffer at build.
    """

    __slots__ = ("fields", "header_counts", "header_fields", "header_rows", "rows", "runs", "segments")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.rows = 0
        self.fields: list[int] = []
        self.segments: list[_Segment] = []
        self.runs: list[_Run] = []
        """(rows, base offset, timestamp base, delta factor, timestamp type, segment index)."""
        self.header_rows: list[int] = []
        self.header_counts: list[int] = []
        self.header_fields: list[int] = []
        """As RecordColumns.header_fields, plus the segment index: FIELDS_PER_HEADER + 1 ints each."""

    def add(
        self,
        header: RecordBatchHeader,
        columns: RecordColumns,
        first_offset: int | None,
        end_offset: int | None,
        include_headers: bool,
    ) -> int | None:
        fields = columns.fields
        count = columns.count
        base = header.base_offset
        lo = base if first_offset is None else first_offset
        hi = header.last_offset + 1 if end_offset is None else end_offset
        header_rows, header_counts, header_fields = (
            (columns.header_rows, columns.header_counts, columns.header_fields)
            if include_headers
            else ((), (), ())
        )
        if base < lo or header.last_offset >= hi:
            keep = [i for i, d in enumerate(fields[OFFSET_DELTA::FIELDS_PER_RECORD]) if lo <= base + d < hi]
            if not keep:
                return None
            width = FIELDS_PER_RECORD
            if keep[-1] - keep[0] + 1 == len(keep):
                fields = fields[keep[0] * width : (keep[-1] + 1) * width]
            else:
                fields = [v for i in keep for v in fields[i * width : (i + 1) * width]]
            if header_rows:
                header_rows, header_counts, header_fields = _select_headers(
                    keep, header_rows, header_counts, header_fields
                )
            count = len(keep)
        segment = self._segment(columns)
        row_base = self.rows
        self.fields += fields
        self.rows += count
        if header.is_log_append_time:
            self.runs.append((count, base, header.max_timestamp, 0, 1, segment))
        else:
            self.runs.append((count, base, header.base_timestamp, 1, 0, segment))
        if header_rows:
            self.header_rows.extend(row + row_base for row in header_rows)
            self.header_counts.extend(header_counts)
            spans = self.header_fields
            for i in range(0, len(header_fields), FIELDS_PER_HEADER):
                spans.extend(header_fields[i : i + FIELDS_PER_HEADER])
                spans.append(segment)
        return base + fields[OFFSET_DELTA]

    def _segment(self, columns: RecordColumns) -> int:
        """The segment holding ``columns``' spans: the last one when the batch follows it in the same
        buffer (spans then keep increasing, which the gather needs), else a new one."""
        if self.segments:
            last = self.segments[-1]
            if last.buffer is columns.buffer and columns.start >= last.end:
                last.end = columns.end
                return len(self.segments) - 1
        self.segments.append(_Segment(columns.buffer, columns.start, columns.end))
        return len(self.segments) - 1

    def build(self, topic: str, partition: int, schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
        """All pooled rows as one RecordBatch; the pool is emptied."""
        n = self.rows
        runs = self.runs
        data, shifts = self._data()
        packed = memoryview(struct.pack(f"{len(self.fields)}q", *self.fields)).cast("q")
        column = [packed[k::FIELDS_PER_RECORD].tobytes() for k in range(FIELDS_PER_RECORD)]
        offset_deltas = _int64(column[OFFSET_DELTA], n)
        offsets = pc.add_checked(offset_deltas, _per_row(runs, 1, n))
        timestamp_deltas = _int64(column[TIMESTAMP_DELTA], n)
        if any(run[3] != 1 for run in runs):
            timestamp_deltas = pc.multiply(timestamp_deltas, _per_row(runs, 3, n))
        millis = pc.add_checked(timestamp_deltas, _per_row(runs, 2, n))
        timestamps = pc.multiply_checked(millis, US_PER_MS).view(TIMESTAMP_TYPE)
        span_shift = _per_row_shift(runs, shifts, n)
        columns = [
            _gather(data, column[KEY_START], column[KEY_LENGTH], span_shift, n, pa.binary()),
            _gather(data, column[VALUE_START], column[VALUE_LENGTH], span_shift, n, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            offsets,
            timestamps,
            _per_row(runs, 4, n, pa.int32()),
        ]
        if include_headers:
            columns.append(self._headers(data, shifts, n))
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        self.clear()
        return batch

    def _data(self) -> tuple[pa.Buffer, list[int]]:
        """One Arrow buffer holding every segment, and each segment's shift (buffer position minus
        position in that buffer). A single segment is used in place, without a copy."""
        if len(self.segments) == 1:
            return pa.py_buffer(self.segments[0].buffer), [0]
        parts: list[memoryview] = []
        shifts: list[int] = []
        size = 0
        for segment in self.segments:
            parts.append(memoryview(segment.buffer)[segment.start : segment.end])
            shifts.append(size - segment.start)
            size += segment.end - segment.start
        return pa.py_buffer(b"".join(parts)), shifts

    def _headers(self, data: pa.Buffer, shifts: list[int], n: int) -> pa.Array:
        """The headers column: list<struct<key, value>> per row, null for a row without headers."""
        if not self.header_rows:
            return pa.nulls(n, HEADERS_TYPE)
        counts = array("i", bytes(4 * (n + 1)))
        for row, count in zip(self.header_rows, self.header_counts):
            counts[row + 1] = count
        list_offsets = pc.cumulative_sum(
            pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(counts)])
        )
        has_headers = pc.greater(
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(counts)], offset=1), 0
        )
        width = FIELDS_PER_HEADER + 1
        flat = self.header_fields
        total = len(flat) // width
        key_starts = array("q", (flat[i] + shifts[flat[i + 4]] for i in range(0, len(flat), width)))
        key_lengths = array("q", flat[1::width])
        value_starts = array("q", (flat[i + 2] + shifts[flat[i + 4]] for i in range(0, len(flat), width)))
        value_lengths = array("q", flat[3::width])
        pairs = pa.StructArray.from_arrays(
            [
                _gather(data, key_starts.tobytes(), key_lengths.tobytes(), 0, total, pa.string()),
                _gather(data, value_starts.tobytes(), value_lengths.tobytes(), 0, total, pa.binary()),
            ],
            fields=list(HEADER_STRUCT),
        )
        return pa.ListArray.from_arrays(list_offsets, pairs, type=HEADERS_TYPE, mask=pc.invert(has_headers))


def _select_headers(
    keep: list[int], rows: Sequence[int], counts: Sequence[int], fields: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    """The headers of the kept records, with row indexes renumbered among the kept ones."""
    renumber = {row: i for i, row in enumerate(keep)}
    new_rows: list[int] = []
    new_counts: list[int] = []
    new_fields: list[int] = []
    pos = 0
    for row, count in zip(rows, counts):
        width = count * FIELDS_PER_HEADER
        if row in renumber:
            new_rows.append(renumber[row])
            new_counts.append(count)
            new_fields.extend(fields[pos : pos + width])
        pos += width
    return new_rows, new_counts, new_fields


def _int64(data: bytes, n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(data)])


def _per_row(runs: list[_Run], index: int, n: int, type_: pa.DataType = _INT64) -> pa.Array | pa.Scalar:
    """Run field ``index`` for every row: a scalar when all runs agree (the usual case), else an
    array built by ``array`` repetition (C speed, one step per run)."""
    first = runs[0][index]
    if all(run[index] == first for run in runs):
        if type_ == _INT64:
            return pa.scalar(first, type_)
        return pa.repeat(pa.scalar(first, type_), n)
    typecode = "q" if type_ == _INT64 else "i"
    values = array(typecode)
    for run in runs:
        values += array(typecode, [run[index]]) * run[0]
    return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(values)])


def _per_row_shift(runs: list[_Run], shifts: list[int], n: int) -> pa.Array | int:
    if len(shifts) == 1:
        return shifts[0]
    values = array("q")
    for run in runs:
        values += array("q", [shifts[run[5]]]) * run[0]
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(values)])


_EVEN_INDICES: list[pa.Array] = [pa.array(range(0, 2 * 16_384, 2), pa.int64())]


def _even_indices(n: int) -> pa.Array:
    """0, 2, 4, ... (n of them), sliced from a cached array that grows as needed."""
    if len(_EVEN_INDICES[0]) < n:
        _EVEN_INDICES[0] = pa.array(range(0, 4 * n, 2), pa.int64())
    return _EVEN_INDICES[0].slice(0, n)


def _gather(
    data: pa.Buffer, starts: bytes, lengths: bytes, shift: pa.Array | int, n: int, type_: pa.DataType
) -> pa.Array:
    """A binary (or string) column of ``n`` spans of ``data``: (start + shift, length), -1 null.

    Arrow has no gather-by-span kernel, but ``take`` on a binary array is one: the spans, written as
    consecutive offsets [start0, end0, start1, end1, ...] over ``data``, are a valid large_binary
    array whose even elements are the wanted values (and odd ones the bytes between them); taking the
    even elements copies exactly the values, in C. Spans must not decrease, which is why the pool
    keeps them in buffer order.
    """
    start_array = _int64(starts, n)
    length_array = _int64(lengths, n)
    nulls = pc.min(length_array).as_py() < 0
    if nulls:
        valid = pc.greater_equal(length_array, 0)
        length_array = pc.max_element_wise(length_array, pa.scalar(0, pa.int64()))
    if not isinstance(shift, int) or shift:
        start_array = pc.add(start_array, shift)
    end_array = pc.add(start_array, length_array)
    bounds = array("q", bytes(16 * n))
    bounds[0::2] = _as_array(start_array, n)
    bounds[1::2] = _as_array(end_array, n)
    spans = pa.Array.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(bounds), data])
    gathered = spans.take(_even_indices(n)).cast(pa.binary())
    offsets_buffer, data_buffer = gathered.buffers()[1:3]
    validity = valid.buffers()[1] if nulls else None
    return pa.Array.from_buffers(type_, n, [validity, offsets_buffer, data_buffer])


def _as_array(values: pa.Array, n: int) -> array[int]:
    out = array("q")
    out.frombytes(memoryview(values.buffers()[1])[values.offset * 8 : (values.offset + n) * 8])
    return out


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
