"""Handing a partition's log from one process to another (DESIGN.md section 1).

The broker process and its follower processes never have the same log open: on a leadership
change one side stops writing, flushes and closes the log, and tells the other side what it needs
to reopen it quickly; only then does the other side open it. :class:`LogHandover` is that message.
It is a plain value (JSON-able through :meth:`LogHandover.to_json`) because it crosses the IPC
socket between the broker and a follower process.

A *clean* handover comes from a side that closed the log itself: every byte below the log end
offset is fsynced and the indexes are final, so the other side opens it without recovery, as after
a clean shutdown. An *unclean* one is rebuilt from the last offsets a process reported before it
died: the files may hold more (or a torn tail) than it says, so opening it re-validates the
segments from the recovery point, as crash recovery does.
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog

from storage.clock import Clock
from storage.config import LogConfig
from storage.log import PartitionLog

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class LogHandover:
    """What the next owner of a closed log needs: where it is and the offsets it had.

    ``directory`` is the partition directory, ``log_dir`` the log directory holding it (whose
    checkpoint files the broker keeps writing). ``clean`` says whether the offsets were taken when
    the log was closed (True) or reconstructed after its owner died (False).
    """

    topic: str
    partition: int
    topic_id: uuid.UUID | None
    directory: str
    log_dir: str
    log_end_offset: int
    high_watermark: int
    recovery_point: int
    log_start_offset: int
    clean: bool = True

    @property
    def topic_partition(self) -> tuple[str, int]:
        return self.topic, self.partition

    def unclean(self) -> LogHandover:
        """The same offsets, marked as reported by an owner that may have died after reporting them."""
        return replace(self, clean=False)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (the topic id as its canonical string, or null)."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "topic_id": None if self.topic_id is None else str(self.topic_id),
            "directory": self.directory,
            "log_dir": self.log_dir,
            "log_end_offset": self.log_end_offset,
            "high_watermark": self.high_watermark,
            "recovery_point": self.recovery_point,
            "log_start_offset": self.log_start_offset,
            "clean": self.clean,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LogHandover:
        """The inverse of :meth:`to_json`; raises KeyError/ValueError/TypeError on a malformed object."""
        topic_id = data.get("topic_id")
        return cls(
            topic=str(data["topic"]),
            partition=_int(data, "partition"),
            topic_id=None if topic_id is None else uuid.UUID(str(topic_id)),
            directory=str(data["directory"]),
            log_dir=str(data["log_dir"]),
            log_end_offset=_int(data, "log_end_offset"),
            high_watermark=_int(data, "high_watermark"),
            recovery_point=_int(data, "recovery_point"),
            log_start_offset=_int(data, "log_start_offset"),
            clean=bool(data.get("clean", True)),
        )


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"handover field {key} must be an integer, got {value!r}")
    return value


def close_for_handover(log: PartitionLog) -> LogHandover:
    """Flush and close ``log`` and describe it for its next owner (a clean handover).

    The caller must have stopped writing to it (no fetch or produce may touch it afterwards).
    A log in which a read found a damaged segment (:meth:`PartitionLog.mark_damaged`) is handed
    over unclean instead, with its recovery point at that segment: the next owner re-validates it
    from there as crash recovery does and truncates it to its last valid batch; a follower then
    fetches the rest again from its leader.
    """
    log.close()  # fsyncs everything first: the recovery point becomes the log end offset
    directory = pathlib.Path(log.directory)
    if log.damaged_from is not None:
        _log.warning(
            "handing over a damaged log for recovery",
            topic=log.topic,
            partition=log.partition,
            recover_from=log.recovery_start_offset,
            log_end_offset=log.log_end_offset,
        )
    return LogHandover(
        topic=log.topic,
        partition=log.partition,
        topic_id=log.topic_id,
        directory=str(directory),
        log_dir=str(directory.parent),
        log_end_offset=log.log_end_offset,
        high_watermark=log.high_watermark,
        recovery_point=log.recovery_start_offset,
        log_start_offset=log.log_start_offset,
        clean=log.damaged_from is None,
    )


def describe_open_log(log: PartitionLog, *, clean: bool = False) -> LogHandover:
    """The offsets of a log that is still open (what a periodic offsets report carries)."""
    directory = pathlib.Path(log.directory)
    return LogHandover(
        topic=log.topic,
        partition=log.partition,
        topic_id=log.topic_id,
        directory=str(directory),
        log_dir=str(directory.parent),
        log_end_offset=log.log_end_offset,
        high_watermark=log.high_watermark,
        recovery_point=log.recovery_point,
        log_start_offset=log.log_start_offset,
        clean=clean,
    )


def open_handed_over_log(handover: LogHandover, config: LogConfig, clock: Clock) -> PartitionLog:
    """Open a log another process handed over; takes no log-dir lock (the broker holds it).

    A clean handover opens without recovery, like a log after a clean shutdown; should its files
    not end where the handover says (someone wrote after closing it), the log is reopened with
    recovery rather than trusted. An unclean handover re-validates every segment from the one
    holding the recovery point and cuts a torn tail, as crash recovery does. Either way the high
    watermark is restored, clamped to what the log holds.
    """
    log = _open(handover, config, clock, clean_shutdown=handover.clean)
    if handover.clean and log.log_end_offset != handover.log_end_offset:
        _log.warning(
            "handed over log does not end where its handover says; recovering it",
            topic=handover.topic,
            partition=handover.partition,
            expected_log_end_offset=handover.log_end_offset,
            found_log_end_offset=log.log_end_offset,
        )
        log.close()
        log = _open(handover, config, clock, clean_shutdown=False)
    log.update_high_watermark(handover.high_watermark)
    return log


def _open(handover: LogHandover, config: LogConfig, clock: Clock, *, clean_shutdown: bool) -> PartitionLog:
    return PartitionLog.open(
        pathlib.Path(handover.directory),
        config,
        clock,
        recovery_point=handover.recovery_point,
        log_start_offset=handover.log_start_offset,
        clean_shutdown=clean_shutdown,
        topic_id=handover.topic_id,
    )


__all__ = ["LogHandover", "close_for_handover", "describe_open_log", "open_handed_over_log"]
