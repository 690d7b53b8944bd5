"""Entry point of a follower process: ``python -m follower --broker-id N --fetcher-id K --ipc-fd FD``.

Started by its broker (broker/replication/followers/supervisor.py), never by hand. The broker passes one end
of a Unix socketpair as ``FD``; everything else (the replica.* settings, the broker epoch, the logs to
follow) arrives over it, starting with ``configure``. This module only wires the pieces together: logging,
uvloop, the IPC channel and the :class:`~follower.service.FollowerService`.

The process ends when the broker asks (``shutdown``), on SIGTERM, or when the IPC socket closes
because the broker died; in every case the fetchers stop and the logs are flushed and closed first.
It runs in its own session so that a Ctrl-C meant for the broker does not kill it mid-write: the
broker shuts it down in order.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import Sequence

import structlog
import uvloop
from prometheus_client import CollectorRegistry

from client.child_entry import configure_child_logging, parse_child_args
from client.child_process import FOLLOWER_ROLE
from client.replica_ipc import IpcChannel
from follower.ipc import FollowerRequestHandler
from follower.metrics import FetcherMetrics
from follower.service import FollowerService

_log = structlog.get_logger("follower")


async def run(broker_id: int, fetcher_id: int, ipc_fd: int) -> int:
    """Serve the broker until it says shutdown or goes away; the process exit code."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=ipc_fd)
    channel = await IpcChannel.over_socket(sock, name=f"follower-{broker_id}-{fetcher_id}")
    service = FollowerService(
        broker_id,
        fetcher_id,
        send_event=channel.send_event,
        metrics=FetcherMetrics(CollectorRegistry()),
        request_broker=channel.request,
    )
    channel.start(on_request=FollowerRequestHandler(service))
    terminated = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, terminated.set)
    _log.info("follower process started")
    waits: list[asyncio.Task[object]] = [asyncio.create_task(e.wait()) for e in (service.stopped, terminated)]
    waits.append(asyncio.create_task(channel.wait_closed()))
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in waits:
        task.cancel()
    if not service.stopped.is_set():
        reason = "SIGTERM" if terminated.is_set() else "the broker closed the IPC channel"
        _log.warning("stopping without a shutdown request", reason=reason)
        await service.shutdown(report=not channel.closed)
    await channel.close()  # after the reply to a shutdown request went out
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_child_args(FOLLOWER_ROLE, "kipling follower process", argv)
    configure_child_logging(
        args.log_level, args.log_json, {"broker_id": args.broker_id, "fetcher_id": args.fetcher_id}
    )
    return uvloop.run(run(args.broker_id, args.fetcher_id, args.ipc_fd))


if __name__ == "__main__":
    sys.exit(main())
