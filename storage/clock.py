"""Wall-clock time for the log: segment roll by age, retention by time, flush.ms, LogAppendTime.

Every time-dependent decision in ``storage`` asks a :class:`Clock` passed in by the caller, so tests
drive roll, retention and flush deterministically with :class:`FakeClock` instead of sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Source of wall-clock milliseconds since the epoch (Kafka's ``Time.milliseconds``)."""

    def time_ms(self) -> int: ...


class SystemClock:
    """The real wall clock."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    def time_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        """Move forward by ``ms`` milliseconds (negative values are refused: time never goes back)."""
        if ms < 0:
            raise ValueError(f"cannot advance a clock by a negative amount ({ms} ms)")
        self._now_ms += ms

    def set(self, ms: int) -> None:
        """Jump to an absolute time (tests use it to set up timestamps relative to 'now')."""
        self._now_ms = ms
