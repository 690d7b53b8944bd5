"""Entry point of a cleaner process: ``python -m cleaner --broker-id N --cleaner-id K --ipc-fd FD``.

Started by the owner of the logs it cleans (cleaner/process.py: the broker for the logs it leads, a
follower process for those it follows), never by hand. The owner passes one end of a Unix socketpair
as ``FD``; settings and tasks arrive over it. The process ends on SIGTERM or when the IPC socket
closes because its owner went away. It runs in its own session so that a Ctrl-C meant
for the broker does not reach it; whatever it leaves half-written (``.cleaned`` files) is removed
by the log loader (storage/cleaner/recovery.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from collections.abc import MutableMapping, Sequence
from typing import Any

import structlog
import uvloop

from cleaner.service import CleanerService
from client.replica_ipc import IpcChannel

_log = structlog.get_logger("cleaner")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cleaner", description="kipling log cleaner process")
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--cleaner-id", type=int, required=True)
    parser.add_argument("--ipc-fd", type=int, required=True, help="inherited Unix socket to the broker")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-json", action="store_true")
    return parser.parse_args(argv)


def configure_logging(level: str, json_output: bool, broker_id: int, cleaner_id: int) -> None:
    """structlog to stderr (the broker's), every line carrying the broker and cleaner ids."""
    numeric = logging.getLevelName(level.upper())

    def add_ids(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        event.setdefault("broker_id", broker_id)
        event.setdefault("cleaner_id", cleaner_id)
        return event

    renderer: Any = (
        structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            add_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            numeric if isinstance(numeric, int) else logging.INFO
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


async def run(broker_id: int, cleaner_id: int, ipc_fd: int) -> int:
    """Serve the owner until it goes away or SIGTERM; the process exit code."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=ipc_fd)
    channel = await IpcChannel.over_socket(sock, name=f"cleaner-{broker_id}-{cleaner_id}")
    channel.start(on_request=CleanerService())
    terminated = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminated.set)
    _log.info("cleaner process started")
    waits = [asyncio.create_task(terminated.wait()), asyncio.create_task(channel.wait_closed())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in waits:
        task.cancel()
    await channel.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level, args.log_json, args.broker_id, args.cleaner_id)
    return uvloop.run(run(args.broker_id, args.cleaner_id, args.ipc_fd))


if __name__ == "__main__":
    sys.exit(main())
