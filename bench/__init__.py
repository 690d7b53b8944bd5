"""Benchmarks: print figures to stdout and write them as JSON under ``bench/results/``.

They are run by ``make bench`` (``python -m bench.codec``, ``python -m bench.log``) and are never part
of the test suite: timings on a shared 2-core machine are too noisy to assert on. The helpers here
keep every benchmark's timing rules and output format the same, so figures from different runs and
different benchmarks can be put side by side.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
"""Where figures go (gitignored); created at run time."""


@dataclass(frozen=True, slots=True)
class Timing:
    """Wall-clock durations of repeated runs of one operation, in nanoseconds."""

    samples_ns: tuple[int, ...]

    @property
    def best_ns(self) -> int:
        """The fastest run: the least disturbed by other processes, so the most repeatable figure."""
        return min(self.samples_ns)

    @property
    def median_ns(self) -> float:
        """The typical run, including the interference a busy machine adds."""
        return statistics.median(self.samples_ns)


def repeat(fn: Callable[[], Any], repetitions: int) -> Timing:
    """Time ``repetitions`` calls of ``fn``.

    A full collection before each run starts every repetition from the same heap, so garbage left
    by the previous run is not charged to the next. The collector stays enabled during the run:
    decoding 10,000 partitions allocates enough objects to trigger it, and the broker pays that too.
    """
    samples: list[int] = []
    for _ in range(repetitions):
        gc.collect()
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return Timing(tuple(samples))


def repeat_interleaved(fns: dict[str, Callable[[], Any]], repetitions: int) -> dict[str, Timing]:
    """Time several operations that are compared with each other, alternating between them.

    On a shared machine a burst of load from another process lands on whichever run is in
    progress; alternating the candidates round by round spreads such bursts over all of them, so
    a ratio of their times is not skewed by when each one happened to run.
    """
    samples: dict[str, list[int]] = {name: [] for name in fns}
    for _ in range(repetitions):
        for name, fn in fns.items():
            gc.collect()
            start = time.perf_counter_ns()
            fn()
            samples[name].append(time.perf_counter_ns() - start)
    return {name: Timing(tuple(s)) for name, s in samples.items()}


def environment() -> dict[str, Any]:
    """What the figures were measured on, stored with them so they are never read out of context."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "system": platform.system(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_results(name: str, figures: dict[str, Any]) -> Path:
    """Write ``figures`` (plus the environment) to ``bench/results/<name>.json`` and return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {"benchmark": name, "environment": environment(), **figures}
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path
