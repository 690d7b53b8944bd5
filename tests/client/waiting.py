"""Bounded waits for asyncio tests: a bug fails the test with what was awaited, never hangs it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], what: str, timeout_s: float) -> T:
    """``awaitable``'s result, or AssertionError naming ``what`` after ``timeout_s``.

    ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` drops a cancellation that
    arrives as the awaitable completes, and a test task cancelled that way never ends.
    """
    try:
        async with asyncio.timeout(timeout_s):
            return await awaitable
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout_s}s waiting for {what}") from None


async def eventually(
    predicate: Callable[[], bool], what: str, timeout_s: float, interval_s: float = 0.05
) -> None:
    """Return once ``predicate()`` holds; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(interval_s)
