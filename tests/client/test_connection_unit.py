"""KafkaConnection and ReconnectingConnection against a scripted in-process fake broker.

The fake lets a test decide exactly what comes back (or does not): a refused ApiVersions version, a
wrong correlation id, silence, delays. Behaviour against the real broker is in test_client_broker.py.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from client.connection import KafkaConnection, ReconnectingConnection
from client.errors import (
    ConnectError,
    ConnectionClosedError,
    ProtocolViolationError,
    RequestTimeoutError,
    UnsupportedApiVersionError,
)
from protocol.api import Request
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from tests.fake_broker import FakeBroker, Reply, Script

RANGES = [
    {"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 4},
    {"api_key": ApiKey.METADATA, "min_version": 0, "max_version": 20},
    {"api_key": ApiKey.FETCH, "min_version": 4, "max_version": 11},
    {"api_key": ApiKey.PRODUCE, "min_version": 0, "max_version": 2},
]


def api_versions_ok(request: Request) -> Reply:
    return request.api_version, {"error_code": 0, "api_keys": RANGES, "throttle_time_ms": 0}, None


def metadata_ok(request: Request, cluster_id: str = "fake") -> Reply:
    body = {"brokers": [], "cluster_id": cluster_id, "controller_id": 1, "topics": []}
    return request.api_version, body, None


@pytest.fixture
async def fake() -> AsyncIterator[Callable[[Script], Awaitable[FakeBroker]]]:
    brokers: list[FakeBroker] = []

    async def start(script: Script) -> FakeBroker:
        broker = await FakeBroker(script).start()
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        await broker.stop()


async def standard(request: Request) -> Reply:
    if request.api_key == ApiKey.API_VERSIONS:
        return api_versions_ok(request)
    return metadata_ok(request)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- handshake ------------------------------------------------------------------------------------


async def test_handshake_asks_api_versions_v3_and_keeps_the_ranges(fake: Any) -> None:
    broker = await fake(standard)
    async with await KafkaConnection.open("127.0.0.1", broker.port) as conn:
        first = broker.requests[0]
        assert (first.api_key, first.api_version) == (ApiKey.API_VERSIONS, 3)
        assert first.body.client_software_name == "kipling-client"
        assert conn.api_versions[ApiKey.FETCH].max_version == 11
        assert conn.version_for(ApiKey.FETCH) == 11
        assert conn.version_for(ApiKey.FETCH, 9) == 9
        assert conn.version_for(ApiKey.METADATA) == 12  # the codec declares up to 12
        with pytest.raises(UnsupportedApiVersionError):
            conn.version_for(ApiKey.PRODUCE)  # broker 0-2, codec 3-11
        with pytest.raises(UnsupportedApiVersionError):
            conn.version_for(ApiKey.FETCH, wanted_min=12)
        with pytest.raises(UnsupportedApiVersionError, match="does not serve"):
            conn.version_for(ApiKey.LIST_OFFSETS)


def refusing_v3(listed_max: int | None) -> Script:
    """A broker that knows ApiVersions only up to v2: it answers v3 in the v0 layout, as Kafka does."""

    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS and request.api_version >= 3:
            keys = (
                [] if listed_max is None else [{"api_key": 18, "min_version": 0, "max_version": listed_max}]
            )
            return 0, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": keys}, None
        return await standard(request)

    return script


@pytest.mark.parametrize(("listed", "retry"), [(None, 0), (2, 2), (1, 1)])
async def test_refused_api_versions_falls_back(fake: Any, listed: int | None, retry: int) -> None:
    broker = await fake(refusing_v3(listed))
    async with await KafkaConnection.open("127.0.0.1", broker.port) as conn:
        assert [r.api_version for r in broker.requests] == [3, retry]
        assert conn.version_for(ApiKey.FETCH) == 11


async def test_api_versions_error_fails_the_connect(fake: Any) -> None:
    async def script(request: Request) -> Reply:
        return request.api_version, {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": []}, None

    broker = await fake(script)
    with pytest.raises(ConnectError, match="INVALID_REQUEST"):
        await KafkaConnection.open("127.0.0.1", broker.port)


async def test_connect_refused_is_a_connect_error() -> None:
    with pytest.raises(ConnectError, match="cannot connect"):
        await KafkaConnection.open("127.0.0.1", unused_port(), connect_timeout_s=2)


async def test_silent_broker_times_out_the_connect(fake: Any) -> None:
    async def silent(request: Request) -> Reply:
        return None

    broker = await fake(silent)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ConnectError, match="handshake"):
        await KafkaConnection.open("127.0.0.1", broker.port, connect_timeout_s=0.2)
    assert loop.time() - started < 2


# -- requests -------------------------------------------------------------------------------------


async def test_pipelined_responses_match_their_requests(fake: Any) -> None:
    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        return metadata_ok(request, cluster_id=f"c{request.correlation_id}")

    broker = await fake(script)
    async with await KafkaConnection.open("127.0.0.1", broker.port) as conn:
        tasks = [asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []})) for _ in range(10)]
        await asyncio.sleep(0)
        assert conn.in_flight == 10
        responses = await asyncio.gather(*tasks)
        sent = [r.correlation_id for r in broker.requests[1:]]
        assert [r.cluster_id for r in responses] == [f"c{cid}" for cid in sent]
        assert conn.in_flight == 0


async def test_wrong_correlation_id_closes_the_connection(fake: Any) -> None:
    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        version, body, _ = metadata_ok(request)  # type: ignore[misc]
        return version, body, request.correlation_id + 100

    broker = await fake(script)
    conn = await KafkaConnection.open("127.0.0.1", broker.port)
    first = asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []}))
    second = asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []}))
    with pytest.raises(ProtocolViolationError, match="correlation id"):
        await first
    with pytest.raises(ProtocolViolationError):
        await second
    assert conn.closed
    with pytest.raises(ConnectionClosedError, match="protocol violation"):
        await conn.request(ApiKey.METADATA, 9, {"topics": []})
    await conn.wait_closed()


async def test_timeout_fails_that_request_and_closes_the_others(fake: Any) -> None:
    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        return None  # never answers

    broker = await fake(script)
    conn = await KafkaConnection.open("127.0.0.1", broker.port)
    slow = asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []}, timeout_s=0.1))
    other = asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []}, timeout_s=30))
    with pytest.raises(RequestTimeoutError, match="Metadata v9"):
        await slow
    with pytest.raises(ConnectionClosedError, match="timed out"):
        await other
    assert conn.closed
    await asyncio.wait_for(conn.wait_closed(), 5)


async def test_a_cancelled_caller_keeps_its_place_in_the_fifo(fake: Any) -> None:
    gate = asyncio.Event()

    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        if request.correlation_id == 1:
            await gate.wait()
        return metadata_ok(request, cluster_id=f"c{request.correlation_id}")

    broker = await fake(script)
    async with await KafkaConnection.open("127.0.0.1", broker.port) as conn:
        first = asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []}))
        second = asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []}))
        await asyncio.sleep(0.05)
        first.cancel()
        gate.set()
        assert (await second).cluster_id == "c2"
        assert conn.in_flight == 0 and not conn.closed


async def test_broker_closing_fails_in_flight_requests(fake: Any) -> None:
    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        raise ConnectionResetError  # the fake drops the connection

    broker = await fake(script)
    conn = await KafkaConnection.open("127.0.0.1", broker.port)
    with pytest.raises(ConnectionClosedError, match=r"closed by the broker|lost"):
        await conn.request(ApiKey.METADATA, 9, {"topics": []})
    assert conn.closed


# -- reconnecting ---------------------------------------------------------------------------------


async def test_reconnecting_connection_replaces_a_closed_connection(fake: Any) -> None:
    broker = await fake(standard)
    reconnecting = ReconnectingConnection.to("127.0.0.1", broker.port)
    first = await reconnecting.connection()
    assert (await reconnecting.request(ApiKey.METADATA, 9, {"topics": []})).cluster_id == "fake"
    first.close()
    assert reconnecting.current is None
    second = await reconnecting.connection()
    assert second is not first and not second.closed
    assert await reconnecting.version_for(ApiKey.FETCH) == 11
    await reconnecting.close()
    assert second.closed
    with pytest.raises(ConnectionClosedError):
        await reconnecting.connection()


async def test_reconnect_backoff_doubles_up_to_the_maximum_and_resets() -> None:
    now = 0.0
    sleeps: list[float] = []
    outcomes: list[bool] = [False, False, False, False, False, False, True]

    async def sleep(seconds: float) -> None:
        nonlocal now
        sleeps.append(round(seconds, 6))
        now += seconds

    class Connected:
        closed = False

    async def connect() -> KafkaConnection:
        if not outcomes.pop(0):
            raise ConnectError("refused")
        return Connected()  # type: ignore[return-value]

    reconnecting = ReconnectingConnection(
        connect, backoff_s=0.05, backoff_max_s=1.0, clock=lambda: now, sleep=sleep, jitter=lambda: 0.5
    )
    for _ in range(6):
        with pytest.raises(ConnectError):
            await reconnecting.connection()
    assert sleeps == [0.05, 0.1, 0.2, 0.4, 0.8]
    await reconnecting.connection()
    assert sleeps[-1] == 1.0  # capped
    assert reconnecting.backoff() == 0.0


async def test_closing_does_not_wait_for_a_broker_that_stopped_reading(fake: Any) -> None:
    """close() lets buffered bytes go out for a moment, then aborts: a paused broker (its socket
    buffers full) must not keep a client's shutdown waiting."""
    never = asyncio.Event()

    async def stalls(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        await never.wait()  # stops reading the connection, as a SIGSTOPped broker does
        return None

    broker = await fake(stalls)
    conn = await KafkaConnection.open("127.0.0.1", broker.port)
    pending = asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []}))
    await asyncio.sleep(0.1)
    assert conn._transport is not None
    conn._transport.write(b"\0" * 64 * 1024 * 1024)  # more than any socket buffers take
    assert conn._transport.get_write_buffer_size() > 0
    conn.close()
    async with asyncio.timeout(10):  # a bound for a bug; it takes CLOSE_GRACE_S
        await conn.wait_closed()
    assert conn.closed
    with pytest.raises(ConnectionClosedError):
        await pending
