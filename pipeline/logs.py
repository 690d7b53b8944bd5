"""Log lines of the pipeline's jobs and of Spark's Python workers: on stderr, each line whole.

Spark runs the source's and the sink's code in Python worker processes the JVM forks, where nothing
configures structlog: its default prints every level, debug included, to stdout, and writes a line
in two pieces, so two workers logging at once garble each other's lines. Every worker entry point
(the data sources' factory methods, which Spark calls in its planning and streaming-source workers,
and the tasks' reads and writes) calls :func:`configure_worker_logging`, which sets the level from
:data:`LOG_LEVEL_ENV` (WARNING unless asked) and writes each line with one ``write`` (atomic on a
pipe). A job's ``--log-level`` is its own lines' level; the workers' is that variable's, which the
job passes on to the executors of a cluster (``spark.executorEnv``) and local workers inherit.
"""

from __future__ import annotations

import logging
import os

import structlog

from client.logs import configure_stderr_logging

LOG_LEVEL_ENV = "KIPLING_LOG_LEVEL"
"""The level of the Spark workers' lines (WARNING when unset)."""
WORKER_DEFAULT_LEVEL = "WARNING"


def level_number(level: str) -> int:
    """``logging``'s number for a level name; ValueError naming the name if it is not one."""
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"unknown log level {level!r} (use DEBUG, INFO, WARNING, ERROR or CRITICAL)")
    return number


def configure_logging(level: str = "INFO") -> None:
    """structlog lines on stderr (stdout is for a command's result), key=value, one write a line."""
    configure_stderr_logging(level_number(level))


def configure_worker_logging() -> None:
    """In a Spark worker: the level of :data:`LOG_LEVEL_ENV` (WARNING if unset or unknown), unless
    this process configured structlog already (a driver, or a test running the code in-process)."""
    if structlog.is_configured():
        return
    level = os.environ.get(LOG_LEVEL_ENV, WORKER_DEFAULT_LEVEL)
    try:
        level_number(level)
    except ValueError:
        level = WORKER_DEFAULT_LEVEL
    configure_logging(level)


__all__ = ["LOG_LEVEL_ENV", "configure_logging", "configure_worker_logging", "level_number"]
