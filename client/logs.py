"""structlog on stderr, one whole line per write: how kipling's tools and pipeline jobs log.

stdout carries a command's output (records, topic lists, a job's results), so log lines go to
stderr; each is written with one ``write`` so that processes sharing the stream (Spark's workers)
never interleave halves of lines.
"""

from __future__ import annotations

import sys

import structlog


class StderrLogger:
    """A structlog logger that looks ``sys.stderr`` up at every write.

    Binding the stream at configuration time (``PrintLoggerFactory(file=sys.stderr)``) breaks when the
    tools run in-process under a test runner that swaps stderr per test and closes the old one.
    """

    def msg(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


def configure_stderr_logging(level: int) -> None:
    """Lines at ``level`` and above on stderr, key=value with an ISO timestamp, whatever was
    configured before."""
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *args: StderrLogger(),
        cache_logger_on_first_use=False,
    )


__all__ = ["StderrLogger", "configure_stderr_logging"]
