"""The child side of a kipling child process (follower, cleaner): its arguments and its logging.

A child is started by its parent (client/child_process.py) with ``--broker-id``, its own id flag,
the inherited IPC socket's fd and the parent's log settings; it logs with structlog to the parent's
stderr, every line carrying both ids, so its lines read as the parent's do.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import structlog

from client.child_process import ChildRole


def parse_child_args(
    role: ChildRole, description: str, argv: Sequence[str] | None = None
) -> argparse.Namespace:
    """``--broker-id``, ``--<id_name>-id``, ``--ipc-fd``, ``--log-level``, ``--log-json``."""
    parser = argparse.ArgumentParser(prog=f"python -m {role.package}", description=description)
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument(f"--{role.id_name}-id", type=int, required=True)
    parser.add_argument("--ipc-fd", type=int, required=True, help="inherited Unix socket to the parent")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-json", action="store_true")
    return parser.parse_args(argv)


def configure_child_logging(level: str, json_output: bool, ids: Mapping[str, int]) -> None:
    """structlog to stderr (the parent's), every line carrying ``ids`` (broker id and the child's)."""
    numeric = logging.getLevelName(level.upper())

    def add_ids(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key, value in ids.items():
            event.setdefault(key, value)
        return event

    renderer: Any = (
        structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            numeric if isinstance(numeric, int) else logging.INFO
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


__all__ = ["configure_child_logging", "parse_child_args"]
