"""One follower process as its broker sees it: a :class:`~client.child_process.ChildProcess` running
``python -m follower``.

The broker stops a follower by asking it over the channel to shut down (its logs flushed and
closed), so :meth:`stop` only waits, then kills one that did not exit.
"""

from __future__ import annotations

from collections.abc import Mapping

from client.child_process import FOLLOWER_ROLE, ChildProcess
from client.replica_ipc import EventHandler, RequestHandler


class FollowerProcess(ChildProcess):
    """A running follower process; create with :meth:`spawn`."""

    @property
    def fetcher_id(self) -> int:
        return self.child_id

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
        on_request: RequestHandler | None = None,
    ) -> FollowerProcess:
        """Start ``python -m follower`` and open the channel to it (``on_request`` answers the
        follower's requests: the read fence)."""
        return await cls.start_child(
            FOLLOWER_ROLE,
            python_executable=python_executable,
            broker_id=broker_id,
            child_id=fetcher_id,
            env=env,
            on_event=on_event,
            log_level=log_level,
            log_json=log_json,
            on_request=on_request,
        )


__all__ = ["FollowerProcess"]
