"""The record walk of :mod:`protocol.records.columnar`, compiled: no Python work per record.

The pure-Python walk costs ~0.5-1.2 µs per record, CPython's price for ~25 varint steps; a bulk
reader (Spark) needs 10 million records/s. This module is the same walk compiled by numba into
machine code over numpy views of the record stream: ~30-50 ns per record on the 2-core benchmark
machine, 18 million records/s with the CRC check (``python -m bench.decoder``), plus ~5 µs per call.

Why numba over numpy buffers and not something else:

* a C extension (or Cython, Rust/pyo3) would be as fast, but needs a compiler at install time or
  a wheel per platform built and published by this project; numba ships wheels for every common
  platform, and the kernel stays Python source that reads like the reference walk it mirrors;
* pyarrow compute and numpy alone cannot parse varints: each record's layout depends on the bytes
  before it, a sequential walk no vectorized kernel expresses;
* no maintained library parses Kafka's v2 records into buffers (the Python clients decode into one
  object per record);
* the cost is install weight (numba + llvmlite, ~210 MB installed, llvmlite carrying LLVM; the
  ``spark`` extra holds it, beside pyspark's ~460 MB) and a first compile of ~10 s. ``cache=True``
  writes the machine code next to this module (``__pycache__``; numba falls back to a per-user
  cache directory where that is not writable), so Spark's Python workers load it instead of
  compiling again in every process; where no cache location is writable at all, the functions are
  compiled without cache. ``nogil=True`` lets threads decode in parallel.

Verdicts are those of the pure-Python walk (and so of :mod:`protocol.records.reader`), on every
input: the same columns, or an error status for anything it rejects; a hypothesis test checks
both against each other and against the reader. Reads are bounded by the stream's end, not by the
record's: a field that crosses its record's end leaves the position past it, and a record is only
accepted if its fields end exactly at its declared length, so the verdict is the same (the message
may differ). Header keys are checked for UTF-8 by the caller (:mod:`protocol.records.columnar_arrays`),
since headers are rare and numba has no UTF-8 validator.

This module only walks and gathers bytes; it knows nothing of batches, codecs or Arrow.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from protocol.records.compiled import compiled, compiled_helper

__all__ = ["OK", "gather_spans", "walk_records"]


OK = -1
"""``walk_records``' status when every record decoded; otherwise the status is the index of the
record that failed."""


@compiled_helper
def _varint(buf: Any, pos: int, end: int) -> tuple[Any, int]:
    """A zigzag varint of at most 5 bytes and 32 bits at ``pos``: (value, next position), or
    (0, -1) if it is longer, wider, or runs past ``end``."""
    raw: Any = 0
    for index in range(5):
        if pos >= end:
            return 0, -1
        byte = np.int64(buf[pos])
        pos += 1
        raw |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            if raw >> 32:
                return 0, -1
            return (raw >> 1) ^ -(raw & 1), pos
    return 0, -1


@compiled_helper
def _varlong(buf: Any, pos: int, end: int) -> tuple[Any, int]:
    """A zigzag varint of at most 10 bytes and 64 bits at ``pos``, as :func:`_varint` does."""
    byte = np.int64(buf[pos]) if pos < end else np.int64(0x80)
    if byte < 0x80:  # the common case: one byte
        return (byte >> 1) ^ -(byte & 1), pos + 1
    raw = np.uint64(0)
    for index in range(10):
        if pos >= end:
            return 0, -1
        byte = np.int64(buf[pos])
        pos += 1
        low = byte & 0x7F
        if index == 9 and low > 1:  # bits beyond the 64th
            return 0, -1
        raw |= np.uint64(low) << np.uint64(7 * index)
        if byte < 0x80:
            half = np.int64(raw >> np.uint64(1))
            if raw & np.uint64(1):
                return -half - 1, pos
            return half, pos
    return 0, -1


@compiled
def _grow(array: Any, used: int, need: int) -> Any:
    if used + need <= array.shape[0]:
        return array
    bigger = np.empty(max(2 * array.shape[0], used + need), np.int64)
    bigger[:used] = array[:used]
    return bigger


@compiled
def walk_records(buf: Any, pos: int, end: int, count: int) -> tuple[Any, Any, Any, Any, int, int]:
    """Decode exactly ``count`` records filling ``buf[pos:end]`` (``buf``: a uint8 array).

    Returns ``(columns, header_rows, header_counts, header_fields, status, position)``: ``columns``
    is a (6, count) int64 array, one row per field in the order of
    :data:`~protocol.records.columnar.FIELDS_PER_RECORD`'s constants (offset delta, timestamp delta,
    key start, key length, value start, value length; -1 for null); the header arrays are
    :class:`~protocol.records.columnar.RecordColumns`' sparse ones. ``status`` is :data:`OK`, or the
    index of the record found corrupt (``count`` when bytes are left after the last record), and
    ``position`` where the walk stopped.
    """
    columns = np.empty((6, count), np.int64)
    header_rows = np.empty(4, np.int64)
    header_counts = np.empty(4, np.int64)
    header_fields = np.empty(16, np.int64)
    rows = 0
    fields = 0
    status = OK
    for index in range(count):
        status = index  # until the record is whole
        length, pos = _varint(buf, pos, end)
        if pos < 0:
            break
        record_end = pos + length
        pos += 1  # attributes: unused
        timestamp_delta, pos = _varlong(buf, pos, end)
        if pos < 0:
            break
        offset_delta, pos = _varint(buf, pos, end)
        if pos < 0:
            break
        key_length, pos = _varint(buf, pos, end)
        if pos < 0 or key_length < -1:
            break
        key_start = pos
        if key_length > 0:
            pos += key_length
        value_length, pos = _varint(buf, pos, end)
        if pos < 0 or value_length < -1:
            break
        value_start = pos
        if value_length > 0:
            pos += value_length
        if pos >= end:
            break
        if buf[pos] == 0:  # no headers
            pos += 1
        else:  # as the reference: a row is listed whenever the count's first byte is not 0
            header_count, pos = _varint(buf, pos, end)
            if pos < 0 or header_count < 0 or header_count > (record_end - pos) // 2:
                break
            header_rows = _grow(header_rows, rows, 1)
            header_counts = _grow(header_counts, rows, 1)
            header_rows[rows] = index
            header_counts[rows] = header_count
            rows += 1
            header_fields = _grow(header_fields, fields, 4 * header_count)
            for _ in range(header_count):
                key_length_h, pos = _varint(buf, pos, end)
                if pos < 0 or key_length_h < 0 or key_length_h > record_end - pos:
                    pos = -1
                    break
                header_fields[fields] = pos
                header_fields[fields + 1] = key_length_h
                pos += key_length_h
                value_length_h, pos = _varint(buf, pos, end)
                if pos < 0 or value_length_h < -1 or value_length_h > record_end - pos:
                    pos = -1
                    break
                header_fields[fields + 2] = pos
                header_fields[fields + 3] = value_length_h
                if value_length_h > 0:
                    pos += value_length_h
                fields += 4
            if pos < 0:
                break
        if pos != record_end:
            break
        columns[0, index] = offset_delta
        columns[1, index] = timestamp_delta
        columns[2, index] = key_start
        columns[3, index] = key_length
        columns[4, index] = value_start
        columns[5, index] = value_length
        status = OK
    if status == OK and pos != end:
        status = count
    return columns, header_rows[:rows], header_counts[:rows], header_fields[:fields], status, pos


def _copy_intrinsic(typing_context: Any, dst: Any, dst_pos: Any, src: Any, src_pos: Any, length: Any) -> Any:
    """``dst[dst_pos : dst_pos + length] = src[src_pos : src_pos + length]`` as one ``memcpy``,
    unchecked (the caller checks the bounds). numba's slice assignment took ~80 ns per 100-byte
    value (a view per slice, an overlap check, a byte loop LLVM cannot vectorize for fear of
    aliasing); ``memcpy`` takes ~6."""
    signature = types.void(dst, dst_pos, src, src_pos, length)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        dst_value, dst_index, src_value, src_index, count = args
        dst_array = context.make_array(sig.args[0])(context, builder, dst_value)
        src_array = context.make_array(sig.args[2])(context, builder, src_value)
        _raw_memcpy(
            builder,
            builder.gep(dst_array.data, [dst_index]),
            builder.gep(src_array.data, [src_index]),
            count,
            1,
        )
        return context.get_dummy_value()

    return signature, codegen


_raw_memcpy: Any = cgutils.raw_memcpy
_copy: Any = intrinsic(_copy_intrinsic)


@compiled
def gather_spans(
    buf: Any, starts: Any, lengths: Any, offsets: Any, data: Any, first_row: int, data_pos: int
) -> int:
    """Copy the spans ``buf[starts[i] : starts[i] + lengths[i]]`` (length -1: null, nothing) one
    after the other into ``data`` from ``data_pos`` on, writing each one's end into
    ``offsets[first_row + i + 1]`` (an Arrow binary array's offsets); returns the new end of data,
    or -1 (having copied only some) if a span lies outside ``buf`` or ``data`` has no room for it.
    ``buf`` and ``data`` are contiguous uint8 arrays.
    """
    size = buf.shape[0]
    room = data.shape[0]
    for i in range(starts.shape[0]):
        length = lengths[i]
        if length > 0:
            start = starts[i]
            if start < 0 or start + length > size or data_pos + length > room:
                return -1
            _copy(data, data_pos, buf, start, length)
            data_pos += length
        offsets[first_row + i + 1] = data_pos
    return data_pos
