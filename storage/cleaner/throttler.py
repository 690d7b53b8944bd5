"""Kafka's ``Throttler`` for the cleaner's I/O (``log.cleaner.io.max.bytes.per.second``).

The cleaner reports every byte it reads and writes; every ``check_interval_s`` the throttler
compares the observed rate with the desired one and sleeps just long enough to bring it back to it.
It sleeps the calling thread: it runs in the cleaner process, never on an event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_CHECK_INTERVAL_S = 0.3


class Throttler:
    """Keeps an observed byte rate at or below ``rate_per_s`` by sleeping."""

    def __init__(
        self,
        rate_per_s: float,
        *,
        check_interval_s: float = DEFAULT_CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_s <= 0:
            raise ValueError(f"a throttle rate must be positive, got {rate_per_s}")
        self.rate_per_s = rate_per_s
        self._check_interval_s = check_interval_s
        self._clock = clock
        self._sleep = sleep
        self._period_start = clock()
        self._observed = 0.0
        self.slept_s = 0.0

    def maybe_throttle(self, observed: float) -> None:
        """Count ``observed`` bytes; sleep when this period ran faster than the desired rate."""
        self._observed += observed
        now = self._clock()
        elapsed = now - self._period_start
        if elapsed < self._check_interval_s:
            return
        if self._observed / elapsed > self.rate_per_s:
            pause = self._observed / self.rate_per_s - elapsed
            if pause > 0:
                self._sleep(pause)
                self.slept_s += pause
        self._period_start = self._clock()
        self._observed = 0.0
