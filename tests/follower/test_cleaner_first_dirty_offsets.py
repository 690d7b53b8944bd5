"""A follower process's first dirty offsets survive its restart: it reports them with its offsets,
the broker writes them into the log dir's ``cleaner-offset-checkpoint`` (its only writer), and sends
them back with each assignment, so a (re)started follower process does not clean its compacted logs
from their start again. A truncation below one lowers it before it is reported."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from broker.replication.followers.supervisor import FollowedPartition, FollowerSupervisor
from client.replica_messages import OFFSETS, PartitionAssignment, PartitionOffsets
from storage.cleaner import CleanerOffsetCheckpoint
from tests.follower import test_service
from tests.follower.test_service import T0, World, until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def world(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[World]:
    cleaner = {
        "log_dirs": [str(tmp_path / "logs")],
        "backoff_ms": 3_600_000,  # the workers look once at start, then sleep: no round runs here
        "dedupe_buffer_size": 1 << 20,
        "load_factor": 0.9,
        "io_max_bytes_per_second": 1e300,
    }
    monkeypatch.setattr(
        test_service, "SETTINGS", dataclasses.replace(test_service.SETTINGS, log_cleaner=cleaner)
    )
    world = World(tmp_path)
    yield world
    await world.close()


def _reported(world: World) -> list[tuple[int, int | None]]:
    return [
        (p["log_end_offset"], p["first_dirty_offset"])
        for kind, body in world.events
        if kind == OFFSETS
        for p in body["partitions"]
    ]


async def test_offset_given_with_the_log_is_reported_and_lowered_by_a_truncation(world: World) -> None:
    leader = await world.leader(1)
    leader.log(T0, [(0, 2), (0, 2)])  # two batches of two records
    handover = world.release(T0)
    assignment = dataclasses.replace(world.assignment(handover, 1, 0), first_dirty_offset=3)
    await world.service.add_partitions([assignment])
    await until(lambda: world.replica(T0)["high_watermark"] == 4)

    await world.service.report_offsets()
    assert _reported(world) == [(4, 3)]  # what the broker sent, not "clean from the start"
    world.service._logs[T0].log.truncate_to(2)  # a diverged follower (the fetcher is not involved)
    await world.service.report_offsets()
    assert _reported(world)[-1] == (2, 2)

    # the broker writes what it is told into the log dir's checkpoint, once per change
    log_dir = pathlib.Path(handover.log_dir)
    assert world.manager.update_external_offsets("t", 0, 2, 2, 0, first_dirty_offset=2)
    assert CleanerOffsetCheckpoint(log_dir).read() == {T0: 2}
    assert world.manager.update_external_offsets("t", 0, 2, 2, 0)  # an old follower: kept
    assert CleanerOffsetCheckpoint(log_dir).read() == {T0: 2}


async def test_a_handback_reports_the_offsets_first(world: World) -> None:
    leader = await world.leader(1)
    leader.log(T0, [(0, 2)])
    assignment = dataclasses.replace(world.assignment(world.release(T0), 1, 0), first_dirty_offset=2)
    await world.service.add_partitions([assignment])
    await until(lambda: world.replica(T0)["high_watermark"] == 2)
    (handover,) = await world.service.remove_partitions([T0])
    assert _reported(world) == [(2, 2)] and handover.log_end_offset == 2


async def test_re_adding_a_log_takes_the_brokers_offset(world: World) -> None:
    leader = await world.leader(1)
    leader.log(T0, [(0, 2)])
    first = dataclasses.replace(world.assignment(world.release(T0), 1, 0), first_dirty_offset=2)
    await world.service.add_partitions([first])
    await until(lambda: world.replica(T0)["high_watermark"] == 2)
    (handover,) = await world.service.remove_partitions([T0])
    world.manager.adopt_log(handover)
    # the broker led it meanwhile; now nothing is checkpointed for it (a new topic, say)
    await world.service.add_partitions([world.assignment(world.release(T0), 1, 0)])
    await until(lambda: world.replica(T0)["high_watermark"] == 2)
    world.events.clear()
    await world.service.report_offsets()
    assert _reported(world) == [(2, None)]


class _Process:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def request(self, message_type: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.bodies.append(body)
        return {"added": [], "failed": []}


async def test_the_supervisor_sends_the_checkpointed_offset_and_passes_reports_on(
    tmp_path: pathlib.Path,
) -> None:
    world = World(tmp_path)
    try:
        handover = world.release(T0)
        log_dir = pathlib.Path(handover.log_dir)
        CleanerOffsetCheckpoint(log_dir).write({T0: 7, ("other", 0): 9})
        calls: list[tuple[Any, ...]] = []
        supervisor = FollowerSupervisor(
            1, 1, test_service.SETTINGS, on_offsets=lambda *a, **k: calls.append((a, k))
        )
        entry = FollowedPartition(handover, 2, "localhost", 1, 0, 0)
        process = _Process()
        slot = supervisor._slots[0]
        await supervisor._send_add(slot, process, [entry])  # type: ignore[arg-type]
        [message] = process.bodies[0]["partitions"]
        assert PartitionAssignment.from_json(message).first_dirty_offset == 7
        supervisor._assignments[T0] = entry
        offsets = PartitionOffsets("t", 0, 5, 5, 0, 5, 4)
        supervisor._on_event(slot, OFFSETS, {"partitions": [offsets.to_json()]})
        assert calls == [(("t", 0, 5, 5, 0), {"first_dirty_offset": 4})]
        # a report of an older follower (no such field) reads as None and is passed on without it
        old = {k: v for k, v in offsets.to_json().items() if k != "first_dirty_offset"}
        supervisor._on_event(slot, OFFSETS, {"partitions": [old]})
        assert calls[-1] == (("t", 0, 5, 5, 0), {})
    finally:
        await world.close()
