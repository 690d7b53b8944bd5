"""BrokerServer against hostile and heavy peers, in process, with a stub dispatcher that holds
requests as long as a test wants: the memory pool pauses and resumes reading without losing a
request, one frame larger than the pool still gets through, a trickled request is closed at the
receive timeout, and a connection over the per-IP limit is closed as soon as it is made."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, cast

import pytest
import uvloop
from prometheus_client import CollectorRegistry

from broker.metrics.requests import RequestMetrics
from broker.server.connection_quotas import MAX_CONNECTIONS_PER_IP, ConnectionQuotas
from broker.server.deadlines import IDLE, RECEIVE_TIMEOUT
from broker.server.dispatcher import Reply, RequestDispatcher
from broker.server.listener import BrokerServer
from broker.server.memory_pool import MemoryPool
from protocol.framing import frame_header

pytestmark = pytest.mark.timeout(30)


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
"""Both loops: uvloop (the broker's) starts reading a new connection only after connection_made
returns, asyncio before it; a pause must hold on both."""


def on_both_loops(scenario: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[str], None]:
    """A test that runs ``scenario`` once on each of :data:`LOOPS`."""

    @pytest.mark.parametrize("loop", sorted(LOOPS))
    def test(loop: str) -> None:
        with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
            runner.run(scenario())

    test.__name__ = scenario.__name__
    test.__doc__ = scenario.__doc__
    return test


class HoldingDispatcher:
    """Answers each request with its first 4 bytes once ``release`` is set (set by default)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.release.set()
        self.received: list[bytes] = []
        self.arrived = asyncio.Event()

    async def dispatch(
        self, frame: memoryview, peer: str, connection_id: int, session: object = None
    ) -> Reply | None:
        self.received.append(bytes(frame[:4]))
        self.arrived.set()
        await self.release.wait()
        body = bytes(frame[:4])
        return Reply([frame_header(len(body)) + body], 4 + len(body))


def request(tag: int, size: int) -> bytes:
    body = struct.pack(">i", tag) + bytes(size - 4)
    return frame_header(len(body)) + body


async def answer(reader: asyncio.StreamReader) -> int:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    tag: int = struct.unpack(">i", await reader.readexactly(size))[0]
    return tag


@contextlib.asynccontextmanager
async def serving(
    dispatcher: HoldingDispatcher, **kwargs: Any
) -> AsyncIterator[tuple[CollectorRegistry, int]]:
    """A server on a loopback port; yields its metrics registry and the port."""
    registry = CollectorRegistry()
    metrics = RequestMetrics(registry)
    settings: dict[str, Any] = {"max_frame_size": 100 * 1024 * 1024, "idle_timeout_ms": 600_000}
    settings.update(kwargs)
    server = BrokerServer(cast(RequestDispatcher, dispatcher), [("127.0.0.1", 0)], metrics, **settings)
    (_, port), *_ = await server.start()
    try:
        yield registry, port
    finally:
        await server.stop(grace_s=1.0)


def closes(registry: CollectorRegistry, reason: str) -> float:
    """Connections the server closed for ``reason`` (the connection-close counter)."""
    name = "kafka_server_socketservermetrics_connection_close_total"
    return registry.get_sample_value(name, {"reason": reason}) or 0.0


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


@on_both_loops
async def test_an_exhausted_pool_holds_reading_and_loses_no_request() -> None:
    dispatcher = HoldingDispatcher()
    dispatcher.release.clear()
    pool = MemoryPool(100_000)
    async with serving(dispatcher, pool=pool) as (_, port):
        (ra, wa), (rb, wb), (rc, wc) = [await connect(port) for _ in range(3)]
        wa.write(request(1, 60_000))
        wb.write(request(2, 60_000))
        while pool.used < 120_000:  # both received and held by the dispatcher
            await asyncio.sleep(0.01)
        assert pool.blocked
        wc.write(request(3, 100))
        await asyncio.sleep(0.3)
        assert sorted(dispatcher.received) == [struct.pack(">i", 1), struct.pack(">i", 2)]
        dispatcher.release.set()  # answered: the pool empties and the third is read
        assert await asyncio.wait_for(answer(rc), 10) == 3
        assert await answer(ra) == 1 and await answer(rb) == 2
        assert pool.used == 0 and not pool.blocked
        for writer in (wa, wb, wc):
            writer.close()


@on_both_loops
async def test_a_frame_larger_than_the_pool_gets_through() -> None:
    dispatcher = HoldingDispatcher()
    pool = MemoryPool(1000)
    async with serving(dispatcher, pool=pool) as (_, port):
        reader, writer = await connect(port)
        writer.write(request(7, 5 * 1024 * 1024))
        assert await asyncio.wait_for(answer(reader), 10) == 7
        writer.write(request(8, 10))  # and the pool is usable afterwards
        assert await asyncio.wait_for(answer(reader), 10) == 8
        assert pool.used == 0
        writer.close()


@on_both_loops
async def test_a_trickled_request_is_closed_at_the_receive_timeout() -> None:
    dispatcher = HoldingDispatcher()
    async with serving(dispatcher, receive_timeout_ms=300) as (registry, port):
        slow_reader, slow = await connect(port)
        fast_reader, fast = await connect(port)
        slow.write(frame_header(1000))
        closed = asyncio.ensure_future(slow_reader.read())
        for tag in range(10):  # one byte every 100 ms: never idle, never done
            if closed.done():
                break
            slow.write(b"x")
            fast.write(request(tag, 50))
            assert await asyncio.wait_for(answer(fast_reader), 5) == tag
            await asyncio.sleep(0.1)
        assert await asyncio.wait_for(closed, 5) == b""
        assert tag < 9  # closed well before the trickle ended
        assert closes(registry, RECEIVE_TIMEOUT) == 1
        fast.write(request(99, 50))
        assert await asyncio.wait_for(answer(fast_reader), 5) == 99
        slow.close()
        fast.close()


@on_both_loops
async def test_the_connection_over_the_per_ip_limit_is_closed_at_once() -> None:
    dispatcher = HoldingDispatcher()
    quotas = ConnectionQuotas(max_connections=100, max_connections_per_ip=2, per_ip_overrides={})
    async with serving(dispatcher, quotas=quotas, listener="PLAINTEXT") as (registry, port):
        kept = [await connect(port) for _ in range(2)]
        reader, writer = await connect(port)
        assert await asyncio.wait_for(reader.read(), 5) == b""
        for tag, (r, w) in enumerate(kept):
            w.write(request(tag, 10))
            assert await asyncio.wait_for(answer(r), 5) == tag
        assert closes(registry, MAX_CONNECTIONS_PER_IP) == 1
        assert quotas.total == 2
        kept[0][1].close()
        while quotas.total != 1:
            await asyncio.sleep(0.01)
        again_reader, again = await connect(port)  # a slot is free again
        again.write(request(5, 10))
        assert await asyncio.wait_for(answer(again_reader), 5) == 5
        for _, w in kept[1:]:
            w.close()
        again.close()
        writer.close()


@on_both_loops
async def test_a_connection_made_while_the_pool_is_exhausted_waits_too() -> None:
    dispatcher = HoldingDispatcher()
    dispatcher.release.clear()
    pool = MemoryPool(1000)
    async with serving(dispatcher, pool=pool) as (_, port):
        first_reader, first = await connect(port)
        first.write(request(1, 5000))  # larger than the pool: through on the overdraft, then held
        while pool.used < 5000:
            await asyncio.sleep(0.01)
        assert pool.blocked
        late_reader, late = await connect(port)
        late.write(request(2, 10))
        await asyncio.sleep(0.3)
        assert dispatcher.received == [struct.pack(">i", 1)]
        assert pool.used <= 5001  # the late connection read one byte at most
        dispatcher.release.set()
        assert await asyncio.wait_for(answer(late_reader), 5) == 2
        assert await asyncio.wait_for(answer(first_reader), 5) == 1
        first.close()
        late.close()


@on_both_loops
async def test_partial_requests_filling_the_pool_are_closed_on_time_and_free_it() -> None:
    dispatcher = HoldingDispatcher()
    pool = MemoryPool(100_000)
    async with serving(dispatcher, pool=pool, receive_timeout_ms=500) as (registry, port):
        hostile = [await connect(port) for _ in range(3)]
        for _, writer in hostile:
            writer.write(frame_header(10 * 1024 * 1024) + bytes(60_000))  # never finished
        while not pool.blocked:
            await asyncio.sleep(0.01)
        reader, writer = await connect(port)
        writer.write(request(1, 10))
        assert await asyncio.wait_for(answer(reader), 10) == 1
        for hostile_reader, _ in hostile:
            assert await asyncio.wait_for(hostile_reader.read(), 5) == b""
        assert closes(registry, RECEIVE_TIMEOUT) == 3
        assert pool.used == 0
        writer.close()
        for _, hostile_writer in hostile:
            hostile_writer.close()


@on_both_loops
async def test_large_produces_at_loopback_speed_never_meet_the_receive_timeout() -> None:
    dispatcher = HoldingDispatcher()
    async with serving(dispatcher, receive_timeout_ms=1000, pool=MemoryPool(100 * 1024 * 1024)) as (
        registry,
        port,
    ):
        reader, writer = await connect(port)
        for tag in range(8):  # pipelined, 10 MiB each
            writer.write(request(tag, 10 * 1024 * 1024))
        assert [await asyncio.wait_for(answer(reader), 20) for _ in range(8)] == list(range(8))
        assert closes(registry, RECEIVE_TIMEOUT) == 0
        writer.close()


class BigAnswers(HoldingDispatcher):
    """Answers requests tagged below 99 with 8 MiB: a peer that does not read them stalls the writes."""

    async def dispatch(
        self, frame: memoryview, peer: str, connection_id: int, session: object = None
    ) -> Reply | None:
        small = await super().dispatch(frame, peer, connection_id)
        if struct.unpack_from(">i", frame)[0] >= 99:
            return small
        body = bytes(8 * 1024 * 1024)
        return Reply([frame_header(len(body)) + body], 4 + len(body))


@on_both_loops
async def test_a_peer_that_stops_reading_its_answers_is_closed_as_idle_and_frees_the_pool() -> None:
    """Pipelined requests whose answers are never read: the writes stall, the read-ahead bound
    pauses reading, and the requests queued behind hold the pool. The idle clock runs from the
    stall (as in Kafka, a send that never completes leaves the channel idle), so the connection is
    aborted, its pool share returns, and another client is served."""
    dispatcher = BigAnswers()
    pool = MemoryPool(1_000_000)
    async with serving(dispatcher, pool=pool, idle_timeout_ms=500) as (registry, port):
        _never_read, stalled = await connect(port)  # its StreamReader stops reading at 128 KiB
        for tag in range(40):
            stalled.write(request(tag, 60_000))
        while not closes(registry, IDLE):
            await asyncio.sleep(0.05)
        assert pool.used == 0
        reader, writer = await connect(port)
        writer.write(request(99, 10))
        assert await asyncio.wait_for(answer(reader), 10) == 99
        writer.close()
        stalled.close()
