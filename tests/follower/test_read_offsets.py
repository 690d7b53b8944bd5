"""What a follower process tells its broker about the logs it follows (KIP-392): changed read
offsets once per round, and the read fence awaited before any cut below an announced high watermark."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest

from client.replica_ipc import IpcClosedError
from client.replica_messages import FENCE_READS, READ_OFFSETS, ReadOffsets
from follower.fetcher import ReplicaFetcher
from follower.read_offsets import ReadOffsetsAnnouncer, read_offsets_of
from tests.follower.fake_leader import FakeLeader
from tests.follower.helpers import CLIENT_ID, Harness

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
    assert broker.rows()[0] == ReadOffsets("topic", 0, 2, 2, 0, 3, 0)
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
    # after the cut, what the fence told the broker is what the log has: nothing more to send
    assert announcer.announced(TP) == read_offsets_of(TP, replica)
    assert all(row.high_watermark == 4 for row in broker.rows())  # only the announcement before
