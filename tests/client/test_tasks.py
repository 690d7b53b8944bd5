"""client.tasks.cancel_and_wait and the tests' bounded waits keep a cancellation of the caller.

Both exist because the obvious idioms lose it on a busy machine: the console consumer ignored
Ctrl-C, and a test's clean-up waited forever for a task that had dropped its cancel.
"""

from __future__ import annotations

import asyncio

import pytest

from client.tasks import cancel_and_wait
from tests.client import waiting


async def test_cancel_and_wait_ends_the_task_and_returns_its_error() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    failing = asyncio.create_task(fails())
    await asyncio.sleep(0)
    error = await cancel_and_wait(failing)
    assert isinstance(error, ValueError)

    sleeping = asyncio.create_task(asyncio.sleep(3600))
    assert await cancel_and_wait(sleeping) is None
    assert sleeping.cancelled()
    assert await cancel_and_wait(None) is None


async def test_a_cancelled_caller_of_cancel_and_wait_stays_cancelled() -> None:
    release = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await release.wait()  # clean-up that takes a while

    slow = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    stopper = asyncio.create_task(cancel_and_wait(slow))
    await asyncio.sleep(0)
    stopper.cancel()
    await asyncio.wait([stopper], timeout=5)
    assert stopper.cancelled()  # with suppress(CancelledError): await slow, it would still wait
    release.set()
    await asyncio.wait([slow], timeout=5)
    assert slow.cancelled()


async def test_cancel_and_wait_leaves_the_calling_task_alone() -> None:
    async def stop_myself() -> str:
        await cancel_and_wait(asyncio.current_task())
        await asyncio.sleep(0)
        return "still running"

    assert await stop_myself() == "still running"


async def test_within_keeps_a_cancel_that_arrives_as_the_awaitable_completes() -> None:
    """The race asyncio.wait_for loses on Python 3.11 (CPython gh-86296): the awaited future
    completes and the waiting task is cancelled in the same loop iteration."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    waiter = asyncio.create_task(waiting.within(done, "the future", 5))
    await asyncio.sleep(0)
    done.set_result("value")
    waiter.cancel()
    await asyncio.wait([waiter], timeout=5)
    assert waiter.cancelled()


async def test_within_fails_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match="the thing"):
        await waiting.within(asyncio.sleep(3600), "the thing", 0.01)
