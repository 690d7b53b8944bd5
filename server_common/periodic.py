"""Housekeeping that runs every N milliseconds on the event loop (Kafka's KafkaScheduler).

For retention, checkpoints and time-based flushes only; nothing on the request path polls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

log = structlog.get_logger("kipling.periodic")


class PeriodicTask:
    """Calls ``fn`` every ``interval_ms``; an exception is logged and the schedule goes on.

    ``on_late(late_ms)``, if given, is called first whenever a run comes more than ``late_after_ms``
    (default: one interval) after it was due: the process was paused or the event loop blocked, and
    work that depends on elapsed time (the controller's broker sessions) can discount the time it
    could not run.
    """

    def __init__(
        self,
        name: str,
        interval_ms: int,
        fn: Callable[[], object],
        *,
        on_late: Callable[[int], object] | None = None,
        late_after_ms: int | None = None,
    ) -> None:
        self.name = name
        self._interval_s = interval_ms / 1000
        self._fn = fn
        self._on_late = on_late
        self._late_after_s = (interval_ms if late_after_ms is None else late_after_ms) / 1000
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._due = loop.time() + self._interval_s
        self._handle = loop.call_at(self._due, self._run)

    def _run(self) -> None:
        late_s = asyncio.get_running_loop().time() - self._due
        try:
            if self._on_late is not None and late_s > self._late_after_s:
                self._on_late(int(late_s * 1000))
            self._fn()
        except Exception:
            log.exception("periodic task failed", task=self.name)
        self.start()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
