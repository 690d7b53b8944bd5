"""ControllerProducerIdManager: ids from controller blocks, fetched ahead, never waited for."""

from __future__ import annotations

import asyncio

import pytest

from broker.cluster.producer_id_blocks import PREFETCH_FRACTION, ControllerProducerIdManager
from broker.handlers.base import RequestContext
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.produce.producer_ids import ProducerIdsUnavailableError
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from tests.broker.txn_support import in_memory_transaction_coordinator


class FakeController:
    """Answers AllocateProducerIds with consecutive blocks of ``size``, or with what the test queues."""

    def __init__(self, size: int = 10) -> None:
        self.size = size
        self.next_first = 0
        self.calls = 0
        self.answers: list[tuple[ErrorCode, int, int] | Exception] = []
        self.gate: asyncio.Event | None = None

    async def allocate(self) -> tuple[ErrorCode, int, int]:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        first, self.next_first = self.next_first, self.next_first + self.size
        return ErrorCode.NONE, first, self.size


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_first_call_asks_for_a_block_and_is_told_to_retry() -> None:
    controller = FakeController()
    manager = ControllerProducerIdManager(controller.allocate)
    with pytest.raises(ProducerIdsUnavailableError):
        manager.generate_producer_id()
    await settle()
    assert controller.calls == 1
    assert [manager.generate_producer_id() for _ in range(3)] == [0, 1, 2]


async def test_the_next_block_is_fetched_ahead_and_taken_without_a_gap() -> None:
    controller = FakeController(size=10)
    manager = ControllerProducerIdManager(controller.allocate)
    manager.prefetch()
    await settle()
    ids = [manager.generate_producer_id() for _ in range(int(10 * PREFETCH_FRACTION))]
    await settle()
    assert ids == list(range(9)) and controller.calls == 2  # 90 % used: the next block was asked for
    assert [manager.generate_producer_id() for _ in range(5)] == [9, 10, 11, 12, 13]
    assert controller.calls == 2


async def test_a_single_request_is_in_flight_however_many_producers_ask() -> None:
    controller = FakeController()
    controller.gate = asyncio.Event()
    manager = ControllerProducerIdManager(controller.allocate)
    for _ in range(5):
        with pytest.raises(ProducerIdsUnavailableError):
            manager.generate_producer_id()
    await settle()
    assert controller.calls == 1
    controller.gate.set()
    await settle()
    assert manager.generate_producer_id() == 0


async def test_a_refused_or_failed_request_is_retried_only_after_the_backoff() -> None:
    controller = FakeController()
    controller.answers = [(ErrorCode.STALE_BROKER_EPOCH, -1, 0), ConnectionError("controller down")]
    clock = Clock()
    manager = ControllerProducerIdManager(controller.allocate, monotonic=clock, retry_backoff_s=0.5)
    manager.prefetch()
    await settle()
    with pytest.raises(ProducerIdsUnavailableError):
        manager.generate_producer_id()
    await settle()
    assert controller.calls == 1  # within the backoff: not asked again
    clock.now += 0.5
    manager.prefetch()
    await settle()
    assert controller.calls == 2  # the connection error: backoff again
    clock.now += 0.5
    with pytest.raises(ProducerIdsUnavailableError):
        manager.generate_producer_id()
    await settle()
    assert controller.calls == 3 and manager.generate_producer_id() == 0


async def test_close_cancels_a_request_in_flight() -> None:
    controller = FakeController()
    controller.gate = asyncio.Event()
    manager = ControllerProducerIdManager(controller.allocate)
    manager.prefetch()
    await settle()
    await manager.close()
    controller.gate.set()
    await settle()
    with pytest.raises(ProducerIdsUnavailableError):
        manager.generate_producer_id()


async def test_init_producer_id_answers_coordinator_load_in_progress_while_no_block_is_at_hand() -> None:
    controller = FakeController()
    controller.gate = asyncio.Event()
    handler = InitProducerIdHandler(
        ControllerProducerIdManager(controller.allocate), in_memory_transaction_coordinator()
    )
    ctx = RequestContext(ApiKey.INIT_PRODUCER_ID, 4, 1, "c", "127.0.0.1:1", 1, 0)
    request = MessageData(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
    )
    body = await handler.handle(ctx, request)
    assert body["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    controller.gate.set()
    await settle()
    body = await handler.handle(ctx, request)
    assert (body["error_code"], body["producer_id"], body["producer_epoch"]) == (0, 0, 0)
