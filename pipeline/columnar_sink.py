"""The sink's rows partitioned and cut into batches without Python work per row (issue 21).

:class:`pipeline.produce.PartitionedWriter` takes one row at a time: a Python object per row, a
murmur2 in Python per key, a :class:`~protocol.records.Record` per row. For an input whose rows all
go to the ``topic`` option's topic, without a ``headers`` column, the same decisions are taken here
over the Arrow buffers: a row's own ``partition`` where it has one, else murmur2 of its key by a numba
kernel
(:func:`protocol.records.columnar_encoder.murmur2_column`), then one compiled sequential pass that
replays :meth:`PartitionedWriter.add`'s rule exactly: a keyed row goes to
``toPositive(murmur2(key)) % numPartitions``, a keyless row to the topic's sticky partition; every
row adds ``RECORD_OVERHEAD_BYTES + len(key) + len(value)`` to its partition's buffered bytes; a
partition whose buffer reaches ``batch.size`` is sent, and if it was the sticky partition the sticky
partition becomes a uniformly random other one. The pass returns every row's partition and the
"send" events in row order; the writer then groups row indices per partition (a stable argsort) and
encodes each sent chunk with the compiled encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from protocol.records.columnar_encoder import BinaryColumn, murmur2_column
from protocol.records.compiled import compiled

__all__ = ["Assignment", "assign_partitions", "binary_column", "row_sizes"]

Int64Array = npt.NDArray[np.int64]


def binary_column(array: pa.Array) -> BinaryColumn:
    """An Arrow string/binary array (large or not, sliced or not) as a :class:`BinaryColumn`,
    without copying the data (strings are their UTF-8 bytes, as the row path writes them)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    count = len(array)
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    buffers = array.buffers()
    offsets_buffer, data_buffer = buffers[1], buffers[2]
    if offsets_buffer is None:
        offsets = np.zeros(count + 1, np.int64)
    else:
        raw = np.frombuffer(offsets_buffer, np.int64 if large else np.int32)
        offsets = raw[array.offset : array.offset + count + 1].astype(np.int64)
    data = np.zeros(0, np.uint8) if data_buffer is None else np.frombuffer(data_buffer, np.uint8)
    if array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False)
    else:
        valid = np.ones(count, np.bool_)
    return BinaryColumn(offsets, data, valid)


def row_sizes(keys: BinaryColumn, values: BinaryColumn, overhead: int) -> Int64Array:
    """Each row's size as the writer counts it: ``overhead + len(key or b"") + len(value or b"")``."""
    key_lengths = np.where(keys.valid, np.diff(keys.offsets), 0)
    value_lengths = np.where(values.valid, np.diff(values.offsets), 0)
    return (key_lengths + value_lengths + overhead).astype(np.int64)


@compiled
def _assign_kernel(
    keyed: Any, sizes: Any, buffered: Any, sticky: int, batch_size: int, steps: Any
) -> tuple[Any, Any, Any, int, int]:
    count = keyed.shape[0]
    num_partitions = buffered.shape[0]
    partitions = np.empty(count, np.int64)
    sent_partitions = np.empty(count, np.int64)
    sent_rows = np.empty(count, np.int64)
    sent = 0
    used_steps = 0
    for row in range(count):
        partition = keyed[row]
        if partition < 0:
            partition = sticky
        partitions[row] = partition
        buffered[partition] += sizes[row]
        if buffered[partition] >= batch_size:
            sent_partitions[sent] = partition
            sent_rows[sent] = row
            sent += 1
            buffered[partition] = 0
            if partition == sticky and num_partitions > 1:
                sticky = (sticky + 1 + steps[used_steps]) % num_partitions
                used_steps += 1
    return partitions, sent_partitions[:sent], sent_rows[:sent], sticky, used_steps


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where the rows of one input go: ``partitions[i]`` for row ``i``; ``sent_partitions[j]`` is sent
    right after row ``sent_rows[j]`` joined it; ``buffered`` and ``sticky`` are the state after."""

    partitions: Int64Array
    sent_partitions: Int64Array
    sent_rows: Int64Array
    buffered: Int64Array
    sticky: int


def assign_partitions(
    keys: BinaryColumn,
    sizes: Int64Array,
    buffered: Int64Array,
    sticky: int,
    batch_size: int,
    rng: np.random.Generator,
    explicit: Int64Array | None = None,
) -> Assignment:
    """Partition every row as :meth:`pipeline.produce.PartitionedWriter.add` does (module docstring).

    ``buffered`` holds the bytes already buffered per partition (its length is the partition count)
    and is not modified; ``rng`` draws the sticky partition's successors; ``explicit`` is a row's
    own partition (a ``partition`` column, checked by the caller), -1 where it has none."""
    num_partitions = int(buffered.shape[0])
    hashes = murmur2_column(keys)
    keyed = np.where(hashes >= 0, (hashes & 0x7FFFFFFF) % num_partitions, -1).astype(np.int64)
    if explicit is not None:
        keyed = np.where(explicit >= 0, explicit, keyed).astype(np.int64)
    state = buffered.astype(np.int64, copy=True)
    # each switch follows a send of the sticky partition: at most one per row
    steps = rng.integers(0, max(num_partitions - 1, 1), size=len(sizes), dtype=np.int64)
    partitions, sent_partitions, sent_rows, new_sticky, _ = _assign_kernel(
        keyed, sizes, state, sticky, batch_size, steps
    )
    return Assignment(partitions, sent_partitions, sent_rows, state, int(new_sticky))
