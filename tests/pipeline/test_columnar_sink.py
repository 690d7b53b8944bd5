"""The sink's compiled path (issue 21): the same partitions and sends as the row path.

:func:`assign_partitions` is checked against a Python model of ``PartitionedWriter.add``'s rule (murmur2
for keyed rows, the sticky partition for the rest, a send when a partition's buffer reaches batch.size,
the sticky partition moving on after it was sent), with the same random successors; then both paths
write the same rows to a real broker and must leave the same keyed rows on the same partitions.
"""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("pyarrow")
pytest.importorskip("numba")

import pyarrow as pa  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from client.partitioner import partition_for_key  # noqa: E402
from pipeline.cluster import BrokerSession  # noqa: E402
from pipeline.columnar_sink import assign_partitions, binary_column, row_sizes  # noqa: E402
from pipeline.errors import KiplingWriteError  # noqa: E402
from pipeline.fetch import ReadTask, read_range  # noqa: E402
from pipeline.offsets import OffsetRange  # noqa: E402
from pipeline.options import Subscribe, parse_read_options, parse_write_options  # noqa: E402
from pipeline.produce import RECORD_OVERHEAD_BYTES, write_batches  # noqa: E402
from protocol.records.columnar_encoder import BinaryColumn  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.pipeline.helpers import new_topic  # noqa: E402

pytestmark = pytest.mark.timeout(180)

KEYS = st.one_of(st.none(), st.binary(max_size=12))


def model(
    keys: list[bytes | None],
    values: list[bytes],
    buffered: list[int],
    sticky: int,
    batch_size: int,
    steps: list[int],
    explicit: list[int | None],
) -> tuple[list[int], list[tuple[int, int]], list[int], int]:
    """``PartitionedWriter.add`` row by row, its random successor taken from ``steps``."""
    buffered = list(buffered)
    partitions, sent = [], []
    used = 0
    for row, (key, value) in enumerate(zip(keys, values, strict=True)):
        own = explicit[row]
        if own is not None:
            partition = own
        elif key is None:
            partition = sticky
        else:
            partition = partition_for_key(key, len(buffered))
        partitions.append(partition)
        buffered[partition] += RECORD_OVERHEAD_BYTES + len(key or b"") + len(value)
        if buffered[partition] >= batch_size:
            sent.append((partition, row))
            buffered[partition] = 0
            if partition == sticky and len(buffered) > 1:
                sticky = (sticky + 1 + steps[used]) % len(buffered)
                used += 1
    return partitions, sent, buffered, sticky


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(KEYS, min_size=1, max_size=80),
    num_partitions=st.integers(1, 6),
    batch_size=st.integers(1, 200),
    seed=st.integers(0, 2**32),
    data=st.data(),
)
def test_assignment_is_the_row_paths(
    keys: list[bytes | None], num_partitions: int, batch_size: int, seed: int, data: st.DataObject
) -> None:
    values = data.draw(st.lists(st.binary(max_size=30), min_size=len(keys), max_size=len(keys)))
    buffered = data.draw(st.lists(st.integers(0, 100), min_size=num_partitions, max_size=num_partitions))
    sticky = data.draw(st.integers(0, num_partitions - 1))
    own = st.one_of(st.none(), st.integers(0, num_partitions - 1))
    nones: list[int | None] = [None] * len(keys)
    explicit: list[int | None] = data.draw(
        st.one_of(st.just(nones), st.lists(own, min_size=len(keys), max_size=len(keys)))
    )
    key_column = BinaryColumn.from_values(keys)
    sizes = row_sizes(key_column, BinaryColumn.from_values(list(values)), RECORD_OVERHEAD_BYTES)
    got = assign_partitions(
        key_column,
        sizes,
        np.array(buffered, np.int64),
        sticky,
        batch_size,
        np.random.default_rng(seed),
        np.array([-1 if p is None else p for p in explicit], np.int64),
    )
    steps = np.random.default_rng(seed).integers(0, max(num_partitions - 1, 1), size=len(keys)).tolist()
    partitions, sent, left, new_sticky = model(keys, values, buffered, sticky, batch_size, steps, explicit)
    assert got.partitions.tolist() == partitions
    assert list(zip(got.sent_partitions.tolist(), got.sent_rows.tolist(), strict=True)) == sent
    assert got.buffered.tolist() == left
    assert got.sticky == new_sticky


@pytest.mark.parametrize("kind", [pa.binary(), pa.string(), pa.large_binary(), pa.large_string()])
def test_binary_column_reads_every_layout(kind: pa.DataType) -> None:
    raw = ["a", None, "", "héllo", None, "xyz"]
    items = [
        None if v is None else (v if kind in (pa.string(), pa.large_string()) else v.encode()) for v in raw
    ]
    array = pa.array(items, kind).slice(1, 5)
    column = binary_column(array)
    expected = [None if v is None else v.encode() for v in raw[1:6]]
    got = [
        bytes(column.data[column.offsets[i] : column.offsets[i + 1]]) if column.valid[i] else None
        for i in range(5)
    ]
    assert got == expected


def _read(bootstrap: str, topic: str) -> dict[int, list[tuple[bytes | None, bytes]]]:
    read = parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, "batch")
    assert read.subscription == Subscribe((topic,))
    with BrokerSession(read.connection) as session:
        partitions = session.partitions(read.subscription, missing_topics="error")
        latest = session.latest(partitions)
        earliest = session.earliest(partitions)
    out: dict[int, list[tuple[bytes | None, bytes]]] = {}
    for tp in partitions:
        task = ReadTask(
            range=OffsetRange(tp.topic, tp.partition, earliest[tp], latest[tp]),
            connection=read.connection,
            leader=None,
        )
        out[tp.partition] = [
            (key, value)
            for batch in read_range(task)
            for key, value in zip(
                batch.column("key").to_pylist(), batch.column("value").to_pylist(), strict=True
            )
        ]
    return out


@pytest.mark.parametrize(("compression", "own_partitions"), [("none", False), ("lz4", False), ("none", True)])
def test_both_paths_write_the_same_rows(
    broker: BrokerProcess, compression: str, own_partitions: bool
) -> None:
    count = 3000
    keys = [None if i % 3 == 0 else f"key-{i % 97}" for i in range(count)]
    values = [f"{i}:".encode() + b"value" * (i % 7) for i in range(count)]  # unique
    columns = {"key": pa.array(keys, pa.string()), "value": pa.array(values, pa.binary())}
    own = [i % 4 if i % 5 == 0 else None for i in range(count)]
    if own_partitions:
        columns["partition"] = pa.array(own, pa.int32())
    batches = [pa.record_batch(columns).slice(start, 1000) for start in range(0, count, 1000)]
    written = {}
    for columnar in (False, True):
        topic = new_topic(broker.bootstrap, "columnar-sink", partitions=4)
        options = parse_write_options(
            {
                "kafka.bootstrap.servers": broker.bootstrap,
                "topic": topic,
                "kafka.batch.size": "2000",
                "kafka.compression.type": compression,
            }
        )
        summary = write_batches(options, batches, columnar=columnar)
        assert summary.records == count
        written[columnar] = _read(broker.bootstrap, topic)
    for partitions in written.values():
        assert sum(len(rows) for rows in partitions.values()) == count
    placed = {  # rows whose partition is not the sticky one's random choice
        columnar: {
            p: [row for row in rows if row[0] is not None or (own_partitions and row in pinned)]
            for p, rows in partitions.items()
        }
        for columnar, partitions in written.items()
        for pinned in [{(None, values[i]) for i in range(count) if own[i] is not None and keys[i] is None}]
    }
    assert placed[True] == placed[False]  # same partitions, same order
    for partition, rows in placed[True].items():
        for key, value in rows:
            row = values.index(value)
            if own_partitions and own[row] is not None:
                assert own[row] == partition
            else:
                assert key is not None
                assert partition_for_key(key, 4) == partition


def test_a_partition_outside_the_topic_fails_the_task(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, "columnar-sink-bad", partitions=2)
    options = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic})
    batch = pa.record_batch({"value": pa.array([b"a", b"b"]), "partition": pa.array([1, 2], pa.int32())})
    with pytest.raises(KiplingWriteError, match=r"2 is not in the range \[0...2\)"):
        write_batches(options, [batch], columnar=True)
