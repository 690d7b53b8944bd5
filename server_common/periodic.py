"""Housekeeping that runs every N milliseconds on the event loop (Kafka's KafkaScheduler).

For retention, checkpoints and time-based flushes only; nothing on the request path polls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

log = structlog.get_logger("kipling.periodic")


class PeriodicTask:
    """Calls ``fn`` every ``interval_ms``; an exception is logged and the schedule goes on."""

    def __init__(self, name: str, interval_ms: int, fn: Callable[[], object]) -> None:
        self.name = name
        self._interval_s = interval_ms / 1000
        self._fn = fn
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._handle = asyncio.get_running_loop().call_later(self._interval_s, self._run)

    def _run(self) -> None:
        try:
            self._fn()
        except Exception:
            log.exception("periodic task failed", task=self.name)
        self.start()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
