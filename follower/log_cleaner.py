"""The cleaner of a follower process: the compacted logs it follows, cleaned as the broker cleans the
logs it leads (the driver of the ``cleaner`` package: cleaner processes, one per log dir, started by
this process; results installed on this process's loop, since it owns these logs' files).

The first uncleanable offset of a followed log is bounded by its last stable offset as this replica
knows it: the high watermark its leader sent, and the first offset of the oldest transaction still
open in its producer state. The first dirty offsets are kept in memory (the broker is the only writer
of ``cleaner-offset-checkpoint``): they go to the broker with the periodic offsets report (and before
a handback), the broker writes them into the checkpoint and sends each back with the log's
``add_partitions`` entry, so a restarted process goes on where the last one stopped. A log handed
back to the broker (``remove_partitions``) is no longer offered, and a round in flight for it is not
installed. An I/O error while installing a round gives the partition up, as a failed append does.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from cleaner.driver import LogCleaner
from cleaner.manager import CleanableLog, InMemoryOffsets, LogCleanerManager
from client.cleaner_messages import CleanerSettings
from follower.fetch_state import TopicPartition
from follower.replica_log import ReplicaLog
from storage.cleaner import LastRecord, last_records_of_active_producers
from storage.clock import Clock

StorageErrorHandler = Callable[[TopicPartition, OSError], None]
"""(partition, error): a followed log could not take a cleaned round (FollowerService gives it up)."""
ReplacedHandler = Callable[[TopicPartition], None]
"""(partition): a cleaned segment was installed in a followed log (FollowerService announces it)."""


def build_follower_log_cleaner(
    settings: Mapping[str, Any],
    logs: Mapping[TopicPartition, ReplicaLog],
    *,
    broker_id: int,
    fetcher_id: int,
    clock: Clock,
    on_storage_error: StorageErrorHandler | None = None,
    on_replaced: ReplacedHandler | None = None,
) -> LogCleaner | None:
    """The cleaner over ``logs`` (the service's live map of followed logs), or None when the
    broker's settings (``FollowerSettings.log_cleaner``) turn cleaning off. ``on_storage_error``
    is told of a log whose cleaned segments could not be installed (an I/O error), ``on_replaced``
    of each cleaned segment installed (the broker reading the log must hear of it)."""
    if not settings:
        return None
    log_dirs = [pathlib.Path(d) for d in settings["log_dirs"]]
    manager = LogCleanerManager(log_dirs, clock, lambda _: InMemoryOffsets())
    return LogCleaner(
        broker_id=broker_id,
        manager=manager,
        candidates=followed_compacted_logs(logs, on_storage_error, on_replaced),
        clock=clock,
        settings=CleanerSettings.from_json(settings),
        backoff_ms=int(settings["backoff_ms"]),
        first_cleaner_id=1000 * (fetcher_id + 1),
    )


def followed_compacted_logs(
    logs: Mapping[TopicPartition, ReplicaLog],
    on_storage_error: StorageErrorHandler | None = None,
    on_replaced: ReplacedHandler | None = None,
) -> Callable[[], Iterator[CleanableLog]]:
    def candidates() -> Iterator[CleanableLog]:
        for tp, replica in list(logs.items()):
            log = replica.log
            if log.closed or not log.config.compact:
                continue
            yield CleanableLog(
                tp,
                log.directory.parent,
                log,
                _last_stable_offset(replica),
                _active_producers(replica),
                _is_current(logs, tp, replica),
                _storage_error(on_storage_error, tp),
                _replaced(on_replaced, tp),
            )

    return candidates


def _storage_error(handler: StorageErrorHandler | None, tp: TopicPartition) -> Callable[[OSError], None]:
    return lambda exc: None if handler is None else handler(tp, exc)


def _last_stable_offset(replica: ReplicaLog) -> int:
    high_watermark = replica.log.high_watermark
    first_unstable = replica.producer_state.first_unstable_offset()
    if first_unstable is None or first_unstable >= high_watermark:
        return high_watermark
    return max(first_unstable, replica.log.log_start_offset)


def _replaced(handler: ReplacedHandler | None, tp: TopicPartition) -> Callable[[], None]:
    return lambda: None if handler is None else handler(tp)


def _active_producers(replica: ReplicaLog) -> Callable[[], Mapping[int, LastRecord]]:
    return lambda: last_records_of_active_producers(replica.producer_state.producers)


def _is_current(
    logs: Mapping[TopicPartition, ReplicaLog], tp: TopicPartition, replica: ReplicaLog
) -> Callable[[], bool]:
    log = replica.log

    def current() -> bool:
        return logs.get(tp) is replica and replica.log is log and not log.closed

    return current
