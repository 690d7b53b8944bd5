"""Work the coordinator leaves running after it answers: sending markers, then writing Complete*.

This package does not use asyncio (the layering keeps ``coordinator/`` free of it); the owner hands
the coordinator a :data:`Spawn` that starts a coroutine in the background and returns a handle that
can be cancelled: ``asyncio.create_task`` is the intended one.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol


class BackgroundTask(Protocol):
    def cancel(self) -> bool: ...

    def done(self) -> bool: ...


Spawn = Callable[[Coroutine[Any, Any, None]], BackgroundTask]
