"""Suite-wide bounds: every test has a timeout, and a hang fails with the stack of every asyncio task.

pytest-timeout (``timeout`` in pyproject.toml) turns a hang into a failure; its report shows the
threads' stacks, which for an asyncio test is only the event loop sitting in ``epoll``. What hangs
is a task, so the report here also walks each pending task's chain of awaits (coroutine by
coroutine, down to the future it waits on). Tests marked ``slow`` get :data:`SLOW_TIMEOUT_S` unless
they set their own ``timeout`` mark.

Tests share a worker process, so logging configuration must not leak between them: the CLI tools
and the broker's entry point configure structlog when a test runs them in-process. Each test gets
the session's configuration back afterwards, and no configuration caches loggers (a logger cached
under one test's configuration would ignore a later ``capture_logs``).
"""

from __future__ import annotations

import asyncio
import signal
import types
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_timeout
import structlog

SLOW_TIMEOUT_S = 600
"""The bound of a test marked ``slow`` (the rest have the ``timeout`` of pyproject.toml)."""


def _make_interruptible() -> None:
    """Let Ctrl-C reach this process and the ones the tests start, however the suite was started.

    A shell without job control starts a background command (``make test &`` in a script, a CI
    runner's step) with SIGINT ignored, and an ignored signal stays ignored through every fork and
    exec: each ``kipling consume`` a test interrupts would never see its Ctrl-C. A handler, unlike
    SIG_IGN, is reset to the default in a child, so installing Python's own here restores SIGINT
    for the suite and for everything it starts.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_make_interruptible()


def _never_cache_loggers() -> None:
    configure = structlog.configure

    def uncached(*args: Any, **kwargs: Any) -> None:
        kwargs["cache_logger_on_first_use"] = False
        configure(*args, **kwargs)

    structlog.configure = uncached  # type: ignore[assignment]


_never_cache_loggers()


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    """Give every test the session's structlog configuration back (see the module docstring)."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


def await_chain(task: asyncio.Task[Any]) -> list[str]:
    """``file:line in function`` for each coroutine the task is suspended in, outermost first,
    then what the innermost one awaits."""
    lines: list[str] = []
    awaited: Any = task.get_coro()
    for _ in range(100):  # a chain is never this deep; the bound only guards against a cycle
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            break
        code = frame.f_code
        lines.append(f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}')
        inner = getattr(awaited, "cr_await", None)
        if inner is None:
            inner = getattr(awaited, "gi_yieldfrom", None)
        if inner is None:
            break
        awaited = inner
    if awaited is not None and not isinstance(awaited, types.CoroutineType | types.GeneratorType):
        lines.append(f"  awaiting {awaited!r}"[:300])
    return lines


def dump_tasks(terminal: Any) -> None:
    """Every pending task of the loop running in this thread (if any), with its await chain."""
    loop = asyncio._get_running_loop()
    if loop is None:
        return
    for task in sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name()):
        terminal.sep("~", title=f"asyncio task {task.get_name()}")
        terminal.write("\n".join(await_chain(task)) + "\n")


_dump_threads = pytest_timeout.dump_stacks


def _dump_threads_and_tasks(terminal: Any) -> None:
    _dump_threads(terminal)
    dump_tasks(terminal)


pytest_timeout.dump_stacks = _dump_threads_and_tasks
