"""The cleaner driver's process supervision and file hygiene, as in Kafka's LogCleaner.

- A cleaner process that started but could not be configured is stopped before the next try: it
  would otherwise wait on its channel forever, one more orphan per retry.
- A round whose log was handed over mid-round removes its own ``.cleaned`` files: the new owner's
  loader ran when it opened the log, before the round wrote them, so nobody else ever would.
"""

from __future__ import annotations

import asyncio
import pathlib
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from cleaner.driver import LogCleaner
from cleaner.manager import CleanableLog, LogCleanerManager
from cleaner.process import CleanerProcess
from client.cleaner_messages import CLEAN, CONFIGURE, CleanerSettings
from client.replica_ipc import JsonObject
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.storage.cleaner.helpers import BASE_TIME, Writer, read_records

pytestmark = pytest.mark.timeout(60)

COMPACT = LogConfig(segment_bytes=10_000_000, file_delete_delay_ms=0, cleanup_policy=("compact",))
SETTINGS = CleanerSettings(dedupe_buffer_size=1 << 20, load_factor=0.9, io_max_bytes_per_second=1e308)


def dirty_log(tmp_path: pathlib.Path, clock: FakeClock, name: str = "t-0") -> PartitionLog:
    log = PartitionLog.open(tmp_path / name, COMPACT, clock)
    w = Writer(log)
    for segment in range(3):
        for i in range(50):
            w.put([(b"k%d" % (i % 5), b"v%d-%d" % (segment, i))])
        log.roll()
    log.update_high_watermark(log.log_end_offset)
    return log


async def real_spawn(cleaner_id: int) -> CleanerProcess:
    return await CleanerProcess.spawn(
        python_executable=sys.executable, broker_id=1, cleaner_id=cleaner_id, env={}
    )


async def test_a_process_that_fails_its_configure_is_stopped_not_orphaned(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    log = dirty_log(tmp_path, clock)
    spawned: list[CleanerProcess] = []

    async def spawn(cleaner_id: int) -> CleanerProcess:
        process = await real_spawn(cleaner_id)
        spawned.append(process)
        if len(spawned) == 1:
            real_request = process.request

            async def configure_times_out(
                message_type: str, body: Mapping[str, Any] | None = None, timeout_s: float | None = None
            ) -> JsonObject:
                if message_type == CONFIGURE:
                    raise TimeoutError("configure timed out")
                return await real_request(message_type, body, timeout_s)

            process.request = configure_times_out  # type: ignore[method-assign]
        return process

    cleaner = LogCleaner(
        broker_id=1,
        manager=LogCleanerManager([tmp_path], clock),
        candidates=lambda: [
            CleanableLog(("t", 0), tmp_path, log, log.high_watermark, lambda: {}, lambda: not log.closed)
        ],
        clock=clock,
        settings=SETTINGS,
        backoff_ms=50,
        spawn=spawn,
    )
    cleaner.start()
    try:
        await cleaner.wait_for_round(30)  # the second process cleaned
    finally:
        await cleaner.stop()
    first = spawned[0]
    assert first.returncode is not None, "the unconfigured cleaner process is still running"
    assert first.channel.closed
    log.close()


async def test_a_round_handed_over_mid_round_leaves_no_cleaned_files(tmp_path: pathlib.Path) -> None:
    """The handover happens while the process writes: the new owner opens the log (its loader removes
    the ``.cleaned`` files there are), then the old owner's round writes its files."""
    clock = FakeClock(BASE_TIME)
    log = dirty_log(tmp_path, clock)
    before = read_records(log)
    owner: list[PartitionLog] = [log]
    handed_over = asyncio.Event()

    async def spawn(cleaner_id: int) -> CleanerProcess:
        process = await real_spawn(cleaner_id)
        real_request = process.request

        async def hand_over_then_clean(
            message_type: str, body: Mapping[str, Any] | None = None, timeout_s: float | None = None
        ) -> JsonObject:
            if message_type == CLEAN and not handed_over.is_set():
                log.close()  # released to a follower process, which opens it (its loader runs now)
                owner[0] = PartitionLog.open(log.directory, COMPACT, clock)
                handed_over.set()
            return await real_request(message_type, body, timeout_s)

        process.request = hand_over_then_clean  # type: ignore[method-assign]
        return process

    cleaner = LogCleaner(
        broker_id=1,
        manager=LogCleanerManager([tmp_path], clock),
        candidates=lambda: (
            [CleanableLog(("t", 0), tmp_path, log, log.high_watermark, lambda: {}, lambda: not log.closed)]
            if not log.closed
            else []
        ),
        clock=clock,
        settings=SETTINGS,
        backoff_ms=50,
        spawn=spawn,
    )
    cleaner.start()
    try:
        async with asyncio.timeout(30):
            await handed_over.wait()
            while cleaner.manager.in_progress(("t", 0)):
                await asyncio.sleep(0.02)
    finally:
        await cleaner.stop()
    assert cleaner.rounds == 0
    assert not list(log.directory.glob("*.cleaned")), "the round's files are left in the new owner's dir"
    assert read_records(owner[0]) == before
    owner[0].close()


async def test_stop_during_a_round_removes_its_files_once_the_process_is_gone(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    log = dirty_log(tmp_path, clock)
    sent = asyncio.Event()

    async def spawn(cleaner_id: int) -> CleanerProcess:
        process = await real_spawn(cleaner_id)
        real_request = process.request

        async def clean_slowly(
            message_type: str, body: Mapping[str, Any] | None = None, timeout_s: float | None = None
        ) -> JsonObject:
            if message_type != CLEAN:
                return await real_request(message_type, body, timeout_s)
            reply = await real_request(message_type, body, timeout_s)  # the files are written
            sent.set()
            await asyncio.sleep(3600)  # the owner is stopped before it reads the reply
            return reply

        process.request = clean_slowly  # type: ignore[method-assign]
        return process

    cleaner = LogCleaner(
        broker_id=1,
        manager=LogCleanerManager([tmp_path], clock),
        candidates=lambda: [
            CleanableLog(("t", 0), tmp_path, log, log.high_watermark, lambda: {}, lambda: not log.closed)
        ],
        clock=clock,
        settings=SETTINGS,
        backoff_ms=50,
        spawn=spawn,
    )
    cleaner.start()
    try:
        async with asyncio.timeout(30):
            await sent.wait()
        assert list(log.directory.glob("*.cleaned"))
    finally:
        await cleaner.stop()
    assert not list(log.directory.glob("*.cleaned"))
    log.close()


async def test_a_log_its_process_keeps_dying_on_is_marked_uncleanable(tmp_path: pathlib.Path) -> None:
    """A log whose rounds kill the cleaner process (memory, a crash) stays the filthiest of its log
    dir: retried forever, it kept every other log there from being cleaned."""
    clock = FakeClock(BASE_TIME)
    poison = dirty_log(tmp_path, clock)  # first and as dirty as the other: the filthiest
    other = dirty_log(tmp_path, clock, "u-0")
    deaths = [0]

    async def spawn(cleaner_id: int) -> CleanerProcess:
        process = await real_spawn(cleaner_id)
        real_request = process.request

        async def die_on_the_poison(
            message_type: str, body: Mapping[str, Any] | None = None, timeout_s: float | None = None
        ) -> JsonObject:
            if message_type == CLEAN and str(body and body["task"]["directory"]).endswith("t-0"):
                deaths[0] += 1
                process.kill()
                await process.channel.wait_closed()
            return await real_request(message_type, body, timeout_s)

        process.request = die_on_the_poison  # type: ignore[method-assign]
        return process

    cleaner = LogCleaner(
        broker_id=1,
        manager=LogCleanerManager([tmp_path], clock),
        candidates=lambda: [
            CleanableLog(("t", 0), tmp_path, poison, poison.high_watermark, lambda: {}, lambda: True),
            CleanableLog(("u", 0), tmp_path, other, other.high_watermark, lambda: {}, lambda: True),
        ],
        clock=clock,
        settings=SETTINGS,
        backoff_ms=50,
        spawn=spawn,
    )
    cleaner.start()
    try:
        await cleaner.wait_for_round(20)  # the other log gets its turn
    finally:
        await cleaner.stop()
    assert deaths[0] == 2
    assert cleaner.manager.first_dirty_offsets(tmp_path) == {("u", 0): 150}
    assert cleaner.manager.uncleanable_partitions_count(tmp_path) == 1
    poison.close()
    other.close()


async def test_stop_between_two_groups_removes_the_groups_not_installed(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    config = LogConfig(segment_bytes=3_000, file_delete_delay_ms=0, cleanup_policy=("compact",))
    log = PartitionLog.open(tmp_path / "t-0", config, clock)
    w = Writer(log)
    for i in range(200):  # many small segments: a round of several groups
        w.put([(b"k%d" % i, b"v" * 40)])
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = read_records(log)
    cleaner = LogCleaner(
        broker_id=1,
        manager=LogCleanerManager([tmp_path], clock),
        candidates=lambda: [
            CleanableLog(("t", 0), tmp_path, log, log.high_watermark, lambda: {}, lambda: not log.closed)
        ],
        clock=clock,
        settings=SETTINGS,
        backoff_ms=50,
        spawn=real_spawn,
    )
    real_install = log.replace_segments
    first_installed = asyncio.Event()

    def replace_and_note(*args: Any, **kwargs: Any) -> Any:
        segment = real_install(*args, **kwargs)
        first_installed.set()
        return segment

    log.replace_segments = replace_and_note  # type: ignore[method-assign]
    cleaner.start()
    try:
        async with asyncio.timeout(30):
            await first_installed.wait()  # the loop yields before the next group
    finally:
        await cleaner.stop()
    assert cleaner.rounds == 0
    assert not list(log.directory.glob("*.cleaned")), "the groups not installed left their files"
    assert read_records(log) == before  # every key is unique: nothing to remove
    log.close()
