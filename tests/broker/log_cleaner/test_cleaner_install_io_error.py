"""An I/O error in the middle of installing a cleaned round is a log dir failure, as Kafka's cleaner
reports an IOException to the LogDirFailureChannel: the owner's storage-error path takes the log
offline (the broker: the partition answers KAFKA_STORAGE_ERROR and resigns; a follower process: the
partition is given up and reported failed, as after a failed append), the log is marked uncleanable,
and the round leaves no ``.cleaned`` files. The error is injected into ``replace_segments``."""

from __future__ import annotations

import asyncio
import errno
import pathlib
from typing import Any

import pytest

from broker.log_cleaner.service import led_compacted_logs
from broker.replication.partition import Partition
from cleaner.driver import LogCleaner
from cleaner.manager import CleanableLog, LogCleanerManager
from client.replica_messages import PARTITION_FAILED
from follower.log_cleaner import followed_compacted_logs
from follower.replica_log import ReplicaLog
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import Record, build_batch
from storage.clock import FakeClock
from storage.log import PartitionLog
from tests.broker.log_cleaner.test_cleaner_driver_supervision import SETTINGS, dirty_log, real_spawn
from tests.broker.test_partition_offline import Sender, lead
from tests.follower.test_service import T0, World, until
from tests.storage.cleaner.helpers import BASE_TIME

pytestmark = pytest.mark.timeout(60)


def fail_installs(log: PartitionLog) -> list[int]:
    calls: list[int] = []

    def replace_segments(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        raise OSError(errno.EIO, "Input/output error (injected)")

    log.replace_segments = replace_segments  # type: ignore[method-assign]
    return calls


async def test_an_install_error_takes_the_log_offline_and_marks_it_uncleanable(
    tmp_path: pathlib.Path,
) -> None:
    clock = FakeClock(BASE_TIME)
    log = dirty_log(tmp_path, clock)
    segments_before = [s.base_offset for s in log.segments()]
    calls = fail_installs(log)
    failed: list[OSError] = []
    reported = asyncio.Event()

    def on_storage_error(exc: OSError) -> None:
        failed.append(exc)
        reported.set()

    manager = LogCleanerManager([tmp_path], clock)
    cleaner = LogCleaner(
        broker_id=1,
        manager=manager,
        candidates=lambda: [
            CleanableLog(
                ("t", 0),
                tmp_path,
                log,
                log.high_watermark,
                lambda: {},
                lambda: not log.closed,
                on_storage_error,
            )
        ],
        clock=clock,
        settings=SETTINGS,
        backoff_ms=20,
        spawn=real_spawn,
    )
    cleaner.start()
    try:
        async with asyncio.timeout(30):
            await reported.wait()
        await asyncio.sleep(0.2)  # a few more passes of the worker: the log is not taken again
    finally:
        await cleaner.stop()
    assert [e.errno for e in failed] == [errno.EIO] and len(calls) == 1
    assert manager.uncleanable_partitions_count(tmp_path) == 1
    assert cleaner.rounds == 0 and manager.first_dirty_offsets(tmp_path) == {}
    assert not list(log.directory.glob("*.cleaned"))
    assert [s.base_offset for s in log.segments()] == segments_before
    log.close()


def keyed_batch(n: int, timestamp: int) -> bytes:
    """Records with keys: the log is compacted, where a keyless record is refused."""
    return build_batch([Record(value=b"v%d" % i, key=b"k%d" % i, timestamp=timestamp + i) for i in range(n)])


def test_the_broker_routes_it_to_the_partitions_offline_path(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    log = PartitionLog.open(tmp_path / "t-0", dirty_log(tmp_path / "x", clock).config, clock)
    sender = Sender()
    partition = lead(log, clock, sender, (1, 2, 3))
    partition.append_records(keyed_batch(2, BASE_TIME), required_acks=1, now_ms=BASE_TIME)

    class Replicas:
        class log_manager:
            @staticmethod
            def log_dir_of(topic: str, index: int) -> pathlib.Path:
                return tmp_path

        @staticmethod
        def partitions() -> list[Partition]:
            return [partition]

        @staticmethod
        def get_partition(topic: str, index: int) -> Partition:
            return partition

    [candidate] = list(led_compacted_logs(Replicas)())  # type: ignore[arg-type]
    candidate.on_storage_error(OSError(errno.EIO, "Input/output error (injected)"))
    assert partition.is_offline and not candidate.is_current()
    assert len(sender.submitted) == 1  # the leader resigned (proposed an ISR without itself)
    with pytest.raises(KafkaError) as raised:
        partition.append_records(keyed_batch(1, BASE_TIME), required_acks=1, now_ms=BASE_TIME)
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert list(led_compacted_logs(Replicas)()) == []  # type: ignore[arg-type]
    partition.close()
    log.close()


def test_a_follower_process_builds_its_candidates_with_the_handler(tmp_path: pathlib.Path) -> None:
    errors: list[tuple[tuple[str, int], OSError]] = []
    clock = FakeClock(BASE_TIME)
    log = dirty_log(tmp_path, clock)
    replica = ReplicaLog(log, clock=clock)
    logs = {("t", 0): replica}
    [candidate] = list(followed_compacted_logs(logs, lambda tp, exc: errors.append((tp, exc)))())
    error = OSError(errno.EIO, "injected")
    candidate.on_storage_error(error)
    assert errors == [(("t", 0), error)]
    log.close()


async def test_a_follower_process_gives_the_partition_up_as_after_a_failed_append(
    tmp_path: pathlib.Path,
) -> None:
    world = World(tmp_path)
    try:
        leader = await world.leader(1)
        leader.log(T0, [(0, 2)])
        await world.service.add_partitions([world.assignment(world.release(T0), 1, 0)])
        await until(lambda: world.replica(T0)["high_watermark"] == 2)
        world.service._on_cleaner_storage_error(T0, OSError(errno.EIO, "injected"))
        assert world.replica(T0)["state"] is None  # no longer fetched; the log stays open here
        await until(lambda: any(kind == PARTITION_FAILED for kind, _ in world.events))
        [failure] = [body for kind, body in world.events if kind == PARTITION_FAILED]
        assert (failure["topic"], failure["partition"]) == T0
        assert "installing a cleaned segment failed" in failure["reason"]
        (handover,) = await world.service.remove_partitions([T0])  # handed back, to be repaired
        assert handover.topic_partition == T0
    finally:
        await world.close()
