"""A follower process's cleaner candidates: its compacted logs, bounded by the last stable offset it
knows (the leader's high watermark, an open transaction), no longer offered once handed back; the
cleaner is built from the broker's settings (none when cleaning is off); each cleaned segment
installed is told (the follower announces the new segment generation to its broker)."""

from __future__ import annotations

import pathlib

import pytest

from cleaner.driver import LogCleaner
from cleaner.manager import InMemoryOffsets, LogCleanerManager
from follower.log_cleaner import build_follower_log_cleaner, followed_compacted_logs
from follower.replica_log import ReplicaLog
from protocol.records import Record, build_batch
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.broker.log_cleaner.test_cleaner_driver_supervision import SETTINGS, dirty_log, real_spawn
from tests.storage.cleaner.helpers import BASE_TIME

NOW = 1_700_000_000_000
COMPACT = LogConfig(cleanup_policy=("compact",))


def replica(tmp_path: pathlib.Path, name: str, config: LogConfig) -> ReplicaLog:
    clock = FakeClock(NOW)
    return ReplicaLog(PartitionLog.open(tmp_path / name, config, clock), clock=clock)


def test_candidates_are_the_compacted_logs_bounded_by_their_last_stable_offset(
    tmp_path: pathlib.Path,
) -> None:
    compacted, plain = replica(tmp_path, "c-0", COMPACT), replica(tmp_path, "p-0", LogConfig())
    for log in (compacted, plain):
        log.append_as_follower(build_batch([Record(b"v", b"k", (), NOW)] * 3, partition_leader_epoch=0))
        txn = [Record(b"t", b"k", (), NOW)]
        log.append_as_follower(
            build_batch(
                txn,
                base_offset=3,
                partition_leader_epoch=0,
                producer_id=9,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            )
        )
        log.log.update_high_watermark(4)
    logs = {("c", 0): compacted, ("p", 0): plain}
    [candidate] = list(followed_compacted_logs(logs)())
    assert candidate.topic_partition == ("c", 0) and candidate.log_dir == tmp_path
    assert candidate.last_stable_offset == 3  # the open transaction at offset 3, below the HW
    assert set(candidate.active_producers()) == {9} and candidate.is_current()
    del logs[("c", 0)]  # handed back to the broker
    assert not candidate.is_current() and list(followed_compacted_logs(logs)()) == []
    compacted.log.close()
    plain.log.close()


def test_built_from_the_broker_settings(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(NOW)
    assert build_follower_log_cleaner({}, {}, broker_id=1, fetcher_id=0, clock=clock) is None
    settings = {
        "log_dirs": [str(tmp_path)],
        "backoff_ms": 100,
        "dedupe_buffer_size": 1 << 20,
        "load_factor": 0.9,
        "io_max_bytes_per_second": 1e6,
    }
    cleaner = build_follower_log_cleaner(settings, {}, broker_id=1, fetcher_id=2, clock=clock)
    assert cleaner is not None and cleaner.manager.log_dirs == [tmp_path]


@pytest.mark.timeout(60)
async def test_each_installed_segment_is_told(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    log = dirty_log(tmp_path, clock)
    replica = ReplicaLog(log, clock=clock)
    before = replica.segment_generation
    told: list[tuple[str, int]] = []
    cleaner = LogCleaner(
        broker_id=1,
        manager=LogCleanerManager([tmp_path], clock, lambda _: InMemoryOffsets()),
        candidates=followed_compacted_logs({("t", 0): replica}, on_replaced=told.append),
        clock=clock,
        settings=SETTINGS,
        backoff_ms=20,
        spawn=real_spawn,
    )
    cleaner.start()
    try:
        await cleaner.wait_for_round(30)
    finally:
        await cleaner.stop()
    assert told and set(told) == {("t", 0)}
    assert replica.segment_generation != before
    log.close()
