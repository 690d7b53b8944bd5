"""A fetcher wired to a FakeLeader and real PartitionLogs in a temporary directory."""

from __future__ import annotations

import pathlib

from prometheus_client import CollectorRegistry

from follower.fetch_state import InitialFetchState, LeaderEpoch, Offset, TopicPartition
from follower.fetcher import ReplicaFetcher
from follower.metrics import FetcherMetrics
from follower.replica_log import ReplicaLog, initial_fetch_offset
from protocol.records import iter_batches
from storage.clock import Clock, FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.follower.fake_leader import FakeLeader, FakeLeaderLog, make_batch

BACKOFF_MS = 10
"""Small, because a round with nothing to fetch really waits this long."""
CLIENT_ID = "ReplicaFetcherThread-0-1"


class Harness:
    """A ReplicaFetcher for source broker 1, its fake leader and the follower's logs."""

    def __init__(
        self,
        directory: pathlib.Path,
        leader: FakeLeader | None = None,
        *,
        clock: Clock | None = None,
        backoff_ms: int = BACKOFF_MS,
    ) -> None:
        self.directory = directory
        self.leader = leader if leader is not None else FakeLeader()
        self.clock = clock if clock is not None else FakeClock()
        self.storage_clock = FakeClock(1_700_000_000_000)
        self.registry = CollectorRegistry()
        self.metrics = FetcherMetrics(self.registry)
        self.logs: dict[TopicPartition, ReplicaLog] = {}
        self.backoff_ms = backoff_ms
        self.fetcher = ReplicaFetcher(
            CLIENT_ID,
            self.leader,
            self.logs,
            self.clock,
            self.metrics.fetcher(CLIENT_ID),
            backoff_ms=backoff_ms,
        )

    def replica(
        self, tp: TopicPartition, batches: list[tuple[int, int]] = (), high_watermark: int = 0
    ) -> ReplicaLog:
        """The follower's log of ``tp``, holding batches given as (epoch, records), from offset 0."""
        log = ReplicaLog(
            PartitionLog.open(self.directory / f"{tp[0]}-{tp[1]}", LogConfig(), self.storage_clock)
        )
        offset = 0
        for epoch, records in batches:
            log.append_as_follower(make_batch(offset, epoch, records))
            offset += records
        log.update_high_watermark(high_watermark)
        self.logs[tp] = log
        return log

    def leader_log(
        self, tp: TopicPartition, batches: list[tuple[int, int]] = (), leader_epoch: int = 0
    ) -> FakeLeaderLog:
        """The leader's log of ``tp`` with batches (epoch, records) from offset 0, now in ``leader_epoch``."""
        log = self.leader.add_log(tp, batches[0][0] if batches else leader_epoch)
        for epoch, records in batches:
            log.append(records, epoch)
        log.become_leader(leader_epoch)
        return log

    def add(self, tp: TopicPartition, leader_epoch: int, init_offset: int | None = None) -> None:
        """Follow ``tp`` at ``leader_epoch`` from ``init_offset`` (default: Kafka's initial offset)."""
        if init_offset is None:
            init_offset = initial_fetch_offset(self.logs[tp], self.leader.supports_truncation_on_fetch)
        self.fetcher.add_partitions({tp: InitialFetchState(Offset(init_offset), LeaderEpoch(leader_epoch))})

    def advance_past_backoff(self) -> None:
        assert isinstance(self.clock, FakeClock)
        self.clock.advance(self.backoff_ms)

    async def work_until_idle(self, rounds: int = 50) -> None:
        """do_work until no partition changes any more (moving the clock past delays)."""
        for _ in range(rounds):
            before = {tp: self.fetcher.fetch_state(tp) for tp in self.fetcher.partitions}
            await self.fetcher.do_work()
            self.advance_past_backoff()
            if {tp: self.fetcher.fetch_state(tp) for tp in self.fetcher.partitions} == before:
                return
        raise AssertionError("the fetcher did not settle")

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


def replica_bytes(log: ReplicaLog) -> bytes:
    """Every batch of the follower's log from its log start offset, read back from the segments."""
    partition_log = log.log
    out, offset = [], partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        result = partition_log.read(offset, 1 << 30)
        assert result.slice is not None
        data = result.slice.read_bytes()
        out.append(data)
        last = [header for _, header in iter_batches(data)][-1]
        offset = last.last_offset + 1
    return b"".join(out)


def replica_epochs(log: ReplicaLog) -> list[tuple[int, int]]:
    """The follower's epoch entries that cover data (one starting at the LEO says nothing yet)."""
    entries = log.log.leader_epoch_cache.entries()
    return [(e.epoch, e.start_offset) for e in entries if e.start_offset < log.log_end_offset]


def assert_replica_matches(replica: ReplicaLog, leader: FakeLeaderLog) -> None:
    """The follower holds exactly the leader's batches, epochs and offsets."""
    assert replica.log_start_offset == leader.log_start_offset
    assert replica.log_end_offset == leader.log_end_offset
    assert replica.high_watermark == leader.high_watermark
    assert replica_bytes(replica) == leader.bytes_from(leader.log_start_offset)
    assert replica_epochs(replica) == leader.epoch_entries()
