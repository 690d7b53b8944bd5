"""FollowerService in-process: handed-over logs replicated from leaders over TCP, and handed back.

The same code runs inside a follower process (tests/follower/test_process.py); here it shares the
test's event loop, so each rule is checked directly and quickly.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from client.replica_messages import (
    ADD_PARTITIONS,
    CONFIGURE,
    OFFSETS,
    PARTITION_FAILED,
    REMOVE_PARTITIONS,
    SHUTDOWN,
    FollowerSettings,
    PartitionAssignment,
)
from follower.ipc import FollowerRequestHandler, UnknownRequestError
from follower.metrics import FetcherMetrics
from follower.service import FollowerService
from protocol.api_keys import ApiKey
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.handover import LogHandover
from storage.log import PartitionLog
from storage.log_manager import LogManager
from tests.follower.network_leader import NetworkLeader

BROKER_ID = 3
T0 = ("t", 0)
T1 = ("t", 1)
SETTINGS = FollowerSettings(
    replica_fetch_wait_max_ms=50,
    replica_fetch_backoff_ms=20,
    replica_socket_timeout_ms=5000,
    broker_epoch=11,
    offsets_report_interval_ms=3_600_000,  # reports are triggered by hand here
)


async def until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def log_bytes(log: PartitionLog) -> bytes:
    result = log.read(log.log_start_offset, 1 << 30)
    return b"" if result.slice is None else result.slice.read_bytes()


class World:
    """A broker-side LogManager, leaders on TCP, and the service under test with its sent events."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        self.clock = FakeClock(1_700_000_000_000)
        self.manager = LogManager([tmp_path / "logs"], LogConfig(), self.clock)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.leaders: dict[int, NetworkLeader] = {}
        self.service = FollowerService(
            BROKER_ID,
            0,
            send_event=self._record,
            metrics=FetcherMetrics(CollectorRegistry()),
            storage_clock=self.clock,
        )
        self.service.configure(SETTINGS)

    async def _record(self, message_type: str, body: dict[str, Any]) -> None:
        self.events.append((message_type, body))

    async def leader(self, broker_id: int) -> NetworkLeader:
        self.leaders[broker_id] = await NetworkLeader().start()
        return self.leaders[broker_id]

    def release(self, tp: tuple[str, int]) -> LogHandover:
        self.manager.get_or_create_log(tp[0], tp[1], None)
        return self.manager.release_log(*tp)

    def assignment(
        self, handover: LogHandover, leader_id: int, epoch: int, **log_config: str
    ) -> PartitionAssignment:
        leader = self.leaders[leader_id]
        return PartitionAssignment(
            handover=handover.to_json(),
            log_config=log_config,
            leader_id=leader_id,
            leader_host=leader.host,
            leader_port=leader.port,
            leader_epoch=epoch,
            partition_epoch=epoch,
        )

    def replica(self, tp: tuple[str, int]) -> dict[str, Any]:
        (found,) = [p for p in self.service.snapshot()["partitions"] if (p["topic"], p["partition"]) == tp]
        return found

    async def close(self) -> None:
        await self.service.shutdown(report=False)
        for leader in self.leaders.values():
            await leader.stop()
        self.manager.shutdown()


@pytest.fixture
async def world(tmp_path: pathlib.Path) -> AsyncIterator[World]:
    world = World(tmp_path)
    yield world
    await world.close()


async def test_replicates_a_handed_over_log_and_hands_it_back(world: World) -> None:
    leader = await world.leader(1)
    leader_log = leader.log(T0, [(0, 3), (1, 2)], leader_epoch=1)
    result = await world.service.add_partitions([world.assignment(world.release(T0), 1, 1)])
    assert result.added == [T0] and not result.failed

    await until(lambda: world.replica(T0)["log_end_offset"] == 5)
    await until(lambda: world.replica(T0)["high_watermark"] == 5)
    (handover,) = await world.service.remove_partitions([T0, ("unknown", 0)])

    assert (handover.log_end_offset, handover.high_watermark, handover.clean) == (5, 5, True)
    assert world.service.snapshot() == {"partitions": [], "fetchers": []}  # the idle fetcher stopped
    adopted = world.manager.adopt_log(handover, LogConfig())
    assert log_bytes(adopted) == leader_log.bytes_from(0)
    assert [(e.epoch, e.start_offset) for e in adopted.leader_epoch_cache.entries()] == [(0, 0), (1, 3)]
    fetch = leader.fetches()[0]
    assert fetch.body.replica_id == BROKER_ID


async def test_a_leader_change_moves_the_partition_to_the_new_leaders_fetcher(world: World) -> None:
    old = await world.leader(1)
    new = await world.leader(2)
    old_log = old.log(T0, [(0, 2)], leader_epoch=0)
    handover = world.release(T0)
    await world.service.add_partitions([world.assignment(handover, 1, 0)])
    await until(lambda: world.replica(T0)["log_end_offset"] == 2)

    new_log = new.log(T0, [(0, 2)], leader_epoch=0)
    new_log.batches = list(old_log.batches)  # the new leader holds the same data...
    new_log.become_leader(1)
    new_log.append(3)  # ...and more, in its own epoch
    await world.service.add_partitions([world.assignment(handover, 2, 1)])  # the log stays open

    await until(lambda: world.replica(T0)["log_end_offset"] == 5)
    assert [f["leader_id"] for f in world.service.snapshot()["fetchers"]] == [2]
    assert world.replica(T0)["leader_epoch"] == 1


async def test_a_new_broker_epoch_reaches_every_fetcher(world: World) -> None:
    leader = await world.leader(1)
    leader.log(T0, [(0, 1)])
    await world.service.add_partitions([world.assignment(world.release(T0), 1, 0)])
    assert [f["broker_epoch"] for f in world.service.snapshot()["fetchers"]] == [SETTINGS.broker_epoch]
    await until(lambda: world.service.snapshot()["fetchers"][0]["connected"])
    world.service.set_broker_epoch(12)
    assert [f["broker_epoch"] for f in world.service.snapshot()["fetchers"]] == [12]
    assert world.service.settings.broker_epoch == 12


async def test_a_lost_connection_is_reopened_and_fetching_goes_on(world: World) -> None:
    leader = await world.leader(1)
    leader_log = leader.log(T0, [(0, 2)])
    await world.service.add_partitions([world.assignment(world.release(T0), 1, 0)])
    await until(lambda: world.replica(T0)["log_end_offset"] == 2)

    leader.drop_next_fetches = 1
    leader_log.append(3)
    # The fetch parked at the log end may bring the 3 records before the next one is dropped, so
    # wait for the second connection's handshake (one per connection), then for more records.
    await until(lambda: len(leader.broker.of(ApiKey.API_VERSIONS)) == 2)
    leader_log.append(1)

    await until(lambda: world.replica(T0)["log_end_offset"] == 6)
    assert len(leader.broker.of(ApiKey.API_VERSIONS)) == 2
    assert world.service.snapshot()["fetchers"][0]["connected"]


async def test_offsets_are_reported_when_they_move(world: World) -> None:
    leader = await world.leader(1)
    leader_log = leader.log(T0, [(0, 2)])
    await world.service.add_partitions([world.assignment(world.release(T0), 1, 0)])
    await until(lambda: world.replica(T0)["high_watermark"] == 2)

    await world.service.report_offsets()
    await world.service.report_offsets()  # nothing moved: nothing sent
    leader_log.append(1)
    await until(lambda: world.replica(T0)["high_watermark"] == 3)
    await world.service.report_offsets()

    reports = [body["partitions"] for kind, body in world.events if kind == OFFSETS]
    assert [[(p["high_watermark"], p["log_end_offset"]) for p in r] for r in reports] == [[(2, 2)], [(3, 3)]]


async def test_a_fenced_partition_is_reported_failed(world: World) -> None:
    leader = await world.leader(1)
    leader.log(T0, [(0, 1)], leader_epoch=5)
    await world.service.add_partitions([world.assignment(world.release(T0), 1, 4)])  # stale epoch

    await until(lambda: any(kind == PARTITION_FAILED for kind, _ in world.events))
    (body,) = [body for kind, body in world.events if kind == PARTITION_FAILED]
    assert (body["topic"], body["partition"]) == T0 and "fenced" in body["reason"]
    assert world.replica(T0)["failed"]
    (handover,) = await world.service.remove_partitions([T0])  # its log is still handed back
    assert handover.clean


async def test_a_log_that_cannot_be_opened_fails_only_its_partition(world: World) -> None:
    await world.leader(1)
    good = world.release(T0)
    bad = LogHandover.from_json({**good.to_json(), "partition": 1, "directory": "/nonexistent/not-a-dir"})
    result = await world.service.add_partitions([world.assignment(bad, 1, 0), world.assignment(good, 1, 0)])
    assert result.added == [T0]
    assert list(result.failed) == [T1]


async def test_shutdown_hands_back_every_log_and_reports_final_offsets(world: World) -> None:
    leader = await world.leader(1)
    leader.log(T0, [(0, 2)])
    leader.log(T1, [(0, 4)])
    await world.service.add_partitions(
        [world.assignment(world.release(T0), 1, 0), world.assignment(world.release(T1), 1, 0)]
    )
    await until(lambda: world.replica(T1)["log_end_offset"] == 4)

    handovers = await world.service.shutdown()

    assert {h.topic_partition: h.log_end_offset for h in handovers} == {T0: 2, T1: 4}
    assert all(h.clean for h in handovers)
    kind, body = world.events[-1]
    assert kind == OFFSETS and {(p["topic"], p["partition"]) for p in body["partitions"]} == {T0, T1}
    assert world.service.stopped.is_set()
    assert await world.service.shutdown() == []


async def test_request_handler_maps_json_and_requires_configure(tmp_path: pathlib.Path) -> None:
    world = World(tmp_path)
    world.service = FollowerService(
        BROKER_ID, 0, send_event=world._record, metrics=FetcherMetrics(CollectorRegistry())
    )
    handler = FollowerRequestHandler(world.service)
    try:
        leader = await world.leader(1)
        leader.log(T0, [(0, 2)])
        entry = world.assignment(world.release(T0), 1, 0).to_json()
        with pytest.raises(RuntimeError):
            await handler(ADD_PARTITIONS, {"partitions": [entry]})
        with pytest.raises(UnknownRequestError):
            await handler("launch_missiles", {})
        assert await handler(CONFIGURE, SETTINGS.to_json()) == {}
        assert await handler(ADD_PARTITIONS, {"partitions": [entry]}) == {"added": [["t", 0]], "failed": []}
        await until(lambda: world.replica(T0)["log_end_offset"] == 2)
        reply = await handler(REMOVE_PARTITIONS, {"partitions": [["t", 0]]})
        assert [LogHandover.from_json(h).log_end_offset for h in reply["handovers"]] == [2]
        assert await handler(SHUTDOWN, {}) == {"handovers": []}
    finally:
        await world.close()
