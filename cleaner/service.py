"""The cleaner process's end of the IPC with its owner: ``configure``, then ``clean`` tasks one at a time.

A task names inactive segments (immutable while their owner appends) and everything the round needs
from the owner (:class:`~storage.cleaner.CleanTask`); the process builds the offset map, writes and
fsyncs the ``.cleaned`` files and answers which old segments each one replaces. It never renames or
deletes a file of the log: the owner installs the result on its own event loop. Cleaning blocks this
process's event loop, which has nothing else to do; the owner waits for the reply.
"""

from __future__ import annotations

import os
import time
from typing import Any

import structlog

from client.cleaner_messages import CLEAN, CONFIGURE, CleanerSettings
from client.replica_ipc import JsonObject
from storage.cleaner import CleaningAborted, CleanTask, OffsetMap, Throttler, write_cleaned_segments

_log = structlog.get_logger(__name__)
_OWNER_CHECK_S = 0.2
_UNLIMITED = 1e300
"""Rates at or above this are Kafka's unthrottled default (Double.MAX_VALUE)."""


class UnknownRequestError(Exception):
    """The owner sent a request type this cleaner does not know."""


class CleanerService:
    """Serves one owner's cleaning requests; keeps one offset map and throttler between rounds."""

    def __init__(self, owner_pid: int | None = None) -> None:
        """``owner_pid`` is the owner's process id (this process's parent by default)."""
        self._owner_pid = os.getppid() if owner_pid is None else owner_pid
        self._settings: CleanerSettings | None = None
        self._offset_map: OffsetMap | None = None
        self._throttler: Throttler | None = None

    async def __call__(self, message_type: str, body: JsonObject) -> JsonObject:
        if message_type == CONFIGURE:
            return self.configure(CleanerSettings.from_json(body))
        if message_type == CLEAN:
            return self.clean(body)
        raise UnknownRequestError(f"unknown request type {message_type!r}")

    def configure(self, settings: CleanerSettings) -> JsonObject:
        self._settings = settings
        self._offset_map = OffsetMap(settings.dedupe_buffer_size, settings.load_factor)
        rate = settings.io_max_bytes_per_second
        self._throttler = Throttler(rate, sleep=self._sleep) if rate < _UNLIMITED else None
        _log.info("cleaner configured", **settings.to_json())
        return {}

    def clean(self, body: JsonObject) -> JsonObject:
        if self._offset_map is None:
            raise RuntimeError("clean before configure")
        task = CleanTask.from_json(body["task"])
        started = time.monotonic()
        try:
            result = write_cleaned_segments(
                task, offset_map=self._offset_map, throttler=self._throttler, check_done=self._check_owner
            )
        except CleaningAborted as exc:
            _log.warning("cleaning aborted", directory=task.directory, reason=str(exc))
            return {"aborted": str(exc)}
        except FileNotFoundError as exc:
            _log.info("cleaning aborted: a segment went away", directory=task.directory, reason=str(exc))
            return {"aborted": str(exc)}
        elapsed = time.monotonic() - started
        reply: dict[str, Any] = {"result": result.to_json(), "elapsed_s": elapsed}
        _log.info(
            "cleaned",
            directory=task.directory,
            groups=len(result.groups),
            bytes_read=result.bytes_read,
            bytes_written=result.bytes_written,
            end_offset=result.end_offset,
            seconds=round(elapsed, 3),
        )
        return reply

    def _sleep(self, seconds: float) -> None:
        """The throttler's pause, in slices that check the owner (a pause may last many seconds)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self._check_owner()
            time.sleep(min(left, _OWNER_CHECK_S))
        self._check_owner()

    def _check_owner(self) -> None:
        """Stop a round whose owner died (this process was re-parented): a round can take minutes
        (throttled, large segments) while this event loop cannot see the channel close, and its
        files would land after the restarted owner's loader removed stale ones, never to be removed,
        while the new owner's own cleaner runs beside it."""
        if os.getppid() != self._owner_pid:
            raise CleaningAborted(f"the owner (pid {self._owner_pid}) went away")
