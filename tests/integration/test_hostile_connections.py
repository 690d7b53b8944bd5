"""Hostile connections cannot pin a broker's memory: a size prefix alone claims nothing.

Issue 15's third fault: 20 connections that each send only a 100 MiB size prefix grew the broker
to 2 GiB, since the frame's buffer was allocated at the prefix. The decoder now grows a frame's
buffer as its bytes arrive (protocol/framing.py, GROWTH_START), so the broker stays small and
keeps serving.
"""

from __future__ import annotations

import resource
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from protocol.framing import DEFAULT_MAX_FRAME_SIZE, frame_header
from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import wait_until

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


# -- issue 15: the memory pool, connection limits and the receive timeout -------------------------

MiB = 1024 * 1024
POOL_USED = "kafka_network_socketserver_memorypoolused"
POOL_AVAILABLE = "kafka_network_socketserver_memorypoolavailable"
CLOSED = "kafka_server_socketservermetrics_connection_close_total"


def _send_some(connection: socket.socket, data: bytes) -> int:
    """Send what the socket takes without blocking (the broker may have stopped reading)."""
    connection.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            sent += connection.send(data[sent : sent + 256 * 1024])
    except BlockingIOError:
        pass
    return sent


def _closed_by_peer(connection: socket.socket, timeout_s: float) -> bool:
    """Whether the broker closes ``connection`` within ``timeout_s`` (EOF or reset)."""
    connection.setblocking(True)
    connection.settimeout(timeout_s)
    try:
        while connection.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return True


def _api_versions(connection: socket.socket, correlation_id: int) -> bool:
    """Send ApiVersions v0 on a raw socket; True if the broker answers it."""
    header = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    connection.settimeout(10)
    connection.sendall(frame_header(len(header)) + header)
    try:
        size = struct.unpack(">i", _recv_exact(connection, 4))[0]
        return bool(struct.unpack(">i", _recv_exact(connection, size)[:4])[0] == correlation_id)
    except ConnectionError:
        return False


def _recv_exact(connection: socket.socket, n: int) -> bytes:
    chunks = b""
    while len(chunks) < n:
        chunk = connection.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("closed")
        chunks += chunk
    return chunks


def _round_trip(bootstrap: str, topic: str, count: int = 20) -> None:
    """A real client produces and consumes ``count`` records."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=60_000)
    try:
        for i in range(count):
            producer.send(topic, f"record-{i}".encode())
        producer.flush(timeout=60)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=20_000
    )
    try:
        values = [record.value for record in consumer]
    finally:
        consumer.close()
    assert values[:count] == [f"record-{i}".encode() for i in range(count)]


def test_memory_pool_bounds_rss_under_many_partial_large_frames(tmp_path: Path) -> None:
    """40 connections each start a 100 MiB produce and send 8 MiB of it: without the pool the
    broker would hold 40 buffers of 8-16 MiB; with queued.max.request.bytes=16 MiB it holds about
    the pool, stops reading the rest, closes the partial frames it read at the receive timeout
    (freeing the pool), and a client is answered meanwhile."""
    broker = BrokerProcess(
        tmp_path / "broker",
        overrides=["queued.max.request.bytes=16777216", "kipling.request.receive.timeout.ms=2000"],
    ).start()
    sockets: list[socket.socket] = []
    try:
        assert broker.pid is not None
        before = _rss_mb(broker.pid)
        chunk = frame_header(DEFAULT_MAX_FRAME_SIZE) + bytes(8 * MiB)
        for _ in range(40):
            connection = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
            _send_some(connection, chunk)
            sockets.append(connection)
        assert wait_until(lambda: broker.metric(POOL_AVAILABLE) <= 0, 20)
        time.sleep(0.5)  # whatever else the broker was going to read, it has read
        during = _rss_mb(broker.pid)
        used = broker.metric(POOL_USED)
        print(f"broker RSS {before:.0f} MB before, {during:.0f} MB with 40 partial frames; pool {used:.0f} B")
        assert used <= 16 * MiB + 16 * MiB  # the pool, overdrawn by one frame's buffer at most
        assert during < before + 120, f"the broker grew from {before:.0f} to {during:.0f} MB"
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=60_000)
        try:
            assert consumer.topics() is not None
        finally:
            consumer.close()
        assert wait_until(lambda: broker.metric(CLOSED, reason="receive_timeout") >= 2, 30)
        assert _rss_mb(broker.pid) < before + 120
        for connection in sockets:
            connection.close()
        assert wait_until(lambda: broker.metric(POOL_USED) == 0, 30)
    finally:
        for connection in sockets:
            connection.close()
        broker.stop()


def test_max_connections_per_ip_closes_the_sixth_and_logs_refusals_sparingly(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides=["max.connections.per.ip=5"]).start()
    kept: list[socket.socket] = []
    try:
        kept = [socket.create_connection(("127.0.0.1", broker.port), timeout=5) for _ in range(5)]
        assert all(_api_versions(connection, i) for i, connection in enumerate(kept))
        extra = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
        assert _closed_by_peer(extra, 10)
        extra.close()
        for i, connection in enumerate(kept):  # the first five still work
            assert _api_versions(connection, 100 + i)
        for _ in range(300):  # a flood of refused connections writes a line or two, not 300
            flood = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
            _closed_by_peer(flood, 10)
            flood.close()
        assert broker.metric(CLOSED, reason="max_connections_per_ip") == 301
        lines = [line for line in broker.output().splitlines() if "connection refused: limit reached" in line]
        assert 1 <= len(lines) <= 3, lines
        for connection in kept:
            connection.close()
        kept = []
        _round_trip(broker.bootstrap, "per-ip")  # the client's own connections fit again
    finally:
        for connection in kept:
            connection.close()
        broker.stop()


class _Trickler(threading.Thread):
    """Sends one byte a second on each socket (a slowloris), noting when the broker closes each."""

    def __init__(self, sockets: list[socket.socket]) -> None:
        super().__init__(daemon=True)
        self.sockets = sockets
        self.closed_at: dict[int, float] = {}
        self.all_closed = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        for connection in self.sockets:
            connection.setblocking(False)
            connection.send(frame_header(10_000))
        while not self.stop.is_set() and len(self.closed_at) < len(self.sockets):
            for i, connection in enumerate(self.sockets):
                if i not in self.closed_at and not self._trickle(connection):
                    self.closed_at[i] = time.monotonic()
            self.stop.wait(1.0)
        self.all_closed.set()

    @staticmethod
    def _trickle(connection: socket.socket) -> bool:
        """One more byte; False once the broker has closed the connection."""
        try:
            if connection.recv(1) == b"":
                return False
        except BlockingIOError:
            pass
        except OSError:
            return False
        try:
            connection.send(b"x")
        except OSError:
            return False
        return True


def test_slowloris_connections_are_closed_while_a_client_works(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides=["kipling.request.receive.timeout.ms=2000"]).start()
    sockets: list[socket.socket] = []
    trickler: _Trickler | None = None
    try:
        sockets = [socket.create_connection(("127.0.0.1", broker.port), timeout=5) for _ in range(30)]
        started = time.monotonic()
        trickler = _Trickler(sockets)
        trickler.start()
        _round_trip(broker.bootstrap, "slowloris")
        assert trickler.all_closed.wait(30), f"{len(trickler.closed_at)} of 30 closed"
        slowest = max(trickler.closed_at.values()) - started
        print(f"30 slowloris connections closed within {slowest:.1f} s (receive timeout 2 s)")
        assert slowest < 20
        assert broker.metric(CLOSED, reason="receive_timeout") == 30
        assert "closing connection: request not received in time" in broker.output()
    finally:
        if trickler is not None:
            trickler.stop.set()
            trickler.join(5)
        for connection in sockets:
            connection.close()
        broker.stop()


def test_two_thousand_idle_connections_do_not_stop_a_client(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4096 + 2000
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))  # the broker inherits it
    broker = BrokerProcess(tmp_path / "broker").start()
    sockets: list[socket.socket] = []
    try:
        for _ in range(2000):
            sockets.append(socket.create_connection(("127.0.0.1", broker.port), timeout=10))
        assert wait_until(
            lambda: broker.metric("kafka_server_socketservermetrics_connection_count") >= 2000, 30
        )
        _round_trip(broker.bootstrap, "idle-crowd")
        assert all(_api_versions(connection, 7) for connection in sockets[::400])
    finally:
        for connection in sockets:
            connection.close()
        broker.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_idle_connections_are_closed_after_connections_max_idle_ms(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides=["connections.max.idle.ms=1000"]).start()
    try:
        connection = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
        assert _api_versions(connection, 1)
        assert _closed_by_peer(connection, 20)
        connection.close()
        assert broker.metric(CLOSED, reason="idle") >= 1
    finally:
        broker.stop()
