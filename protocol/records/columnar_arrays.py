"""The records of a v2 batch as numpy columns, decoded by the compiled kernel or by the Python walk.

:mod:`protocol.records.columnar` gives a batch's fields as one flat Python list; a bulk reader then
spends more time turning that list into buffers than the walk took. Here the same columns come as one
(6, count) int64 array, each field a contiguous row, ready to become Arrow arrays without a copy.
They are decoded by :func:`protocol.records.columnar_kernel.walk_records` (numba, ~30-50 ns per
record) when numba is installed, else by the pure-Python walk of :mod:`protocol.records.columnar`
(the reference, ~0.5 µs per record) whose list is then converted. Callers choose with ``compiled``;
:data:`KERNEL_AVAILABLE` says whether the kernel can be used at all. Both give the same verdict on
every input (a hypothesis test checks it): the same arrays, or :class:`CorruptRecordError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from protocol.errors import CorruptRecordError
from protocol.records.batch import RecordBatchHeader
from protocol.records.columnar import (
    FIELDS_PER_HEADER,
    FIELDS_PER_RECORD,
    RecordColumns,
    batch_record_stream,
    decode_record_columns,
)
from protocol.records.reader import DEFAULT_MAX_DECOMPRESSED_SIZE

try:
    from protocol.records import columnar_kernel as _kernel
except ImportError:  # numba (or numpy) not installed: the Python walk only
    _kernel = None  # type: ignore[assignment]

__all__ = [
    "KERNEL_AVAILABLE",
    "RecordArrays",
    "arrays_from_columns",
    "as_uint8",
    "decode_batch_arrays",
    "decode_record_arrays",
    "gather_spans",
]

KERNEL_AVAILABLE = _kernel is not None
"""Whether the compiled kernel is importable (numba installed)."""

Buffer = bytes | bytearray | memoryview
Int64Array = npt.NDArray[np.int64]

_MIN_RECORD_SIZE = 7


@dataclass(frozen=True, slots=True)
class RecordArrays:
    """The records of one batch as int64 arrays; spans index :attr:`buffer`.

    :attr:`columns` has one row per field, in the order of :mod:`protocol.records.columnar`'s index
    constants (``columns[VALUE_LENGTH]`` is every value's length, -1 for null). The header arrays
    are :class:`~protocol.records.columnar.RecordColumns`' sparse ones, as arrays.
    """

    buffer: Buffer
    start: int
    end: int
    count: int
    columns: Int64Array
    """Shape (FIELDS_PER_RECORD, count), C-contiguous: each field's row is contiguous."""
    header_rows: Int64Array
    header_counts: Int64Array
    header_fields: Int64Array


def as_uint8(buf: Buffer) -> npt.NDArray[np.uint8]:
    """A read-only uint8 view of ``buf``, no copy. Always read-only, whatever the buffer type: numba
    compiles (and caches) one machine-code version per array type, so one type means one compile."""
    return np.frombuffer(memoryview(buf).toreadonly(), np.uint8)


def decode_batch_arrays(
    buf: Buffer,
    pos: int = 0,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    *,
    verify_crc: bool = True,
    compiled: bool = True,
) -> tuple[RecordBatchHeader, RecordArrays]:
    """:func:`~protocol.records.columnar.decode_batch_columns`, as arrays: same checks, same errors.

    An uncompressed batch is decoded in place (spans index ``buf``); a compressed one's spans index
    its decompressed stream. ``compiled`` uses the kernel when it is available.
    """
    header, stream, start, end = batch_record_stream(buf, pos, max_decompressed_size, verify_crc=verify_crc)
    return header, decode_record_arrays(stream, start, end, header.records_count, compiled=compiled)


def decode_record_arrays(
    buf: Buffer, pos: int, end: int, count: int, *, compiled: bool = True
) -> RecordArrays:
    """Decode exactly ``count`` records filling ``buf[pos:end]``; spans index ``buf``.

    Raises :class:`CorruptRecordError` for anything
    :func:`~protocol.records.columnar.decode_record_columns` rejects.
    """
    if not compiled or _kernel is None:
        return arrays_from_columns(decode_record_columns(buf, pos, end, count))
    if count < 0 or count > (end - pos) // _MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record batch declares {count} records but holds only {end - pos} bytes of records"
        )
    view = as_uint8(buf)
    columns, header_rows, header_counts, header_fields, status, stop = _kernel.walk_records(
        view, pos, end, count
    )
    if status == count:
        raise CorruptRecordError(f"{end - stop} bytes left after the {count} records the batch declares")
    if status != _kernel.OK:
        raise CorruptRecordError(f"record {status} of the {count} the batch declares is malformed")
    if len(header_fields):
        _check_header_keys(buf, header_fields)
    return RecordArrays(buf, pos, end, count, columns, header_rows, header_counts, header_fields)


def _check_header_keys(buf: Buffer, header_fields: Int64Array) -> None:
    """Header keys must be UTF-8, as the reader checks (the kernel does not)."""
    view = memoryview(buf)
    for start, length in header_fields.reshape(-1, FIELDS_PER_HEADER)[:, :2].tolist():
        try:
            bytes(view[start : start + length]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record header key is not valid UTF-8: {exc}") from exc


def arrays_from_columns(decoded: RecordColumns) -> RecordArrays:
    """The Python walk's flat lists as arrays."""
    count = decoded.count
    flat = np.fromiter(decoded.fields, np.int64, len(decoded.fields))  # twice as fast as np.array
    columns = np.ascontiguousarray(flat.reshape(count, FIELDS_PER_RECORD).T)
    return RecordArrays(
        decoded.buffer,
        decoded.start,
        decoded.end,
        count,
        columns,
        np.array(decoded.header_rows, np.int64),
        np.array(decoded.header_counts, np.int64),
        np.array(decoded.header_fields, np.int64),
    )


def gather_spans(
    buf: npt.NDArray[np.uint8],
    starts: Int64Array,
    lengths: Int64Array,
    offsets: npt.NDArray[Any],
    data: npt.NDArray[np.uint8],
    first_row: int,
    data_pos: int,
    *,
    compiled: bool = True,
) -> int:
    """Copy the spans (start, length; -1 null) of ``buf`` one after the other into ``data`` from
    ``data_pos`` on and write each one's end into ``offsets[first_row + i + 1]``; return the new
    end. The kernel's gather, or numpy's fancy indexing without it (same result). A span outside
    ``buf``, or no room for it in ``data``, raises ``IndexError``."""
    if compiled and _kernel is not None:
        end: int = _kernel.gather_spans(buf, starts, lengths, offsets, data, first_row, data_pos)
        if end < 0:
            raise IndexError("a span lies outside its buffer, or the data buffer has no room for it")
        return end
    n = len(starts)
    sizes = np.maximum(lengths, 0)
    ends = np.cumsum(sizes) + data_pos
    offsets[first_row + 1 : first_row + n + 1] = ends
    total = int(ends[-1]) - data_pos if n else 0
    if total:
        begins = ends - sizes
        index = np.repeat(starts - begins, sizes) + np.arange(data_pos, data_pos + total)
        data[data_pos : data_pos + total] = buf[index]
    return data_pos + total
