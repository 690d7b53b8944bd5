"""Hostile connections cannot pin a broker's memory: a size prefix alone claims nothing.

Issue 15's third fault: 20 connections that each send only a 100 MiB size prefix grew the broker
to 2 GiB, since the frame's buffer was allocated at the prefix. The decoder now grows a frame's
buffer as its bytes arrive (protocol/framing.py, GROWTH_START), so the broker stays small and
keeps serving.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from protocol.framing import DEFAULT_MAX_FRAME_SIZE, frame_header
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(120)

CONNECTIONS = 20
RSS_LIMIT_MB = 300


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_twenty_connections_sending_100_mib_prefixes_pin_no_memory(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker").start()
    sockets: list[socket.socket] = []
    try:
        assert broker.pid is not None
        before = _rss_mb(broker.pid)
        for _ in range(CONNECTIONS):
            connection = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
            connection.sendall(frame_header(DEFAULT_MAX_FRAME_SIZE) + bytes(64 * 1024))
            sockets.append(connection)
        time.sleep(1.0)  # the broker has read every prefix (and the 64 KiB after it)
        during = _rss_mb(broker.pid)
        print(
            f"broker RSS {before:.0f} MB before, {during:.0f} MB with {CONNECTIONS} 100 MiB prefixes pending"
        )
        assert during < RSS_LIMIT_MB, f"the broker holds {during:.0f} MB for {CONNECTIONS} bare size prefixes"
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
        try:
            assert consumer.topics() is not None  # it still answers
        finally:
            consumer.close()
    finally:
        for connection in sockets:
            connection.close()
        broker.stop()
