"""An in-memory leader for driving a ReplicaFetcher: logs with epochs, and errors on demand.

:class:`FakeLeaderLog` is one partition as its leader holds it: whole v2 batches, a leader epoch
cache (storage's, in memory), a log start offset and a high watermark. :class:`FakeLeader` serves
the LeaderEndpoint protocol from such logs with the leader's rules of kafka-behaviour.md 6.6 (epoch
fencing, diverging epochs before the offset range check, OFFSET_OUT_OF_RANGE), plus scripted
per-partition errors and hooks that run while a call is "in flight", so tests can change the
fetcher's partitions between request and response.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field

from follower.fetch_state import LeaderEpoch, Offset, TopicPartition
from follower.leader_endpoint import (
    EpochEndOffset,
    FetchPartitionData,
    FetchPartitionParams,
    FollowerFetchRequest,
    OffsetAndEpoch,
    full_fetch_request,
)
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import Record, build_batch, read_header
from storage.epoch import LeaderEpochFileCache

BASE_TIME = 1_700_000_000_000


def make_batch(base_offset: int, epoch: int, records: int = 1, tag: bytes = b"v") -> bytes:
    """A v2 batch of ``records`` records at ``base_offset`` written in leader epoch ``epoch``."""
    return build_batch(
        [
            Record(
                value=tag + b"-%d-%d" % (base_offset + i, epoch),
                key=None,
                timestamp=BASE_TIME + base_offset + i,
            )
            for i in range(records)
        ],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


@dataclass
class _Batch:
    base_offset: int
    last_offset: int
    data: bytes


class FakeLeaderLog:
    """One partition's log at its leader."""

    def __init__(self, leader_epoch: int = 0) -> None:
        self.batches: list[_Batch] = []
        self.epoch_cache = LeaderEpochFileCache(None)
        self.leader_epoch = leader_epoch
        self.log_start_offset = 0
        self.fixed_high_watermark: int | None = None
        """None: the HW follows the LEO (every replica caught up)."""
        self.epoch_cache.assign(leader_epoch, 0)

    def copy(self) -> FakeLeaderLog:
        """An independent copy: what a replica that stopped replicating now would hold later."""
        twin = FakeLeaderLog.__new__(FakeLeaderLog)
        twin.batches = list(self.batches)
        twin.epoch_cache = LeaderEpochFileCache(None)
        for entry in self.epoch_cache.entries():
            twin.epoch_cache.assign(entry.epoch, entry.start_offset)
        twin.leader_epoch = self.leader_epoch
        twin.log_start_offset = self.log_start_offset
        twin.fixed_high_watermark = self.fixed_high_watermark
        return twin

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.log_start_offset

    @property
    def high_watermark(self) -> int:
        if self.fixed_high_watermark is None:
            return self.log_end_offset
        return max(self.log_start_offset, min(self.fixed_high_watermark, self.log_end_offset))

    def append(self, records: int = 1, epoch: int | None = None) -> bytes:
        """Append a batch at the LEO in ``epoch`` (default: the leader epoch); returns its bytes."""
        epoch = self.leader_epoch if epoch is None else epoch
        batch = make_batch(self.log_end_offset, epoch, records)
        self.epoch_cache.assign(epoch, self.log_end_offset)
        self.batches.append(_Batch(self.log_end_offset, self.log_end_offset + records - 1, batch))
        return batch

    def become_leader(self, epoch: int) -> None:
        """A new leader epoch starts at the LEO (assigned before any data, as Kafka's leader does)."""
        self.leader_epoch = epoch
        self.epoch_cache.assign(epoch, self.log_end_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop the batches at and above ``offset`` (a batch boundary): what an unclean leader lacks."""
        assert offset >= self.log_start_offset
        assert any(b.base_offset == offset for b in self.batches) or offset >= self.log_end_offset
        self.batches = [b for b in self.batches if b.base_offset < offset]
        self.epoch_cache.truncate_from_end(offset)

    def increment_log_start_offset(self, offset: int) -> None:
        """Retention: the log now starts at ``offset`` (a batch boundary at or below the HW)."""
        assert self.log_start_offset <= offset <= self.high_watermark
        assert offset == self.log_end_offset or any(b.base_offset == offset for b in self.batches)
        self.batches = [b for b in self.batches if b.last_offset >= offset]
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)

    def read(self, offset: int, max_batches: int | None) -> bytes:
        """Whole batches from the one holding ``offset``."""
        found = [b.data for b in self.batches if b.last_offset >= offset]
        return b"".join(found[:max_batches])

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def bytes_from(self, offset: int) -> bytes:
        return b"".join(b.data for b in self.batches if b.base_offset >= offset)

    def epoch_entries(self) -> list[tuple[int, int]]:
        """The epoch cache entries that cover data (a new epoch with no batch yet is left out)."""
        return [
            (e.epoch, e.start_offset)
            for e in self.epoch_cache.entries()
            if e.start_offset < self.log_end_offset
        ]


Hook = Callable[[], None]


@dataclass
class FakeLeader:
    """A LeaderEndpoint over FakeLeaderLogs (sessionless: every request is a full one)."""

    supports_truncation_on_fetch: bool = True
    supports_offset_for_leader_epoch: bool = True
    max_batches: int | None = None
    """Batches per partition per fetch (None: all), so replication can take several rounds."""
    long_poll_s: float = 0.0
    """How long a fetch that finds no data waits, as a leader's fetch purgatory would."""
    logs: dict[TopicPartition, FakeLeaderLog] = field(default_factory=dict)
    fetch_errors: defaultdict[TopicPartition, deque[ErrorCode]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    epoch_errors: defaultdict[TopicPartition, deque[ErrorCode]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    list_offsets_errors: defaultdict[TopicPartition, deque[ErrorCode]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    fetch_failures: deque[Exception] = field(default_factory=deque)
    corrupt_next: set[TopicPartition] = field(default_factory=set)
    records_with_divergence: bool = False
    """Misbehave: send records along with a DivergingEpoch (the follower must ignore them)."""
    extra_epoch_results: dict[TopicPartition, EpochEndOffset] = field(default_factory=dict)
    on_fetch: Hook | None = None
    on_fetch_epochs: Hook | None = None
    on_list_offsets: Hook | None = None
    requests: list[FollowerFetchRequest] = field(default_factory=list)
    changed_sets: list[Set[TopicPartition]] = field(default_factory=list)
    epoch_requests: list[dict[TopicPartition, tuple[int, int]]] = field(default_factory=list)

    def add_log(self, tp: TopicPartition, leader_epoch: int = 0) -> FakeLeaderLog:
        log = self.logs[tp] = FakeLeaderLog(leader_epoch)
        return log

    # -- LeaderEndpoint ------------------------------------------------------------------------------

    def build_fetch(
        self, partitions: Mapping[TopicPartition, FetchPartitionParams], changed: Set[TopicPartition]
    ) -> FollowerFetchRequest | None:
        self.changed_sets.append(changed)
        return full_fetch_request(partitions)

    async def fetch(self, request: FollowerFetchRequest) -> dict[TopicPartition, FetchPartitionData]:
        self.requests.append(request)
        await asyncio.sleep(0)
        if self.on_fetch is not None:
            self.on_fetch()
        if self.fetch_failures:
            raise self.fetch_failures.popleft()
        response = {tp: self._fetch_partition(tp, params) for tp, params in request.partitions.items()}
        if self.long_poll_s and not any(d.records for d in response.values()):
            await asyncio.sleep(self.long_poll_s)
        return response

    def _fetch_partition(self, tp: TopicPartition, params: FetchPartitionParams) -> FetchPartitionData:
        if self.fetch_errors[tp]:
            return FetchPartitionData(error=self.fetch_errors[tp].popleft())
        log = self.logs.get(tp)
        if log is None:
            return FetchPartitionData(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        epoch_error = _epoch_error(params.current_leader_epoch, log.leader_epoch)
        if epoch_error is not None:
            return FetchPartitionData(error=epoch_error)
        offset, last_epoch = params.fetch_offset, params.last_fetched_epoch
        if last_epoch is not None and last_epoch >= 0:
            if offset < log.log_start_offset:
                return FetchPartitionData(error=ErrorCode.OFFSET_OUT_OF_RANGE)
            epoch, end = log.end_offset_for(last_epoch)
            if end < 0:
                return FetchPartitionData(error=ErrorCode.OFFSET_OUT_OF_RANGE)
            if epoch < last_epoch or end < offset:
                records = (
                    log.read(min(end, offset), self.max_batches) if self.records_with_divergence else b""
                )
                return self._data(
                    log, records, EpochEndOffset(ErrorCode.NONE, LeaderEpoch(epoch), Offset(end))
                )
        if not log.log_start_offset <= offset <= log.log_end_offset:
            return FetchPartitionData(error=ErrorCode.OFFSET_OUT_OF_RANGE)
        records = log.read(offset, self.max_batches)
        if tp in self.corrupt_next and records:
            self.corrupt_next.discard(tp)
            records = _flip_last_byte(records)
        return self._data(log, records, None)

    @staticmethod
    def _data(log: FakeLeaderLog, records: bytes, diverging: EpochEndOffset | None) -> FetchPartitionData:
        return FetchPartitionData(
            ErrorCode.NONE,
            Offset(log.high_watermark),
            Offset(log.log_start_offset),
            records,
            diverging,
        )

    async def fetch_epoch_end_offsets(
        self, partitions: Mapping[TopicPartition, tuple[LeaderEpoch, LeaderEpoch]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        self.epoch_requests.append(dict(partitions))
        await asyncio.sleep(0)
        results = {tp: self._epoch_end_offset(tp, *request) for tp, request in partitions.items()}
        if self.on_fetch_epochs is not None:
            self.on_fetch_epochs()
        results.update(self.extra_epoch_results)
        return results

    def _epoch_end_offset(self, tp: TopicPartition, current_epoch: int, epoch: int) -> EpochEndOffset:
        if self.epoch_errors[tp]:
            return EpochEndOffset(self.epoch_errors[tp].popleft())
        log = self.logs.get(tp)
        if log is None:
            return EpochEndOffset(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        error = _epoch_error(current_epoch, log.leader_epoch)
        if error is not None:
            return EpochEndOffset(error)
        found_epoch, end = log.end_offset_for(epoch)
        return EpochEndOffset(ErrorCode.NONE, LeaderEpoch(found_epoch), Offset(end))

    async def fetch_earliest_offset(
        self, tp: TopicPartition, current_leader_epoch: LeaderEpoch
    ) -> OffsetAndEpoch:
        log = await self._list_offsets(tp, current_leader_epoch)
        return OffsetAndEpoch(Offset(log.log_start_offset))

    async def fetch_latest_offset(
        self, tp: TopicPartition, current_leader_epoch: LeaderEpoch
    ) -> OffsetAndEpoch:
        log = await self._list_offsets(tp, current_leader_epoch)
        return OffsetAndEpoch(Offset(log.log_end_offset), LeaderEpoch(log.leader_epoch))

    async def _list_offsets(self, tp: TopicPartition, current_epoch: int) -> FakeLeaderLog:
        await asyncio.sleep(0)
        if self.on_list_offsets is not None:
            self.on_list_offsets()
        if self.list_offsets_errors[tp]:
            raise KafkaError(self.list_offsets_errors[tp].popleft())
        log = self.logs[tp]
        error = _epoch_error(current_epoch, log.leader_epoch)
        if error is not None:
            raise KafkaError(error)
        return log


def _epoch_error(request_epoch: int, leader_epoch: int) -> ErrorCode | None:
    if request_epoch < 0 or request_epoch == leader_epoch:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if request_epoch < leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


def _flip_last_byte(records: bytes) -> bytes:
    """Corrupt the first batch's last byte (covered by its CRC)."""
    size = read_header(records).size
    return records[: size - 1] + bytes([records[size - 1] ^ 0xFF]) + records[size:]
