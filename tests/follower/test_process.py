"""Real follower processes (``python -m follower``), started by FollowerSupervisor, replicating over TCP.

The leader is tests/follower/network_leader.py in this test's event loop; the broker side is a real
LogManager that releases logs to the follower process and adopts them back. Every fixture stops
(and if need be kills) the processes it started, whatever the test did.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from broker.replication.followers.process import FollowerProcess
from broker.replication.followers.supervisor import FollowedPartition, fetcher_id_for
from client.replica_messages import ADD_PARTITIONS, CONFIGURE, fetcher_client_id
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.handover import LogHandover, open_handed_over_log
from storage.log import PartitionLog
from storage.segment import LogSegment
from tests.follower.network_leader import NetworkLeader
from tests.follower.process_helpers import (
    BROKER_ID,
    LEADER_ID,
    SEGMENT,
    SETTINGS,
    T0,
    Broker,
    child_env,
    log_bytes,
    until,
)


@pytest.fixture
async def leader() -> AsyncIterator[NetworkLeader]:
    leader = await NetworkLeader().start()
    yield leader
    await leader.stop()


@pytest.fixture
async def broker(tmp_path: pathlib.Path, leader: NetworkLeader) -> AsyncIterator[Broker]:
    broker = Broker(tmp_path, leader)
    try:
        await broker.supervisor.start()
        yield broker
    finally:
        await broker.close()


async def test_a_follower_process_replicates_into_its_segment_files_and_hands_the_log_back(
    broker: Broker, leader: NetworkLeader
) -> None:
    leader_log = leader.log(T0, [(0, 3), (1, 2)], leader_epoch=1)
    await broker.supervisor.add_partitions([broker.entry(T0, leader_epoch=1)])

    await until(broker.replicated(T0, leader_log))
    await until(lambda: broker.manager.external_logs()[T0].high_watermark == 5)  # offsets reached the broker
    handovers = await broker.supervisor.remove_partitions([T0])

    handover = handovers[T0]
    assert (handover.log_end_offset, handover.high_watermark, handover.clean) == (5, 5, True)
    adopted = broker.manager.adopt_log(handover, LogConfig())
    assert log_bytes(adopted) == leader_log.bytes_from(0)
    assert [(e.epoch, e.start_offset) for e in adopted.leader_epoch_cache.entries()] == [(0, 0), (1, 3)]
    assert broker.supervisor.assignments == {}


async def test_a_killed_follower_process_is_restarted_and_replication_resumes(
    broker: Broker, leader: NetworkLeader
) -> None:
    leader_log = leader.log(T0, [(0, 2)])
    await broker.supervisor.add_partitions([broker.entry(T0)])
    await until(broker.replicated(T0, leader_log))
    (pid,) = broker.supervisor.process_ids().values()
    assert pid is not None

    os.kill(pid, signal.SIGKILL)
    await until(lambda: broker.supervisor.restart_count(0) == 1)
    assert broker.supervisor.process_ids()[0] not in (None, pid)
    leader_log.append(3)
    leader_log.append(1)

    await until(broker.replicated(T0, leader_log))
    handover = (await broker.supervisor.remove_partitions([T0]))[T0]
    assert handover.log_end_offset == 6
    adopted = broker.manager.adopt_log(handover, LogConfig())
    assert log_bytes(adopted) == leader_log.bytes_from(0)


async def test_the_childrens_fetcher_metrics_reach_the_brokers_registry(
    broker: Broker, leader: NetworkLeader
) -> None:
    registry = CollectorRegistry()
    broker.supervisor.register_collector(registry)
    leader_log = leader.log(T0, [(0, 4)])
    leader_log.fixed_high_watermark = 4
    await broker.supervisor.add_partitions([broker.entry(T0)])
    await until(broker.replicated(T0, leader_log))
    client_id = fetcher_client_id(fetcher_id_for("t", 0, 1), LEADER_ID)
    lag = {"client_id": client_id, "topic": "t", "partition": "0"}

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    leader_log.append(2)  # the HW stays at 4 while the follower fetches up to 6: lag 0
    await until(lambda: (sample("kafka_server_fetcherstats_bytespersec_total", client_id=client_id) or 0) > 0)
    assert (sample("kafka_server_fetcherstats_requestspersec_total", client_id=client_id) or 0) >= 1
    assert (sample("kafka_server_fetcherstats_requestlatency_seconds_count", client_id=client_id) or 0) >= 1
    assert sample("kafka_server_replicafetchermanager_failedpartitionscount", client_id=client_id) == 0
    await until(lambda: sample("kafka_server_fetcherlagmetrics_consumerlag", **lag) == 0)
    assert "kafka_server_fetcherlagmetrics_consumerlag" in {m.name for m in registry.collect()}
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ  # only the children run in multiprocess mode

    await broker.supervisor.remove_partitions([T0])
    assert sample("kafka_server_fetcherlagmetrics_consumerlag", **lag) is None
    assert (sample("kafka_server_fetcherstats_bytespersec_total", client_id=client_id) or 0) > 0


async def test_stop_shuts_the_processes_down_and_returns_clean_handovers(
    tmp_path: pathlib.Path, leader: NetworkLeader
) -> None:
    broker = Broker(tmp_path, leader, num_fetchers=2)
    try:
        await broker.supervisor.start()
        tps = [("t", p) for p in range(4)]
        logs = {tp: leader.log(tp, [(0, tp[1] + 1)]) for tp in tps}
        await broker.supervisor.add_partitions([broker.entry(tp) for tp in tps])
        for tp in tps:
            await until(broker.replicated(tp, logs[tp]))
        for fetcher_id in (0, 1):  # each partition went to the fetcher Kafka's formula names
            snapshot = await broker.supervisor.snapshot(fetcher_id)
            assert {(p["topic"], p["partition"]) for p in snapshot["partitions"]} == {
                tp for tp in tps if fetcher_id_for(*tp, 2) == fetcher_id
            }
        await broker.supervisor.set_broker_epoch(8)
        assert (await broker.supervisor.snapshot(0))["fetchers"][0]["broker_epoch"] == 8

        handovers = await broker.supervisor.stop()

        assert {tp: h.log_end_offset for tp, h in handovers.items()} == {tp: tp[1] + 1 for tp in tps}
        assert all(h.clean for h in handovers.values())
        assert broker.supervisor.process_ids() == {0: None, 1: None}
        for handover in handovers.values():
            broker.manager.external_log_closed(handover)
        assert not (tmp_path / "metrics").exists()
    finally:
        await broker.close()


def _no_recovery(*args: object, **kwargs: object) -> int:
    raise AssertionError("a log closed cleanly needs no recovery")


async def test_a_follower_process_closes_its_logs_and_exits_when_its_broker_goes_away(
    tmp_path: pathlib.Path, leader: NetworkLeader, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader_log = leader.log(T0, [(0, 3)])
    log = PartitionLog.open(tmp_path / "logs" / "t-0", LogConfig(), FakeClock(0))
    log.close()
    handover = LogHandover("t", 0, None, str(tmp_path / "logs" / "t-0"), str(tmp_path / "logs"), 0, 0, 0, 0)
    entry = FollowedPartition(handover, LEADER_ID, leader.host, leader.port, 0, 0)
    process = await FollowerProcess.spawn(
        python_executable=sys.executable,
        broker_id=BROKER_ID,
        fetcher_id=0,
        env={**child_env(), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)},
        on_event=lambda kind, body: None,
        log_level="WARNING",
    )
    try:
        await process.request(CONFIGURE, SETTINGS.to_json(), 5)
        await process.request(ADD_PARTITIONS, {"partitions": [entry.to_message().to_json()]}, 5)
        path = tmp_path / "logs" / "t-0" / SEGMENT
        await until(lambda: path.read_bytes() == leader_log.bytes_from(0))

        await process.channel.close()  # the broker died

        assert await asyncio.wait_for(process.wait(), 8) == 0
        index = path.with_suffix(".index")
        assert index.stat().st_size < LogConfig().max_index_size  # trimmed: the log was closed
        monkeypatch.setattr(LogSegment, "recover", _no_recovery)
        final = replace(handover, log_end_offset=3, high_watermark=3, recovery_point=3)
        reopened = open_handed_over_log(final, LogConfig(), FakeClock(0))
        assert log_bytes(reopened) == leader_log.bytes_from(0)
        reopened.close()
    finally:
        process.kill()
        await process.wait()
