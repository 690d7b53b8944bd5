"""The cleaner process's end of the IPC with its owner: ``configure``, then ``clean`` tasks one at a time.

A task names inactive segments (immutable while their owner appends) and everything the round needs
from the owner (:class:`~storage.cleaner.CleanTask`); the process builds the offset map, writes and
fsyncs the ``.cleaned`` files and answers which old segments each one replaces. It never renames or
deletes a file of the log: the owner installs the result on its own event loop. Cleaning blocks this
process's event loop, which has nothing else to do; the owner waits for the reply.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from client.cleaner_messages import CLEAN, CONFIGURE, CleanerSettings
from client.replica_ipc import JsonObject
from storage.cleaner import CleanTask, OffsetMap, Throttler, write_cleaned_segments

_log = structlog.get_logger(__name__)
_UNLIMITED = 1e300
"""Rates at or above this are Kafka's unthrottled default (Double.MAX_VALUE)."""


class UnknownRequestError(Exception):
    """The owner sent a request type this cleaner does not know."""


class CleanerService:
    """Serves one owner's cleaning requests; keeps one offset map and throttler between rounds."""

    def __init__(self) -> None:
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
        self._throttler = Throttler(rate) if rate < _UNLIMITED else None
        _log.info("cleaner configured", **settings.to_json())
        return {}

    def clean(self, body: JsonObject) -> JsonObject:
        if self._offset_map is None:
            raise RuntimeError("clean before configure")
        task = CleanTask.from_json(body["task"])
        started = time.monotonic()
        try:
            result = write_cleaned_segments(task, offset_map=self._offset_map, throttler=self._throttler)
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
