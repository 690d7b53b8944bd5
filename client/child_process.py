"""A kipling child process (``python -m <package>``) as its parent sees it: the child and its IPC channel.

Follower processes (started by their broker) and cleaner processes (started by the owner of the logs
they clean) are launched the same way: the child gets one end of a Unix socketpair through
``pass_fds`` and runs in its own session, so a Ctrl-C aimed at the parent reaches only the parent,
which then stops its children in order. The child's stderr is the parent's, so its structured log
lines land with the parent's. This module is that one mechanism; the roles add only their names.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import structlog

from client.replica_ipc import EventHandler, IpcChannel, JsonObject, RequestHandler

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ChildRole:
    """What differs between kinds of child: the package run with ``-m`` and the name of its id."""

    package: str
    """``follower`` or ``cleaner``: run as ``python -m <package>``."""
    id_name: str
    """``fetcher`` or ``cleaner``: its id's flag is ``--<id_name>-id`` and its log key ``<id_name>_id``."""
    terminate_first: bool = False
    """Whether :meth:`ChildProcess.stop` sends SIGTERM before waiting (else the parent has already
    asked the child to exit over the channel)."""


FOLLOWER_ROLE = ChildRole(package="follower", id_name="fetcher")
"""A follower process: its broker stops it by asking over the channel (logs flushed and closed)."""
CLEANER_ROLE = ChildRole(package="cleaner", id_name="cleaner", terminate_first=True)
"""A cleaner process: SIGTERM first (obeyed between rounds); a round cut short leaves only
``.cleaned`` files, which the next owner's log loader removes."""


class ChildProcess:
    """A running child process; create with :meth:`spawn`."""

    def __init__(
        self, role: ChildRole, child_id: int, process: asyncio.subprocess.Process, channel: IpcChannel
    ) -> None:
        self.role = role
        self.child_id = child_id
        self._process = process
        self.channel = channel

    @classmethod
    async def start_child(
        cls,
        role: ChildRole,
        *,
        python_executable: str,
        broker_id: int,
        child_id: int,
        env: Mapping[str, str],
        on_event: EventHandler | None = None,
        log_level: str = "INFO",
        log_json: bool = False,
        on_request: RequestHandler | None = None,
    ) -> Self:
        """Start ``python -m <package>`` with one end of a fresh socketpair and open the channel;
        ``on_event`` hears the child's events, ``on_request`` answers its requests."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        args = ["-m", role.package, "--broker-id", str(broker_id), f"--{role.id_name}-id", str(child_id)]
        args += ["--ipc-fd", str(child.fileno()), "--log-level", log_level]
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
            name = f"broker-{broker_id}-{role.id_name}-{child_id}"
            channel = await IpcChannel.over_socket(parent, name=name)
        except BaseException:
            parent.close()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        channel.start(on_request=on_request, on_event=on_event)
        _log.info(f"{role.package} process started", **{f"{role.id_name}_id": child_id}, pid=process.pid)
        return cls(role, child_id, process, channel)

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
        """Wait up to ``timeout_s`` for the process to exit (after a SIGTERM for a role that wants
        one), then SIGKILL it; its exit code."""
        if self.role.terminate_first:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(timeout_s):
                code = await asyncio.shield(self._process.wait())
        except TimeoutError:
            _log.error(
                f"{self.role.package} process did not exit; killing it",
                **{f"{self.role.id_name}_id": self.child_id},
                pid=self.pid,
            )
            self.kill()
            code = await self._process.wait()
        await self.channel.close()
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()


__all__ = ["CLEANER_ROLE", "FOLLOWER_ROLE", "ChildProcess", "ChildRole"]
