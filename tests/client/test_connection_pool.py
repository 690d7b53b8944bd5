"""client.connection_pool.ConnectionPool against a scripted in-process broker: shared connections
are reused while open and replaced once closed or forgotten, dedicated ones are never shared, and
close() closes both kinds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from client.connection_pool import ConnectionPool
from tests.client.test_connection_unit import standard
from tests.fake_broker import FakeBroker


@pytest.fixture
async def broker() -> AsyncIterator[FakeBroker]:
    fake = await FakeBroker(standard).start()
    yield fake
    await fake.stop()


def new_pool() -> ConnectionPool:
    return ConnectionPool(client_id="pool-test", connect_timeout_s=5, request_timeout_s=5)


async def test_shared_connections_are_reused_until_they_close_or_are_forgotten(broker: FakeBroker) -> None:
    pool = new_pool()
    try:
        first = await pool.shared("127.0.0.1", broker.port)
        assert await pool.shared("127.0.0.1", broker.port) is first
        assert pool.any_open() is first
        first.close()
        second = await pool.shared("127.0.0.1", broker.port)
        assert second is not first and not second.closed
        pool.forget_address("127.0.0.1", broker.port)
        assert second.closed and pool.any_open() is None
        third = await pool.shared("127.0.0.1", broker.port)
        pool.forget(third)
        assert third.closed and pool.any_open() is None
    finally:
        await pool.close()


async def test_dedicated_connections_are_never_shared_and_close_with_the_pool(broker: FakeBroker) -> None:
    pool = new_pool()
    shared = await pool.shared("127.0.0.1", broker.port)
    one = await pool.dedicated("127.0.0.1", broker.port)
    two = await pool.dedicated("127.0.0.1", broker.port)
    assert len({id(shared), id(one), id(two)}) == 3
    assert pool.any_open() is shared  # a dedicated connection is never handed out as shared
    assert one.client_id == "pool-test"
    await pool.close()
    assert shared.closed and one.closed and two.closed
