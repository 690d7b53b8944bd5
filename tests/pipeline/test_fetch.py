"""The task-side range reader against a fake consumer: what it keeps, skips, and calls data loss."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pyarrow")


from client.consumer import FetchedPartition, FetchResult
from client.fetch_session import FetchMetadata, TopicPartition
from pipeline.arrow import RecordBatchBuilder
from pipeline.errors import KiplingDataLossError, KiplingReadTimeoutError
from pipeline.fetch import RangeReader, ReadTask
from pipeline.offsets import OffsetRange
from pipeline.options import BrokerAddress, ConnectionSettings
from protocol.error_codes import ErrorCode
from protocol.records import (
    CompressionType,
    Record,
    build_batch,
    build_end_txn_marker_batch,
    iter_batches,
)
from protocol.records.aborted import AbortedTransactionFilter

TP = TopicPartition("t", 0)
SETTINGS = ConnectionSettings((BrokerAddress("127.0.0.1", 1),))


class FakeLog:
    """One partition's log as a list of encoded batches."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, bytes]] = []  # (base offset, last offset, bytes)
        self.log_start = 0
        self.high_watermark = 0
        self.aborted: list[tuple[int, int, int]] = []
        """(producer id, first offset, marker offset) of aborted transactions (the broker's index)."""
        self._open: dict[int, int] = {}

    def append(self, count: int, compression: CompressionType = CompressionType.NONE) -> None:
        base = self.high_watermark
        records = [
            Record(f"v{base + i}".encode(), f"k{base + i}".encode(), timestamp=1000 + base + i)
            for i in range(count)
        ]
        self.batches.append(
            (base, base + count - 1, build_batch(records, base_offset=base, compression=compression))
        )
        self.high_watermark += count

    def append_marker(self, producer_id: int = 7, commit: bool = True) -> None:
        base = self.high_watermark
        marker = build_end_txn_marker_batch(
            commit=commit,
            producer_id=producer_id,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp=5,
            base_offset=base,
        )
        self.batches.append((base, base, marker))
        self.high_watermark += 1
        first = self._open.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append((producer_id, first, base))

    def aborted_from(self, offset: int) -> tuple[tuple[int, int], ...]:
        """What a read_committed fetch at ``offset`` gets: the aborted transactions not over yet."""
        return tuple((producer_id, first) for producer_id, first, last in self.aborted if last >= offset)

    def append_txn(self, producer_id: int, count: int) -> None:
        base = self.high_watermark
        records = [Record(f"v{base + i}".encode(), timestamp=1000 + base + i) for i in range(count)]
        batch = build_batch(
            records,
            base_offset=base,
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
        self.batches.append((base, base + count - 1, batch))
        self._open.setdefault(producer_id, base)
        self.high_watermark += count

    def delete_before(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b[1] >= offset]
        self.log_start = offset

    def read(self, position: int, max_batches: int) -> tuple[ErrorCode, bytes]:
        if position < self.log_start or position > self.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, b""
        chosen = [raw for _, last, raw in self.batches if last >= position][:max_batches]
        return ErrorCode.NONE, b"".join(chosen)


class FakeConsumer:
    def __init__(
        self,
        log: FakeLog,
        *,
        batches_per_fetch: int = 1,
        errors: list[ErrorCode] | None = None,
        read_committed: bool = False,
    ) -> None:
        self.log = log
        self.read_committed = read_committed
        self.batches_per_fetch = batches_per_fetch
        self.errors = errors or []
        self.position = -1
        self.fetches = 0
        self.closed = False
        self.fail_fetches: dict[int, Exception] = {}
        """Fetch number (1-based) -> the exception that fetch raises."""
        self.block_fetches: dict[int, asyncio.Event] = {}
        """Fetch number (1-based) -> an event that fetch waits for before answering."""
        self.cancelled = 0

    def assign(self, tp: TopicPartition, offset: int) -> None:
        assert tp == TP
        self.position = offset

    seek = assign

    async def fetch(self, timeout_s: float | None = None) -> FetchResult:
        self.fetches += 1
        number = self.fetches
        if number in self.fail_fetches:
            raise self.fail_fetches[number]
        if number in self.block_fetches:
            try:
                await self.block_fetches[number].wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if self.errors:
            error, raw = self.errors.pop(0), b""
        else:
            error, raw = self.log.read(self.position, self.batches_per_fetch)
        next_offset = self.position
        for _, header in iter_batches(raw):
            next_offset = max(next_offset, header.next_offset)
        hw = self.log.high_watermark
        aborted = self.log.aborted_from(self.position) if self.read_committed else None
        fetched = FetchedPartition(
            TP, self.position, error, hw, hw, self.log.log_start, raw or None, next_offset, aborted
        )
        self.position = next_offset
        return FetchResult(FetchMetadata(1, 1), 1, partitions={TP: fetched})

    async def close(self) -> None:
        self.closed = True


class Harness:
    def __init__(self, log: FakeLog, **consumer: object) -> None:
        self.log = log
        self.now = 0.0
        self.consumers: list[FakeConsumer] = []
        self.refreshes: list[bool] = []
        self.consumer_options = consumer

    async def open_consumer(self, refresh: bool) -> FakeConsumer:
        self.refreshes.append(refresh)
        consumer = FakeConsumer(self.log, **self.consumer_options)  # type: ignore[arg-type]
        self.consumers.append(consumer)
        return consumer

    async def available_range(self) -> tuple[int, int]:
        return self.log.log_start, self.log.high_watermark

    async def sleep(self, seconds: float) -> None:
        self.now += seconds

    def read(
        self,
        start: int,
        end: int,
        *,
        fail_on_data_loss: bool = True,
        poll_timeout_ms: int = 10_000,
        prefetch: bool = True,
    ) -> tuple[list[int], RangeReader]:
        reader = self.reader(start, end, fail_on_data_loss=fail_on_data_loss, poll_timeout_ms=poll_timeout_ms)
        reader._prefetch = prefetch

        async def run() -> list[int]:
            offsets: list[int] = []
            try:
                while (records := await reader.next_records()) is not None:
                    assert records, "next_records returned an empty list"
                    offsets.extend(r.offset for r in records)
                    self.now += 0.01
            finally:
                await reader.close()
            return offsets

        return asyncio.run(run()), reader

    def reader(
        self, start: int, end: int, *, fail_on_data_loss: bool = True, poll_timeout_ms: int = 10_000
    ) -> RangeReader:
        task = ReadTask(
            OffsetRange("t", 0, start, end),
            SETTINGS,
            None,
            fail_on_data_loss=fail_on_data_loss,
            poll_timeout_ms=poll_timeout_ms,
            retry_interval_ms=100,
        )
        return RangeReader(
            task, self.open_consumer, self.available_range, clock=lambda: self.now, sleep=self.sleep
        )


def test_reads_exactly_the_range_across_compressed_batches() -> None:
    log = FakeLog()
    log.append(10, CompressionType.GZIP)
    log.append(10, CompressionType.LZ4)
    log.append(10, CompressionType.ZSTD)
    harness = Harness(log)
    offsets, reader = harness.read(3, 15)
    assert offsets == list(range(3, 15))
    assert reader.skipped_offsets == 0
    assert harness.consumers[0].closed


def test_control_records_are_skipped_and_a_trailing_marker_ends_the_range() -> None:
    log = FakeLog()
    log.append(5)
    log.append_marker()  # offset 5
    log.append(4)  # 6..9
    log.append_marker()  # offset 10
    harness = Harness(log)
    assert harness.read(0, 8)[0] == [0, 1, 2, 3, 4, 6, 7]
    assert harness.read(0, 11)[0] == [0, 1, 2, 3, 4, 6, 7, 8, 9]  # ends on the marker, no waiting
    assert harness.read(5, 6)[0] == []  # a range of only a marker yields nothing


def test_offsets_below_the_log_start_are_data_loss() -> None:
    log = FakeLog()
    for _ in range(4):
        log.append(5)
    log.delete_before(10)
    with pytest.raises(
        KiplingDataLossError, match=r"\[0, 20\) for topic partition t-0.*available offsets are \[10, 20\)"
    ):
        Harness(log).read(0, 20)
    offsets, reader = Harness(log).read(0, 20, fail_on_data_loss=False)
    assert offsets == list(range(10, 20))
    assert reader.skipped_offsets == 10
    offsets, reader = Harness(log).read(0, 8, fail_on_data_loss=False)  # entirely aged out
    assert offsets == [] and reader.skipped_offsets == 8


def test_a_range_past_the_log_end_is_data_loss_not_a_hang() -> None:
    log = FakeLog()
    log.append(5)
    with pytest.raises(KiplingDataLossError, match="available offsets are \\[0, 5\\)"):
        Harness(log).read(0, 9)  # e.g. the topic was recreated with fewer records
    assert Harness(log).read(0, 9, fail_on_data_loss=False)[0] == [0, 1, 2, 3, 4]


def test_retriable_errors_reopen_the_consumer_on_a_fresh_leader() -> None:
    log = FakeLog()
    log.append(6)
    harness = Harness(log, errors=[ErrorCode.NOT_LEADER_OR_FOLLOWER])  # shared: only the first fetch fails
    offsets, _ = harness.read(0, 6)
    assert offsets == list(range(6))
    assert harness.refreshes[:2] == [False, True]


def test_no_progress_times_out_after_the_poll_timeout() -> None:
    log = FakeLog()
    log.append(6)
    harness = Harness(log, errors=[ErrorCode.LEADER_NOT_AVAILABLE] * 1000)
    with pytest.raises(KiplingReadTimeoutError, match="pollTimeoutMs=1000"):
        harness.read(0, 6, poll_timeout_ms=1000)


def test_non_retriable_errors_fail_the_task() -> None:
    from client.errors import KafkaResponseError

    log = FakeLog()
    log.append(3)
    harness = Harness(log, errors=[ErrorCode.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaResponseError, match="TOPIC_AUTHORIZATION_FAILED"):
        harness.read(0, 3)


def test_read_committed_skips_aborted_transactions_on_both_decoders() -> None:
    log = FakeLog()
    log.append_txn(1, 3)  # 0..2, aborted
    log.append_txn(2, 2)  # 3..4, committed
    log.append(2)  # 5..6
    log.append_marker(1, commit=False)  # 7
    log.append_marker(2, commit=True)  # 8
    log.append_txn(1, 2)  # 9..10, committed
    log.append_marker(1, commit=True)  # 11
    committed = Harness(log, read_committed=True, batches_per_fetch=2)
    assert committed.read(0, 12)[0] == [3, 4, 5, 6, 9, 10]
    assert Harness(log).read(0, 12)[0] == [0, 1, 2, 3, 4, 5, 6, 9, 10]
    builder = RecordBatchBuilder("t", 0, False)
    fetched = FetchedPartition(TP, 0, ErrorCode.NONE, 12, 12, 0, b"".join(b for *_, b in log.batches), 12)
    builder.append_record_batches(
        fetched.raw_records or b"", 0, 12, aborted=AbortedTransactionFilter(log.aborted_from(0))
    )
    table = builder.flush()
    assert table is not None and table.column("offset").to_pylist() == [3, 4, 5, 6, 9, 10]


def test_the_next_fetch_is_sent_before_a_response_is_decoded() -> None:
    log = FakeLog()
    for _ in range(4):
        log.append(5)
    harness = Harness(log)
    reader = harness.reader(0, 20)

    async def first_round() -> int:
        records = await reader.next_records()
        assert records is not None and [r.offset for r in records] == [0, 1, 2, 3, 4]
        sent = harness.consumers[0].fetches
        await reader.close()
        return sent

    assert asyncio.run(first_round()) == 2  # the fetch at 5 left before the records of 0..4 came back
    for end in (20, 17):  # ends on a batch boundary, and inside a batch: no fetch past the range
        with_ahead, without = Harness(log), Harness(log)
        assert with_ahead.read(0, end)[0] == without.read(0, end, prefetch=False)[0] == list(range(end))
        assert with_ahead.consumers[0].fetches == without.consumers[0].fetches == 4


def test_closing_early_cancels_the_fetch_ahead() -> None:
    log = FakeLog()
    log.append(5)
    log.append(5)
    harness = Harness(log)
    reader = harness.reader(0, 10)

    async def one_round_then_close() -> None:
        assert await reader.next_records() is not None
        consumer = harness.consumers[0]
        consumer.block_fetches[2] = asyncio.Event()  # the fetch ahead is still waiting for its answer
        await reader.close()
        assert consumer.closed and consumer.cancelled == 0  # it had already answered: collected

    asyncio.run(one_round_then_close())
    harness = Harness(log)
    reader = harness.reader(0, 10)

    async def blocked_ahead_then_close() -> None:
        await reader._consumer_at_position()
        consumer = harness.consumers[0]
        consumer.block_fetches[2] = asyncio.Event()
        assert await reader.next_records() is not None
        await reader.close()
        assert consumer.closed and consumer.cancelled == 1

    asyncio.run(blocked_ahead_then_close())


def test_a_failed_fetch_ahead_is_retried_on_a_fresh_consumer() -> None:
    from client.errors import ConnectionClosedError

    log = FakeLog()
    for _ in range(3):
        log.append(4)
    harness = Harness(log)
    original = harness.open_consumer

    async def open_consumer(refresh: bool) -> FakeConsumer:
        consumer = await original(refresh)
        if len(harness.consumers) == 1:
            consumer.fail_fetches[2] = ConnectionClosedError("lost")  # the fetch ahead
        return consumer

    harness.open_consumer = open_consumer  # type: ignore[method-assign]
    offsets, reader = harness.read(0, 12)
    assert offsets == list(range(12)) and reader.skipped_offsets == 0
    assert harness.refreshes == [False, True]
    assert harness.consumers[1].position == 12
