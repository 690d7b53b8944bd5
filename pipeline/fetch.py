"""Read one offset range of one topic partition inside a Spark task, as Arrow batches.

One task = one :class:`ReadTask` = one kipling :class:`~client.consumer.Consumer` (one incremental fetch
session) on the partition's leader, reading exactly [start, end) and stopping there. Everything the
task needs travels in the ReadTask (it is the InputPartition's payload): the reader object Spark
unpickles holds no connection, and ``read()`` opens its own (pyspark-notes.md §3.1).

What a fetched slice may contain, and what is done with it:

* a compressed batch that starts before ``start`` (the broker answers with whole batches): records
  below ``start`` are dropped (:meth:`FetchedPartition.records` already does);
* records at or past ``end`` in the last batch: dropped, and reading stops;
* control batches (transaction markers): skipped; their offsets are gaps, which is fine. Spark's Kafka
  source reads ``read_uncommitted`` by default, and so does this reader; with
  ``kafka.isolation.level=read_committed`` it reads up to the last stable offset and skips the
  batches of aborted transactions, from the aborted transactions the broker returns;
* offsets below the log start offset (retention deleted them): data loss. Like Spark's
  ``KafkaDataConsumer``, ``failOnDataLoss=true`` fails the task; ``false`` logs a warning and resumes at
  the earliest offset still available inside the range, or skips the rest of the range when none is;
* a gap above the log start (compaction, markers): not data loss;
* no progress at all for ``kafkaConsumer.pollTimeoutMs``: the task fails with a timeout, as Spark's does.

One fetch ahead: once a response is known good (no error, records past the position, the range not
finished by it), the next Fetch is sent *before* that response is decoded, so the broker reads and
sends the next slice while this process decodes and hands Arrow to Spark. The consumer has already
moved its position past the response (:meth:`Consumer.fetch` does), and the decoding moves
:attr:`RangeReader.position` to the same place, so the request ahead asks for exactly what the next
sequential fetch would have asked for. It is an asyncio task on the session's loop, not a thread: the
request leaves on the socket at once (one loop turn), the broker (another process) does its part
while this one decodes, and the response waits in the socket buffer until the next round reads it.
Decoding stays on the loop's thread, so the builder and the reader's state have one owner, and the
Python-side work of the fetch client (response parsing, asyncio) does not fight the decoder for the
GIL. At most one response is ahead (bounded by ``kafka.max.partition.fetch.bytes``), and only after a
good response: every error path (retries, OffsetOutOfRange, data loss, no progress) runs exactly as
without it, because there is then nothing in flight. Closing the reader cancels a fetch still ahead
(Spark stopping early, or a failure). ``KIPLING_PIPELINE_PREFETCH=0`` turns it off (benchmarks).

Records are decoded batch by batch into numpy columns (:mod:`protocol.records.columnar_arrays`, whose
compiled kernel walks the records) and turned into Arrow by
:meth:`RecordBatchBuilder.append_record_batches`, with no Python work per record (bench/README.md,
"Reading into Spark", and ``bench.decoder``). One switch, ``KIPLING_PIPELINE_DECODER`` in the
environment of Spark's Python workers, chooses :func:`read_range`'s decoder:

* ``columnar`` (the default): the compiled kernel, or the pure-Python walk where numba is not installed;
* ``python``: the pure-Python walk of :mod:`protocol.records.columnar` (the kernel's reference) and
  numpy's gather, whether numba is installed or not;
* ``records``: one :class:`DecodedRecord` per record (:meth:`RangeReader.next_records`), the path
  before the columnar one, only so that ``bench.spark_read`` can measure the difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

import pyarrow as pa
import structlog

from client.consumer import Consumer, FetchedPartition, FetchResult
from client.errors import AuthenticationFailedError, ClientError, KafkaResponseError
from client.fetch_session import TopicPartition
from client.tasks import cancel_and_wait
from pipeline.arrow import DEFAULT_MAX_ROWS_PER_BATCH, RecordBatchBuilder
from pipeline.cluster import BrokerSession, ClusterClient
from pipeline.errors import KiplingReadTimeoutError
from pipeline.offsets import DataLossReporter, OffsetRange
from pipeline.options import BrokerAddress, ConnectionSettings
from protocol.error_codes import ErrorCode
from protocol.records import DecodedRecord
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, IsolationLevel

_log = structlog.get_logger("kipling.pipeline.fetch")

DECODER_ENV = "KIPLING_PIPELINE_DECODER"
"""Environment variable choosing :func:`read_range`'s decoder: ``columnar`` (the default: compiled
when numba is installed), ``python`` (the pure-Python walk) or ``records`` (one :class:`DecodedRecord`
per record, the path before the columnar one; for benchmarks only)."""
DECODERS = ("columnar", "python", "records")

PREFETCH_ENV = "KIPLING_PIPELINE_PREFETCH"
"""Environment variable: ``0`` turns off the fetch ahead of decoding (on by default; for benchmarks)."""

_Taken = TypeVar("_Taken")


@dataclass(frozen=True, slots=True)
class ReadTask:
    """One Spark task's work: a range and how to read it. Small and picklable."""

    range: OffsetRange
    connection: ConnectionSettings
    leader: BrokerAddress | None
    """The leader at planning time: saves a Metadata round trip; a stale one is corrected on error."""
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    max_partition_fetch_bytes: int = 1_048_576
    fetch_max_wait_ms: int = 500
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    retries: int = 3
    retry_interval_ms: int = 1000


class FetchingConsumer(Protocol):
    """What :class:`RangeReader` needs of a consumer (a real :class:`Consumer`, or a test's fake)."""

    def assign(self, tp: TopicPartition, offset: int) -> None: ...

    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    async def fetch(self, timeout_s: float | None = None) -> FetchResult: ...

    async def close(self) -> None: ...


OpenConsumer = Callable[[bool], Awaitable[FetchingConsumer]]
"""Open a consumer on the partition's leader; the flag says to look the leader up again."""
AvailableRange = Callable[[], Awaitable[tuple[int, int]]]
"""The partition's (log start offset, high watermark) now."""


class RangeReader:
    """Fetch [start, end) of one partition; :meth:`next_records` returns records until the range is done.

    Asyncio, driven one round at a time by :func:`read_range` so that Spark gets batches while the
    range is still being read.
    """

    def __init__(
        self,
        task: ReadTask,
        open_consumer: OpenConsumer,
        available_range: AvailableRange,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        prefetch: bool = True,
    ) -> None:
        self.task = task
        self.tp = task.range.tp
        self.position = task.range.start
        self.end = task.range.end
        self._open_consumer = open_consumer
        self._available_range = available_range
        self._clock = clock
        self._sleep = sleep
        self._report = DataLossReporter(task.fail_on_data_loss)
        self._consumer: FetchingConsumer | None = None
        self._refresh_leader = False
        self._last_progress = clock()
        self._prefetch = prefetch
        self._ahead: asyncio.Task[FetchResult] | None = None
        """The fetch sent before the previous response was decoded; only ever on ``self._consumer``."""
        self.skipped_offsets = 0
        """Offsets given up as lost (failOnDataLoss=false)."""

    @property
    def done(self) -> bool:
        return self.position >= self.end

    async def next_records(self) -> list[DecodedRecord] | None:
        """The next records of the range (never empty), or None once the range is read."""
        return await self._next(self._take)

    async def append_next(self, builder: RecordBatchBuilder) -> int | None:
        """Append the next records of the range to ``builder`` through its columnar path; return how
        many (never 0), or None once the range is read. Same rules as :meth:`next_records`."""
        return await self._next(lambda fetched: self._take_into(builder, fetched))

    async def _next(self, take: Callable[[FetchedPartition], _Taken | None]) -> _Taken | None:
        """Fetch until ``take`` gets something out of a response (a non-empty result), or the range ends."""
        while not self.done:
            consumer = await self._consumer_at_position()
            if consumer is None:
                continue
            try:
                result = await self._fetch(consumer)
            except KafkaResponseError:
                raise
            except ClientError as exc:
                await self._lost_consumer(f"fetch failed: {exc}")
                continue
            fetched = result.partitions.get(self.tp)
            if fetched is None or not result.valid:
                await self._no_progress()
                continue
            if fetched.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                await self._out_of_range()
                continue
            if fetched.error is not ErrorCode.NONE:
                if not fetched.error.retriable:
                    raise KafkaResponseError(
                        fetched.error, context=f"fetch {self.tp.topic}-{self.tp.partition} at {self.position}"
                    )
                await self._lost_consumer(f"fetch answered {fetched.error.name}")
                continue
            if self._prefetch and self.position < fetched.next_offset < self.end:
                await self._fetch_ahead(consumer)
            taken = take(fetched)
            if taken is None:
                await self._no_progress()
                continue
            if taken:
                return taken
        return None

    async def close(self) -> None:
        await self._drop_ahead()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.close()

    # -- internals ---------------------------------------------------------------------------------

    async def _fetch(self, consumer: FetchingConsumer) -> FetchResult:
        """The fetch already ahead, if one is, else a new one."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            return await ahead
        return await consumer.fetch()

    async def _fetch_ahead(self, consumer: FetchingConsumer) -> None:
        """Send the next fetch now, before the current response is decoded; one loop turn sends it."""
        self._ahead = asyncio.ensure_future(consumer.fetch())
        await asyncio.sleep(0)

    async def _drop_ahead(self) -> None:
        """Cancel a fetch still ahead (its answer is dropped when it comes); collect its outcome."""
        ahead, self._ahead = self._ahead, None
        await cancel_and_wait(ahead)  # its failure no longer matters: nobody wants its answer

    def _take(self, fetched: FetchedPartition) -> list[DecodedRecord] | None:
        """Records of [position, end) in ``fetched``; None when no whole batch came back."""
        if fetched.next_offset <= self.position:
            return None
        records = [r for r in fetched.records() if r.offset < self.end]
        self._advance(fetched, records[0].offset if records else None)
        return records

    def _take_into(self, builder: RecordBatchBuilder, fetched: FetchedPartition) -> int | None:
        """Append the records of [position, end) in ``fetched`` to ``builder``; how many, or None when
        no whole batch came back. The same records as :meth:`_take`: at or after the fetch offset,
        before the range's end, control batches skipped."""
        if fetched.next_offset <= self.position:
            return None
        before = len(builder)
        first = None
        if fetched.raw_records:
            first = builder.append_record_batches(
                fetched.raw_records, fetched.fetch_offset, self.end, aborted=fetched.batch_filter()
            )
        self._advance(fetched, first)
        return len(builder) - before

    def _advance(self, fetched: FetchedPartition, first: int | None) -> None:
        """Move past ``fetched``, whose first record in range is at ``first`` (None: it had none);
        a gap below the log start offset is data loss."""
        if first is None:
            first = min(fetched.next_offset, self.end)
        if first > self.position and fetched.log_start_offset > self.position:
            lost_until = min(first, fetched.log_start_offset)
            self._report(
                f"Could not read records in offset [{self.position}, {lost_until}) for topic partition "
                f"{self.tp.topic}-{self.tp.partition}: the log now starts at {fetched.log_start_offset}"
            )
            self.skipped_offsets += lost_until - self.position
        self.position = min(fetched.next_offset, self.end)
        self._last_progress = self._clock()

    async def _consumer_at_position(self) -> FetchingConsumer | None:
        if self._consumer is not None:
            return self._consumer
        try:
            consumer = await self._open_consumer(self._refresh_leader)
        except KafkaResponseError as exc:
            if not exc.retriable:
                raise
            await self._lost_consumer(f"leader lookup failed: {exc}")
            return None
        except AuthenticationFailedError:
            raise  # a refused login is refused again: fail the task now, not after pollTimeoutMs
        except ClientError as exc:
            await self._lost_consumer(f"cannot connect to the leader: {exc}")
            return None
        consumer.assign(self.tp, self.position)
        self._consumer = consumer
        return consumer

    async def _lost_consumer(self, why: str) -> None:
        """Drop the consumer and look the leader up again, within the poll timeout."""
        _log.info("fetch retry", topic=self.tp.topic, partition=self.tp.partition, why=why)
        await self._drop_ahead()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(ClientError):
                await consumer.close()
        self._refresh_leader = True
        self._check_deadline(why)
        await self._sleep(self.task.retry_interval_ms / 1000)

    async def _no_progress(self) -> None:
        """Nothing came back: the range may be gone (truncated, topic recreated) or just slow."""
        earliest, latest = await self._available_range()
        if self.position < earliest or self.position >= latest:
            await self._out_of_range(earliest, latest)
            return
        self._check_deadline("no records")

    async def _out_of_range(self, earliest: int | None = None, latest: int | None = None) -> None:
        """Spark's ``KafkaDataConsumer`` on OffsetOutOfRange: fail, or resume where data still is."""
        if earliest is None or latest is None:
            earliest, latest = await self._available_range()
        self._report(
            f"Could not read records in offset [{self.position}, {self.end}) for topic partition "
            f"{self.tp.topic}-{self.tp.partition}: the available offsets are [{earliest}, {latest})"
        )
        before = self.position
        if self.position >= latest or earliest >= self.end:
            self.position = self.end  # no overlap with what the log still holds: skip the rest
        elif self.position < earliest:
            self.position = earliest
        else:
            self._check_deadline("offset disappeared and came back")
        self.skipped_offsets += self.position - before
        self._last_progress = self._clock()
        if self._consumer is not None and not self.done:
            self._consumer.seek(self.tp, self.position)

    def _check_deadline(self, why: str) -> None:
        waited_ms = (self._clock() - self._last_progress) * 1000
        if waited_ms > self.task.poll_timeout_ms:
            raise KiplingReadTimeoutError(
                f"Cannot fetch records in [{self.position}, {self.end}) of "
                f"{self.tp.topic}-{self.tp.partition} "
                f"within kafkaConsumer.pollTimeoutMs={self.task.poll_timeout_ms} ms (last problem: {why})"
            )


def read_range(
    task: ReadTask, max_rows_per_batch: int = DEFAULT_MAX_ROWS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    """The records of ``task.range`` as Arrow batches of ``max_rows_per_batch`` rows (the last one fewer)."""
    if task.range.size <= 0:
        return
    decoder = os.environ.get(DECODER_ENV, "columnar")
    if decoder not in DECODERS:
        raise ValueError(f"{DECODER_ENV}={decoder!r}: expected one of {', '.join(DECODERS)}")
    builder = RecordBatchBuilder(
        task.range.topic, task.range.partition, task.include_headers, compiled=decoder == "columnar"
    )
    with BrokerSession(
        task.connection,
        retries=task.retries,
        retry_interval_ms=task.retry_interval_ms,
        isolation_level=task.isolation_level,
    ) as session:
        client = session.client
        reader = RangeReader(
            task,
            _consumer_opener(client, task),
            _range_lookup(client, task.range.tp),
            prefetch=os.environ.get(PREFETCH_ENV, "1") != "0",
        )
        try:
            if decoder != "records":
                while session.run(reader.append_next(builder)) is not None:
                    while len(builder) >= max_rows_per_batch:
                        batch = builder.take_batch(max_rows_per_batch)
                        if batch is not None:
                            yield batch
            else:
                while (records := session.run(reader.next_records())) is not None:
                    for record in records:
                        builder.append(record)
                        if len(builder) >= max_rows_per_batch:
                            batch = builder.flush()
                            if batch is not None:
                                yield batch
            batch = builder.flush()
            if batch is not None:
                yield batch
        finally:
            session.run(reader.close())
    _log.debug(
        "range read",
        topic=task.range.topic,
        partition=task.range.partition,
        start=task.range.start,
        end=task.range.end,
        skipped=reader.skipped_offsets,
    )


def _consumer_opener(client: ClusterClient, task: ReadTask) -> OpenConsumer:
    tp = task.range.tp

    async def open_consumer(refresh: bool) -> FetchingConsumer:
        address = task.leader
        if refresh or address is None:
            address = (await client.leaders([tp]))[tp]
        connection = await client.connection(address)
        return Consumer(
            connection,
            max_wait_ms=task.fetch_max_wait_ms,
            partition_max_bytes=task.max_partition_fetch_bytes,
            isolation_level=task.isolation_level,
        )

    return open_consumer


def _range_lookup(client: ClusterClient, tp: TopicPartition) -> AvailableRange:
    async def available_range() -> tuple[int, int]:
        earliest = await client.list_offsets({tp: EARLIEST_TIMESTAMP})
        latest = await client.list_offsets({tp: LATEST_TIMESTAMP})
        return earliest[tp], latest[tp]

    return available_range


__all__ = ["DECODER_ENV", "PREFETCH_ENV", "RangeReader", "ReadTask", "read_range"]
