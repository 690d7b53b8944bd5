"""A broker side for tests that run real follower processes: LogManager, FollowerSupervisor, waits.

Shared by tests/follower/test_process.py and tests/broker/test_follower_supervisor.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
import sys
from collections.abc import Callable

from broker.replication.followers.supervisor import FollowedPartition, FollowerSupervisor
from client.replica_messages import FollowerSettings
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.log_manager import LogManager
from tests.follower.fake_leader import FakeLeaderLog
from tests.follower.network_leader import NetworkLeader

REPO = pathlib.Path(__file__).resolve().parents[2]
"""The children import kipling from here, installed or not."""
BROKER_ID = 1
LEADER_ID = 2
T0 = ("t", 0)
SETTINGS = FollowerSettings(
    replica_fetch_wait_max_ms=100,
    replica_fetch_backoff_ms=50,
    replica_socket_timeout_ms=5000,
    broker_epoch=7,
    offsets_report_interval_ms=100,
)
SEGMENT = "00000000000000000000.log"


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(REPO) if not path else f"{REPO}{os.pathsep}{path}"}


async def until(predicate: Callable[[], bool], timeout_s: float = 8.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def log_bytes(log: PartitionLog) -> bytes:
    result = log.read(log.log_start_offset, 1 << 30)
    return b"" if result.slice is None else result.slice.read_bytes()


class Broker:
    """The broker's side: its LogManager, the supervisor, and a leader on TCP for its partitions."""

    def __init__(
        self,
        tmp_path: pathlib.Path,
        leader: NetworkLeader,
        num_fetchers: int = 1,
        *,
        python_executable: str = sys.executable,
    ) -> None:
        self.clock = FakeClock(1_700_000_000_000)
        self.manager = LogManager([tmp_path / "logs"], LogConfig(), self.clock)
        self.leader = leader
        self.failures: list[tuple[str, int, str]] = []
        self.supervisor = FollowerSupervisor(
            BROKER_ID,
            num_fetchers,
            SETTINGS,
            on_offsets=self.manager.update_external_offsets,
            on_partition_failed=lambda topic, partition, reason: self.failures.append(
                (topic, partition, reason)
            ),
            python_executable=python_executable,
            metrics_dir=tmp_path / "metrics",
            env=child_env(),
            log_level="WARNING",
            restart_backoff_ms=50,
            request_timeout_ms=10_000,
            shutdown_timeout_ms=5_000,
        )

    def entry(self, tp: tuple[str, int], leader_epoch: int = 0) -> FollowedPartition:
        self.manager.get_or_create_log(tp[0], tp[1], None)
        return FollowedPartition(
            self.manager.release_log(*tp),
            LEADER_ID,
            self.leader.host,
            self.leader.port,
            leader_epoch,
            leader_epoch,
        )

    def segment_bytes(self, tp: tuple[str, int]) -> bytes:
        path = self.manager.log_dirs[0] / f"{tp[0]}-{tp[1]}" / SEGMENT
        return path.read_bytes() if path.exists() else b""

    def replicated(self, tp: tuple[str, int], leader_log: FakeLeaderLog) -> Callable[[], bool]:
        expected = leader_log.bytes_from(0)
        return lambda: self.segment_bytes(tp) == expected

    async def close(self) -> None:
        pids = [pid for pid in self.supervisor.process_ids().values() if pid is not None]
        try:
            await self.supervisor.stop()
        finally:
            for pid in pids:  # in case stop() itself failed
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.manager.shutdown()
