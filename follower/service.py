"""A follower process's state: the logs it owns, the fetchers that fill them, and what it reports.

:class:`FollowerService` is driven by its broker's IPC requests (follower/ipc.py turns messages
into calls here). It owns every log handed to it until it hands it back: it opens the log from the
handover, gives it to the fetcher of the partition's leader (one :class:`SourceBrokerFetcher` per
source broker, created on demand and stopped when it has no partition left), and on removal stops
fetching, snapshots the producer state, flushes and closes the log and returns the handover.
Besides, it tells the broker the offsets it must checkpoint (the broker writes the log dir's
checkpoint files, one writer per file), fsyncs idle logs whose ``flush.ms`` is due, applies
retention and forgets idle producers, as a LogManager would.

Everything runs on one event loop: a request handler and a fetcher round never interleave inside
a synchronous log operation, and a fetcher drops any response for a partition removed while the
request was in flight, so after :meth:`FollowerService.remove_partitions` no byte reaches the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog

from cleaner.driver import LogCleaner
from client.replica_ipc import IpcClosedError
from client.replica_messages import (
    OFFSETS,
    PARTITION_FAILED,
    FollowerSettings,
    PartitionAssignment,
    PartitionOffsets,
)
from client.replication_quota import ReplicationQuota
from follower.fetch_state import TopicPartition
from follower.log_cleaner import build_follower_log_cleaner
from follower.metrics import FetcherMetrics
from follower.read_offsets import ReadOffsetsAnnouncer, RequestBroker
from follower.replica_log import ReplicaLog
from follower.source_fetcher import Connect, SourceBroker, SourceBrokerFetcher, fetcher_name
from storage.clock import Clock, SystemClock
from storage.config import LogConfig
from storage.file_pool import size_process_pool
from storage.handover import LogHandover, open_handed_over_log
from storage.producer_state import PRODUCER_EXPIRATION_CHECK_INTERVAL_MS

QUOTA_RATE_INTERVAL_MS = 1000
"""How often the follower replication byte-rate gauge is refreshed."""

_log = structlog.get_logger(__name__)

SendEvent = Callable[[str, dict[str, Any]], Awaitable[None]]
ConnectFactory = Callable[[SourceBroker, FollowerSettings, str], Connect]
_NEVER_FLUSH_MS = LogConfig().flush_ms


@dataclass(slots=True)
class FollowedPartition:
    """A partition this process follows: its log and where its leader is."""

    log: ReplicaLog
    source: SourceBroker
    leader_epoch: int
    partition_epoch: int
    reported: PartitionOffsets | None = None
    """The offsets last sent to the broker (only changes are sent)."""


@dataclass(frozen=True, slots=True)
class AddResult:
    added: list[TopicPartition]
    failed: dict[TopicPartition, str]


class FollowerService:
    """The logs and fetchers of one follower process (one fetcher id of one broker)."""

    def __init__(
        self,
        broker_id: int,
        fetcher_id: int,
        *,
        send_event: SendEvent,
        metrics: FetcherMetrics,
        storage_clock: Clock | None = None,
        connect_factory: ConnectFactory | None = None,
        request_broker: RequestBroker | None = None,
    ) -> None:
        """``request_broker`` asks the broker (the IPC channel's ``request``): the read fence before a
        truncation below an announced high watermark (follower/read_offsets.py)."""
        self.broker_id = broker_id
        self.fetcher_id = fetcher_id
        self._send_event = send_event
        self._metrics = metrics
        self._storage_clock = storage_clock or SystemClock()
        self._connect_factory = connect_factory
        self._settings: FollowerSettings | None = None
        self._partitions: dict[TopicPartition, FollowedPartition] = {}
        self._logs: dict[TopicPartition, ReplicaLog] = {}
        """Shared by every fetcher: a partition's log is here exactly while it is followed."""
        self._fetchers: dict[SourceBroker, SourceBrokerFetcher] = {}
        self.replication_quota = ReplicationQuota(lambda: int(time.monotonic() * 1000))
        """The follower side of the replication quota, shared by every fetcher of this process."""
        self._housekeeping: list[asyncio.Task[None]] = []
        self._event_tasks: set[asyncio.Task[None]] = set()
        self._cleaner: LogCleaner | None = None
        self.read_offsets = ReadOffsetsAnnouncer(send_event, request_broker)
        """What the broker may read of each followed log (KIP-392), kept announced and fenced."""
        self.stopped = asyncio.Event()

    # -- configuration -------------------------------------------------------------------------------

    @property
    def settings(self) -> FollowerSettings:
        if self._settings is None:
            raise RuntimeError("the follower process has not been configured yet")
        return self._settings

    def configure(self, settings: FollowerSettings) -> None:
        """Take the broker's settings (first message); the periodic tasks start here."""
        first = self._settings is None
        self._settings = settings
        for fetcher in self._fetchers.values():
            fetcher.set_broker_epoch(settings.broker_epoch)
        if first:
            open_at_most = size_process_pool(settings.log_open_files_max)
            _log.info("segment files", open_at_most=open_at_most)
            self._start_housekeeping(settings)
            self._cleaner = build_follower_log_cleaner(
                settings.log_cleaner,
                self._logs,
                broker_id=self.broker_id,
                fetcher_id=self.fetcher_id,
                clock=self._storage_clock,
                on_storage_error=self._on_cleaner_storage_error,
                on_replaced=self._on_segments_replaced,
            )
            if self._cleaner is not None:
                self._cleaner.start()
        _log.info("configured", broker_epoch=settings.broker_epoch)

    def set_broker_epoch(self, epoch: int) -> None:
        """The broker registered again: later Fetch requests carry the new epoch."""
        self._settings = replace(self.settings, broker_epoch=epoch)
        for fetcher in self._fetchers.values():
            fetcher.set_broker_epoch(epoch)

    # -- partitions ----------------------------------------------------------------------------------

    async def add_partitions(self, assignments: Iterable[PartitionAssignment]) -> AddResult:
        """Open the handed-over logs and follow them; re-adding one moves it to its new leader/epoch.

        A log that cannot be opened fails that partition only (it is reported in the result).
        """
        settings = self.settings
        added: list[TopicPartition] = []
        failed: dict[TopicPartition, str] = {}
        for assignment in assignments:
            tp = assignment.topic_partition
            try:
                self._add(tp, assignment, settings)
            except Exception as exc:
                _log.exception("cannot follow partition", topic=tp[0], partition=tp[1])
                failed[tp] = f"{type(exc).__name__}: {exc}"
            else:
                added.append(tp)
        # before any fetch round can cut these logs (no await came since they were given to their
        # fetchers) and before the reply: the broker reads them from the offsets announced here
        await self.read_offsets.announce(self._logs, added)
        await self._stop_idle_fetchers()
        return AddResult(added, failed)

    def _add(self, tp: TopicPartition, assignment: PartitionAssignment, settings: FollowerSettings) -> None:
        source = SourceBroker(assignment.leader_id, assignment.leader_host, assignment.leader_port)
        current = self._partitions.get(tp)
        if current is None:
            handover = LogHandover.from_json(assignment.handover)
            if handover.topic_partition != tp:
                raise ValueError(f"handover for {handover.topic_partition} in the entry of {tp}")
            config = LogConfig.from_properties(assignment.log_config or settings.log_config)
            log = self._open_replica_log(handover, config, settings.producer_id_expiration_ms)
            current = FollowedPartition(log, source, assignment.leader_epoch, assignment.partition_epoch)
            if self._cleaner is not None:
                log_dir = log.log.directory.parent
                self._cleaner.manager.take_first_dirty_offset(log_dir, tp, assignment.first_dirty_offset)
            self._partitions[tp] = current
            self._logs[tp] = log
        else:
            if current.source != source:
                self._fetchers[current.source].remove_partitions([tp])
            # a leader change can carry a config change of the same metadata delta: the broker's
            # table then already holds the new config and sends no update_log_configs for it
            config = LogConfig.from_properties(assignment.log_config or settings.log_config)
            if current.log.log.config != config:
                current.log.log.reconfigure(config)
        current.source = source
        current.leader_epoch = assignment.leader_epoch
        current.partition_epoch = assignment.partition_epoch
        topic_id = current.log.log.topic_id
        self._fetcher_for(source).add_partition(tp, assignment.leader_epoch, topic_id)
        _log.info(
            "following partition",
            topic=tp[0],
            partition=tp[1],
            leader_id=source.broker_id,
            leader_epoch=assignment.leader_epoch,
            log_end_offset=current.log.log_end_offset,
        )

    def _open_replica_log(
        self, handover: LogHandover, config: LogConfig, producer_id_expiration_ms: int
    ) -> ReplicaLog:
        """Open the handed-over log and rebuild its producer state; the log is closed if that fails."""
        partition_log = open_handed_over_log(handover, config, self._storage_clock)
        try:
            return ReplicaLog(
                partition_log,
                clock=self._storage_clock,
                producer_id_expiration_ms=producer_id_expiration_ms,
            )
        except BaseException:
            partition_log.close()
            raise

    def update_replication_quota(self, rate: int, throttled: Mapping[str, frozenset[int] | str]) -> None:
        """The broker's follower replication quota (this process's share of the rate, and the
        partitions it throttles) changed."""
        self.replication_quota.update(rate, throttled)
        _log.info("replication quota", rate=rate, throttled=sorted(throttled))

    def update_log_configs(self, configs: Mapping[TopicPartition, Mapping[str, str]]) -> list[TopicPartition]:
        """A dynamic config change: give each followed log its new configuration (topic properties).

        The log reads it at its next append, roll, flush check and retention pass; a partition not
        followed here is skipped (the broker's table already carries the new config for when it is
        added). Returns the partitions updated.
        """
        updated: list[TopicPartition] = []
        for tp, props in configs.items():
            followed = self._partitions.get(tp)
            if followed is None:
                continue
            followed.log.log.reconfigure(LogConfig.from_properties(props))
            updated.append(tp)
        if updated:
            _log.info("log configs updated", partitions=len(updated))
        return updated

    async def remove_partitions(self, tps: Iterable[TopicPartition]) -> list[LogHandover]:
        """Stop following ``tps``, flush and close their logs; their handovers (unknown ones skipped).

        Moved offsets are reported first (on the channel the reply follows): the broker's
        checkpoint then holds this cleaner's first dirty offsets, lowered below any truncation,
        when the broker takes the logs back.
        """
        with contextlib.suppress(Exception):
            await self.report_offsets()
        handovers = []
        for tp in tps:
            followed = self._partitions.pop(tp, None)
            if followed is None:
                continue
            self._fetchers[followed.source].remove_partitions([tp])
            del self._logs[tp]
            self.read_offsets.forget([tp])
            handover = followed.log.close_for_handover()
            handovers.append(handover)
            _log.info(
                "partition handed back",
                topic=tp[0],
                partition=tp[1],
                log_end_offset=handover.log_end_offset,
                high_watermark=handover.high_watermark,
            )
        await self._stop_idle_fetchers()
        return handovers

    def _fetcher_for(self, source: SourceBroker) -> SourceBrokerFetcher:
        fetcher = self._fetchers.get(source)
        if fetcher is None:
            settings = self.settings
            name = fetcher_name(self.fetcher_id, source.broker_id)
            connect = None
            if self._connect_factory is not None:
                connect = self._connect_factory(source, settings, name)
            fetcher = SourceBrokerFetcher(
                self.fetcher_id,
                source,
                self._logs,
                settings,
                replica_id=self.broker_id,
                stats=self._metrics.fetcher(name),
                on_failed=self._on_partition_failed,
                connect=connect,
                quota=self.replication_quota,
                before_truncate=self.read_offsets.fence,
                after_round=self._after_fetch_round,
            )
            self._fetchers[source] = fetcher
            fetcher.start()
        return fetcher

    async def _after_fetch_round(self, touched: set[TopicPartition]) -> None:
        """One fetcher round ended: announce the moved read offsets of the partitions it touched."""
        await self.read_offsets.announce(self._logs, touched)

    async def _stop_idle_fetchers(self) -> None:
        used = {followed.source for followed in self._partitions.values()}
        for source in [source for source in self._fetchers if source not in used]:
            await self._fetchers.pop(source).stop()

    # -- reports -------------------------------------------------------------------------------------

    def _on_partition_failed(self, tp: TopicPartition, reason: str) -> None:
        """A fetcher gave ``tp`` up: tell the broker (the log stays open here until removed)."""
        body = {"topic": tp[0], "partition": tp[1], "reason": reason}
        self._spawn_event(PARTITION_FAILED, body)

    def _on_cleaner_storage_error(self, tp: TopicPartition, exc: OSError) -> None:
        """The cleaner could not install a cleaned round (an I/O error): as after a failed append,
        stop fetching the partition and tell the broker it was given up (the log stays open here
        until removed; the next owner's open finishes or undoes the install)."""
        followed = self._partitions.get(tp)
        if followed is None:
            return
        fetcher = self._fetchers.get(followed.source)
        if fetcher is not None:
            fetcher.remove_partitions([tp])
        self._on_partition_failed(tp, f"installing a cleaned segment failed: {exc!r}")

    def _on_segments_replaced(self, tp: TopicPartition) -> None:
        """The cleaner installed a cleaned segment in ``tp``'s log: announce its new segment
        generation, so the broker drops the replaced files it may hold (follower/read_offsets.py)."""
        task = asyncio.create_task(self.read_offsets.announce(self._logs, [tp]))
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    def _spawn_event(self, message_type: str, body: dict[str, Any]) -> None:
        task = asyncio.create_task(self._send_quietly(message_type, body))
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    async def _send_quietly(self, message_type: str, body: dict[str, Any]) -> None:
        try:
            await self._send_event(message_type, body)
        except Exception as exc:
            _log.warning("could not send an event to the broker", type=message_type, error=repr(exc))

    def moved_offsets(self) -> list[PartitionOffsets]:
        """The partitions whose offsets changed since they were last reported (marked reported)."""
        moved = []
        manager = self._cleaner.manager if self._cleaner is not None else None
        for (topic, partition), followed in self._partitions.items():
            log = followed.log.log
            offsets = PartitionOffsets(
                topic,
                partition,
                log.high_watermark,
                log.recovery_point,
                log.log_start_offset,
                log.log_end_offset,
                None if manager is None else manager.first_dirty_offset(log.directory.parent, log),
            )
            if offsets != followed.reported:
                followed.reported = offsets
                moved.append(offsets)
        return moved

    async def report_offsets(self) -> None:
        """The moved offsets, and the cleaner's figures (the broker's cleaner gauges show them)."""
        body: dict[str, Any] = {"partitions": [o.to_json() for o in self.moved_offsets()]}
        if self._cleaner is not None:
            body["cleaner"] = self._cleaner.stats().to_json()
        if body["partitions"] or self._cleaner is not None:
            await self._send_event(OFFSETS, body)

    def snapshot(self) -> dict[str, Any]:
        """Per partition: offsets and fetch state; per fetcher: its leader and counts (diagnostics)."""
        partitions = []
        for tp, followed in self._partitions.items():
            fetcher = self._fetchers.get(followed.source)
            state = fetcher.fetch_state(tp) if fetcher is not None else None
            log = followed.log.log
            partitions.append(
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "leader_id": followed.source.broker_id,
                    "leader_epoch": followed.leader_epoch,
                    "log_start_offset": log.log_start_offset,
                    "log_end_offset": log.log_end_offset,
                    "high_watermark": log.high_watermark,
                    "recovery_point": log.recovery_point,
                    "fetch_offset": None if state is None else state.fetch_offset,
                    "lag": None if state is None else state.lag,
                    "state": None if state is None else state.state.value,
                    "failed": fetcher is not None and tp in fetcher.failed_partitions,
                }
            )
        fetchers = [
            {
                "name": fetcher.name,
                "leader_id": source.broker_id,
                "leader": f"{source.host}:{source.port}",
                "connected": fetcher.connected,
                "broker_epoch": fetcher.broker_epoch,
                "partitions": len(fetcher.partitions),
                "failed": len(fetcher.failed_partitions),
            }
            for source, fetcher in self._fetchers.items()
        ]
        return {"partitions": partitions, "fetchers": fetchers}

    # -- housekeeping --------------------------------------------------------------------------------

    def _start_housekeeping(self, settings: FollowerSettings) -> None:
        self._housekeeping = [
            asyncio.create_task(_every(settings.offsets_report_interval_ms, self.report_offsets, "offsets")),
            asyncio.create_task(_every(settings.flush_check_interval_ms, self._flush_due, "flush")),
            asyncio.create_task(
                _every(settings.log_retention_check_interval_ms, self._run_retention, "retention")
            ),
            asyncio.create_task(
                _every(PRODUCER_EXPIRATION_CHECK_INTERVAL_MS, self._expire_producers, "producer-expiration")
            ),
            asyncio.create_task(_every(QUOTA_RATE_INTERVAL_MS, self._publish_quota_rate, "quota-rate")),
        ]

    async def _publish_quota_rate(self) -> None:
        """The follower quota's current rate as a gauge (it decays while nothing is fetched)."""
        self._metrics.follower_replication_byte_rate.set(self.replication_quota.rate())

    async def _flush_due(self) -> None:
        """fsync the logs whose flush.ms passed with unflushed data (appends check it only when busy)."""
        for followed in list(self._partitions.values()):
            log = followed.log.log
            if log.config.flush_ms < _NEVER_FLUSH_MS:
                log.flush_if_due()

    async def _run_retention(self) -> None:
        for followed in list(self._partitions.values()):
            followed.log.delete_old_segments()
        await self.read_offsets.announce(self._logs, list(self._logs))  # log start offsets moved

    async def _expire_producers(self) -> None:
        """Forget idle producers, as the leader does, so the snapshots this process writes stay small."""
        for followed in list(self._partitions.values()):
            followed.log.remove_expired_producers()

    # -- shutdown ------------------------------------------------------------------------------------

    async def shutdown(self, *, report: bool = True) -> list[LogHandover]:
        """Stop every fetcher, close every log; the handovers. With ``report``, send final offsets.

        Idempotent: a second call returns nothing (everything was handed over by the first).
        """
        for task in self._housekeeping:
            task.cancel()
        await asyncio.gather(*self._housekeeping, return_exceptions=True)
        self._housekeeping = []
        if self._cleaner is not None:
            await self._cleaner.stop()  # no install may land on a log being closed
            self._cleaner = None
        for fetcher in list(self._fetchers.values()):
            await fetcher.stop()
        self._fetchers.clear()
        handovers = []
        for tp, followed in list(self._partitions.items()):
            try:
                handovers.append(followed.log.close_for_handover())
            except Exception:
                _log.exception("could not close a log cleanly", topic=tp[0], partition=tp[1])
        final = [_offsets_of(handover) for handover in handovers]
        self._partitions.clear()
        self._logs.clear()
        if report and final:
            with contextlib.suppress(Exception):
                await self._send_event(OFFSETS, {"partitions": [o.to_json() for o in final]})
        await asyncio.gather(*self._event_tasks, return_exceptions=True)
        self.stopped.set()
        _log.info("follower process stopped", partitions=len(handovers))
        return handovers


async def _every(interval_ms: int, action: Callable[[], Awaitable[None]], name: str) -> None:
    """Run ``action`` every ``interval_ms``; a failure is logged and the schedule goes on. A closed
    IPC channel ends it quietly: the broker is gone, and the shutdown that follows says so."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await action()
        except IpcClosedError:
            return
        except Exception:
            _log.exception("periodic task failed", task=name)


def _offsets_of(handover: LogHandover) -> PartitionOffsets:
    return PartitionOffsets(
        handover.topic,
        handover.partition,
        handover.high_watermark,
        handover.recovery_point,
        handover.log_start_offset,
        handover.log_end_offset,
    )


__all__ = ["AddResult", "FollowedPartition", "FollowerService"]
