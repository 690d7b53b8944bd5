"""A one-line progress bar for the CLI tools, drawn on a terminal only.

Why not a dependency: the tools need one line (a bar when the total is known, counts and rates) and
nothing else, and a new runtime dependency for that is not worth it. Why TTY-only: the tools' stderr is
often a log file or a pipe, where carriage-return redraws turn into thousands of garbage lines. Why
rate-limited: a redraw costs a write system call, and the tools call :meth:`ProgressBar.update` once per
batch; redrawing at most every ``min_interval_s`` keeps the bar's cost invisible at any throughput.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

DEFAULT_MIN_INTERVAL_S = 0.2
BAR_WIDTH = 24


def is_tty(stream: object) -> bool:
    """Whether ``stream`` is a terminal (False for closed, captured or odd streams)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return callable(isatty) and bool(isatty())
    except (ValueError, OSError):
        return False


class ProgressBar:
    """Counts of records and bytes, their rates, and a bar when ``total`` is known.

    ``total`` and ``completed`` are in whatever unit says how far along the job is (bytes of an input
    file for the producer, records for a consumer with ``--max-messages``). When ``enabled`` is None it
    is taken from whether ``stream`` is a terminal; a disabled bar writes nothing at all.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        total: int | None = None,
        enabled: bool | None = None,
        min_interval_s: float = DEFAULT_MIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self.total = total if total is not None and total > 0 else None
        self.enabled = is_tty(stream) if enabled is None else enabled
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._start = clock()
        self._last_draw: float | None = None
        self._last_width = 0
        self.records = 0
        self.nbytes = 0
        self.completed = 0
        self.draws = 0

    def update(self, *, records: int, nbytes: int, completed: int | None = None) -> None:
        """Set the absolute counts (records, payload bytes, progress towards ``total``); maybe redraw."""
        self.records = records
        self.nbytes = nbytes
        self.completed = records if completed is None else completed
        if not self.enabled:
            return
        now = self._clock()
        if self._last_draw is not None and now - self._last_draw < self._min_interval_s:
            return
        self._draw(now)

    def close(self) -> None:
        """Draw the final figures and end the line (only if a bar was drawn before)."""
        if not self.enabled or self._last_draw is None:
            return
        self._draw(self._clock())
        self._stream.write("\n")
        self._stream.flush()

    def render(self, now: float) -> str:
        """The bar's text at ``now`` (no carriage return)."""
        elapsed = max(now - self._start, 1e-9)
        parts = []
        if self.total is not None:
            fraction = min(self.completed / self.total, 1.0)
            filled = int(fraction * BAR_WIDTH)
            parts.append(f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction * 100:5.1f}%")
        parts.append(f"{self.records:,} records")
        parts.append(f"{self.records / elapsed:,.0f} records/s")
        parts.append(f"{self.nbytes / elapsed / 1e6:,.2f} MB/s")
        return "  ".join(parts)

    def _draw(self, now: float) -> None:
        text = self.render(now)
        padding = " " * max(self._last_width - len(text), 0)
        self._stream.write(f"\r{text}{padding}")
        self._stream.flush()
        self._last_width = len(text)
        self._last_draw = now
        self.draws += 1


__all__ = ["ProgressBar", "is_tty"]
