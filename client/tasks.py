"""Stopping asyncio tasks without losing the caller's own cancellation.

Two idioms swallow a cancellation meant for the *caller*, and on a busy machine they do (the
console consumer ignored Ctrl-C, a test's clean-up waited forever on a task that had ignored its
cancel):

* ``with suppress(CancelledError): await task`` after ``task.cancel()``: if the caller is cancelled
  while it waits, its CancelledError is suppressed too and it carries on.
* asyncio's ``wait_for`` on Python 3.11: a cancel that arrives in the loop iteration in which the
  awaited thing completes is dropped and the result returned (CPython gh-86296, fixed in 3.12).
  kipling uses ``asyncio.timeout`` instead, which ``tests/test_architecture.py`` enforces.

:func:`cancel_and_wait` is the one way kipling stops a task it owns.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> BaseException | None:
    """Cancel ``task`` and wait until it has ended; the exception it ended with, if any.

    A cancellation of the caller while it waits propagates (the task still ends cancelled). The
    task's own exception is returned rather than raised: the caller is stopping it and decides
    whether its failure matters. The caller's own task is left alone (a task ending itself just
    returns).
    """
    if task is None or task is asyncio.current_task():
        return None
    task.cancel()
    if not task.done():
        await asyncio.wait([task])
    return None if task.cancelled() else task.exception()


__all__ = ["cancel_and_wait"]
