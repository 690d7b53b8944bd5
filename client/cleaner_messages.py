"""The requests an owner of logs (the broker, a follower process) sends its cleaner processes over the
IPC channel (client/replica_ipc.py).

Kept in ``client`` because both ends use them. The task and the result themselves are storage's
:class:`~storage.cleaner.CleanTask` and :class:`~storage.cleaner.CleanResult` as JSON.

* ``configure`` (:class:`CleanerSettings`) -> ``{}``: sent once, first;
* ``clean`` ``{"task": CleanTask}`` -> ``{"result": CleanResult}``, or ``{"aborted": reason}`` when a
  segment of the task went away while it was read (retention, truncation: nothing to clean then);
  a reply error is a failure of the cleaner itself (Kafka marks the partition uncleanable).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

CONFIGURE = "configure"
CLEAN = "clean"


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """What a cleaner process needs of the broker's log.cleaner.* keys (its share of them)."""

    dedupe_buffer_size: int
    load_factor: float
    io_max_bytes_per_second: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> CleanerSettings:
        return cls(
            dedupe_buffer_size=int(body["dedupe_buffer_size"]),
            load_factor=float(body["load_factor"]),
            io_max_bytes_per_second=float(body["io_max_bytes_per_second"]),
        )
