"""Entry point of a cleaner process: ``python -m cleaner --broker-id N --cleaner-id K --ipc-fd FD``.

Started by the owner of the logs it cleans (cleaner/process.py: the broker for the logs it leads, a
follower process for those it follows), never by hand. The owner passes one end of a Unix socketpair
as ``FD``; settings and tasks arrive over it. The process ends on SIGTERM or when the IPC socket
closes because its owner went away. It runs in its own session so that a Ctrl-C meant
for the broker does not reach it; whatever it leaves half-written (``.cleaned`` files) is removed
by the log loader (storage/cleaner/recovery.py).
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import Sequence

import structlog
import uvloop

from cleaner.service import CleanerService
from client.child_entry import configure_child_logging, parse_child_args
from client.child_process import CLEANER_ROLE
from client.replica_ipc import IpcChannel

_log = structlog.get_logger("cleaner")


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
    args = parse_child_args(CLEANER_ROLE, "kipling log cleaner process", argv)
    configure_child_logging(
        args.log_level, args.log_json, {"broker_id": args.broker_id, "cleaner_id": args.cleaner_id}
    )
    return uvloop.run(run(args.broker_id, args.cleaner_id, args.ipc_fd))


if __name__ == "__main__":
    sys.exit(main())
