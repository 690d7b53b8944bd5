"""The figures behind Kafka's LogCleaner and LogCleanerManager gauges, for one owner of logs or several.

Every owner of logs cleans its own (the broker the logs it leads, each follower process the logs it
follows), but an operator reads one set of gauges per broker, as Kafka's single LogCleaner gives it.
So each owner takes a :class:`CleanerStats` snapshot of its cleaner; a follower process sends its
snapshot to the broker with its offsets report, and the broker's gauges show :func:`combine` of its
own and its follower processes' latest snapshots, with Kafka's aggregation over cleaner threads (one
worker per log dir here): the largest buffer utilisation, clean time, compaction delay and dirty
ratio, the recopy share of all last rounds together, the most recent run (a wall-clock time, so
a snapshot a few seconds old still tells it), dead workers and uncleanable partitions summed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class RoundStats:
    """A worker's last round: Kafka's ``CleanerStats`` of a thread's last clean."""

    buffer_utilization: float
    bytes_read: int
    bytes_written: int
    seconds: float


@dataclass(frozen=True, slots=True)
class UncleanableStats:
    """A log dir's uncleanable partitions: how many, and their bytes."""

    count: int
    size: int


@dataclass(frozen=True, slots=True)
class CleanerStats:
    """One owner's cleaner now (or several combined)."""

    max_dirty_percent: float = 0.0
    last_run_ms: int = 0
    """When the owner's cleaner last looked for a log to clean (ms since the epoch)."""
    max_compaction_delay_ms: float = 0.0
    dead_count: int = 0
    last_rounds: tuple[RoundStats, ...] = ()
    """The last round of each worker that has cleaned since its owner started."""
    uncleanable: Mapping[str, UncleanableStats] = field(default_factory=dict)
    """Per log dir (its path as configured)."""

    @property
    def max_buffer_utilization_percent(self) -> float:
        return 100 * max((r.buffer_utilization for r in self.last_rounds), default=0.0)

    @property
    def recopy_percent(self) -> float:
        read = sum(r.bytes_read for r in self.last_rounds)
        return 100 * sum(r.bytes_written for r in self.last_rounds) / max(read, 1)

    @property
    def max_clean_time_s(self) -> float:
        return max((r.seconds for r in self.last_rounds), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "max_dirty_percent": self.max_dirty_percent,
            "last_run_ms": self.last_run_ms,
            "max_compaction_delay_ms": self.max_compaction_delay_ms,
            "dead_count": self.dead_count,
            "last_rounds": [
                [r.buffer_utilization, r.bytes_read, r.bytes_written, r.seconds] for r in self.last_rounds
            ],
            "uncleanable": {d: [u.count, u.size] for d, u in self.uncleanable.items()},
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> CleanerStats:
        return cls(
            max_dirty_percent=float(body["max_dirty_percent"]),
            last_run_ms=int(body["last_run_ms"]),
            max_compaction_delay_ms=float(body["max_compaction_delay_ms"]),
            dead_count=int(body["dead_count"]),
            last_rounds=tuple(
                RoundStats(float(u), int(r), int(w), float(s)) for u, r, w, s in body["last_rounds"]
            ),
            uncleanable={
                str(d): UncleanableStats(int(c), int(b)) for d, (c, b) in body["uncleanable"].items()
            },
        )


def combine(snapshots: Iterable[CleanerStats]) -> CleanerStats:
    """Several owners' cleaners as one broker's (see the module docstring); none: all zero."""
    stats = list(snapshots)
    if not stats:
        return CleanerStats()
    uncleanable: dict[str, UncleanableStats] = {}
    for s in stats:
        for log_dir, u in s.uncleanable.items():
            seen = uncleanable.get(log_dir, UncleanableStats(0, 0))
            uncleanable[log_dir] = UncleanableStats(seen.count + u.count, seen.size + u.size)
    return CleanerStats(
        max_dirty_percent=max(s.max_dirty_percent for s in stats),
        last_run_ms=max(s.last_run_ms for s in stats),
        max_compaction_delay_ms=max(s.max_compaction_delay_ms for s in stats),
        dead_count=sum(s.dead_count for s in stats),
        last_rounds=tuple(r for s in stats for r in s.last_rounds),
        uncleanable=uncleanable,
    )
