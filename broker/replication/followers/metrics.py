"""The follower processes' metrics on the broker's ``/metrics``, via prometheus-client's multiprocess mode.

Follower processes write their fetcher metrics (follower/metrics.py) into files of a directory the
supervisor gives them in ``PROMETHEUS_MULTIPROC_DIR``; :class:`FollowerMetricsCollector` merges those
files with prometheus-client's :class:`~prometheus_client.multiprocess.MultiProcessCollector` on
every scrape. The broker's own metrics stay in-process: the variable is set only in the children's
environment.

The shared files cannot forget a label set, so a partition's lag series would outlive its move to
another fetcher. The collector therefore keeps a lag series only while the partition is assigned to
that fetcher (client id and partition match the supervisor's table).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterable, Set

from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

CONSUMER_LAG = "kafka_server_fetcherlagmetrics_consumerlag"
"""The per-partition lag family (follower/metrics.py names it; broker may not import follower)."""

LagSeries = tuple[str, str, str]
"""(client id, topic, partition) of a lag series, as its labels spell them."""


class FollowerMetricsCollector:
    """Merges the follower processes' metric files; drops lag series of unassigned partitions."""

    def __init__(self, directory: pathlib.Path, live_lag_series: Callable[[], Set[LagSeries]]) -> None:
        self._directory = directory
        self._live_lag_series = live_lag_series

    def describe(self) -> Iterable[Metric]:
        return []  # the families are known only once the children have written them

    def collect(self) -> Iterable[Metric]:
        if not self._directory.is_dir():
            return []
        metrics = _merged(self._directory)
        live = self._live_lag_series()
        for metric in metrics:
            if metric.name == CONSUMER_LAG:
                metric.samples = [s for s in metric.samples if _lag_series(s.labels) in live]
        return metrics


# prometheus-client ships py.typed but leaves its multiprocess module unannotated: its calls are
# untyped (no-untyped-call), hence the targeted ignores below.


def _merged(directory: pathlib.Path) -> list[Metric]:
    """The metric families of the directory's files, merged across processes."""
    collector = MultiProcessCollector(None, path=str(directory))  # type: ignore[no-untyped-call]
    return list(collector.collect())  # type: ignore[no-untyped-call]


def _lag_series(labels: dict[str, str]) -> LagSeries:
    return labels.get("client_id", ""), labels.get("topic", ""), labels.get("partition", "")


def forget_process(directory: pathlib.Path, pid: int) -> None:
    """A follower process exited: drop its live gauges (its counters keep counting in the totals)."""
    if directory.is_dir():
        mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]  # unannotated, see above


__all__ = ["CONSUMER_LAG", "FollowerMetricsCollector", "LagSeries", "forget_process"]
