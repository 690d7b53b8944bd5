"""Prometheus metrics of the log cleaner, named after Kafka's LogCleaner and LogCleanerManager MBeans.

The only module of the cleaner code that imports prometheus_client. One broker's gauges cover every
log it holds: the logs it leads (its own cleaner) and the logs its follower processes follow (their
cleaners, whose latest snapshots arrive with their offsets reports), combined as Kafka aggregates
over its cleaner threads (cleaner/stats.py). Figures are read when Prometheus scrapes; the per-round
ones (buffer utilisation, recopy share, clean time) are those of each worker's last round.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

from cleaner.stats import CleanerStats, combine
from storage.clock import Clock

MAX_BUFFER_UTILIZATION = "kafka_log_logcleaner_max_buffer_utilization_percent"
CLEANER_RECOPY = "kafka_log_logcleaner_cleaner_recopy_percent"
MAX_CLEAN_TIME = "kafka_log_logcleaner_max_clean_time_secs"
MAX_COMPACTION_DELAY = "kafka_log_logcleaner_max_compaction_delay_secs"
DEAD_THREAD_COUNT = "kafka_log_logcleaner_deadthreadcount"
MAX_DIRTY = "kafka_log_logcleanermanager_max_dirty_percent"
TIME_SINCE_LAST_RUN = "kafka_log_logcleanermanager_time_since_last_run_ms"
UNCLEANABLE_PARTITIONS = "kafka_log_logcleanermanager_uncleanable_partitions_count"
UNCLEANABLE_BYTES = "kafka_log_logcleanermanager_uncleanable_bytes"

StatsSource = Callable[[], Iterable[CleanerStats]]
"""The snapshots to combine at a scrape: the broker's own cleaner's and its follower processes'."""


class LogCleanerMetrics:
    """A collector of the combined cleaner gauges (registered once per broker)."""

    def __init__(self, registry: CollectorRegistry, sources: StatsSource, clock: Clock) -> None:
        self._sources = sources
        self._clock = clock
        registry.register(self)

    def describe(self) -> Iterable[Metric]:
        return list(self._families(CleanerStats()))

    def collect(self) -> Iterable[Metric]:
        return list(self._families(combine(self._sources())))

    def _families(self, stats: CleanerStats) -> Iterator[Metric]:
        since = max(self._clock.time_ms() - stats.last_run_ms, 0) if stats.last_run_ms else 0
        yield from (
            _gauge(
                MAX_BUFFER_UTILIZATION,
                "How full the offset map got in the last rounds, in percent (max).",
                stats.max_buffer_utilization_percent,
            ),
            _gauge(
                CLEANER_RECOPY,
                "Bytes written over bytes read by the last rounds, in percent.",
                stats.recopy_percent,
            ),
            _gauge(MAX_CLEAN_TIME, "Seconds the longest of the last rounds took.", stats.max_clean_time_s),
            _gauge(
                MAX_COMPACTION_DELAY,
                "Seconds the most overdue log is past its max.compaction.lag.ms.",
                stats.max_compaction_delay_ms / 1000,
            ),
            _gauge(
                DEAD_THREAD_COUNT, "Cleaner workers whose process died and is not back yet.", stats.dead_count
            ),
            _gauge(
                MAX_DIRTY,
                "Highest dirty ratio among the compacted logs, in percent.",
                stats.max_dirty_percent,
            ),
            _gauge(TIME_SINCE_LAST_RUN, "Milliseconds since a cleaner last looked for a log.", since),
        )
        count = GaugeMetricFamily(
            UNCLEANABLE_PARTITIONS,
            "Partitions the cleaner failed on and skips until restart.",
            labels=["logDirectory"],
        )
        size = GaugeMetricFamily(
            UNCLEANABLE_BYTES, "Bytes of the uncleanable partitions.", labels=["logDirectory"]
        )
        for log_dir, uncleanable in sorted(stats.uncleanable.items()):
            count.add_metric([log_dir], uncleanable.count)
            size.add_metric([log_dir], uncleanable.size)
        yield from (count, size)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
