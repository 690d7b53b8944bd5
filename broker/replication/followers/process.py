"""One follower process as its broker sees it: the child, and the IPC channel to it.

The child gets one end of a Unix socketpair through ``pass_fds`` and runs ``python -m follower``
in its own session, so a Ctrl-C aimed at the broker reaches only the broker, which then shuts its
followers down in order (their logs flushed and closed). The child's stderr is the broker's, so
its structured log lines land with the broker's.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
from collections.abc import Mapping
from typing import Any

import structlog

from client.replica_ipc import EventHandler, IpcChannel, JsonObject

_log = structlog.get_logger(__name__)


class FollowerProcess:
    """A running follower process; create with :meth:`spawn`."""

    def __init__(self, fetcher_id: int, process: asyncio.subprocess.Process, channel: IpcChannel) -> None:
        self.fetcher_id = fetcher_id
        self._process = process
        self.channel = channel

    @classmethod
    async def spawn(
        cls,
        *,
        python_executable: str,
        broker_id: int,
        fetcher_id: int,
        env: Mapping[str, str],
        on_event: EventHandler,
        log_level: str = "INFO",
        log_json: bool = False,
    ) -> FollowerProcess:
        """Start ``python -m follower`` with one end of a fresh socketpair and open the channel."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        args = [
            "-m",
            "follower",
            "--broker-id",
            str(broker_id),
            "--fetcher-id",
            str(fetcher_id),
            "--ipc-fd",
            str(child.fileno()),
            "--log-level",
            log_level,
        ]
        if log_json:
            args.append("--log-json")
        try:
            process = await asyncio.create_subprocess_exec(
                python_executable,
                *args,
                pass_fds=(child.fileno(),),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()  # the child holds its own copy; ours would hide its exit from the channel
        try:
            channel = await IpcChannel.over_socket(parent, name=f"broker-{broker_id}-fetcher-{fetcher_id}")
        except BaseException:
            parent.close()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        channel.start(on_event=on_event)
        _log.info("follower process started", fetcher_id=fetcher_id, pid=process.pid)
        return cls(fetcher_id, process, channel)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def request(
        self, message_type: str, body: Mapping[str, Any] | None = None, timeout_s: float | None = None
    ) -> JsonObject:
        return await self.channel.request(message_type, body, timeout_s)

    async def wait(self) -> int:
        """Wait for the process to exit; its exit code (negative: killed by that signal)."""
        return await self._process.wait()

    async def stop(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the process to exit, then SIGKILL it; its exit code."""
        try:
            async with asyncio.timeout(timeout_s):
                code = await asyncio.shield(self._process.wait())
        except TimeoutError:
            _log.error("follower process did not exit; killing it", fetcher_id=self.fetcher_id, pid=self.pid)
            self.kill()
            code = await self._process.wait()
        await self.channel.close()
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()


__all__ = ["FollowerProcess"]
