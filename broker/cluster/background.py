"""A named coroutine that runs for the life of a component and is cancelled when it stops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from client.tasks import cancel_and_wait

_log = structlog.get_logger("kipling.background")


class BackgroundTask:
    """Starts ``run()`` as a task; :meth:`stop` cancels it and waits. A crash is logged, not lost."""

    def __init__(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.name = name
        self._run = run
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)
        self._task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            _log.error("background task died", task=self.name, exc_info=task.exception())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)  # a crash was logged when it happened (_done); stopping goes on
