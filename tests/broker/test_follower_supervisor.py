"""FollowerSupervisor: Kafka's fetcher id, the assignment table, failures reported by a real child."""

from __future__ import annotations

import asyncio
import ctypes
import json
import pathlib
import random
import string
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.followers.process import FollowerProcess
from broker.followers.settings import follower_settings
from broker.followers.supervisor import (
    FollowedPartition,
    FollowerSupervisor,
    fetcher_id_for,
)
from client.replica_messages import REMOVE_PARTITIONS, FollowerSettings, PartitionAssignment
from server_common.config.broker_config import BrokerConfig
from server_common.java_hash import java_string_hash
from storage.checkpoint import CLEAN_SHUTDOWN_MARKER
from storage.config import LogConfig
from storage.handover import LogHandover
from tests.follower.network_leader import NetworkLeader
from tests.follower.process_helpers import T0, Broker, until

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


async def test_start_fails_cleanly_when_the_child_cannot_run(tmp_path: pathlib.Path) -> None:
    supervisor = FollowerSupervisor(
        1, 1, FollowerSettings(), python_executable=str(tmp_path / "no-python"), metrics_dir=tmp_path / "m"
    )
    with pytest.raises(OSError):
        await supervisor.start()
    assert supervisor.process_ids() == {0: None}
    assert not (tmp_path / "m").exists()


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
        await asyncio.wait_for(sent.wait(), 30)
        removal.cancel()
        with pytest.raises(asyncio.CancelledError):
            await removal

        handovers = await asyncio.wait_for(broker.supervisor.stop(), 60)
        assert handovers[T0].clean and handovers[T0].log_end_offset == 3
        for handover in handovers.values():
            broker.manager.external_log_closed(handover)
        broker.manager.shutdown()
        assert (tmp_path / "logs" / CLEAN_SHUTDOWN_MARKER).exists()
    finally:
        await broker.close()
