"""A rate over sampled time windows: Kafka's ``Rate`` on a ``SampledStat`` (its ``WindowedSum``).

``samples`` windows of ``window_ms`` each; a value is added to the current window, a new window
starts when the current one is ``window_ms`` old (the oldest is reused when all are taken), and
windows older than ``samples * window_ms`` are purged (reset) before measuring. The rate is the
sum of the retained windows divided by the elapsed time since the oldest window started, counted
as at least ``samples - 1`` whole windows so that a young sensor is not measured over a tiny span
(``Rate.windowSize``). Values are per second.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


class SampledRate:
    """The rate of the values recorded, per second, over the last ``samples`` windows."""

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self._samples_max = max(samples, 2)
        self._window_ms = window_ms
        self._samples: list[_Sample] = [_Sample(now_ms)]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._samples[self._current]
        if now_ms >= sample.start_ms + self._window_ms:
            sample = self._advance(now_ms)
        sample.value += value

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self._samples_max
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms))
        else:
            sample = self._samples[self._current]
            sample.start_ms, sample.value = now_ms, 0.0
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire_age = self._samples_max * self._window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age:
                sample.start_ms, sample.value = now_ms, 0.0

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's ``Rate.windowSize``: the span the rate is measured over (at least 1 ms)."""
        self._purge(now_ms)
        elapsed = now_ms - min(sample.start_ms for sample in self._samples)
        full_windows = elapsed // self._window_ms
        minimum = self._samples_max - 1
        if full_windows < minimum:
            elapsed += (minimum - full_windows) * self._window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Values per second over the retained windows."""
        window_ms = self.window_size_ms(now_ms)
        return sum(sample.value for sample in self._samples) / (window_ms / 1000)
