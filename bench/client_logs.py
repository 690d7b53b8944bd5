"""What the confluent-kafka clients of a cluster bench share: their logs go to a list, not stderr,
and SIGTERM/SIGHUP unwind the bench through ``finally`` so every broker it started is stopped."""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

RDKAFKA_LINES_KEPT = 1000
"""librdkafka lines kept for the results JSON (connection refused by a dead broker, ...)."""

rdkafka_lines: list[str] = []

_rdkafka_log = logging.getLogger("bench.librdkafka")
_rdkafka_log.propagate = False


class _Collect(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if len(rdkafka_lines) < RDKAFKA_LINES_KEPT:
            rdkafka_lines.append(f"{record.levelname} {record.getMessage()}")


_rdkafka_log.addHandler(_Collect())


def client_base(bootstrap: str) -> dict[str, Any]:
    """Settings every client of a bench gets: its logs go to :data:`rdkafka_lines`."""
    return {"bootstrap.servers": bootstrap, "logger": _rdkafka_log, "log.connection.close": False}


def _raise_exit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def exit_on_termination() -> None:
    """SIGTERM and SIGHUP raise SystemExit, so ``finally`` blocks stop the brokers."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_exit)
