"""Start-up failures: one typed error that names what to fix, reported as one line.

A broker that cannot start (a log dir that is a file or cannot be written, a port in use, a log dir
that belongs to another node) is an operator's problem, not a bug: it must say which config key or
resource is wrong and exit non-zero, without a traceback. The composition root
(``broker/__main__.py``) builds and starts the broker inside one ``try``; what can fail there is
either raised as a :class:`StartupError` where the resource is known (:func:`check_log_dirs`,
:func:`bound`) or translated into one by :func:`as_startup_error`, and :func:`report` prints it.
The traceback is kept for ``--log-level debug``.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TextIO, TypeVar

import structlog

from broker.meta_properties import MetaPropertiesError
from metadata.bootstrap import BootstrapMetadataError
from metadata.controller.metadata_log import ControllerFailedError
from metadata.legacy_import import LegacyMetadataError
from server_common.config import ConfigError
from server_common.config.properties import PropertiesError
from storage.errors import StorageError

__all__ = [
    "EXIT_CANNOT_START",
    "EXIT_INVALID_CONFIG",
    "StartupError",
    "as_startup_error",
    "bound",
    "check_log_dirs",
    "report",
]

EXIT_CANNOT_START = 1
EXIT_INVALID_CONFIG = 2
LOG_DIRS = "log.dirs"
_WRITE_PROBE = ".kipling-write-probe"

T = TypeVar("T")
_log = structlog.get_logger("kipling.broker")


class StartupError(Exception):
    """The broker cannot start; ``subject`` is the config key or resource to fix."""

    def __init__(self, subject: str, problem: str, exit_code: int = EXIT_CANNOT_START) -> None:
        super().__init__(f"{subject}: {problem}")
        self.subject = subject
        self.problem = problem
        self.exit_code = exit_code


def reason(exc: OSError) -> str:
    """The system's words for an OSError ("Permission denied"), without errno or file name."""
    if isinstance(exc, socket.gaierror):
        return exc.strerror or str(exc)
    if exc.errno is not None and exc.errno in errno.errorcode:
        return os.strerror(exc.errno)
    return exc.strerror or str(exc)


# -- log dirs ----------------------------------------------------------------------------------------


def check_log_dirs(log_dirs: Sequence[Path]) -> None:
    """Create each log dir if it is missing and check that it is a writable directory.

    Runs before anything is written there, so that a wrong ``log.dirs`` is reported as such rather
    than as whatever file the broker happened to write first.
    """
    for directory in log_dirs:
        if directory.exists() and not directory.is_dir():
            raise StartupError(LOG_DIRS, f"{directory} is a file, not a directory")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StartupError(LOG_DIRS, f"{directory} cannot be created: {reason(exc)}") from exc
        probe = directory / _WRITE_PROBE
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StartupError(LOG_DIRS, f"{directory} is not writable: {reason(exc)}") from exc


# -- listeners ---------------------------------------------------------------------------------------


async def bound(subject: str, addresses: Sequence[str], start: Awaitable[T]) -> T:
    """Await ``start`` (a server binding ``addresses``); a failure to bind names the one that failed.

    ``addresses`` are what the operator wrote (``PLAINTEXT://127.0.0.1:9092``, ``127.0.0.1:9404``).
    The OSError of asyncio and uvloop quotes the address it failed on; when none of ``addresses``
    can be matched to it, all of them are named.
    """
    try:
        return await start
    except OSError as exc:
        failed = [a for a in addresses if _quoted(a) in str(exc)] or list(addresses)
        raise StartupError(subject, f"{', '.join(failed)} cannot be bound: {reason(exc)}") from exc


def _quoted(address: str) -> str:
    """``('127.0.0.1', 9092)``, as the event loops write the address they could not bind."""
    host, _, port = address.rpartition("://")[2].rpartition(":")
    return repr((host.strip("[]"), int(port))) if port.isdigit() else address


# -- everything else ---------------------------------------------------------------------------------


def as_startup_error(exc: BaseException) -> StartupError:
    """The start-up error for any exception raised while building or starting the broker."""
    if isinstance(exc, StartupError):
        return exc
    if isinstance(exc, (ConfigError, PropertiesError)):
        return StartupError("invalid configuration", str(exc), EXIT_INVALID_CONFIG)
    if isinstance(exc, MetaPropertiesError):
        return StartupError(exc.key, str(exc))
    if isinstance(exc, (StorageError, LegacyMetadataError, BootstrapMetadataError)):
        return StartupError(LOG_DIRS, str(exc))
    if isinstance(exc, ControllerFailedError):
        return StartupError("controller", f"the metadata log cannot be used: {exc}")
    if isinstance(exc, OSError):
        subject = str(exc.filename) if exc.filename else "start-up"
        return StartupError(subject, reason(exc))
    return StartupError(
        "start-up failed", f"{type(exc).__name__}: {exc} (--log-level debug shows where)".strip()
    )


def report(exc: BaseException, *, json_output: bool = False, stream: TextIO | None = None) -> int:
    """Say why the broker did not start, in one line; the exit status.

    The text form is ``error: <key or resource>: <problem>``; with ``--log-json`` it is one JSON
    log record instead, so that stderr stays parseable. The traceback goes to the debug log.
    """
    error = as_startup_error(exc)
    _log.debug("start-up failure", exc_info=exc)
    if json_output:
        _log.error("cannot start", subject=error.subject, error=error.problem)
    else:
        out = stream if stream is not None else sys.stderr
        out.write(f"error: {error}\n")
        out.flush()
    return error.exit_code
