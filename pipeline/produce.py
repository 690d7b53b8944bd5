"""Write rows to kipling from a Spark task: partitioning, batching per partition, pipelined produce.

Semantics are those of Spark's Kafka sink: at-least-once. A task that fails after some of its batches
were acknowledged leaves them written, and Spark's retry writes them again; nothing is rolled back
(``abort`` can only log). Rows without a partition go where Kafka's default partitioner would put
them: murmur2 of the key modulo the partition count for keyed rows (so kipling and Kafka clients agree
on a key's partition), and a "sticky" partition, changed after every batch, for rows without a key.

Inputs without a headers column going to the ``topic`` option's topic take a compiled path
(:mod:`pipeline.columnar_sink`, :mod:`protocol.records.columnar_encoder`): the same partitions, sticky
switches and batches, decided and encoded over the Arrow buffers without a Python object per row.

Batches fill up to ``kafka.batch.size`` bytes per partition and are sent with at most
``kafka.max.in.flight.requests.per.connection`` requests in flight per leader. A broker error or a lost
connection fails the task with :class:`KiplingWriteError`: retrying a produce whose outcome is unknown
would duplicate or reorder rows behind the caller's back.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import structlog

from client.connection import KafkaConnection
from client.errors import ClientError, KafkaResponseError
from client.fetch_session import TopicPartition
from client.partitioner import partition_for_key
from client.producer import Producer
from pipeline.arrow import OutgoingRecord, outgoing_records
from pipeline.cluster import BrokerSession, ClusterClient
from pipeline.columnar_sink import assign_partitions, binary_column, row_sizes
from pipeline.errors import KiplingWriteError
from pipeline.options import BrokerAddress, WriteOptions
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch
from protocol.records.columnar_encoder import BinaryColumn, ColumnPiece, build_batch_pieces

_log = structlog.get_logger("kipling.pipeline.produce")

COLUMNAR_DEFAULT = os.environ.get("KIPLING_PIPELINE_COLUMNAR_SINK", "1") != "0"
"""Whether the sink encodes eligible inputs with the compiled path (``KIPLING_PIPELINE_COLUMNAR_SINK=0``
turns it off, for comparison)."""

RECORD_OVERHEAD_BYTES = 21
"""Rough per-record framing (length, attributes, deltas, lengths) for sizing batches."""


@dataclass(slots=True)
class WriteSummary:
    """What one task wrote: records per partition (sent to the driver in the commit message)."""

    records: int = 0
    by_partition: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _TopicInfo:
    num_partitions: int
    leaders: dict[int, BrokerAddress]
    sticky: int


class PartitionedWriter:
    """Buffers rows per partition and produces them to the leaders (asyncio; one per task)."""

    def __init__(self, client: ClusterClient, options: WriteOptions) -> None:
        self._client = client
        self._options = options
        self._topics: dict[str, _TopicInfo] = {}
        self._buffers: dict[TopicPartition, list[Record]] = {}
        self._buffer_bytes: dict[TopicPartition, int] = {}
        self._pieces: dict[TopicPartition, list[ColumnPiece]] = {}
        self._rng = np.random.default_rng()
        self._producers: dict[BrokerAddress, tuple[KafkaConnection, Producer]] = {}
        self._slots: dict[BrokerAddress, asyncio.Semaphore] = {}
        self._in_flight: set[asyncio.Task[None]] = set()
        self._errors: list[BaseException] = []
        self.summary = WriteSummary()

    async def add(self, row: OutgoingRecord) -> None:
        self._raise_failures()
        topic = self._options.topic or row.topic
        if topic is None:
            raise KiplingWriteError(
                "null topic present in the data. Use the topic option for setting a topic."
            )
        info = await self._topic(topic)
        if row.partition is not None:
            if not 0 <= row.partition < info.num_partitions:
                raise KiplingWriteError(
                    f"Invalid partition given with record: {row.partition} is not in the range "
                    f"[0...{info.num_partitions}) of topic {topic}"
                )
            partition = row.partition
        elif row.key is not None:
            partition = partition_for_key(row.key, info.num_partitions)
        else:
            partition = info.sticky
        tp = TopicPartition(topic, partition)
        record = Record(row.value, row.key, row.headers, int(time.time() * 1000))
        self._buffers.setdefault(tp, []).append(record)
        size = RECORD_OVERHEAD_BYTES + len(row.key or b"") + len(row.value or b"")
        size += sum(len(k) + len(v or b"") for k, v in row.headers)
        self._buffer_bytes[tp] = self._buffer_bytes.get(tp, 0) + size
        if self._buffer_bytes[tp] >= self._options.batch_size:
            await self._send(tp)

    def columnar(self, schema: pa.Schema) -> bool:
        """Whether inputs of ``schema`` can take :meth:`add_batch`: every row goes to the ``topic``
        option's topic and no row carries headers."""
        return self._options.topic is not None and "headers" not in schema.names

    async def add_batch(self, batch: pa.RecordBatch) -> None:
        """Add every row of ``batch`` (its schema :meth:`columnar`) as :meth:`add` would, row by row:
        the same partitions, sticky switches and sends (:mod:`pipeline.columnar_sink`), without a
        Python object per row; rows of one input share its timestamp."""
        self._raise_failures()
        topic = self._options.topic
        assert topic is not None  # checked by columnar()
        count = batch.num_rows
        if count == 0:
            return
        info = await self._topic(topic)
        values = binary_column(batch.column("value"))
        names = batch.schema.names
        keys = binary_column(batch.column("key")) if "key" in names else BinaryColumn.nulls(count)
        sizes = row_sizes(keys, values, RECORD_OVERHEAD_BYTES)
        explicit = _explicit_partitions(batch, topic, info.num_partitions) if "partition" in names else None
        buffered = np.array(
            [self._buffer_bytes.get(TopicPartition(topic, p), 0) for p in range(info.num_partitions)],
            np.int64,
        )
        assignment = assign_partitions(
            keys, sizes, buffered, info.sticky, self._options.batch_size, self._rng, explicit
        )
        info.sticky = assignment.sticky
        timestamp = int(time.time() * 1000)
        order = np.argsort(assignment.partitions, kind="stable")
        ordered = assignment.partitions[order]
        wanted = np.arange(info.num_partitions)
        starts = np.searchsorted(ordered, wanted, "left")
        ends = np.searchsorted(ordered, wanted, "right")
        taken = starts.copy()

        def take(partition: int, upto: int) -> None:
            rows = order[taken[partition] : upto]
            taken[partition] = upto
            if rows.shape[0]:
                piece = ColumnPiece(keys, values, rows, np.full(rows.shape[0], timestamp, np.int64))
                self._pieces.setdefault(TopicPartition(topic, partition), []).append(piece)

        for partition, row in zip(
            assignment.sent_partitions.tolist(), assignment.sent_rows.tolist(), strict=True
        ):
            start, end = int(starts[partition]), int(ends[partition])
            take(partition, start + int(np.searchsorted(order[start:end], row, "right")))
            await self._send(TopicPartition(topic, partition), switch_sticky=False)
        for partition in range(info.num_partitions):
            take(partition, int(ends[partition]))
            if assignment.buffered[partition]:
                self._buffer_bytes[TopicPartition(topic, partition)] = int(assignment.buffered[partition])

    async def finish(self) -> WriteSummary:
        """Send what is buffered and wait for every acknowledgement."""
        for tp in list(self._buffers) + list(self._pieces):
            await self._send(tp)
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
        self._raise_failures()
        return self.summary

    async def abandon(self) -> None:
        """Cancel sends in flight after a failure (their outcome stays unknown)."""
        for task in self._in_flight:
            task.cancel()
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    async def _topic(self, topic: str) -> _TopicInfo:
        info = self._topics.get(topic)
        if info is not None:
            return info
        metadata = await self._client.with_retries("metadata", lambda: self._client.metadata([topic]))
        description = metadata.topics.get(topic)
        if description is None or description.error is not ErrorCode.NONE:
            code = description.error if description is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            raise KiplingWriteError(f"cannot write to topic {topic}: {code.name}")
        partitions = [p.partition for p in description.partitions]
        leaders = await self._client.with_retries(
            "metadata", lambda: self._client.leaders([TopicPartition(topic, p) for p in partitions])
        )
        info = _TopicInfo(
            num_partitions=len(partitions),
            leaders={tp.partition: address for tp, address in leaders.items()},
            sticky=random.randrange(len(partitions)),
        )
        self._topics[topic] = info
        return info

    async def _send(self, tp: TopicPartition, *, switch_sticky: bool = True) -> None:
        """Send ``tp``'s buffer; moves the sticky partition on if it was the one (``add_batch``'s
        pass already did)."""
        records = self._buffers.pop(tp, None)
        pieces = self._pieces.pop(tp, None)
        self._buffer_bytes.pop(tp, None)
        if records and pieces:  # one task's inputs share a schema, so one path: never both
            raise KiplingWriteError(f"rows of {tp.topic}-{tp.partition} were buffered by both sink paths")
        if records:
            batch = build_batch(records, compression=self._options.compression)
            count = len(records)
        elif pieces:
            batch = build_batch_pieces(pieces, compression=self._options.compression)
            count = sum(int(piece.rows.shape[0]) for piece in pieces)
        else:
            return
        info = self._topics[tp.topic]
        if switch_sticky and tp.partition == info.sticky and info.num_partitions > 1:
            info.sticky = random.choice([p for p in range(info.num_partitions) if p != tp.partition])
        address = info.leaders[tp.partition]
        producer = await self._producer(address)
        slots = self._slots.setdefault(address, asyncio.Semaphore(self._options.max_in_flight))
        await slots.acquire()
        task = asyncio.create_task(self._produce(producer, tp, batch, count, slots))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _produce(
        self, producer: Producer, tp: TopicPartition, batch: bytes, count: int, slots: asyncio.Semaphore
    ) -> None:
        try:
            await producer.send_batch(tp.topic, tp.partition, batch)
        except (KafkaResponseError, ClientError) as exc:
            self._errors.append(
                KiplingWriteError(f"producing {count} records to {tp.topic}-{tp.partition} failed: {exc}")
            )
            return
        finally:
            slots.release()
        self.summary.records += count
        key = f"{tp.topic}-{tp.partition}"
        self.summary.by_partition[key] = self.summary.by_partition.get(key, 0) + count

    async def _producer(self, address: BrokerAddress) -> Producer:
        """The producer on the current connection to ``address`` (a new one after a reconnect)."""
        connection = await self._client.connection(address)
        cached = self._producers.get(address)
        if cached is not None and cached[0] is connection:
            return cached[1]
        producer = Producer(
            connection,
            acks=self._options.acks,
            timeout_ms=self._options.connection.request_timeout_ms,
            compression=self._options.compression,
        )
        self._producers[address] = (connection, producer)
        return producer

    def _raise_failures(self) -> None:
        if self._errors:
            first = self._errors[0]
            raise first


def _explicit_partitions(batch: pa.RecordBatch, topic: str, num_partitions: int) -> npt.NDArray[np.int64]:
    """The ``partition`` column as int64, -1 for null; refuses a partition outside the topic as
    :meth:`PartitionedWriter.add` does (its first such row's)."""
    column = batch.column("partition")
    explicit = np.asarray(column.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    wrong = np.flatnonzero(
        column.is_valid().to_numpy(zero_copy_only=False) & ((explicit < 0) | (explicit >= num_partitions))
    )
    if wrong.shape[0]:
        raise KiplingWriteError(
            f"Invalid partition given with record: {int(explicit[wrong[0]])} is not in the range "
            f"[0...{num_partitions}) of topic {topic}"
        )
    return explicit


def write_batches(
    options: WriteOptions, batches: Iterable[pa.RecordBatch], *, columnar: bool = COLUMNAR_DEFAULT
) -> WriteSummary:
    """Produce every row of ``batches`` (one Spark task's input); raises on the first failure.

    Inputs without a headers column going to the ``topic`` option's topic take the
    compiled path (:meth:`PartitionedWriter.add_batch`) unless ``columnar`` is False (the bench
    compares both); the others go row by row."""
    with BrokerSession(options.connection) as session:
        writer = PartitionedWriter(session.client, options)

        async def run() -> WriteSummary:
            try:
                for batch in batches:
                    if columnar and writer.columnar(batch.schema):
                        await writer.add_batch(batch)
                        continue
                    for row in outgoing_records(batch):
                        await writer.add(row)
                return await writer.finish()
            except BaseException:
                await writer.abandon()
                raise

        return session.run(run())


__all__ = ["PartitionedWriter", "WriteSummary", "write_batches"]
