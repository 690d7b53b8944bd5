"""Tasks waiting for something to happen to one key (a partition), woken by whoever makes it happen.

Waiters are plain futures kept per key, removed when they finish, so a key nobody waits for costs
nothing and a waiter that times out leaves nothing behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

__all__ = ["KeyedWaiters"]


class KeyedWaiters:
    """``await wait(key, timeout_s)`` returns when ``wake(key)`` is called or the timeout passes."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}

    def __len__(self) -> int:
        return sum(len(waiters) for waiters in self._waiters.values())

    async def wait(self, key: Hashable, timeout_s: float) -> bool:
        """True if woken, False if ``timeout_s`` passed first."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(key, set())
        waiters.add(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
            return True
        except TimeoutError:
            return False
        finally:
            waiters.discard(waiter)
            if not waiters and self._waiters.get(key) is waiters:
                del self._waiters[key]

    def wake(self, key: Hashable) -> None:
        for waiter in self._waiters.get(key, ()):
            if not waiter.done():
                waiter.set_result(None)
