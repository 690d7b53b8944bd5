"""FollowerSupervisor: Kafka's fetcher id, the assignment table, lazy launches, a real child's failures."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import pathlib
import random
import signal
import string
import struct
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.replication.followers.process import FollowerProcess
from broker.replication.followers.settings import follower_settings
from broker.replication.followers.supervisor import (
    FollowedPartition,
    FollowerSupervisor,
    fetcher_id_for,
)
from client.replica_ipc import IpcError
from client.replica_messages import CONFIGURE, REMOVE_PARTITIONS, FollowerSettings, PartitionAssignment
from server_common.config.broker_config import BrokerConfig
from server_common.java_hash import java_string_hash
from storage.checkpoint import CLEAN_SHUTDOWN_MARKER
from storage.config import LogConfig
from storage.handover import LogHandover
from tests.follower.network_leader import NetworkLeader
from tests.follower.process_helpers import T0, Broker, until

PROCESS_TIMEOUT_S = 60.0
"""Bound on waits that include starting a Python child (slow on a loaded machine, never a budget)."""

# -- fetcher ids -----------------------------------------------------------------------------------------


def reference_hash(text: str) -> int:
    """Java's String.hashCode written the slow, obvious way with a real 32-bit int."""
    data = text.encode("utf-16-be")
    h = ctypes.c_int32(0)
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = ctypes.c_int32(h.value * 31 + unit)
    return h.value


def reference_fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    value = ctypes.c_int32(31 * reference_hash(topic) + partition).value
    kafka_abs = 0 if value == -(2**31) else abs(value)  # Utils.abs
    return kafka_abs % num_fetchers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
        ("__consumer_offsets", reference_hash("__consumer_offsets")),
        ("é", 233),
        ("\U0001f600", 31 * 0xD83D + 0xDE00),  # a surrogate pair counts as two code units
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected == reference_hash(text)


def test_fetcher_id_by_hand() -> None:
    assert fetcher_id_for("abc", 1, 4) == (31 * 96354 + 1) % 4 == 3
    assert fetcher_id_for("hello", 0, 5) == abs(ctypes.c_int32(31 * 99162322).value) % 5
    # 31 * Integer.MIN_VALUE overflows back to MIN_VALUE, and Utils.abs(MIN_VALUE) is 0 (not 2^31 % 3 = 2).
    assert fetcher_id_for("polygenelubricants", 0, 3) == 0
    assert fetcher_id_for("anything", 7, 1) == 0
    with pytest.raises(ValueError):
        fetcher_id_for("t", 0, 0)


def test_fetcher_id_matches_the_reference_and_is_stable() -> None:
    rng = random.Random(42)
    alphabet = string.ascii_letters + string.digits + "._-"
    for _ in range(500):
        topic = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        partition = rng.randrange(0, 10_000)
        num = rng.randint(1, 16)
        assert fetcher_id_for(topic, partition, num) == reference_fetcher_id(topic, partition, num)
        assert fetcher_id_for(topic, partition, num) == fetcher_id_for(topic, partition, num)
    assert {fetcher_id_for("orders", p, 4) for p in range(100)} == {0, 1, 2, 3}


# -- the table without processes --------------------------------------------------------------------------


def handover(tp: tuple[str, int], tmp_path: pathlib.Path) -> LogHandover:
    return LogHandover(tp[0], tp[1], None, str(tmp_path / f"{tp[0]}-{tp[1]}"), str(tmp_path), 5, 4, 5, 0)


def test_an_entry_becomes_an_add_partitions_message(tmp_path: pathlib.Path) -> None:
    entry = FollowedPartition(handover(("t", 1), tmp_path), 2, "h", 9092, 3, 4, LogConfig(segment_bytes=4096))
    message = PartitionAssignment.from_json(json.loads(json.dumps(entry.to_message().to_json())))
    assert LogHandover.from_json(message.handover) == entry.handover
    assert LogConfig.from_properties(message.log_config) == LogConfig(segment_bytes=4096)
    assert (message.leader_id, message.leader_host, message.leader_port) == (2, "h", 9092)
    assert (message.leader_epoch, message.partition_epoch) == (3, 4)
    assert FollowedPartition(entry.handover, 2, "h", 1, 0, 0).to_message().log_config == {}


async def test_while_a_process_is_down_the_table_answers(tmp_path: pathlib.Path) -> None:
    supervisor = FollowerSupervisor(1, 2, FollowerSettings(), metrics_dir=tmp_path / "m")
    entries = [FollowedPartition(handover(("t", p), tmp_path), 2, "h", 1, 0, 0) for p in range(3)]
    await supervisor.add_partitions(entries)  # not started: nothing to send to
    assert set(supervisor.assignments) == {("t", 0), ("t", 1), ("t", 2)}

    moved = FollowedPartition(handover(("t", 0), tmp_path), 3, "h2", 2, 1, 1)
    await supervisor.add_partitions([moved])
    assert supervisor.assignments[("t", 0)].leader_id == 3

    removed = await supervisor.remove_partitions([("t", 0), ("t", 9)])
    assert removed == {("t", 0): entries[0].handover}  # nobody opened it: still the clean handover
    with pytest.raises(ValueError):
        FollowerSupervisor(1, 0, FollowerSettings())


async def test_start_launches_nothing_and_stop_without_a_process_returns_nothing(
    tmp_path: pathlib.Path,
) -> None:
    """A broker follows nothing until the metadata says so: a single node stays one process."""
    supervisor = FollowerSupervisor(
        1, 3, FollowerSettings(), python_executable=str(tmp_path / "no-python"), metrics_dir=tmp_path / "m"
    )
    await supervisor.start()  # the child could not even run: nothing tried to start it
    assert supervisor.process_ids() == {0: None, 1: None, 2: None}
    assert (tmp_path / "m").is_dir()
    registry = CollectorRegistry()
    supervisor.register_collector(registry)
    assert registry.get_sample_value("kafka_server_replicafetchermanager_failedpartitionscount") is None
    await supervisor.set_broker_epoch(4)  # recorded for a later launch; nobody to send it to now
    async with asyncio.timeout(10):  # nothing to shut down: no wait on a process
        assert await supervisor.stop() == {}
    assert supervisor.process_ids() == {0: None, 1: None, 2: None}
    assert not (tmp_path / "m").exists()


async def test_a_launch_that_fails_is_raised_by_add_partitions_and_retried_with_backoff(
    tmp_path: pathlib.Path,
) -> None:
    """The first add of a fetcher id whose process cannot start raises (the transition logs it);
    the slot's restart loop keeps trying with backoff, the table keeps the partitions, and what
    no process ever opened is handed back clean."""
    supervisor = FollowerSupervisor(
        1,
        1,
        FollowerSettings(),
        python_executable=str(tmp_path / "no-python"),
        metrics_dir=tmp_path / "m",
        restart_backoff_ms=20,
    )
    await supervisor.start()
    entries = [FollowedPartition(handover(("t", p), tmp_path), 2, "h", 1, 0, 0) for p in range(2)]
    with pytest.raises(OSError):
        await supervisor.add_partitions([entries[0]])
    assert supervisor.process_ids() == {0: None}
    assert supervisor._slots[0].supervisor_task is not None  # the restart loop retries it
    assert supervisor.assignments[("t", 0)] == entries[0]  # still the supervisor's to hand back
    await supervisor.add_partitions([entries[1]])  # recorded: the next launch sends the whole table
    assert supervisor.restart_count(0) == 0  # no launch succeeded
    assert await supervisor.remove_partitions([("t", 1)]) == {("t", 1): entries[1].handover}

    async with asyncio.timeout(10):
        handovers = await supervisor.stop()
    assert handovers == {("t", 0): entries[0].handover}  # no process ever opened it: still clean
    assert supervisor.process_ids() == {0: None}
    assert not (tmp_path / "m").exists()


async def test_a_first_launch_that_failed_is_retried_until_it_runs(
    tmp_path: pathlib.Path, leader: NetworkLeader
) -> None:
    """A follower process that fails its first start (here: its interpreter exits at once, the
    first time) is started again by the slot's restart loop, and replicates."""
    flag = tmp_path / "failed-once"
    wrapper = tmp_path / "python-failing-once"
    wrapper.write_text(
        f'#!/bin/sh\nif [ ! -e {flag} ]; then touch {flag}; exit 3; fi\nexec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    broker = Broker(tmp_path, leader, python_executable=str(wrapper))  # restart backoff 50 ms
    try:
        await broker.supervisor.start()
        log = leader.log(T0, [(0, 2)])
        with pytest.raises((IpcError, OSError, TimeoutError)):
            await broker.supervisor.add_partitions([broker.entry(T0)])
        await until(lambda: broker.supervisor.process_ids()[0] is not None, PROCESS_TIMEOUT_S)
        assert broker.supervisor.restart_count(0) == 1
        await until(broker.replicated(T0, log), PROCESS_TIMEOUT_S)
    finally:
        await broker.close()


def test_settings_come_from_the_broker_config(tmp_path: pathlib.Path) -> None:
    config, _ = BrokerConfig.from_properties(
        {
            "log.dirs": str(tmp_path),
            "node.id": "1",
            "replica.fetch.wait.max.ms": "250",
            "replica.fetch.backoff.ms": "40",
            "log.segment.bytes": "65536",
            "replica.high.watermark.checkpoint.interval.ms": "1000",
            "producer.id.expiration.ms": "60000",
        }
    )
    settings = follower_settings(config, broker_epoch=12)
    assert settings.producer_id_expiration_ms == 60_000
    assert (settings.replica_fetch_wait_max_ms, settings.replica_fetch_backoff_ms) == (250, 40)
    assert settings.replica_fetch_max_bytes == config.replica_fetch_max_bytes
    assert settings.replica_socket_timeout_ms == config.replica_socket_timeout_ms
    assert settings.broker_epoch == 12
    assert LogConfig.from_properties(settings.log_config).segment_bytes == 65536
    assert settings.offsets_report_interval_ms == 1000
    assert FollowerSettings.from_json(json.loads(json.dumps(settings.to_json()))) == settings


# -- with a real follower process -------------------------------------------------------------------------


@pytest.fixture
async def leader() -> AsyncIterator[NetworkLeader]:
    leader = await NetworkLeader().start()
    yield leader
    await leader.stop()


async def test_a_partition_the_follower_gives_up_is_reported(
    tmp_path: pathlib.Path, leader: NetworkLeader
) -> None:
    broker = Broker(tmp_path, leader)
    try:
        await broker.supervisor.start()
        registry = CollectorRegistry()
        broker.supervisor.register_collector(registry)
        leader.log(("t", 0), [(0, 1)], leader_epoch=5)
        await broker.supervisor.add_partitions([broker.entry(("t", 0), leader_epoch=4)])  # a stale epoch

        await until(lambda: bool(broker.failures))
        ((topic, partition, reason),) = broker.failures
        assert (topic, partition) == ("t", 0) and "fenced" in reason
        assert ("t", 0) in broker.supervisor.failed_partitions
        await until(
            lambda: (
                registry.get_sample_value(
                    "kafka_server_replicafetchermanager_failedpartitionscount",
                    {"client_id": "ReplicaFetcherThread-0-2"},
                )
                == 1
            )
        )
        await broker.supervisor.add_partitions([broker_entry_again(broker, leader, 5)])  # new metadata
        assert ("t", 0) not in broker.supervisor.failed_partitions
        await until(lambda: broker.segment_bytes(("t", 0)) == leader.leader.logs[("t", 0)].bytes_from(0))
    finally:
        await broker.close()


def broker_entry_again(broker: Broker, leader: NetworkLeader, epoch: int) -> FollowedPartition:
    known = broker.supervisor.assignments[("t", 0)]
    return FollowedPartition(known.handover, 2, leader.host, leader.port, epoch, epoch)


async def test_a_removal_whose_caller_is_cancelled_still_hands_its_logs_over_at_stop(
    tmp_path: pathlib.Path, leader: NetworkLeader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker stopping while its metadata loader takes a partition back cancels the loader in the
    middle of ``remove_partitions``: the process closes the log anyway. That log must come back
    from stop() with the process's clean handover, or the log dir would not be marked clean."""
    sent = asyncio.Event()
    original = FollowerProcess.request

    async def request(self: FollowerProcess, message_type: str, *args: Any, **kwargs: Any) -> Any:
        if message_type == REMOVE_PARTITIONS:
            sent.set()  # the request is written before this coroutine first waits
        return await original(self, message_type, *args, **kwargs)

    monkeypatch.setattr(FollowerProcess, "request", request)
    broker = Broker(tmp_path, leader)
    try:
        await broker.supervisor.start()
        log = leader.log(T0, [(0, 3)])
        await broker.supervisor.add_partitions([broker.entry(T0)])
        await until(broker.replicated(T0, log))
        await until(lambda: not broker.supervisor.assignments[T0].handover.clean)  # offsets reported

        removal = asyncio.create_task(broker.supervisor.remove_partitions([T0]))
        async with asyncio.timeout(30):
            await sent.wait()
        removal.cancel()
        with pytest.raises(asyncio.CancelledError):
            await removal

        async with asyncio.timeout(60):
            handovers = await broker.supervisor.stop()
        assert handovers[T0].clean and handovers[T0].log_end_offset == 3
        for handover in handovers.values():
            broker.manager.external_log_closed(handover)
        broker.manager.shutdown()
        assert (tmp_path / "logs" / CLEAN_SHUTDOWN_MARKER).exists()
    finally:
        await broker.close()


# -- lazy launches ----------------------------------------------------------------------------------------


def partitions_of(fetcher_id: int, num_fetchers: int, count: int) -> list[tuple[str, int]]:
    """The first ``count`` partitions of topic "t" that Kafka's formula gives to ``fetcher_id``."""
    found = [("t", p) for p in range(1000) if fetcher_id_for("t", p, num_fetchers) == fetcher_id]
    return found[:count]


async def test_a_process_is_launched_for_exactly_the_fetcher_id_of_an_added_partition(
    tmp_path: pathlib.Path, leader: NetworkLeader
) -> None:
    broker = Broker(tmp_path, leader, num_fetchers=3)
    try:
        await broker.supervisor.start()
        assert broker.supervisor.process_ids() == {0: None, 1: None, 2: None}
        await broker.supervisor.set_broker_epoch(9)  # before the launch: recorded, then configured

        tps = partitions_of(2, 3, 2)
        logs = {tp: leader.log(tp, [(0, 2)]) for tp in tps}
        async with asyncio.timeout(PROCESS_TIMEOUT_S):  # two adds race for the first launch
            await asyncio.gather(*(broker.supervisor.add_partitions([broker.entry(tp)]) for tp in tps))
        pids = broker.supervisor.process_ids()
        assert pids[2] is not None and (pids[0], pids[1]) == (None, None)
        for tp in tps:
            await until(broker.replicated(tp, logs[tp]), PROCESS_TIMEOUT_S)
        snapshot = await broker.supervisor.snapshot(2)
        assert {(p["topic"], p["partition"]) for p in snapshot["partitions"]} == set(tps)
        assert snapshot["fetchers"][0]["broker_epoch"] == 9
        assert broker.supervisor.restart_count(2) == 0  # one launch, not one per add

        os.kill(pids[2], signal.SIGKILL)  # a launched slot is supervised: it comes back
        await until(lambda: broker.supervisor.restart_count(2) == 1, PROCESS_TIMEOUT_S)
        restarted = broker.supervisor.process_ids()
        assert restarted[2] not in (None, pids[2]) and (restarted[0], restarted[1]) == (None, None)
        logs[tps[0]].append(3)
        await until(broker.replicated(tps[0], logs[tps[0]]), PROCESS_TIMEOUT_S)

        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            handovers = await broker.supervisor.stop()
        assert {tp: h.log_end_offset for tp, h in handovers.items()} == {tps[0]: 5, tps[1]: 2}
        assert all(h.clean for h in handovers.values())
        assert broker.supervisor.process_ids() == {0: None, 1: None, 2: None}
        for handover in handovers.values():
            broker.manager.external_log_closed(handover)
    finally:
        await broker.close()


async def test_partitions_added_before_start_get_their_process_at_start(
    tmp_path: pathlib.Path, leader: NetworkLeader
) -> None:
    broker = Broker(tmp_path, leader, num_fetchers=2)
    try:
        (tp,) = partitions_of(1, 2, 1)
        log = leader.log(tp, [(0, 2)])
        await broker.supervisor.add_partitions([broker.entry(tp)])  # not started: only recorded
        assert broker.supervisor.process_ids() == {0: None, 1: None}
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            await broker.supervisor.start()
        pids = broker.supervisor.process_ids()
        assert pids[0] is None and pids[1] is not None
        await until(broker.replicated(tp, log), PROCESS_TIMEOUT_S)
    finally:
        await broker.close()


async def test_a_launch_whose_caller_is_cancelled_goes_on_and_stops_cleanly(
    tmp_path: pathlib.Path, leader: NetworkLeader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node stopping mid-transition cancels the add that launches a process: the launch is not
    cancelled with it (killing a process that may have opened its logs would hand them back
    unclean); it finishes, replicates, and stop() shuts it down with clean handovers."""
    configuring = asyncio.Event()
    release = asyncio.Event()
    launched: list[int] = []
    original = FollowerProcess.request

    async def request(self: FollowerProcess, message_type: str, *args: Any, **kwargs: Any) -> Any:
        if message_type == CONFIGURE:
            launched.append(self.pid)
            configuring.set()
            await release.wait()  # the launch is still configuring when its caller is cancelled
        return await original(self, message_type, *args, **kwargs)

    monkeypatch.setattr(FollowerProcess, "request", request)
    broker = Broker(tmp_path, leader)
    try:
        await broker.supervisor.start()
        log = leader.log(T0, [(0, 2)])
        adding = asyncio.create_task(broker.supervisor.add_partitions([broker.entry(T0)]))
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            await configuring.wait()
        adding.cancel()
        with pytest.raises(asyncio.CancelledError):
            await adding
        release.set()
        await until(lambda: broker.supervisor.process_ids()[0] == launched[0], PROCESS_TIMEOUT_S)
        assert len(launched) == 1  # one launch, not killed and redone
        await until(broker.replicated(T0, log), PROCESS_TIMEOUT_S)
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            handovers = await broker.supervisor.stop()
        assert handovers[T0].clean
    finally:
        await broker.close()
