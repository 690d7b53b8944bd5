"""Handing logs between the broker's LogManager and a follower process (storage/handover.py).

The follower side is played in-process: it only needs storage.handover, never the LogManager or its
directory lock, which is the point.
"""

from __future__ import annotations

import json
import pathlib
import uuid
from typing import Any

import pytest

from protocol.records.builder import Record, build_batch
from storage.checkpoint import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import KiplingStorageError
from storage.handover import LogHandover, close_for_handover, describe_open_log, open_handed_over_log
from storage.log import PartitionLog
from storage.log_manager import ExternallyOwnedLogError, LogManager

NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID(int=7)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def dirs(tmp_path: pathlib.Path) -> list[pathlib.Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def manager(dirs: list[pathlib.Path], clock: FakeClock) -> Any:
    manager = LogManager(dirs, LogConfig(), clock)
    yield manager
    manager.shutdown()


def batch(base_offset: int, epoch: int, records: int = 2) -> bytes:
    return build_batch(
        [Record(b"v-%d" % (base_offset + i), timestamp=NOW + base_offset + i) for i in range(records)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def led_log(manager: LogManager, partition: int = 0, batches: int = 3) -> PartitionLog:
    """A log the broker leads: ``batches`` batches of 2 records in epochs 0, 1, 2..., HW at 4."""
    log = manager.get_or_create_log("orders", partition, TOPIC_ID)
    for epoch in range(batches):
        log.append_as_leader(batch(0, epoch), leader_epoch=epoch)
    log.update_high_watermark(4)
    return log


def contents(log: PartitionLog) -> bytes:
    result = log.read(log.log_start_offset, 1 << 30)
    return b"" if result.slice is None else result.slice.read_bytes()


def epochs(log: PartitionLog) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries()]


def checkpoint(log_dir: pathlib.Path, name: str) -> dict[tuple[str, int], int]:
    return OffsetCheckpointFile(log_dir / name).read()


# -- release and reopen --------------------------------------------------------------------------


def test_release_closes_and_forgets_the_log_and_describes_it(manager: LogManager) -> None:
    log = led_log(manager)
    log_dir = manager.log_dir_of("orders", 0)
    assert log_dir is not None

    handover = manager.release_log("orders", 0)

    assert handover == LogHandover(
        topic="orders",
        partition=0,
        topic_id=TOPIC_ID,
        directory=str(log_dir / "orders-0"),
        log_dir=str(log_dir),
        log_end_offset=6,
        high_watermark=4,
        recovery_point=6,
        log_start_offset=0,
        clean=True,
    )
    assert manager.get_log("orders", 0) is None
    assert manager.all_logs() == []  # stray and retention handling never see it
    assert manager.is_external("orders", 0)
    assert manager.external_logs()[("orders", 0)].recovery_point == 6
    with pytest.raises(KiplingStorageError):
        log.read(0, 100)  # closed
    with pytest.raises(KiplingStorageError):
        manager.release_log("orders", 0)


def test_reopening_a_released_log_keeps_data_epochs_and_offsets(
    manager: LogManager, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = led_log(manager)
    expected_bytes, expected_epochs = contents(log), epochs(log)
    handover = manager.release_log("orders", 0)
    recoveries: list[object] = []
    monkeypatch.setattr(
        "storage.segment.LogSegment.recover", lambda *args, **kwargs: recoveries.append(args) or 0
    )

    reopened = open_handed_over_log(handover, LogConfig(), clock)  # while the manager holds the lock

    assert recoveries == []  # a clean handover skips recovery
    assert contents(reopened) == expected_bytes
    assert epochs(reopened) == expected_epochs == [(0, 0), (1, 2), (2, 4)]
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.high_watermark) == (0, 6, 4)
    assert reopened.topic_id == TOPIC_ID
    reopened.close()


def test_handover_round_trips_through_json(manager: LogManager) -> None:
    led_log(manager)
    handover = manager.release_log("orders", 0)
    assert LogHandover.from_json(json.loads(json.dumps(handover.to_json()))) == handover
    no_id = LogHandover("t", 1, None, "/x/t-1", "/x", 5, 4, 3, 2, clean=False)
    assert LogHandover.from_json(json.loads(json.dumps(no_id.to_json()))) == no_id
    with pytest.raises(TypeError):
        LogHandover.from_json({**no_id.to_json(), "partition": "1"})
    with pytest.raises(KeyError):
        LogHandover.from_json({"topic": "t"})


def test_unclean_handover_recovers_a_torn_tail(manager: LogManager, clock: FakeClock) -> None:
    led_log(manager)
    reported = manager.release_log("orders", 0)
    follower_log = open_handed_over_log(reported, LogConfig(), clock)
    follower_log.append_as_follower(batch(6, 3))
    follower_log.close()
    segment = pathlib.Path(reported.directory) / "00000000000000000000.log"
    with open(segment, "ab") as out:
        out.write(batch(8, 3)[:30])  # the follower process died in the middle of a write

    reopened = open_handed_over_log(reported.unclean(), LogConfig(), clock)

    assert reopened.log_end_offset == 8  # everything valid is kept, the torn batch is cut
    assert epochs(reopened)[-1] == (3, 6)
    assert segment.stat().st_size == len(contents(reopened))
    reopened.close()


def test_clean_handover_whose_files_grew_is_recovered_instead_of_trusted(
    manager: LogManager, clock: FakeClock
) -> None:
    led_log(manager)
    handover = manager.release_log("orders", 0)
    other = open_handed_over_log(handover, LogConfig(), clock)
    other.append_as_follower(batch(6, 3))
    other.close()

    reopened = open_handed_over_log(handover, LogConfig(), clock)  # stale: says LEO 6

    assert reopened.log_end_offset == 8
    reopened.close()


# -- adopting back -------------------------------------------------------------------------------


def test_adopt_takes_back_what_the_follower_wrote(manager: LogManager, clock: FakeClock) -> None:
    led_log(manager)
    follower_log = open_handed_over_log(manager.release_log("orders", 0), LogConfig(), clock)
    follower_log.append_as_follower(batch(6, 3))
    follower_log.update_high_watermark(8)
    final = close_for_handover(follower_log)

    adopted = manager.adopt_log(final, LogConfig())

    assert manager.get_log("orders", 0) is adopted
    assert not manager.is_external("orders", 0)
    assert (adopted.log_end_offset, adopted.high_watermark) == (8, 8)
    assert epochs(adopted) == [(0, 0), (1, 2), (2, 4), (3, 6)]
    adopted.append_as_leader(batch(0, 4), leader_epoch=4)  # the broker leads it again
    assert adopted.log_end_offset == 10
    manager.delete_log("orders", 0)  # allowed again once adopted


def test_adopt_refuses_logs_that_were_not_released(manager: LogManager, tmp_path: pathlib.Path) -> None:
    led_log(manager)
    with pytest.raises(KiplingStorageError):
        manager.adopt_log(describe_open_log(manager.get_log("orders", 0)))  # type: ignore[arg-type]
    handover = manager.release_log("orders", 0)
    with pytest.raises(KiplingStorageError):
        manager.adopt_log(LogHandover("other", 0, None, str(tmp_path / "other-0"), str(tmp_path), 0, 0, 0, 0))
    moved = LogHandover.from_json({**handover.to_json(), "log_dir": str(tmp_path / "elsewhere")})
    with pytest.raises(KiplingStorageError):
        manager.adopt_log(moved)
    assert manager.is_external("orders", 0)


# -- external entries ----------------------------------------------------------------------------


def test_external_logs_are_protected_from_deletion_and_recreation(manager: LogManager) -> None:
    led_log(manager)
    manager.release_log("orders", 0)
    with pytest.raises(ExternallyOwnedLogError):
        manager.delete_log("orders", 0)
    with pytest.raises(ExternallyOwnedLogError):
        manager.mark_stray("orders", 0)
    with pytest.raises(ExternallyOwnedLogError):
        manager.get_or_create_log("orders", 0, TOPIC_ID)
    assert manager.is_external("orders", 0)


def test_checkpoints_include_the_offsets_follower_processes_report(
    manager: LogManager, dirs: list[pathlib.Path]
) -> None:
    led_log(manager, 0)
    led_log(manager, 1)  # in the other log dir
    log_dir = manager.log_dir_of("orders", 0)
    assert log_dir == dirs[0]
    manager.release_log("orders", 0)

    assert manager.update_external_offsets(
        "orders", 0, high_watermark=9, recovery_point=7, log_start_offset=2
    )
    assert not manager.update_external_offsets("orders", 5, 1, 1, 1)  # unknown: ignored
    manager.checkpoint_high_watermarks()
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()

    assert checkpoint(dirs[0], REPLICATION_OFFSET_CHECKPOINT) == {("orders", 0): 9}
    assert checkpoint(dirs[0], RECOVERY_POINT_CHECKPOINT) == {("orders", 0): 7}
    assert checkpoint(dirs[0], LOG_START_OFFSET_CHECKPOINT) == {("orders", 0): 2}
    assert checkpoint(dirs[1], REPLICATION_OFFSET_CHECKPOINT) == {("orders", 1): 4}


def test_new_logs_count_external_ones_when_choosing_a_log_dir(
    manager: LogManager, dirs: list[pathlib.Path]
) -> None:
    led_log(manager, 0)
    manager.release_log("orders", 0)
    manager.get_or_create_log("orders", 1, TOPIC_ID)
    assert manager.log_dir_of("orders", 1) == dirs[1]


def test_shutdown_marks_a_log_dir_clean_only_if_its_external_logs_were_closed(
    dirs: list[pathlib.Path], clock: FakeClock
) -> None:
    manager = LogManager(dirs, LogConfig(), clock)
    led_log(manager, 0)
    manager.release_log("orders", 0)  # in dirs[0]; the follower process still holds it
    manager.update_external_offsets("orders", 0, 4, 6, 0)
    manager.shutdown()
    assert not (dirs[0] / CLEAN_SHUTDOWN_MARKER).exists()
    assert (dirs[1] / CLEAN_SHUTDOWN_MARKER).exists()
    assert checkpoint(dirs[0], REPLICATION_OFFSET_CHECKPOINT) == {("orders", 0): 4}

    manager = LogManager(dirs, LogConfig(), clock)  # loads it again, recovering dirs[0]
    log = manager.get_log("orders", 0)
    assert log is not None and (log.log_end_offset, log.high_watermark) == (6, 4)
    final = close_for_handover(open_handed_over_log(manager.release_log("orders", 0), LogConfig(), clock))
    manager.external_log_closed(final)
    manager.shutdown()
    assert (dirs[0] / CLEAN_SHUTDOWN_MARKER).exists()


def test_a_late_report_after_a_closed_handover_reopens_the_entry(
    manager: LogManager, clock: FakeClock
) -> None:
    led_log(manager, 0)
    handover = manager.release_log("orders", 0)
    manager.external_log_closed(handover)
    assert manager.external_logs()[("orders", 0)].closed
    manager.update_external_offsets("orders", 0, 4, 6, 0)  # it was reopened by a follower
    assert not manager.external_logs()[("orders", 0)].closed
    manager.external_log_closed(handover.unclean())
    assert not manager.external_logs()[("orders", 0)].closed
