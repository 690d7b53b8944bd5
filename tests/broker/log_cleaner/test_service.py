"""The broker's LogCleaner with a real cleaner process (``python -m cleaner``) over a real log: a round
is written by the process and installed by the owner while it keeps appending; a log given up
meanwhile is not installed into (the round still removes its own cleaned files); a killed process
is restarted; stop ends the process."""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from cleaner.driver import LogCleaner
from cleaner.manager import CleanableLog, LogCleanerManager
from client.cleaner_messages import CleanerSettings
from storage.cleaner import CleanResult
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.storage.cleaner.helpers import BASE_TIME, Writer, read_records

pytestmark = pytest.mark.timeout(60)

COMPACT = LogConfig(segment_bytes=10_000_000, file_delete_delay_ms=0, cleanup_policy=("compact",))
SETTINGS = CleanerSettings(dedupe_buffer_size=1 << 20, load_factor=0.9, io_max_bytes_per_second=1e308)


def build(tmp_path: pathlib.Path) -> tuple[FakeClock, PartitionLog, Writer]:
    clock = FakeClock(BASE_TIME)
    log = PartitionLog.open(tmp_path / "t-0", COMPACT, clock)
    w = Writer(log)
    for segment in range(3):
        for i in range(50):
            w.put([(b"k%d" % (i % 5), b"v%d-%d" % (segment, i))])
        log.roll()
    log.update_high_watermark(log.log_end_offset)
    return clock, log, w


def cleaner_for(tmp_path: pathlib.Path, clock: FakeClock, log: PartitionLog, owned: list[bool]) -> LogCleaner:
    def candidates() -> list[CleanableLog]:
        return [
            CleanableLog(
                ("t", 0), tmp_path, log, log.high_watermark, lambda: {}, lambda: owned[0] and not log.closed
            )
        ]

    return LogCleaner(
        broker_id=1,
        manager=LogCleanerManager([tmp_path], clock),
        candidates=candidates,
        clock=clock,
        settings=SETTINGS,
        backoff_ms=50,
    )


def latest(log: PartitionLog) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value, control in read_records(log):
        if key is not None and not control:
            out[key] = (offset, value)
    return out


async def test_a_round_in_the_cleaner_process_is_installed_by_the_owner(tmp_path: pathlib.Path) -> None:
    clock, log, w = build(tmp_path)
    before = latest(log)
    size_before = log.size_in_bytes
    cleaner = cleaner_for(tmp_path, clock, log, [True])
    cleaner.start()
    try:
        w.put([(b"k1", b"during")])  # the owner appends while the process cleans
        await cleaner.wait_for_round(30)
    finally:
        await cleaner.stop()
    after = latest(log)
    assert after[b"k1"][1] == b"during"
    assert {k: v for k, v in after.items() if k != b"k1"} == {k: v for k, v in before.items() if k != b"k1"}
    assert len([r for r in read_records(log) if r[0] < 150]) == 5  # one record per key below the active
    assert log.size_in_bytes < size_before / 5
    assert cleaner.manager.first_dirty_offsets(tmp_path) == {("t", 0): 150}
    assert not list(log.directory.glob("*.cleaned"))
    log.close()


async def test_a_log_given_up_meanwhile_is_left_alone(tmp_path: pathlib.Path) -> None:
    clock, log, _ = build(tmp_path)
    before = read_records(log)
    owned = [True]
    cleaner = cleaner_for(tmp_path, clock, log, owned)
    original = cleaner._install

    async def give_up_first(candidate: CleanableLog, result: CleanResult, truncations: int) -> bool:
        owned[0] = False  # e.g. leadership moved while the process was cleaning
        return await original(candidate, result, truncations)

    cleaner._install = give_up_first  # type: ignore[method-assign]
    cleaner.start()
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            if not cleaner.manager.in_progress(("t", 0)) and cleaner._workers[0].process is not None:
                break
    finally:
        await cleaner.stop()
    assert read_records(log) == before and cleaner.rounds == 0
    assert cleaner.manager.first_dirty_offsets(tmp_path) == {}
    # the round removes its own (token-named) files: the new owner's loader may have run before them
    assert not list(log.directory.glob("*.cleaned"))
    log.close()
    reopened = PartitionLog.open(log.directory, COMPACT, clock)
    assert read_records(reopened) == before and not list(log.directory.glob("*.cleaned"))
    reopened.close()


async def test_a_killed_cleaner_process_is_restarted(tmp_path: pathlib.Path) -> None:
    clock, log, w = build(tmp_path)
    cleaner = cleaner_for(tmp_path, clock, log, [True])
    cleaner.start()
    try:
        await cleaner.wait_for_round(30)
        process = cleaner._workers[0].process
        assert process is not None
        process.kill()
        await process.channel.wait_closed()
        for i in range(50):
            w.put([(b"k%d" % (i % 5), b"again-%d" % i)])
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        await cleaner.wait_for_round(30)
        assert cleaner._workers[0].process is not process
    finally:
        await cleaner.stop()
    assert latest(log)[b"k4"][1] == b"again-49"
    log.close()


async def test_a_round_planned_before_a_truncation_is_not_installed(tmp_path: pathlib.Path) -> None:
    """A truncated segment can grow back to its base and size with other records (a follower that
    diverged): a round planned before any truncation is dropped, whatever the segments look like."""
    clock, log, _ = build(tmp_path)
    cleaner = cleaner_for(tmp_path, clock, log, [True])
    original = cleaner._install
    installed: list[tuple[str, bool]] = []

    async def truncate_first(candidate: CleanableLog, result: CleanResult, truncations: int) -> bool:
        if not installed:
            log.truncate_to(log.log_end_offset - 1)  # the last record of the log goes
        done = await original(candidate, result, truncations)
        installed.append((result.token, done))
        return done

    cleaner._install = truncate_first  # type: ignore[method-assign]
    before = read_records(log)
    cleaner.start()
    try:
        for _ in range(200):
            await asyncio.sleep(0.05)
            if installed:
                break
    finally:
        await cleaner.stop()
    [(token, done), *_] = installed
    assert not done
    assert not list(log.directory.glob(f"*.{token}.cleaned"))  # still its owner: it removed its files
    assert latest(log) == latest_of_records(before[:-1])  # the truncation only, nothing lost
    log.close()


def latest_of_records(
    records: list[tuple[int, bytes | None, bytes | None, bool]],
) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value, control in records:
        if key is not None and not control:
            out[key] = (offset, value)
    return out
