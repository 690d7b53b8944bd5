"""Muting a throttled client's connection (Kafka's ThrottledChannel and the socket server's mute).

A client over its quota gets its response at once, with the throttle time in it, and its
connection then reads no further request until that time has passed (KIP-219: clients that see the
throttle time back off themselves; the mute bounds those that do not). The dispatcher waits here
before serving a connection's next request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

PURGE_AT = 1024
"""Mutes kept before the expired ones (of connections gone meanwhile) are dropped."""


class ChannelThrottles:
    """The connections muted, each until a monotonic time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._muted_until: dict[int, float] = {}

    def mute(self, connection_id: int, throttle_ms: int) -> None:
        """Mute ``connection_id`` for ``throttle_ms`` from now (extending a longer mute, never shortening)."""
        if throttle_ms <= 0:
            return
        now = self._clock()
        if len(self._muted_until) >= PURGE_AT:  # connections that closed while muted
            self._muted_until = {c: t for c, t in self._muted_until.items() if t > now}
        until = now + throttle_ms / 1000
        self._muted_until[connection_id] = max(until, self._muted_until.get(connection_id, 0.0))

    def remaining_s(self, connection_id: int) -> float:
        until = self._muted_until.get(connection_id)
        if until is None:
            return 0.0
        left = until - self._clock()
        if left <= 0:
            del self._muted_until[connection_id]
            return 0.0
        return left

    async def wait(self, connection_id: int) -> None:
        """Return once ``connection_id`` is no longer muted (at once when it is not)."""
        left = self.remaining_s(connection_id)
        if left > 0:
            await asyncio.sleep(left)
            self._muted_until.pop(connection_id, None)

    def forget(self, connection_id: int) -> None:
        self._muted_until.pop(connection_id, None)
