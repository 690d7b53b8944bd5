"""Prometheus metrics of the log cleaner, named after Kafka's LogCleaner and LogCleanerManager MBeans.

The only module of the cleaner code that imports prometheus_client. Gauges read the cleaner's
figures when Prometheus scrapes (``Gauge.set_function``); the per-round figures (buffer
utilisation, recopy share, clean time) are those of the last round, as Kafka's gauges report.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge

MAX_BUFFER_UTILIZATION = "kafka_log_logcleaner_max_buffer_utilization_percent"
CLEANER_RECOPY = "kafka_log_logcleaner_cleaner_recopy_percent"
MAX_CLEAN_TIME = "kafka_log_logcleaner_max_clean_time_secs"
MAX_COMPACTION_DELAY = "kafka_log_logcleaner_max_compaction_delay_secs"
DEAD_THREAD_COUNT = "kafka_log_logcleaner_deadthreadcount"
MAX_DIRTY = "kafka_log_logcleanermanager_max_dirty_percent"
TIME_SINCE_LAST_RUN = "kafka_log_logcleanermanager_time_since_last_run_ms"
UNCLEANABLE_PARTITIONS = "kafka_log_logcleanermanager_uncleanable_partitions_count"
UNCLEANABLE_BYTES = "kafka_log_logcleanermanager_uncleanable_bytes"


class LogCleanerMetrics:
    """The cleaner's gauges; the service records each round, the manager's figures are read live."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._buffer = Gauge(
            MAX_BUFFER_UTILIZATION,
            "How full the offset map got in the last round, in percent.",
            registry=registry,
        )
        self._recopy = Gauge(
            CLEANER_RECOPY, "Bytes written over bytes read by the last round, in percent.", registry=registry
        )
        self._clean_time = Gauge(MAX_CLEAN_TIME, "Seconds the last round took.", registry=registry)
        self._delay = Gauge(
            MAX_COMPACTION_DELAY,
            "Seconds the most overdue log is past its max.compaction.lag.ms.",
            registry=registry,
        )
        self._dead = Gauge(DEAD_THREAD_COUNT, "Cleaner processes not running now.", registry=registry)
        self._dirty = Gauge(
            MAX_DIRTY, "Highest dirty ratio among the compacted logs, in percent.", registry=registry
        )
        self._since = Gauge(
            TIME_SINCE_LAST_RUN, "Milliseconds since the cleaner last looked for a log.", registry=registry
        )
        self._uncleanable = Gauge(
            UNCLEANABLE_PARTITIONS,
            "Partitions the cleaner failed on and skips until restart.",
            ["logDirectory"],
            registry=registry,
        )
        self._uncleanable_bytes = Gauge(
            UNCLEANABLE_BYTES, "Bytes of the uncleanable partitions.", ["logDirectory"], registry=registry
        )

    def track(
        self,
        *,
        max_dirty_percent: Callable[[], float],
        time_since_last_run_ms: Callable[[], float],
        max_compaction_delay_s: Callable[[], float],
        dead_count: Callable[[], float],
    ) -> None:
        self._dirty.set_function(max_dirty_percent)
        self._since.set_function(time_since_last_run_ms)
        self._delay.set_function(max_compaction_delay_s)
        self._dead.set_function(dead_count)

    def track_log_dir(
        self, log_dir: pathlib.Path, count: Callable[[], float], size: Callable[[], float]
    ) -> None:
        self._uncleanable.labels(str(log_dir)).set_function(count)
        self._uncleanable_bytes.labels(str(log_dir)).set_function(size)

    def record_round(
        self, buffer_utilization: float, bytes_read: int, bytes_written: int, seconds: float
    ) -> None:
        self._buffer.set(100 * buffer_utilization)
        self._recopy.set(100 * bytes_written / bytes_read if bytes_read else 0)
        self._clean_time.set(seconds)
