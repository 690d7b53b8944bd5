"""PeriodicTask: runs on schedule, survives a failing run, and reports a run that came late."""

from __future__ import annotations

import asyncio
import time

from server_common.periodic import PeriodicTask

INTERVAL_MS = 20
STALL_S = 0.3


async def test_a_run_after_a_stall_reports_how_late_it_is_before_running() -> None:
    calls: list[str] = []
    late: list[int] = []
    ran = asyncio.Event()

    def run() -> None:
        calls.append("run")
        ran.set()

    def on_late(late_ms: int) -> None:
        calls.append("late")
        late.append(late_ms)

    task = PeriodicTask("test", INTERVAL_MS, run, on_late=on_late)
    task.start()
    try:
        async with asyncio.timeout(10):
            await ran.wait()
        ran.clear()
        calls.clear()
        time.sleep(STALL_S)  # the event loop is blocked, as in a paused process
        async with asyncio.timeout(10):
            await ran.wait()
    finally:
        task.stop()
    assert calls[:2] == ["late", "run"]
    assert late[0] >= STALL_S * 1000 - 2 * INTERVAL_MS


async def test_a_failing_run_is_logged_and_the_schedule_goes_on() -> None:
    runs = 0
    twice = asyncio.Event()

    def fail() -> None:
        nonlocal runs
        runs += 1
        if runs >= 2:
            twice.set()
        raise RuntimeError("boom")

    task = PeriodicTask("failing", INTERVAL_MS, fail)
    task.start()
    try:
        async with asyncio.timeout(10):
            await twice.wait()
    finally:
        task.stop()


async def test_lateness_below_the_threshold_is_not_reported() -> None:
    """A busy loop (late by less than ``late_after_ms``) still ran its other callbacks meanwhile:
    only a longer stall is reported."""
    late: list[int] = []
    ran = asyncio.Event()
    task = PeriodicTask("busy", INTERVAL_MS, ran.set, on_late=late.append, late_after_ms=1000)
    task.start()
    try:
        async with asyncio.timeout(10):
            await ran.wait()
        ran.clear()
        time.sleep(STALL_S)
        async with asyncio.timeout(10):
            await ran.wait()
    finally:
        task.stop()
    assert late == []
