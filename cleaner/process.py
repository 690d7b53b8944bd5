"""One cleaner process as its owner (the broker, or a follower process) sees it: the child and the IPC
channel to it.

Spawned like a follower process (broker/replication/followers/process.py): one end of a Unix
socketpair through ``pass_fds``, ``python -m cleaner`` in its own session, its stderr the broker's,
and the same IPC channel (client/replica_ipc.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
from collections.abc import Mapping
from typing import Any

import structlog

from client.replica_ipc import IpcChannel, JsonObject

_log = structlog.get_logger(__name__)


class CleanerProcess:
    """A running cleaner process; create with :meth:`spawn`."""

    def __init__(self, cleaner_id: int, process: asyncio.subprocess.Process, channel: IpcChannel) -> None:
        self.cleaner_id = cleaner_id
        self._process = process
        self.channel = channel

    @classmethod
    async def spawn(
        cls,
        *,
        python_executable: str,
        broker_id: int,
        cleaner_id: int,
        env: Mapping[str, str],
        log_level: str = "INFO",
        log_json: bool = False,
    ) -> CleanerProcess:
        """Start ``python -m cleaner`` with one end of a fresh socketpair and open the channel."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        args = [
            "-m",
            "cleaner",
            "--broker-id",
            str(broker_id),
            "--cleaner-id",
            str(cleaner_id),
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
            channel = await IpcChannel.over_socket(parent, name=f"broker-{broker_id}-cleaner-{cleaner_id}")
        except BaseException:
            parent.close()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        channel.start()
        _log.info("cleaner process started", cleaner_id=cleaner_id, pid=process.pid)
        return cls(cleaner_id, process, channel)

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

    async def stop(self, timeout_s: float) -> int:
        """SIGTERM (obeyed between rounds), then SIGKILL after ``timeout_s``: a round cut short leaves
        only ``.cleaned`` files, which the next owner's log loader removes."""
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(timeout_s):
                code = await asyncio.shield(self._process.wait())
        except TimeoutError:
            self.kill()
            code = await self._process.wait()
        await self.channel.close()
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()
