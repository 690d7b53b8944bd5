"""A real follower process tells its broker how far consumers may read the log it follows (KIP-392):
the broker's FollowedReplicas gets every high watermark move, reads the process's files up to it,
and is asked to fence before the process truncates below it (an unclean leader change)."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from broker.replication.followers.followed_replicas import FollowedReplicas
from broker.replication.followers.supervisor import FollowerSupervisor
from metadata.topics import PartitionState
from protocol.error_codes import ErrorCode
from protocol.records import iter_batches
from protocol.sentinels import IsolationLevel
from tests.follower.network_leader import NetworkLeader
from tests.follower.process_helpers import BROKER_ID, LEADER_ID, SETTINGS, T0, Broker, child_env, until

pytestmark = pytest.mark.timeout(60)


class ReadingBroker(Broker):
    """The test broker, with the consumer read side of the partitions it follows."""

    def __init__(self, tmp_path: pathlib.Path, leader: NetworkLeader) -> None:
        super().__init__(tmp_path, leader)
        self.leader_epoch = 1
        self.fences: list[tuple[str, int, int]] = []
        self.followed = FollowedReplicas(BROKER_ID, self._state, lambda name: None)
        fence = self.followed.fence

        def recording_fence(topic: str, index: int, offset: int) -> None:
            self.fences.append((topic, index, offset))
            fence(topic, index, offset)

        self.followed.fence = recording_fence  # type: ignore[method-assign]
        self.supervisor = FollowerSupervisor(
            BROKER_ID,
            1,
            SETTINGS,
            on_offsets=self.manager.update_external_offsets,
            metrics_dir=tmp_path / "metrics",
            env=child_env(),
            log_level="WARNING",
            restart_backoff_ms=50,
            request_timeout_ms=10_000,
            shutdown_timeout_ms=5_000,
            read_replicas=self.followed,
        )

    def _state(self, topic: str, index: int) -> PartitionState:
        return PartitionState(
            index, LEADER_ID, self.leader_epoch, self.leader_epoch, [LEADER_ID, BROKER_ID], []
        )

    def consumer_read(self, offset: int) -> tuple[ErrorCode, int, list[int]]:
        replica = self.followed.get(*T0)
        assert replica is not None
        read = replica.read(
            offset,
            1 << 20,
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            min_one_batch=True,
            current_leader_epoch=-1,
            last_fetched_epoch=-1,
        )
        data = read.slice if isinstance(read.slice, bytes) else b""
        return read.error_code, read.high_watermark, [h.last_offset for _, h in iter_batches(data)]


@pytest.fixture
async def leader() -> AsyncIterator[NetworkLeader]:
    leader = await NetworkLeader().start()
    yield leader
    await leader.stop()


@pytest.fixture
async def broker(tmp_path: pathlib.Path, leader: NetworkLeader) -> AsyncIterator[ReadingBroker]:
    broker = ReadingBroker(tmp_path, leader)
    try:
        await broker.supervisor.start()
        yield broker
    finally:
        await broker.close()


def high_watermark(broker: ReadingBroker) -> int:
    replica = broker.followed.get(*T0)
    return -1 if replica is None else replica.high_watermark


async def test_the_broker_reads_what_the_process_announces_and_is_fenced_before_a_cut(
    broker: ReadingBroker, leader: NetworkLeader
) -> None:
    leader_log = leader.log(T0, [(0, 3), (1, 2)], leader_epoch=1)
    await broker.supervisor.add_partitions([broker.entry(T0, leader_epoch=1)])
    assert broker.followed.get(*T0) is not None  # readable once the process announces (before its reply)

    await until(lambda: high_watermark(broker) == 5)
    assert broker.consumer_read(0) == (ErrorCode.NONE, 5, [2, 4])
    leader_log.append(2)
    await until(lambda: high_watermark(broker) == 7)  # pushed after the round, not the periodic report
    assert broker.consumer_read(5) == (ErrorCode.NONE, 7, [6])
    assert broker.fences == []

    # an unclean leader change: the new leader lost offsets 3..6, which the follower had committed
    leader_log.truncate_to(3)
    leader_log.become_leader(2)
    leader_log.append(3, epoch=2)
    broker.leader_epoch = 2
    entry = broker.supervisor.assignments[T0]
    await broker.supervisor.add_partitions([replace(entry, leader_epoch=2, partition_epoch=2)])

    await until(lambda: bool(broker.fences))
    assert broker.fences[0] == ("t", 0, 3)
    await until(lambda: high_watermark(broker) == 6)
    error, hw, offsets = broker.consumer_read(3)
    assert (error, hw, offsets) == (ErrorCode.NONE, 6, [5])
    with_new = broker.followed.get(*T0)
    assert with_new is not None and with_new.log_end_offset == 6

    await broker.supervisor.remove_partitions([T0])
    assert broker.followed.get(*T0) is None  # nothing reads a log being handed back
