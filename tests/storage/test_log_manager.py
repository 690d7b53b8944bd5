"""LogManager: loading partitions, checkpoints, clean-shutdown marker, deletion and the dir lock."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest

from protocol.records.builder import Record, build_batch
from storage.checkpoint import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    PartitionMetadataFile,
)
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import KiplingStorageError
from storage.log import PartitionLog
from storage.log_manager import (
    LogManager,
    delete_dir_name,
    parse_partition_dir_name,
    validate_topic_partition,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
NOW = 1_700_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def dirs(tmp_path: pathlib.Path) -> list[pathlib.Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def open_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Records the arguments of every PartitionLog.open while still opening real logs."""
    calls: list[dict[str, Any]] = []
    original = PartitionLog.open.__func__  # type: ignore[attr-defined]

    def spy(cls: type[PartitionLog], directory: pathlib.Path, *args: Any, **kwargs: Any) -> PartitionLog:
        calls.append({"directory": pathlib.Path(directory), "args": args, **kwargs})
        return original(cls, directory, *args, **kwargs)

    monkeypatch.setattr(PartitionLog, "open", classmethod(spy))
    return calls


def append(log: PartitionLog, count: int, timestamp: int = NOW, epoch: int = 0) -> None:
    for i in range(count):
        log.append_as_leader(build_batch([Record(b"value-%d" % i, timestamp=timestamp)]), leader_epoch=epoch)


# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", ("orders", 0)),
        ("my-topic.v2-13", ("my-topic.v2", 13)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("orders", None),
        ("orders-x", None),
        ("-3", None),
        ("orders-0.0123abcd-future", None),
        ("orders-٣", None),
    ],
)
def test_parse_partition_dir_name(name: str, expected: tuple[str, int] | None) -> None:
    assert parse_partition_dir_name(name) == expected


def test_delete_dir_name_fits_in_255_characters() -> None:
    name = delete_dir_name("t" * 249, 12345)
    assert len(name) <= 255
    assert name.endswith("-delete")
    assert "-12345." in name
    assert delete_dir_name("orders", 0).startswith("orders-0.")


@pytest.mark.parametrize(
    ("topic", "partition"), [("", 0), ("a b", 0), (".", 0), ("..", 1), ("t" * 250, 0), ("t", -1)]
)
def test_illegal_topic_partitions_are_refused(topic: str, partition: int) -> None:
    with pytest.raises(ValueError):
        validate_topic_partition(topic, partition)


# -- creation and loading --------------------------------------------------------------------------


def test_create_places_logs_in_the_least_loaded_dir_and_writes_metadata(
    dirs: list[pathlib.Path], clock: FakeClock
) -> None:
    manager = LogManager(dirs, LogConfig(), clock)
    ids = {p: uuid.uuid4() for p in range(4)}
    logs = [manager.get_or_create_log("orders", p, ids[p]) for p in range(4)]
    assert [manager.log_dir_of("orders", p) for p in range(4)] == [dirs[0], dirs[1], dirs[0], dirs[1]]
    for p, log in enumerate(logs):
        directory = manager.log_dir_of("orders", p) / f"orders-{p}"
        assert PartitionMetadataFile(directory / PARTITION_METADATA).read() == ids[p]
        assert manager.get_log("orders", p) is log
    assert manager.get_or_create_log("orders", 0, ids[0]) is logs[0]
    assert manager.get_or_create_log("orders", 0, None) is logs[0]
    assert manager.get_log("orders", 9) is None
    assert sorted(manager.all_logs(), key=id) == sorted(logs, key=id)
    manager.shutdown()


def test_a_dir_outside_the_placement_dirs_takes_only_logs_created_there_by_name(
    dirs: list[pathlib.Path], clock: FakeClock
) -> None:
    """metadata.log.dir apart from log.dirs: the metadata log goes there, data logs never do, and
    the next start finds it there again."""
    metadata_dir, data_dir = dirs[0], dirs[1]
    manager = LogManager(dirs, LogConfig(), clock, placement_dirs=[data_dir])
    spelled_otherwise = pathlib.Path(os.path.relpath(metadata_dir))  # as metadata.log.dir may say it
    manager.get_or_create_log("__cluster_metadata", 0, None, log_dir=spelled_otherwise)
    for p in range(3):
        manager.get_or_create_log("orders", p, uuid.uuid4())
    assert manager.log_dir_of("__cluster_metadata", 0) == metadata_dir
    assert {manager.log_dir_of("orders", p) for p in range(3)} == {data_dir}
    with pytest.raises(ValueError, match="not one of this log manager's log dirs"):
        manager.get_or_create_log("orders", 9, None, log_dir=metadata_dir / "elsewhere")
    manager.shutdown()
    again = LogManager(dirs, LogConfig(), clock, placement_dirs=[data_dir])
    assert again.log_dir_of("__cluster_metadata", 0) == metadata_dir
    again.shutdown()


def test_topic_id_mismatch_is_an_error(dirs: list[pathlib.Path], clock: FakeClock) -> None:
    manager = LogManager(dirs, LogConfig(), clock)
    manager.get_or_create_log("orders", 0, uuid.uuid4())
    with pytest.raises(KiplingStorageError):
        manager.get_or_create_log("orders", 0, uuid.uuid4())
    manager.shutdown()


def test_reload_after_clean_shutdown_finds_every_partition(
    dirs: list[pathlib.Path], clock: FakeClock, open_calls: list[dict[str, Any]]
) -> None:
    names = [("orders", 0), ("orders", 1), ("my-topic.v2", 3), ("__consumer_offsets", 12)]
    ids = {name: uuid.uuid4() for name in names}
    manager = LogManager(dirs, LogConfig(), clock)
    for i, (topic, partition) in enumerate(names):
        append(manager.get_or_create_log(topic, partition, ids[(topic, partition)]), i + 1)
    manager.shutdown()
    for directory in dirs:
        assert (directory / CLEAN_SHUTDOWN_MARKER).exists()

    open_calls.clear()
    reloaded = LogManager(dirs, LogConfig(), clock)
    assert {(log.topic, log.partition) for log in reloaded.all_logs()} == set(names)
    for i, name in enumerate(names):
        log = reloaded.get_log(*name)
        assert log is not None
        assert log.log_end_offset == i + 1
        assert log.topic_id == ids[name]
    assert len(open_calls) == len(names)
    assert all(call["clean_shutdown"] for call in open_calls)
    assert all(call["recovery_point"] == (names.index(_name(call)) + 1) for call in open_calls)
    for directory in dirs:  # the marker is gone once loaded, so a later crash is detected
        assert not (directory / CLEAN_SHUTDOWN_MARKER).exists()
    reloaded.shutdown()


def _name(call: dict[str, Any]) -> tuple[str, int]:
    parsed = parse_partition_dir_name(call["directory"].name)
    assert parsed is not None
    return parsed


def test_topic_configs_choose_each_log_config(
    dirs: list[pathlib.Path], clock: FakeClock, open_calls: list[dict[str, Any]]
) -> None:
    special = LogConfig(segment_bytes=4096)
    configs = {"special": special}
    manager = LogManager(
        dirs, LogConfig(), clock, topic_configs=lambda topic: configs.get(topic, LogConfig())
    )
    manager.get_or_create_log("special", 0, None)
    manager.get_or_create_log("plain", 0, None)
    explicit = LogConfig(segment_bytes=8192)
    manager.get_or_create_log("explicit", 0, None, config=explicit)
    manager.shutdown()
    assert [call["args"][0] for call in open_calls] == [special, LogConfig(), explicit]
    open_calls.clear()
    LogManager(
        dirs, LogConfig(), clock, topic_configs=lambda topic: configs.get(topic, LogConfig())
    ).shutdown()
    by_topic = {_name(call)[0]: call["args"][0] for call in open_calls}
    assert by_topic["special"] == special
    assert by_topic["plain"] == LogConfig()


def test_non_partition_entries_are_skipped_and_pending_deletions_removed(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log_dir = tmp_path / "d"
    (log_dir / "lost+found").mkdir(parents=True)
    (log_dir / "orders-0.0123456789abcdef0123456789abcdef-future").mkdir()
    leftover = log_dir / "orders-1.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"junk")
    (log_dir / "meta.properties").write_text("version=1\n")
    manager = LogManager([log_dir], LogConfig(), clock)
    assert manager.all_logs() == []
    assert not leftover.exists()
    assert (log_dir / "lost+found").exists()
    manager.shutdown()


def test_same_partition_in_two_dirs_is_an_error(dirs: list[pathlib.Path], clock: FakeClock) -> None:
    for directory in dirs:
        (directory / "orders-0").mkdir(parents=True)
    with pytest.raises(KiplingStorageError, match="orders-0"):
        LogManager(dirs, LogConfig(), clock)
    LogManager(dirs[:1], LogConfig(), clock).shutdown()  # the failed start released its locks


# -- checkpoints -----------------------------------------------------------------------------------


def test_checkpoints_are_written_and_read_back(dirs: list[pathlib.Path], clock: FakeClock) -> None:
    manager = LogManager(dirs, LogConfig(), clock)
    first = manager.get_or_create_log("orders", 0, None)
    second = manager.get_or_create_log("orders", 1, None)
    append(first, 5)
    append(second, 3)
    first.update_high_watermark(4)
    second.update_high_watermark(3)
    manager.flush_all()
    manager.checkpoint_recovery_points()
    manager.checkpoint_high_watermarks()
    manager.checkpoint_log_start_offsets()

    def read(directory: pathlib.Path, name: str) -> dict[tuple[str, int], int]:
        return OffsetCheckpointFile(directory / name).read()

    assert read(dirs[0], RECOVERY_POINT_CHECKPOINT) == {("orders", 0): 5}
    assert read(dirs[1], RECOVERY_POINT_CHECKPOINT) == {("orders", 1): 3}
    assert read(dirs[0], REPLICATION_OFFSET_CHECKPOINT) == {("orders", 0): 4}
    assert read(dirs[1], REPLICATION_OFFSET_CHECKPOINT) == {("orders", 1): 3}
    assert read(dirs[0], LOG_START_OFFSET_CHECKPOINT) == {("orders", 0): 0}
    manager.shutdown()

    reloaded = LogManager(dirs, LogConfig(), clock)
    assert reloaded.get_log("orders", 0).high_watermark == 4  # type: ignore[union-attr]
    assert reloaded.get_log("orders", 1).high_watermark == 3  # type: ignore[union-attr]
    reloaded.shutdown()


def test_checkpointed_high_watermark_is_clamped_to_the_log_end_offset(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log_dir = tmp_path / "d"
    manager = LogManager([log_dir], LogConfig(), clock)
    append(manager.get_or_create_log("orders", 0, None), 2)
    manager.shutdown()
    OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write({("orders", 0): 1000, ("gone", 0): 7})
    reloaded = LogManager([log_dir], LogConfig(), clock)
    assert reloaded.get_log("orders", 0).high_watermark == 2  # type: ignore[union-attr]
    reloaded.shutdown()


def test_checkpointed_recovery_point_and_log_start_offset_are_passed_to_open(
    tmp_path: pathlib.Path, clock: FakeClock, open_calls: list[dict[str, Any]]
) -> None:
    log_dir = tmp_path / "d"
    manager = LogManager([log_dir], LogConfig(), clock)
    append(manager.get_or_create_log("orders", 0, None), 3)
    manager.shutdown()
    OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write({("orders", 0): 2})
    OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write({("orders", 0): 1})
    open_calls.clear()
    LogManager([log_dir], LogConfig(), clock).shutdown()
    assert open_calls[0]["recovery_point"] == 2
    assert open_calls[0]["log_start_offset"] == 1


# -- crash and clean shutdown marker ---------------------------------------------------------------

CRASHING_BROKER = textwrap.dedent(
    """
    import os, pathlib, sys
    from protocol.records.builder import Record, build_batch
    from storage.clock import SystemClock
    from storage.config import LogConfig
    from storage.log_manager import LogManager

    manager = LogManager([pathlib.Path(sys.argv[1])], LogConfig(), SystemClock())
    log = manager.get_or_create_log("orders", 0, None)
    for i in range(4):
        log.append_as_leader(build_batch([Record(b"v%d" % i)]), leader_epoch=0)
    manager.flush_all()
    manager.checkpoint_recovery_points()
    os._exit(0)  # dies without shutdown: no marker, lock released by the kernel
    """
)


def test_a_crash_is_detected_and_the_log_recovered(
    tmp_path: pathlib.Path, clock: FakeClock, open_calls: list[dict[str, Any]]
) -> None:
    log_dir = tmp_path / "d"
    LogManager([log_dir], LogConfig(), clock).shutdown()  # leaves a marker behind
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", CRASHING_BROKER, str(log_dir)], check=True, env=env, cwd=REPO)
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    manager = LogManager([log_dir], LogConfig(), clock)
    assert open_calls[-1]["clean_shutdown"] is False
    assert open_calls[-1]["recovery_point"] == 4
    assert manager.get_log("orders", 0).log_end_offset == 4  # type: ignore[union-attr]
    manager.shutdown()


def test_shutdown_is_idempotent(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    manager = LogManager([tmp_path / "d"], LogConfig(), clock)
    manager.get_or_create_log("orders", 0, None)
    manager.shutdown()
    manager.shutdown()
    assert (tmp_path / "d" / CLEAN_SHUTDOWN_MARKER).exists()


# -- deletion ---------------------------------------------------------------------------------------


def test_delete_log_removes_its_files_and_checkpoint_entries(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log_dir = tmp_path / "d"
    manager = LogManager([log_dir], LogConfig(), clock)
    append(manager.get_or_create_log("orders", 0, uuid.uuid4()), 3)
    append(manager.get_or_create_log("orders", 1, None), 1)
    manager.checkpoint_recovery_points()
    manager.delete_log("orders", 0)
    manager.delete_log("orders", 0)  # already gone: no-op
    assert manager.get_log("orders", 0) is None
    assert not (log_dir / "orders-0").exists()
    assert not any(child.name.endswith("-delete") for child in log_dir.iterdir())
    assert ("orders", 0) not in OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
    manager.shutdown()
    reloaded = LogManager([log_dir], LogConfig(), clock)
    assert [(log.topic, log.partition) for log in reloaded.all_logs()] == [("orders", 1)]
    recreated = reloaded.get_or_create_log("orders", 0, uuid.uuid4())
    assert recreated.log_end_offset == 0
    reloaded.shutdown()


# -- retention --------------------------------------------------------------------------------------


def test_run_retention_deletes_old_segments_and_checkpoints_the_log_start_offset(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    log_dir = tmp_path / "d"
    config = LogConfig(segment_bytes=200, retention_ms=60_000)
    manager = LogManager([log_dir], config, clock)
    log = manager.get_or_create_log("orders", 0, None)
    append(log, 10, timestamp=NOW)
    log.update_high_watermark(log.log_end_offset)
    assert manager.run_retention() == 0
    clock.advance(120_000)
    deleted = manager.run_retention()
    assert deleted > 0
    assert log.log_start_offset > 0
    checkpointed = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
    assert checkpointed[("orders", 0)] == log.log_start_offset
    manager.shutdown()


# -- the directory lock ------------------------------------------------------------------------------


def test_a_locked_log_dir_cannot_be_opened_twice(dirs: list[pathlib.Path], clock: FakeClock) -> None:
    first = LogManager(dirs[:1], LogConfig(), clock)
    with pytest.raises(KiplingStorageError, match="in use"):
        LogManager(dirs[:1], LogConfig(), clock)
    with pytest.raises(KiplingStorageError):
        LogManager([dirs[1], dirs[0]], LogConfig(), clock)
    LogManager(dirs[1:], LogConfig(), clock).shutdown()  # the failed attempt released dirs[1]
    first.shutdown()
    LogManager(dirs[:1], LogConfig(), clock).shutdown()


def test_flush_dirty_logs_flushes_an_idle_tail(tmp_path: pathlib.Path) -> None:
    """flush.ms is honoured for a partition that receives no further appends."""
    clock = FakeClock(1_000)
    manager = LogManager([tmp_path / "d"], LogConfig(flush_ms=100), clock)
    log = manager.get_or_create_log("t", 0, None)
    for _ in range(3):
        log.append_as_leader(build_batch([Record(b"x")]), leader_epoch=0)
    assert log.recovery_point == 0
    assert manager.flush_dirty_logs() == 0  # not due yet
    clock.advance(150)
    assert manager.flush_dirty_logs() == 1
    assert log.recovery_point == log.log_end_offset == 3
    assert manager.flush_dirty_logs() == 0  # nothing left to flush
    manager.shutdown()


def test_each_start_says_whether_it_is_the_first_after_a_clean_or_an_unclean_shutdown(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    """A new log dir is a first start, never an unclean shutdown; then the marker decides."""
    from structlog.testing import capture_logs

    def events(logs: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [
            (e["log_level"], e["event"])
            for e in logs
            if e["event"].startswith(("first start", "log dir loaded"))
        ]

    def start() -> tuple[LogManager, list[tuple[str, str]]]:
        with capture_logs() as logs:
            manager = LogManager([tmp_path / "d"], LogConfig(), clock)
        return manager, events(logs)

    manager, said = start()
    assert said == [("info", "first start: new log directory")]
    manager.get_or_create_log("t", 0, None)
    manager.shutdown()

    manager, said = start()
    assert said == [("info", "log dir loaded after a clean shutdown: no recovery")]
    manager.shutdown()

    (tmp_path / "d" / CLEAN_SHUTDOWN_MARKER).unlink()  # as after a crash
    manager, said = start()
    assert said == [
        ("warning", "log dir loaded after an unclean shutdown: logs recovered from their recovery points")
    ]
    manager.shutdown()

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "meta.properties").write_text("node.id=1\n")  # written before the logs are loaded
    with capture_logs() as logs:
        LogManager([empty], LogConfig(), clock).shutdown()
    assert events(logs) == [("info", "first start: new log directory")]
