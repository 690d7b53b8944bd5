"""DescribeLogDirs handler: which log dirs and partitions it reports, their sizes against the files
on disk (led logs and logs a follower process owns), the topic filter, an unreadable log dir's
KAFKA_STORAGE_ERROR, and the fields of every version, through the wire codec."""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.handlers.describe_log_dirs import DescribeLogDirsHandler, segments_size
from broker.handlers.registry import HandlerRegistry
from metadata.log_topic import METADATA_TOPIC
from protocol.error_codes import ErrorCode
from protocol.records.builder import Record, build_batch
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.handover import open_handed_over_log
from storage.log_manager import LogManager
from tests.broker.test_handlers_produce import call

NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID(int=7)
SMALL_SEGMENTS = LogConfig(segment_bytes=1024)


@pytest.fixture
def dirs(tmp_path: pathlib.Path) -> list[pathlib.Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def manager(dirs: list[pathlib.Path]) -> Iterator[LogManager]:
    manager = LogManager(dirs, SMALL_SEGMENTS, FakeClock(NOW))
    yield manager
    manager.shutdown()


def fill(manager: LogManager, topic: str, partition: int, log_dir: pathlib.Path, batches: int) -> None:
    log = manager.get_or_create_log(topic, partition, TOPIC_ID, SMALL_SEGMENTS, log_dir=log_dir)
    for i in range(batches):
        log.append_as_leader(build_batch([Record(b"x" * 300, timestamp=NOW + i)]), leader_epoch=0)


def disk_size(partition_dir: pathlib.Path) -> int:
    """What Kafka calls the log's size: its segment (.log) files."""
    return sum(f.stat().st_size for f in partition_dir.glob("*.log"))


def reported(result: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


def handler(dirs: list[pathlib.Path], manager: LogManager) -> DescribeLogDirsHandler:
    h = DescribeLogDirsHandler(dirs, manager)
    HandlerRegistry([h])  # the declared range is one the codec knows
    return h


async def test_every_partition_of_every_dir_with_its_size_on_disk(
    dirs: list[pathlib.Path], manager: LogManager
) -> None:
    fill(manager, "a", 0, dirs[0], 10)  # several segments
    fill(manager, "a", 1, dirs[1], 1)
    fill(manager, "b", 0, dirs[0], 2)
    manager.get_or_create_log("empty", 0, TOPIC_ID, log_dir=dirs[1])
    response = await call(handler(dirs, manager), 4, {"topics": None})
    assert response.error_code == ErrorCode.NONE
    first, second = response.results
    assert (first.log_dir, second.log_dir) == (str(dirs[0]), str(dirs[1]))
    assert (first.error_code, second.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
    assert len(list((dirs[0] / "a-0").glob("*.log"))) > 1
    assert reported(first) == {("a", 0): disk_size(dirs[0] / "a-0"), ("b", 0): disk_size(dirs[0] / "b-0")}
    assert reported(second) == {("a", 1): disk_size(dirs[1] / "a-1"), ("empty", 0): 0}
    assert disk_size(dirs[0] / "a-0") > 3000
    for result in response.results:
        for topic in result.topics:
            for p in topic.partitions:
                assert (p.offset_lag, p.is_future_key) == (0, False)
        stats = os.statvfs(result.log_dir)
        assert result.total_bytes == stats.f_blocks * stats.f_frsize
        assert 0 < result.usable_bytes <= result.total_bytes


async def test_a_followed_partition_is_sized_from_its_files_without_opening_them(
    dirs: list[pathlib.Path], manager: LogManager
) -> None:
    fill(manager, "f", 0, dirs[0], 2)
    handover = manager.release_log("f", 0)
    # the follower process's side: it owns the log now and appends to it
    follower_log = open_handed_over_log(handover, SMALL_SEGMENTS, FakeClock(NOW))
    for i in range(6):
        batch = build_batch([Record(b"y" * 300, timestamp=NOW)], base_offset=2 + i, partition_leader_epoch=0)
        follower_log.append_as_follower(batch)
    try:
        before = manager.held_logs()
        response = await call(handler(dirs, manager), 4, {"topics": None})
        assert reported(response.results[0]) == {("f", 0): disk_size(dirs[0] / "f-0")}
        assert reported(response.results[0])[("f", 0)] == follower_log.size_in_bytes
        assert manager.is_external("f", 0) and manager.held_logs() == before
    finally:
        follower_log.close()


async def test_segments_pending_deletion_are_not_counted(tmp_path: pathlib.Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(b"a" * 100)
    (directory / "00000000000000000000.log.deleted").write_bytes(b"b" * 1000)
    (directory / "00000000000000000000.index").write_bytes(b"c" * 50)
    (directory / "00000000000000000100.log").write_bytes(b"d" * 7)
    assert segments_size(directory) == 107
    assert segments_size(tmp_path / "gone-0") is None


async def test_filters_by_the_requested_partitions(dirs: list[pathlib.Path], manager: LogManager) -> None:
    for topic, partition in (("a", 0), ("a", 1), ("b", 0), ("c", 0)):
        fill(manager, topic, partition, dirs[partition % 2], 1)
    body = {
        "topics": [
            {"topic": "a", "partitions": [1, 7]},
            {"topic": "b", "partitions": [0]},
            {"topic": "nope", "partitions": [0]},
            {"topic": "c", "partitions": []},
        ]
    }
    first, second = (await call(handler(dirs, manager), 4, body)).results
    assert [t.name for t in first.topics] == ["b"]  # a topic with nothing asked for is left out
    assert reported(first) == {("b", 0): disk_size(dirs[0] / "b-0")}
    assert reported(second) == {("a", 1): disk_size(dirs[1] / "a-1")}
    empty = (await call(handler(dirs, manager), 4, {"topics": []})).results
    assert [(r.log_dir, r.error_code, r.topics) for r in empty] == [
        (str(dirs[0]), ErrorCode.NONE, []),
        (str(dirs[1]), ErrorCode.NONE, []),
    ]


async def test_only_log_dirs_are_described_not_the_metadata_log(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, meta = tmp_path / "data", tmp_path / "meta"
    manager = LogManager([data, meta], SMALL_SEGMENTS, FakeClock(NOW), placement_dirs=[data])
    try:
        manager.get_or_create_log(METADATA_TOPIC, 0, None, log_dir=meta)
        manager.get_or_create_log(METADATA_TOPIC, 1, None, log_dir=data)  # never there; never listed
        fill(manager, "t", 0, data, 1)
        # log.dirs names the data dir twice, once relative: one result, by its absolute path
        monkeypatch.chdir(tmp_path)
        response = await call(handler([data, pathlib.Path("data")], manager), 4, {"topics": None})
    finally:
        manager.shutdown()
    [result] = response.results
    assert result.log_dir == str(data)
    assert reported(result) == {("t", 0): disk_size(data / "t-0")}


async def test_an_unreadable_log_dir_answers_kafka_storage_error(
    dirs: list[pathlib.Path], manager: LogManager
) -> None:
    fill(manager, "a", 0, dirs[0], 1)
    fill(manager, "a", 1, dirs[1], 1)
    away = dirs[1].with_name("away")
    dirs[1].rename(away)  # the disk went away
    try:
        first, gone = (await call(handler(dirs, manager), 1, {"topics": None})).results
        assert (gone.log_dir, gone.error_code, gone.topics) == (
            str(dirs[1]),
            ErrorCode.KAFKA_STORAGE_ERROR,
            [],
        )
        assert first.error_code == ErrorCode.NONE
        assert reported(first) == {("a", 0): disk_size(dirs[0] / "a-0")}
        dirs[1].write_bytes(b"")  # and something that is not a directory took its place
        bad = (await call(handler(dirs, manager), 4, {"topics": None})).results[1]
        assert (bad.error_code, bad.topics) == (ErrorCode.KAFKA_STORAGE_ERROR, [])
        assert (bad.total_bytes, bad.usable_bytes) == (-1, -1)
    finally:
        dirs[1].unlink(missing_ok=True)
        away.rename(dirs[1])  # for the manager's shutdown


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
async def test_fields_of_each_version(dirs: list[pathlib.Path], manager: LogManager, version: int) -> None:
    fill(manager, "a", 0, dirs[0], 1)
    response = await call(handler(dirs, manager), version, {"topics": [{"topic": "a", "partitions": [0]}]})
    result = response.results[0]
    assert response.throttle_time_ms == 0
    assert reported(result) == {("a", 0): disk_size(dirs[0] / "a-0")}
    assert response.error_code == ErrorCode.NONE  # v3+; the codec's default before
    if version >= 4:
        assert result.total_bytes > 0 and result.usable_bytes >= 0
    else:  # not on the wire: the declared default
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    assert result.is_cordoned is False


def test_versions_served_and_the_error_response(dirs: list[pathlib.Path], manager: LogManager) -> None:
    h = handler(dirs, manager)
    assert (h.min_version, h.max_version) == (1, 5)
    body = h.error_response(None, None, ErrorCode.UNKNOWN_SERVER_ERROR)  # type: ignore[arg-type]
    assert body == {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "results": []}
