"""KIP-392 on a follower: a consumer fetch (v11+) of a partition this broker follows is read from the
follower process's log, up to the high watermark it announced and never past it, with Kafka's
errors; a parked fetch is woken by high watermark announcements (not by log end moves, not by
polling); fetch sessions see the changes; fences and removals stop reads at once; a read_committed
read never pairs records and aborted transactions of two cleanings, and a new segment generation
releases the files held.

The follower process's log is a PartitionLog in its own directory, written directly by the test;
its announcements are the ``read_offsets`` rows the process would send."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pathlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from broker.fetch.service import FetchRequest, FetchService
from broker.fetch_session import (
    FetchManager,
    FetchSessionCache,
    FetchSessionCacheMetrics,
    PartitionFetchParams,
)
from broker.replication.followers.followed_replicas import FollowedReplica, FollowedReplicas
from broker.replication.replica_manager import ReplicaManager
from client.replica_messages import ReadOffsets
from metadata.topics import PartitionState
from protocol.error_codes import ErrorCode
from protocol.records import iter_batches
from protocol.sentinels import IsolationLevel
from server_common.config import load_config, to_log_config
from server_common.purgatory import DelayedOperationPurgatory
from storage.cleaner import plan_clean, write_cleaned_segments
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics
from tests.broker.test_fetch_service import BIG, NOW, batch, by_key, key, records_of
from tests.storage.cleaner.helpers import Writer
from tests.storage.test_read_view import committed_values

pytestmark = pytest.mark.timeout(30)

NODE = 1


@dataclass
class Env:
    service: FetchService
    followed: FollowedReplicas
    follower_log: PartitionLog
    purgatory: DelayedOperationPurgatory
    replicas: ReplicaManager
    logs: LogManager
    leader_epoch: list[int]

    def append(self, records: int = 2) -> None:
        self.follower_log.append_as_leader(batch(records), self.leader_epoch[0])

    def announce(self, high_watermark: int, *, last_stable_offset: int | None = None) -> None:
        log = self.follower_log
        log.update_high_watermark(high_watermark)
        row = ReadOffsets(
            "orders",
            0,
            log.high_watermark,
            log.high_watermark if last_stable_offset is None else last_stable_offset,
            log.log_start_offset,
            log.log_end_offset,
            log.active_segment.base_offset,
            log.segment_generation,
        )
        self.followed.on_read_offsets([row.to_row()])

    def owner_bytes(self, start: int, bound: int) -> bytes:
        result = self.follower_log.read(start, 1 << 30, bound, True)
        return b"" if result.slice is None else result.slice.read_bytes()


@pytest.fixture
async def env(tmp_path: pathlib.Path) -> AsyncIterator[Env]:
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = LocalTopics(NODE, brokers=[2])
    replicas = ReplicaManager(logs, topics, NODE, config, clock)
    topics.subscribe(replicas)
    topic = topics.create_topic("orders", -1, -1, {}, assignments=[(0, [2, NODE])])  # broker 2 leads
    assert replicas.get_partition("orders", 0) is None
    leader_epoch = [topic.partitions[0].leader_epoch]

    def partition_state(name: str, index: int) -> PartitionState | None:
        state = replicas.partition_state(name, index)
        return None if state is None else dataclasses.replace(state, leader_epoch=leader_epoch[0])

    followed = FollowedReplicas(NODE, partition_state, lambda name: topic.topic_id)
    purgatory = DelayedOperationPurgatory("Fetch", asyncio.get_running_loop())
    cache = FetchSessionCache(FetchSessionCacheMetrics(CollectorRegistry()), random_source=random.Random(7))
    service = FetchService(
        FetchManager(cache, clock.time_ms),
        replicas,
        topics,
        purgatory,
        fetch_max_bytes=BIG,
        followed=followed,
    )
    followed.add_listener(service.on_followed_replica_changed)
    directory = tmp_path / "follower" / "orders-0"
    follower_log = PartitionLog.open(directory, LogConfig(segment_bytes=1000), FakeClock(NOW))
    followed.follow("orders", 0, topic.topic_id, str(directory))
    built = Env(service, followed, follower_log, purgatory, replicas, logs, leader_epoch)
    yield built
    purgatory.shutdown()
    followed.unfollow_all()
    follower_log.close()
    replicas.shutdown()
    logs.shutdown()


def consumer(
    offset: int,
    *,
    version: int = 12,
    replica_id: int = -1,
    leader_epoch: int = -1,
    max_wait_ms: int = 0,
    session: tuple[int, int] = (0, -1),
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    partitions: bool = True,
) -> FetchRequest:
    params = PartitionFetchParams(fetch_offset=offset, max_bytes=BIG, current_leader_epoch=leader_epoch)
    return FetchRequest(
        version=version,
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=BIG,
        isolation_level=isolation,
        session_id=session[0],
        session_epoch=session[1],
        fetch_data=[(key("orders"), params)] if partitions else [],
        to_forget=[],
        rack_id="",
    )


async def fetch_one(env: Env, request: FetchRequest):  # type: ignore[no-untyped-def]
    return by_key(await asyncio.wait_for(env.service.fetch(request), 10)).get(key("orders"))


def last_offsets(data: bytes) -> list[int]:
    return [header.last_offset for _, header in iter_batches(data)]


async def test_consumer_reads_the_follower_log_up_to_its_high_watermark(env: Env) -> None:
    for _ in range(5):
        env.append()
    env.announce(6)  # LEO 10, HW 6
    result = await fetch_one(env, consumer(0))
    assert (result.error_code, result.high_watermark, result.last_stable_offset) == (ErrorCode.NONE, 6, 6)
    assert result.log_start_offset == 0
    assert records_of(result) == env.owner_bytes(0, 6)
    assert last_offsets(records_of(result)) == [1, 3, 5]
    later = await fetch_one(env, consumer(3))  # from inside a batch: the whole batch
    assert last_offsets(records_of(later)) == [3, 5]


async def test_between_the_high_watermark_and_the_log_end_no_records_and_no_error(env: Env) -> None:
    for _ in range(3):
        env.append()
    env.announce(2)
    for offset in (2, 4, 6):
        result = await fetch_one(env, consumer(offset))
        assert (result.error_code, result.records_size, result.high_watermark) == (ErrorCode.NONE, 0, 2)
    beyond = await fetch_one(env, consumer(7))
    assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_only_consumer_fetches_of_v11_and_later_are_served(env: Env) -> None:
    env.append()
    env.announce(2)
    old = await fetch_one(env, consumer(0, version=10))
    assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    follower = await fetch_one(env, consumer(0, replica_id=3))
    assert follower.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await fetch_one(env, consumer(0, version=11))).records_size > 0


async def test_leader_epoch_checks(env: Env) -> None:
    env.leader_epoch[0] = 4
    env.append()
    env.announce(2)
    assert (await fetch_one(env, consumer(0, leader_epoch=3))).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (await fetch_one(env, consumer(0, leader_epoch=5))).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert (await fetch_one(env, consumer(0, leader_epoch=4))).records_size > 0


async def test_nothing_is_readable_before_the_follower_announced(env: Env) -> None:
    env.append()
    assert (await fetch_one(env, consumer(0))).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_read_committed_stops_at_the_last_stable_offset(env: Env) -> None:
    for _ in range(3):
        env.append()
    env.announce(6, last_stable_offset=2)
    result = await fetch_one(env, consumer(0, isolation=IsolationLevel.READ_COMMITTED))
    assert last_offsets(records_of(result)) == [1] and result.last_stable_offset == 2
    assert result.aborted_transactions == ()


async def test_a_parked_fetch_wakes_on_the_high_watermark_not_on_the_log_end(env: Env) -> None:
    env.append()
    env.announce(2)
    parked = asyncio.create_task(env.service.fetch(consumer(2, max_wait_ms=20_000)))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not parked.done() and env.purgatory.num_delayed == 1
    env.append()
    env.announce(2)  # the follower's log end moved; its high watermark did not
    for _ in range(5):
        await asyncio.sleep(0)
    assert not parked.done()
    env.announce(4)
    result = by_key(await asyncio.wait_for(parked, 5))[key("orders")]
    assert last_offsets(records_of(result)) == [3] and result.high_watermark == 4


async def test_incremental_session_reports_the_follower_progress(env: Env) -> None:
    env.append()
    env.announce(2)
    full = await env.service.fetch(consumer(2, session=(0, 0)))
    assert full.session_id != 0

    def idle(epoch: int) -> FetchRequest:
        return consumer(0, session=(full.session_id, epoch), partitions=False)

    assert by_key(await env.service.fetch(idle(1))) == {}
    env.append()
    env.announce(4)
    result = by_key(await env.service.fetch(idle(2)))[key("orders")]
    assert last_offsets(records_of(result)) == [3]


async def test_a_fence_stops_reads_at_once(env: Env) -> None:
    for _ in range(3):
        env.append()
    env.announce(6)
    env.followed.fence("orders", 0, 3)  # the follower will cut at 3 (inside the batch 2..3)
    result = await fetch_one(env, consumer(0))
    assert last_offsets(records_of(result)) == [1] and result.high_watermark == 3
    assert (await fetch_one(env, consumer(4))).error_code == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_unfollowed_partition_answers_not_leader_and_wakes_parked_fetches(env: Env) -> None:
    env.append()
    env.announce(2)
    parked = asyncio.create_task(env.service.fetch(consumer(2, max_wait_ms=20_000)))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not parked.done()
    env.followed.unfollow([("orders", 0)])
    result = by_key(await asyncio.wait_for(parked, 5))[key("orders")]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await fetch_one(env, consumer(0))).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_reads_follow_segment_rolls_announced_with_the_offsets(env: Env) -> None:
    for _ in range(30):
        env.append()  # segment.bytes=1000: several segments
    assert len(env.follower_log.segments()) > 2
    env.announce(60)
    offset, seen = 0, []
    while offset < 60:
        result = await fetch_one(env, consumer(offset))
        offsets = last_offsets(records_of(result))
        assert offsets, offset
        seen += offsets
        offset = offsets[-1] + 1
    assert seen == list(range(1, 60, 2))


async def test_an_incremental_fetch_on_a_follower_reads_only_the_changed_partitions(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN.md's O(changed) rule holds for followed partitions: an incremental fetch of a session
    holding many of them reads only those whose announced offsets moved."""
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = LocalTopics(NODE, brokers=[2])
    replicas = ReplicaManager(logs, topics, NODE, config, clock)
    topics.subscribe(replicas)
    count = 40
    topic = topics.create_topic("wide", -1, -1, {}, assignments=[(i, [2, NODE]) for i in range(count)])
    followed = FollowedReplicas(NODE, replicas.partition_state, lambda name: topic.topic_id)
    purgatory = DelayedOperationPurgatory("Fetch", asyncio.get_running_loop())
    cache = FetchSessionCache(FetchSessionCacheMetrics(CollectorRegistry()), random_source=random.Random(7))
    service = FetchService(
        FetchManager(cache, clock.time_ms),
        replicas,
        topics,
        purgatory,
        fetch_max_bytes=BIG,
        followed=followed,
    )
    followed.add_listener(service.on_followed_replica_changed)
    follower_logs = []
    for index in range(count):
        directory = tmp_path / "follower" / f"wide-{index}"
        log = PartitionLog.open(directory, LogConfig(), FakeClock(NOW))
        log.append_as_leader(batch(2), topic.partitions[index].leader_epoch)
        log.update_high_watermark(2)
        followed.follow("wide", index, topic.topic_id, str(directory))
        row = ReadOffsets("wide", index, 2, 2, 0, 2, 0)
        followed.on_read_offsets([row.to_row()])
        follower_logs.append(log)
    reads: list[int] = []
    real_read = FollowedReplica.read

    def counting_read(self: FollowedReplica, *args: object, **kwargs: object) -> object:
        reads.append(self.index)
        return real_read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(FollowedReplica, "read", counting_read)

    def wide_fetch(session: tuple[int, int], offsets: dict[int, int]) -> FetchRequest:
        data = [
            (key("wide", i), PartitionFetchParams(fetch_offset=o, max_bytes=BIG)) for i, o in offsets.items()
        ]
        return dataclasses.replace(consumer(0, session=session), fetch_data=data, max_wait_ms=0)

    full = await service.fetch(wide_fetch((0, 0), {i: 2 for i in range(count)}))
    assert full.session_id != 0 and len(reads) == count
    reads.clear()
    follower_logs[7].append_as_leader(batch(2), topic.partitions[7].leader_epoch)
    follower_logs[7].update_high_watermark(4)
    followed.on_read_offsets([ReadOffsets("wide", 7, 4, 4, 0, 4, 0).to_row()])
    parts = by_key(await service.fetch(wide_fetch((full.session_id, 1), {})))
    assert list(parts) == [key("wide", 7)] and reads == [7]
    assert last_offsets(records_of(parts[key("wide", 7)])) == [3]
    purgatory.shutdown()
    followed.unfollow_all()
    for log in follower_logs:
        log.close()
    replicas.shutdown()
    logs.shutdown()


async def test_after_a_fenced_truncation_reads_see_only_the_new_batches(env: Env) -> None:
    """Reads below the old high watermark remembered batch positions and held segment files; the
    follower then cut the log below them (after the fence) and wrote the new leader's batches,
    laid out differently, at the same offsets. Every read afterwards is the owner's own."""
    for _ in range(30):
        env.append()  # offsets 0..59, batches of 2, several segments
    env.announce(60)
    offset = 0
    while offset < 60:  # a consumer reads it all: positions cached, every segment held
        offset = last_offsets(records_of(await fetch_one(env, consumer(offset))))[-1] + 1
    env.followed.fence("orders", 0, 21)
    env.follower_log.truncate_to(21)  # cuts the batch 20..21 and every segment above
    env.leader_epoch[0] += 1
    for _ in range(15):
        env.append(3)  # 20..64 in batches of 3: other positions, other segment bases
    env.announce(env.follower_log.log_end_offset)
    end = env.follower_log.log_end_offset
    for start in range(20, end):
        got = records_of(await fetch_one(env, consumer(start)))
        assert got and got == env.owner_bytes(start, end)[: len(got)], start


def removed_files_held(directory: pathlib.Path) -> list[str]:
    """Files of ``directory`` this process still holds open though they were deleted."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)) and target.endswith(" (deleted)"):
            held.append(target)
    return held


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
async def test_read_committed_never_pairs_records_and_aborted_transactions_of_two_cleanings(env: Env) -> None:
    """A consumer's read_committed read made the broker hold segment 0's file, with an aborted
    record. The follower's cleaner then replaced it twice (the second cleaning drops the aborted
    transaction's index entry) and the broker has not heard of it yet: its reads answer the held
    file with that file's index, never with the new one's. The announcement of the new segment
    generation then makes it drop the replaced files (deleted: their space is freed) and read the
    new ones."""
    log = env.follower_log
    log.reconfigure(dataclasses.replace(log.config, file_delete_delay_ms=0))  # only the view holds them
    writer = Writer(log)
    writer.put([(b"k", b"aborted")], producer_id=7)
    writer.put([(b"x", b"1")])
    writer.end_txn(7, commit=False)
    log.roll()
    writer.put([(b"y", b"1")])
    log.roll()
    writer.put([(b"z", b"1")])
    end = log.log_end_offset
    env.announce(end)
    committed = consumer(0, isolation=IsolationLevel.READ_COMMITTED)
    first = await fetch_one(env, committed)
    assert first.aborted_transactions
    assert committed_values(records_of(first), first.aborted_transactions) == [b"1"]
    for _ in range(2):  # delete.retention.ms 0: the second round also drops the index entry
        task = plan_clean(
            log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=NOW, delete_retention_ms=0
        )
        result = write_cleaned_segments(task)
        for group in result.groups:
            assert log.replace_segments(group.replaced, token=result.token)
    assert log.collect_aborted_transactions(0, end) == []
    stale = await fetch_one(env, committed)  # the held file, not announced yet
    assert b"aborted" not in committed_values(records_of(stale), stale.aborted_transactions)
    directory = log.directory
    assert removed_files_held(directory)  # the broker's view still holds the replaced file
    env.announce(end)  # the follower announces after the cleaner installed: a new segment generation
    assert removed_files_held(directory) == []
    fresh = await fetch_one(env, committed)
    assert records_of(fresh) == env.owner_bytes(0, end)
    assert fresh.aborted_transactions == () and committed_values(records_of(fresh), ()) == [b"1", b"1"]
