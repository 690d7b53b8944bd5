"""The metadata quorum on real processes: three combined voters elect one active controller, and
the cluster survives the loss of any one of them, the active controller included."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from client.connection import KafkaConnection
from metadata.raft import wire
from protocol.api_keys import ApiKey
from tests.integration.cluster import Cluster, wait_until
from tests.integration.test_replication import (
    KAFKA_SESSION_DEFAULTS,
    ContinuousProducer,
    _check_acked,
    _create_topic,
    _wait_replicas_identical,
)

pytestmark = [pytest.mark.timeout(240)]

ACTIVATED = re.compile(r"\[info\s*\] active controller\s")
"""The line a node logs when its controller becomes active (broker/quorum: ActiveController)."""


def _describe(port: int) -> tuple[int, int, int] | None:
    """(leader id, epoch, high watermark) from a voter's DescribeQuorum, None if it does not lead."""
    import asyncio

    async def ask() -> tuple[int, int, int] | None:
        connection = await KafkaConnection.open("127.0.0.1", port, connect_timeout_s=2, request_timeout_s=5)
        try:
            body = wire.describe_quorum_request_body()
            response = await connection.request(ApiKey.DESCRIBE_QUORUM, 2, body)
        finally:
            connection.close()
            await connection.wait_closed()
        partition = response.topics[0].partitions[0]
        if partition.error_code:
            return None
        return int(partition.leader_id), int(partition.leader_epoch), int(partition.high_watermark)

    try:
        return asyncio.run(ask())
    except (OSError, ConnectionError, TimeoutError):
        return None
    except Exception:
        return None


def _active_controller(cluster: Cluster, alive: set[int]) -> tuple[int, int]:
    """(leader id, epoch) as the voters in ``alive`` report it; waits for one to lead."""
    found: list[tuple[int, int]] = []

    def one_leads() -> bool:
        for node in alive:
            answer = _describe(cluster.controller_ports[node])
            if answer is not None and answer[0] == node:
                found[:] = [(answer[0], answer[1])]
                return True
        return False

    wait_until(one_leads, 30, "a voter to lead the metadata quorum", interval_s=0.2)
    return found[0]


@pytest.mark.slow
def test_three_voters_elect_one_leader_that_brokers_follow(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, voters=3).start()
    try:
        leader, epoch = _active_controller(cluster, {1, 2, 3})
        others = [n for n in (1, 2, 3) if n != leader]
        for node in others:  # followers refuse DescribeQuorum: only the leader has the answer
            assert _describe(cluster.controller_ports[node]) is None
        _create_topic(cluster, [1, 2, 3])
        assert ACTIVATED.search(cluster.brokers[leader].output())
        for node in others:
            assert not ACTIVATED.search(cluster.brokers[node].output())
        print(f"leader {leader} in epoch {epoch}")
    finally:
        cluster.stop()


@pytest.mark.slow
def test_killing_the_active_controller_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """SIGKILL of the node that is the active controller and leads the partition: another voter is
    elected, the broker's session and the partition move, and acks=all writes resume with nothing
    acknowledged lost or duplicated."""
    cluster = Cluster(tmp_path, voters=3, overrides=KAFKA_SESSION_DEFAULTS).start()
    try:
        leader, epoch = _active_controller(cluster, {1, 2, 3})
        others = [n for n in (1, 2, 3) if n != leader]
        _create_topic(cluster, [leader, *others])
        process = cluster.brokers[leader].process
        assert process is not None
        with ContinuousProducer(cluster, "k") as producer:
            producer.wait_for_more(100, "before the active controller is killed")
            killed_at = time.monotonic()
            process.send_signal(signal.SIGKILL)
            new_leader, new_epoch = _active_controller(cluster, set(others))
            elected_s = time.monotonic() - killed_at
            producer.wait_for_more(20, "after the active controller was killed", timeout_s=90)
            resumed_s = time.monotonic() - killed_at
            acked = producer.stop()
        print(
            f"new active controller {new_leader} (epoch {new_epoch}) {elected_s:.1f} s after SIGKILL of "
            f"{leader}; acks=all writes resumed after {resumed_s:.1f} s"
        )
        assert new_epoch > epoch
        assert resumed_s < 30, f"writes resumed only after {resumed_s:.1f} s"
        _wait_replicas_identical(cluster, others, len(acked))
        for node in others:
            _check_acked(cluster, node, acked)
    finally:
        cluster.stop()
