"""The broker's log cleaner: the compacted logs of the partitions it leads, cleaned by the driver of the
``cleaner`` package (cleaner processes, one per log dir, results installed on the broker's loop).

Logs owned by follower processes are cleaned by those processes (follower/log_cleaner.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry

from broker.metrics.log_cleaner import LogCleanerMetrics
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from cleaner.driver import LogCleaner
from cleaner.manager import CleanableLog, LogCleanerManager
from cleaner.stats import CleanerStats
from client.cleaner_messages import CleanerSettings
from server_common.config import BrokerConfig
from storage.cleaner import LastRecord, last_records_of_active_producers
from storage.clock import Clock
from storage.log import PartitionLog


def led_compacted_logs(replicas: ReplicaManager) -> Callable[[], Iterator[CleanableLog]]:
    """The candidates of a broker: the compacted logs of the partitions it leads (it owns their files)."""

    def candidates() -> Iterator[CleanableLog]:
        log_manager = replicas.log_manager
        for partition in replicas.partitions():
            log = partition.log
            if not partition.is_leader or partition.is_offline or log.closed or not log.config.compact:
                continue
            log_dir = log_manager.log_dir_of(partition.topic, partition.index)
            if log_dir is None:
                continue
            yield CleanableLog(
                (partition.topic, partition.index),
                log_dir,
                log,
                partition.last_stable_offset,
                _active_producers(partition),
                _is_current(replicas, partition, log),
                partition.storage_failed,
            )

    return candidates


def _active_producers(partition: Partition) -> Callable[[], Mapping[int, LastRecord]]:
    return lambda: last_records_of_active_producers(partition.producer_state.producers)


def _is_current(replicas: ReplicaManager, partition: Partition, log: PartitionLog) -> Callable[[], bool]:
    def current() -> bool:
        return (
            replicas.get_partition(partition.topic, partition.index) is partition
            and partition.is_leader
            and not partition.is_offline
            and partition.log is log
            and not log.closed
        )

    return current


def build_log_cleaner(
    config: BrokerConfig,
    replicas: ReplicaManager,
    clock: Clock,
    registry: CollectorRegistry,
    *,
    follower_stats: Callable[[], Iterable[CleanerStats]] = list,
    log_level: str = "INFO",
    log_json: bool = False,
) -> LogCleaner | None:
    """The broker's cleaner, or None when ``log.cleaner.enable`` is false or there are no threads.

    Its gauges on ``registry`` cover its own logs and, through ``follower_stats`` (the follower
    processes' latest snapshots), the logs they clean.

    One cleaner process per log dir (DESIGN.md section 3, Compaction), sharing
    ``log.cleaner.dedupe.buffer.size`` with the follower processes' cleaners as Kafka's threads
    share it.
    """
    if not config.log_cleaner_enable or config.log_cleaner_threads <= 0:
        return None
    log_dirs = replicas.log_manager.log_dirs
    manager = LogCleanerManager(log_dirs, clock)
    # Kafka's cleaner threads share one offset-map budget and one Throttler: each of the
    # len(log_dirs) * (1 + num.replica.fetchers) cleaner processes gets its share of both
    processes = max(len(log_dirs), 1) * (1 + config.num_replica_fetchers)
    settings = CleanerSettings(
        dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size // processes,
        load_factor=config.log_cleaner_io_buffer_load_factor,
        io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second / processes,
    )
    cleaner = LogCleaner(
        broker_id=config.node_id,
        manager=manager,
        candidates=led_compacted_logs(replicas),
        clock=clock,
        settings=settings,
        backoff_ms=config.log_cleaner_backoff_ms,
        log_level=log_level,
        log_json=log_json,
    )
    LogCleanerMetrics(registry, lambda: [cleaner.stats(), *follower_stats()], clock)
    return cleaner
