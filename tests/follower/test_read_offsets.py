"""What a follower process tells its broker about the logs it follows (KIP-392): changed read
offsets once per round, the read fence awaited before any cut below an announced high watermark,
and a segment generation that moves whenever segment files are removed, replaced or cut."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
from typing import Any

import pytest

from client.replica_ipc import IpcClosedError
from client.replica_messages import FENCE_READS, READ_OFFSETS, ReadOffsets
from follower.fetcher import ReplicaFetcher
from follower.read_offsets import ReadOffsetsAnnouncer, read_offsets_of
from follower.replica_log import ReplicaLog
from storage.cleaner import plan_clean, write_cleaned_segments
from storage.log import PartitionLog
from tests.follower.fake_leader import FakeLeader
from tests.follower.helpers import CLIENT_ID, Harness
from tests.follower.test_service import T0, World, until
from tests.storage.cleaner.helpers import BASE_TIME, Writer, open_log

pytestmark = pytest.mark.timeout(30)

TP = ("topic", 0)


class Broker:
    """The broker end: events received, fence requests answered (optionally held)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.fences: list[dict[str, Any]] = []
        self.hold: asyncio.Event | None = None
        self.log_end_at_fence: list[int] = []
        self.on_fence: Any = None

    async def send_event(self, kind: str, body: dict[str, Any]) -> None:
        self.events.append((kind, body))

    async def request(self, kind: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert kind == FENCE_READS
        self.fences.append(body)
        if self.on_fence is not None:
            self.on_fence()
        if self.hold is not None:
            await self.hold.wait()
        return {}

    def rows(self) -> list[ReadOffsets]:
        return [ReadOffsets.from_row(row) for kind, body in self.events for row in body["partitions"]]


def fetcher_with(h: Harness, announcer: ReadOffsetsAnnouncer) -> ReplicaFetcher:
    async def after_round(touched: set[tuple[str, int]]) -> None:
        await announcer.announce(h.logs, touched)

    h.fetcher = ReplicaFetcher(
        CLIENT_ID,
        h.leader,
        h.logs,
        h.clock,
        h.metrics.fetcher(CLIENT_ID),
        backoff_ms=h.backoff_ms,
        before_truncate=announcer.fence,
        after_round=after_round,
    )
    return h.fetcher


async def test_announces_only_changes_in_one_event(tmp_path: pathlib.Path) -> None:
    broker = Broker()
    announcer = ReadOffsetsAnnouncer(broker.send_event, broker.request)
    h = Harness(tmp_path)
    log = h.replica(TP, [(0, 3)], high_watermark=2)
    await announcer.announce(h.logs, [TP, ("gone", 0)])
    assert broker.events == [(READ_OFFSETS, {"partitions": [read_offsets_of(TP, log).to_row()]})]
    assert broker.rows()[0] == ReadOffsets("topic", 0, 2, 2, 0, 3, 0, log.segment_generation)
    await announcer.announce(h.logs, [TP])
    assert len(broker.events) == 1  # nothing moved: nothing sent
    log.update_high_watermark(3)
    await announcer.announce(h.logs, [TP])
    assert broker.rows()[-1].high_watermark == 3 and len(broker.events) == 2


async def test_fence_only_below_the_announced_high_watermark(tmp_path: pathlib.Path) -> None:
    broker = Broker()
    announcer = ReadOffsetsAnnouncer(broker.send_event, broker.request)
    h = Harness(tmp_path)
    h.replica(TP, [(0, 5)], high_watermark=4)
    await announcer.fence(TP, 1)  # nothing announced: the broker reads nothing yet
    assert broker.fences == []
    await announcer.announce(h.logs, [TP])
    await announcer.fence(TP, 4)  # at the high watermark: nothing readable is cut
    assert broker.fences == []
    await announcer.fence(TP, 2)
    assert broker.fences == [{"topic": "topic", "partition": 0, "offset": 2}]
    announced = announcer.announced(TP)
    assert announced is not None and (announced.high_watermark, announced.log_end_offset) == (2, 2)
    announcer.forget([TP])
    assert announcer.announced(TP) is None


async def test_fence_gives_up_when_the_broker_is_gone(tmp_path: pathlib.Path) -> None:
    async def closed(kind: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        raise IpcClosedError("gone")

    broker = Broker()
    announcer = ReadOffsetsAnnouncer(broker.send_event, closed)
    h = Harness(tmp_path)
    h.replica(TP, [(0, 5)], high_watermark=4)
    await announcer.announce(h.logs, [TP])
    await announcer.fence(TP, 1)  # returns: the truncation may go ahead


async def test_truncation_below_the_announced_high_watermark_waits_for_the_fence(
    tmp_path: pathlib.Path,
) -> None:
    """A diverged follower whose (unclean) high watermark is above the truncation point: the broker
    is asked first, and the log is cut only once it answered."""
    broker = Broker()
    announcer = ReadOffsetsAnnouncer(broker.send_event, broker.request)
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP, [(1, 2), (3, 2)], high_watermark=4)
    h.leader_log(TP, [(1, 2), (2, 3)], leader_epoch=5)
    fetcher = fetcher_with(h, announcer)
    await announcer.announce(h.logs, [TP])
    h.add(TP, leader_epoch=5, init_offset=4)
    broker.hold = asyncio.Event()
    broker.on_fence = lambda: broker.log_end_at_fence.append(replica.log_end_offset)
    work = asyncio.create_task(fetcher.maybe_truncate())
    await asyncio.sleep(0.05)
    assert broker.fences == [{"topic": "topic", "partition": 0, "offset": 2}]
    assert replica.log_end_offset == 4  # not cut while the broker has not answered
    broker.hold.set()
    await work
    assert replica.log_end_offset == 2 and broker.log_end_at_fence == [4]


async def test_a_partition_removed_during_the_fence_is_not_cut(tmp_path: pathlib.Path) -> None:
    broker = Broker()
    announcer = ReadOffsetsAnnouncer(broker.send_event, broker.request)
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP, [(1, 2), (3, 2)], high_watermark=4)
    h.leader_log(TP, [(1, 2), (2, 3)], leader_epoch=5)
    fetcher = fetcher_with(h, announcer)
    await announcer.announce(h.logs, [TP])
    h.add(TP, leader_epoch=5, init_offset=4)
    broker.hold = asyncio.Event()
    work = asyncio.create_task(fetcher.maybe_truncate())
    await asyncio.sleep(0.05)
    fetcher.remove_partitions([TP])  # handed back meanwhile
    broker.hold.set()
    await work
    assert replica.log_end_offset == 4


async def test_each_round_announces_what_it_touched(tmp_path: pathlib.Path) -> None:
    broker = Broker()
    announcer = ReadOffsetsAnnouncer(broker.send_event, broker.request)
    h = Harness(tmp_path)
    h.replica(TP, [])
    h.leader_log(TP, [(0, 3)], leader_epoch=0)  # its high watermark is its log end
    fetcher = fetcher_with(h, announcer)
    await announcer.announce(h.logs, [TP])
    h.add(TP, leader_epoch=0)
    await fetcher.do_work()
    rows = broker.rows()
    assert rows[-1].log_end_offset == 3 and rows[-1].high_watermark == 3
    sent = len(broker.events)
    await fetcher.do_work()  # nothing new at the leader: nothing announced
    assert len(broker.events) == sent


async def test_a_fence_that_times_out_is_asked_again_and_the_log_cut_only_once_answered(
    tmp_path: pathlib.Path,
) -> None:
    """A broker paused past the fence timeout still reads when it resumes: the cut waits for it."""
    answered = asyncio.Event()
    attempts: list[int] = []

    async def slow_broker(kind: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        attempts.append(replica.log_end_offset)
        if len(attempts) < 3:
            raise TimeoutError
        answered.set()
        return {}

    broker = Broker()
    announcer = ReadOffsetsAnnouncer(broker.send_event, slow_broker, fence_timeout_s=0.01)
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP, [(1, 2), (3, 2)], high_watermark=4)
    h.leader_log(TP, [(1, 2), (2, 3)], leader_epoch=5)
    fetcher = fetcher_with(h, announcer)
    await announcer.announce(h.logs, [TP])
    h.add(TP, leader_epoch=5, init_offset=4)
    await fetcher.maybe_truncate()
    assert answered.is_set() and attempts == [4, 4, 4]  # never cut before the answer
    assert replica.log_end_offset == 2


async def test_nothing_announces_a_partition_while_its_fence_waits(tmp_path: pathlib.Path) -> None:
    """A retention pass announcing every log during a fence would raise the broker's bound above
    the cut again (its event arrives after the fence); it leaves the fenced partition out."""
    broker = Broker()
    announcer = ReadOffsetsAnnouncer(broker.send_event, broker.request)
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP, [(1, 2), (3, 2)], high_watermark=4)
    h.leader_log(TP, [(1, 2), (2, 3)], leader_epoch=5)
    fetcher = fetcher_with(h, announcer)
    await announcer.announce(h.logs, [TP])
    h.add(TP, leader_epoch=5, init_offset=4)
    fence_sent = asyncio.Event()
    broker.hold = asyncio.Event()
    broker.on_fence = fence_sent.set
    work = asyncio.create_task(fetcher.maybe_truncate())
    await fence_sent.wait()
    sent = len(broker.events)
    await announcer.announce(h.logs, [TP])  # what _run_retention does, with the log not cut yet
    assert len(broker.events) == sent
    broker.hold.set()
    await work
    assert replica.log_end_offset == 2
    # after the cut, what the fence told the broker is what the log has, but for its segment
    # generation (the cut moved it): the round's announcement carries it
    announced, now = announcer.announced(TP), read_offsets_of(TP, replica)
    assert announced is not None and announced.segment_generation != now.segment_generation
    assert dataclasses.replace(announced, segment_generation=now.segment_generation) == now
    assert all(row.high_watermark == 4 for row in broker.rows())  # only the announcement before


def test_the_segment_generation_moves_when_segment_files_are_removed_replaced_or_cut(
    tmp_path: pathlib.Path,
) -> None:
    """Not for appends and rolls (the broker's view sees those by itself), but for the cleaner's
    installs, retention, truncations; and a log opened again never reuses an earlier value."""
    compacted = open_log(tmp_path)
    replica = ReplicaLog(compacted)
    writer = Writer(compacted)
    seen = [read_offsets_of(TP, replica).segment_generation]

    def moved() -> bool:
        seen.append(read_offsets_of(TP, replica).segment_generation)
        return seen[-1] != seen[-2]

    for key in (b"a", b"b", b"a", b"c"):
        writer.put([(key, b"v")])
        compacted.roll()
    writer.put([(b"d", b"v")])
    compacted.update_high_watermark(compacted.log_end_offset)
    assert not moved()
    task = plan_clean(compacted, first_dirty_offset=0, first_uncleanable_offset=5, now_ms=BASE_TIME)
    result = write_cleaned_segments(task)
    for group in result.groups:
        assert compacted.replace_segments(group.replaced, token=result.token)
    assert moved()
    compacted.maybe_increment_log_start_offset(compacted.segments()[1].base_offset)
    assert compacted.delete_old_segments() == 1 and moved()
    replica.truncate_to(compacted.log_end_offset - 1)
    assert moved()
    directory = compacted.directory
    compacted.close()
    reopened = ReplicaLog(PartitionLog.open(directory, compacted.config, compacted.clock))
    assert read_offsets_of(TP, reopened).segment_generation > max(seen)
    reopened.log.close()


async def test_a_cleaned_segment_installed_is_announced(tmp_path: pathlib.Path) -> None:
    """The cleaner's install hook announces the partition: its new segment generation reaches the
    broker without waiting for a fetch round that moves its offsets."""
    world = World(tmp_path)
    try:
        leader = await world.leader(1)
        leader.log(T0, [(0, 2)])
        await world.service.add_partitions([world.assignment(world.release(T0), 1, 0)])
        await until(lambda: world.replica(T0)["high_watermark"] == 2)
        replica = world.service._logs[T0]
        announced = world.service.read_offsets.announced(T0)
        assert announced is not None
        replica.log.segment_generation += 1  # what an install does to the log
        world.service._on_segments_replaced(T0)
        generation = replica.segment_generation

        def told() -> bool:
            rows = [
                ReadOffsets.from_row(r)
                for kind, b in world.events
                if kind == READ_OFFSETS
                for r in b["partitions"]
            ]
            return any(row.segment_generation == generation for row in rows)

        await until(told)
        assert generation != announced.segment_generation
    finally:
        await world.close()
