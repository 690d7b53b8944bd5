"""One cleaner process as its owner (the broker, or a follower process) sees it: a
:class:`~client.child_process.ChildProcess` running ``python -m cleaner``, spawned exactly as a
follower process is, over the same IPC channel.

Stopping it sends SIGTERM first (obeyed between rounds), then SIGKILL after the timeout: a round cut
short leaves only ``.cleaned`` files, which the next owner's log loader removes.
"""

from __future__ import annotations

from collections.abc import Mapping

from client.child_process import CLEANER_ROLE, ChildProcess


class CleanerProcess(ChildProcess):
    """A running cleaner process; create with :meth:`spawn`."""

    @property
    def cleaner_id(self) -> int:
        return self.child_id

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
        """Start ``python -m cleaner`` and open the channel to it."""
        return await cls.start_child(
            CLEANER_ROLE,
            python_executable=python_executable,
            broker_id=broker_id,
            child_id=cleaner_id,
            env=env,
            log_level=log_level,
            log_json=log_json,
        )


__all__ = ["CleanerProcess"]
