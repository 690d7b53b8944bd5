"""The broker's follower processes: start them, route partitions to them, restart them, stop them.

A broker runs up to ``num.replica.fetchers`` follower processes (DESIGN.md section 1). A followed partition
always goes to the same one, Kafka's fetcher id ``abs(31 * topic.hashCode() + partition) %
num.replica.fetchers`` (broker/replication/followers/fetcher_ids.py), which then owns the partition's log
until it hands it back.

The processes start lazily. :meth:`FollowerSupervisor.start` only prepares (the metrics
directory); a fetcher id's process is launched, sent ``configure`` with the current broker epoch
and supervised from the first time a partition of that fetcher id is added. A broker follows
nothing until the metadata gives it a follower replica, and a single node never does, so a single
node is one process; a broker of a cluster runs processes only for the fetcher ids it uses. A
launch that fails is raised to the ``add_partitions`` caller: the slot is left as if never
launched (no process, no supervising task), its partitions stay in the table (so
``remove_partitions`` and ``stop()`` hand their logs back), and the next partition added to that
fetcher id tries the launch again.

:class:`FollowerSupervisor` keeps the *assignment table*: per followed partition, the entry last
sent in ``add_partitions``, whose handover is updated from the follower's ``offsets`` reports.
That table is what survives a follower crash. When a launched process dies the supervisor logs
its exit code at ERROR, waits a backoff (doubling up to a maximum while restarts keep failing
fast), starts a new process and sends it ``configure`` (with the current broker epoch) and every
partition of its fetcher id. Their handovers are then *unclean*: built from the last reported
offsets, which may be behind the files (or the files may end in a torn write), so the new process
recovers each log from its recovery point as crash recovery does (storage/handover.py).

Requests to one process are serialised by a per-process lock, so a launch or a restart never
interleaves with an add or a remove. While a process is down, ``add_partitions`` only records the
entry (the restart sends it) and ``remove_partitions`` answers from the table: no process has those
files open then.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import pathlib
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from broker.replication.followers.fetcher_ids import fetcher_id_for
from broker.replication.followers.followed_replicas import FollowedReplicas
from broker.replication.followers.metrics import FollowerMetricsCollector, LagSeries, forget_process
from broker.replication.followers.process import FollowerProcess
from broker.replication.followers.quota_shares import quota_shares
from cleaner.stats import CleanerStats
from client.replica_ipc import IpcClosedError, IpcError, JsonObject
from client.replica_messages import (
    ADD_PARTITIONS,
    CONFIGURE,
    FENCE_READS,
    METRICS_SNAPSHOT,
    OFFSETS,
    PARTITION_FAILED,
    READ_OFFSETS,
    REMOVE_PARTITIONS,
    SET_BROKER_EPOCH,
    SHUTDOWN,
    UPDATE_LOG_CONFIGS,
    UPDATE_REPLICATION_QUOTA,
    FollowerSettings,
    PartitionAssignment,
    PartitionOffsets,
    fetcher_client_id,
)
from client.tasks import cancel_and_wait
from storage.cleaner import CleanerOffsetCheckpoint
from storage.config import LogConfig
from storage.errors import StorageError
from storage.handover import LogHandover

_log = structlog.get_logger(__name__)

TopicPartition = tuple[str, int]
OffsetsCallback = Callable[..., object]
"""(topic, partition, HW, recovery point, log start offset, first_dirty_offset=offset when the
follower's cleaner reported one): LogManager.update_external_offsets."""
FailureCallback = Callable[[str, int, str], object]
"""(topic, partition, reason): a follower process gave a partition up."""

MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
_STABLE_RUN_S = 60.0
"""A process that ran this long before dying restarts after the initial backoff again."""


# -- the assignment table ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FollowedPartition:
    """A partition given to a follower process: its log's handover and the leader to follow.

    ``log_config`` None means the defaults of the supervisor's settings.
    """

    handover: LogHandover
    leader_id: int
    leader_host: str
    leader_port: int
    leader_epoch: int
    partition_epoch: int
    log_config: LogConfig | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return self.handover.topic_partition

    def to_message(self, first_dirty_offset: int | None = None) -> PartitionAssignment:
        return PartitionAssignment(
            handover=self.handover.to_json(),
            log_config={} if self.log_config is None else self.log_config.to_properties(),
            leader_id=self.leader_id,
            leader_host=self.leader_host,
            leader_port=self.leader_port,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            first_dirty_offset=first_dirty_offset,
        )


@dataclass(eq=False)
class _Slot:
    """One fetcher id: its current process (None while down) and the lock ordering its requests.

    ``supervisor_task`` is None until the slot's first process is launched (lazily, see the module
    docstring); from then on it restarts the process whenever it dies.
    """

    fetcher_id: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    process: FollowerProcess | None = None
    supervisor_task: asyncio.Task[None] | None = None
    launching: asyncio.Task[None] | None = None
    """The first launch while it runs (see FollowerSupervisor._add_to)."""
    sent_at_launch: dict[TopicPartition, FollowedPartition] = field(default_factory=dict)
    """The entries the last launch sent: an add that raced with it sends what it missed."""
    ran: bool = False
    """Whether a process of this slot ever got its partitions (until then its logs are untouched)."""
    restarts: int = 0
    cleaner_stats: CleanerStats | None = None
    """The latest snapshot of its process's log cleaner (with its offsets reports)."""


class FollowerSupervisor:
    """Starts, feeds, restarts and stops a broker's follower processes."""

    def __init__(
        self,
        broker_id: int,
        num_fetchers: int,
        settings: FollowerSettings,
        *,
        python_executable: str = sys.executable,
        on_offsets: OffsetsCallback | None = None,
        on_partition_failed: FailureCallback | None = None,
        metrics_dir: pathlib.Path | None = None,
        env: Mapping[str, str] | None = None,
        log_level: str = "INFO",
        log_json: bool = False,
        restart_backoff_ms: int = 500,
        restart_backoff_max_ms: int = 30_000,
        request_timeout_ms: int = 60_000,
        shutdown_timeout_ms: int = 30_000,
        read_replicas: FollowedReplicas | None = None,
    ) -> None:
        """``env`` is the children's base environment (default: the broker's).

        ``metrics_dir`` is where the children write their metrics (default: a directory named
        after the broker id and pid under the temp dir); its metric files are deleted at start and
        stop, and the directory too at stop when nothing else is in it.

        ``read_replicas`` (KIP-392) is told which logs are followed, fed the processes'
        ``read_offsets`` events and ``fence_reads`` requests, and drops a partition before its log
        is taken back.
        """
        if num_fetchers < 1:
            raise ValueError(f"num.replica.fetchers must be at least 1, got {num_fetchers}")
        self.broker_id = broker_id
        self.num_fetchers = num_fetchers
        self._settings = settings
        self._replication_quota: dict[int, JsonObject] = {}
        """The last follower replication quota sent to each process (a launched one gets it too)."""
        self._python = python_executable
        self._on_offsets = on_offsets
        self._on_partition_failed = on_partition_failed
        self._read_replicas = read_replicas
        self.metrics_dir = metrics_dir or pathlib.Path(tempfile.gettempdir()) / (
            f"kipling-follower-metrics-{broker_id}-{os.getpid()}"
        )
        self._env = dict(os.environ if env is None else env)
        self._log_level = log_level
        self._log_json = log_json
        self._restart_backoff_s = restart_backoff_ms / 1000
        self._restart_backoff_max_s = restart_backoff_max_ms / 1000
        self._request_timeout_s = request_timeout_ms / 1000
        self._shutdown_timeout_s = shutdown_timeout_ms / 1000
        self._slots = [_Slot(fetcher_id) for fetcher_id in range(num_fetchers)]
        self._assignments: dict[TopicPartition, FollowedPartition] = {}
        self._failed: dict[TopicPartition, str] = {}
        self._unclaimed: set[asyncio.Future[list[dict[TopicPartition, LogHandover]]]] = set()
        """Removals whose caller was cancelled (the broker is stopping): :meth:`stop` returns their
        handovers, so that logs the processes closed are not mistaken for logs left open."""
        self._started = False
        self._stopping = False
        self._logger = _log.bind(broker_id=broker_id)

    # -- lookups -------------------------------------------------------------------------------------

    def fetcher_id_for(self, topic: str, partition: int) -> int:
        return fetcher_id_for(topic, partition, self.num_fetchers)

    @property
    def assignments(self) -> Mapping[TopicPartition, FollowedPartition]:
        """The followed partitions with what is known of their logs (a copy)."""
        return dict(self._assignments)

    @property
    def failed_partitions(self) -> Mapping[TopicPartition, str]:
        """Partitions a follower process gave up, with the reason (until removed or re-added)."""
        return dict(self._failed)

    def process_ids(self) -> dict[int, int | None]:
        """Fetcher id -> pid of its running process (None while it is down or not launched yet)."""
        return {slot.fetcher_id: slot.process.pid if slot.process else None for slot in self._slots}

    def restart_count(self, fetcher_id: int) -> int:
        return self._slots[fetcher_id].restarts

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Prepare the metrics directory; processes start as their fetcher ids get partitions.

        Only a fetcher id that already has partitions (added before ``start``) gets its process
        now; if that fails, everything is stopped and the error raised.
        """
        if self._started:
            raise RuntimeError("FollowerSupervisor.start() called twice")
        self._started = True
        self._clean_metrics_dir()
        pending = [slot for slot in self._slots if self._partitions_of(slot)]
        try:
            await asyncio.gather(*(self._launch_locked(slot) for slot in pending))
        except BaseException:
            await self.stop()
            raise
        self._logger.info("follower supervisor started", fetcher_ids=self.num_fetchers, launched=len(pending))

    async def stop(self) -> dict[TopicPartition, LogHandover]:
        """Shut every process down (SIGKILL after the timeout); the handovers of every followed log.

        Handovers the processes returned are clean; those of a process that died or did not answer
        are rebuilt from the table, unclean. The table is empty afterwards. Removals still in
        flight whose caller gave up waiting (it was cancelled) finish first, and the handovers
        they got are returned too.
        """
        self._stopping = True
        if self._read_replicas is not None:
            self._read_replicas.unfollow_all()
        results = await self._claim_unclaimed()
        results += await asyncio.gather(*(self._stop_slot(slot) for slot in self._slots))
        results += await self._claim_unclaimed()  # any cancelled while the slots were stopping
        launches = [slot.launching for slot in self._slots if slot.launching is not None]
        await asyncio.gather(*launches, return_exceptions=True)  # each ended: done, or saw _stopping
        for slot in self._slots:
            error = await cancel_and_wait(slot.supervisor_task)
            if error is not None:  # the handovers and the other slots must still be collected
                self._logger.error("a follower slot's supervisor had failed", error=repr(error))
        handovers: dict[TopicPartition, LogHandover] = {}
        for result in results:
            handovers.update(result)
        self._assignments.clear()
        self._failed.clear()
        self._clean_metrics_dir(remove=True)
        self._logger.info("follower processes stopped", partitions=len(handovers))
        return handovers

    async def _claim_unclaimed(self) -> list[dict[TopicPartition, LogHandover]]:
        """The handovers of removals whose caller was cancelled, once they finished."""
        claimed: list[dict[TopicPartition, LogHandover]] = []
        while self._unclaimed:
            removal = self._unclaimed.pop()
            try:
                claimed += await removal
            except Exception:  # unexpected: its partitions stay in the table, handed back unclean
                self._logger.exception("a cancelled removal of partitions failed")
        return claimed

    async def _launch_locked(self, slot: _Slot) -> None:
        async with slot.lock:
            if slot.supervisor_task is None and not self._stopping:
                try:
                    await self._first_launch(slot)
                except Exception as exc:
                    self._logger.error(
                        "could not start follower process; retrying with backoff",
                        fetcher_id=slot.fetcher_id,
                        partitions=len(self._partitions_of(slot)),
                        error=repr(exc),
                    )
                    # the restart loop relaunches it with backoff, with the slot's whole table
                    slot.supervisor_task = asyncio.create_task(
                        self._supervise(slot), name=f"supervise-{slot.fetcher_id}"
                    )
                    raise

    async def _first_launch(self, slot: _Slot) -> None:
        """Launch the slot's first process and supervise it; the caller holds ``slot.lock``.

        On failure nothing of the slot is left started (``_launch`` kills the process) and the
        error propagates; the slot's partitions stay in the table.
        """
        process = await self._launch(slot)
        slot.process = process  # no await between these two: a cancellation cannot split them
        slot.supervisor_task = asyncio.create_task(self._supervise(slot), name=f"supervise-{slot.fetcher_id}")
        self._logger.info(
            "follower process started",
            fetcher_id=slot.fetcher_id,
            pid=process.pid,
            partitions=len(self._partitions_of(slot)),
        )

    def _clean_metrics_dir(self, *, remove: bool = False) -> None:
        """Delete the children's metric files (of earlier runs, or at stop); only ``*.db`` files go.

        The directory itself is created here, and removed at stop if nothing else is in it.
        """
        self.metrics_dir.mkdir(parents=True, exist_ok=True)
        for path in self.metrics_dir.glob("*.db"):
            path.unlink(missing_ok=True)
        if remove:
            with contextlib.suppress(OSError):
                self.metrics_dir.rmdir()

    async def _stop_slot(self, slot: _Slot) -> dict[TopicPartition, LogHandover]:
        async with slot.lock:
            process, slot.process = slot.process, None
            returned: dict[TopicPartition, LogHandover] | None = None
            if process is not None:
                try:
                    reply = await process.request(SHUTDOWN, {}, self._shutdown_timeout_s)
                    returned = _handovers(reply)
                except (IpcError, TimeoutError) as exc:
                    self._logger.error(
                        "follower process did not shut down cleanly",
                        fetcher_id=slot.fetcher_id,
                        error=repr(exc),
                    )
                code = await process.stop(self._shutdown_timeout_s)
                forget_process(self.metrics_dir, process.pid)
                self._logger.info("follower process exited", fetcher_id=slot.fetcher_id, exit_code=code)
            return self._final_handovers(slot, returned)

    def _final_handovers(
        self, slot: _Slot, returned: dict[TopicPartition, LogHandover] | None
    ) -> dict[TopicPartition, LogHandover]:
        """What the process returned, else the table's handover (unclean unless the process answered)."""
        out = {}
        for tp in self._partitions_of(slot):
            handover = returned.get(tp) if returned is not None else None
            if handover is None:
                # a slot whose process never got its partitions holds the broker's own handovers
                known = self._assignments[tp].handover
                clean = returned is not None or not slot.ran
                handover = known if clean else known.unclean()
            out[tp] = handover
        return out

    async def _launch(self, slot: _Slot) -> FollowerProcess:
        """Start a process for ``slot``: configure it and give it the slot's partitions."""
        slot.cleaner_stats = None  # a dead process's figures are not the new one's
        env = {**self._env, MULTIPROCESS_DIR_ENV: str(self.metrics_dir)}
        process = await FollowerProcess.spawn(
            python_executable=self._python,
            broker_id=self.broker_id,
            fetcher_id=slot.fetcher_id,
            env=env,
            on_event=functools.partial(self._on_event, slot),
            on_request=self._on_request,
            log_level=self._log_level,
            log_json=self._log_json,
        )
        sent: list[TopicPartition] = []
        try:
            await process.request(CONFIGURE, self._settings.to_json(), self._request_timeout_s)
            quota = self._replication_quota.get(slot.fetcher_id)
            if quota is not None:
                await process.request(UPDATE_REPLICATION_QUOTA, quota, self._request_timeout_s)
            entries = [self._assignments[tp] for tp in self._partitions_of(slot)]
            if entries:
                sent = [entry.topic_partition for entry in entries]
                await self._send_add(slot, process, entries)
            slot.sent_at_launch = {entry.topic_partition: entry for entry in entries}
            slot.ran = True
        except BaseException:
            self._mark_unclean(sent)  # it may have opened them, and now it is killed
            process.kill()
            await process.stop(self._shutdown_timeout_s)
            forget_process(self.metrics_dir, process.pid)
            raise
        return process

    async def _supervise(self, slot: _Slot) -> None:
        """Restart the slot's process whenever it dies, until the supervisor stops."""
        loop = asyncio.get_running_loop()
        delay = self._restart_backoff_s
        while not self._stopping:
            process = slot.process
            if process is not None:
                started = loop.time()
                code = await process.wait()
                if self._stopping or slot.process is not process:
                    continue
                self._on_process_died(slot, process, code)
                await process.channel.close()
                if loop.time() - started >= _STABLE_RUN_S:
                    delay = self._restart_backoff_s
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._restart_backoff_max_s)
            async with slot.lock:
                if self._stopping or slot.process is not None:
                    continue
                try:
                    slot.process = await self._launch(slot)
                except Exception:
                    self._logger.exception("could not restart follower process", fetcher_id=slot.fetcher_id)
                    continue
                slot.restarts += 1
                self._logger.warning(
                    "follower process restarted",
                    fetcher_id=slot.fetcher_id,
                    pid=slot.process.pid,
                    partitions=len(self._partitions_of(slot)),
                )

    def _on_process_died(self, slot: _Slot, process: FollowerProcess, code: int) -> None:
        """Log, forget its live gauges, mark its logs' handovers unclean (it may have left torn tails)."""
        slot.process = None
        partitions = self._partitions_of(slot)
        self._logger.error(
            "follower process died; restarting it",
            fetcher_id=slot.fetcher_id,
            pid=process.pid,
            exit_code=code,
            partitions=len(partitions),
        )
        forget_process(self.metrics_dir, process.pid)
        self._mark_unclean(partitions)

    def _mark_unclean(self, tps: Iterable[TopicPartition]) -> None:
        """A process that may have written these logs is gone: their handovers need recovery."""
        for tp in tps:
            entry = self._assignments.get(tp)
            if entry is not None:
                self._assignments[tp] = replace(entry, handover=entry.handover.unclean())

    def _partitions_of(self, slot: _Slot) -> list[TopicPartition]:
        return [tp for tp in self._assignments if self.fetcher_id_for(*tp) == slot.fetcher_id]

    # -- partitions ----------------------------------------------------------------------------------

    async def add_partitions(self, entries: Iterable[FollowedPartition]) -> None:
        """Give partitions to their follower processes (a partition already followed changes leader).

        The entries are in the table before anything is sent, so a process that dies meanwhile
        gets them from its restart. A log a process could not open is reported through the
        failure callback.

        A fetcher id without a process yet gets one now (once :meth:`start` was called), which
        is sent ``configure`` and every partition of its fetcher id. If that launch fails, the
        error is raised here once every other fetcher id got its entries; the failed fetcher id's
        entries stay in the table and the next call for that fetcher id launches again.
        """
        by_slot: dict[int, list[FollowedPartition]] = {}
        for entry in entries:
            tp = entry.topic_partition
            known = self._assignments.get(tp)
            if known is not None:  # its log stays where it is: keep what is known of it
                entry = replace(entry, handover=known.handover)
            self._assignments[tp] = entry
            self._failed.pop(tp, None)
            if self._read_replicas is not None:
                handover = entry.handover
                self._read_replicas.follow(tp[0], tp[1], handover.topic_id, handover.directory)
            by_slot.setdefault(self.fetcher_id_for(*tp), []).append(entry)
        results = await asyncio.gather(
            *(self._add_to(self._slots[fid], group) for fid, group in by_slot.items()),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _add_to(self, slot: _Slot, entries: list[FollowedPartition]) -> None:
        if slot.supervisor_task is None and self._started and not self._stopping:
            # Never launched: the launch sends the slot's whole table. It runs as a task of its own,
            # which a cancelled caller (a node stopping mid-transition) does not cancel: stop()
            # then waits for the slot's lock and shuts the new process down cleanly, instead of
            # killing it mid-launch and handing its logs back unclean.
            if slot.launching is None or slot.launching.done():
                slot.launching = asyncio.create_task(
                    self._launch_locked(slot), name=f"launch-follower-{slot.fetcher_id}"
                )
            await asyncio.shield(slot.launching)
            entries = [e for e in entries if slot.sent_at_launch.get(e.topic_partition) is not e]
            if not entries:
                return
        async with slot.lock:
            if slot.supervisor_task is None:  # stopping, or not started: the entries wait in the table
                return
            process = slot.process
            if process is None:
                return  # down: the restart sends the whole table
            try:
                await self._send_add(slot, process, entries)
            except IpcClosedError:
                pass  # it died: the restart sends them
            except (IpcError, TimeoutError) as exc:
                self._logger.error(
                    "add_partitions failed; restarting the process",
                    fetcher_id=slot.fetcher_id,
                    error=repr(exc),
                )
                await self._fence(process)

    async def _send_add(
        self, slot: _Slot, process: FollowerProcess, entries: Sequence[FollowedPartition]
    ) -> None:
        checkpoints: dict[str, dict[TopicPartition, int]] = {}
        messages = []
        for entry in entries:
            log_dir = entry.handover.log_dir
            if log_dir not in checkpoints:  # one read per log dir (a restart sends the whole table)
                checkpoints[log_dir] = _first_dirty_offsets(log_dir)
            messages.append(entry.to_message(checkpoints[log_dir].get(entry.topic_partition)).to_json())
        body = {"partitions": messages}
        reply = await process.request(ADD_PARTITIONS, body, self._request_timeout_s)
        for failure in reply.get("failed", []):
            self._partition_failed(
                slot, (str(failure["topic"]), int(failure["partition"])), str(failure["reason"])
            )

    async def remove_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LogHandover]:
        """Take partitions back: their processes stop fetching, close the logs and hand them over.

        Partitions not followed are ignored. If a process fails to answer it is killed first, and
        the handover comes from the table (unclean), so nobody opens a log a process may still write.

        A removal, once sent, is not undone by cancelling the caller: the process closes the logs
        whatever happens to the caller, so the removal finishes regardless (the table forgets
        those partitions) and :meth:`stop` returns their handovers. Otherwise a broker stopping
        while its metadata loader takes a partition back would keep a log the process closed
        cleanly under the table's last handover, unclean, and not mark its log dir clean.
        """
        by_slot: dict[int, list[TopicPartition]] = {}
        for tp in dict.fromkeys(tps):
            if tp in self._assignments:
                by_slot.setdefault(self.fetcher_id_for(*tp), []).append(tp)
        if self._read_replicas is not None:  # nothing reads a log about to change owner
            self._read_replicas.unfollow([tp for group in by_slot.values() for tp in group])
        removal = asyncio.gather(
            *(self._remove_from(self._slots[fid], group) for fid, group in by_slot.items())
        )
        try:
            results = await asyncio.shield(removal)
        except asyncio.CancelledError:
            self._unclaimed.add(removal)
            raise
        out: dict[TopicPartition, LogHandover] = {}
        for result in results:
            out.update(result)
        return out

    async def _remove_from(self, slot: _Slot, tps: list[TopicPartition]) -> dict[TopicPartition, LogHandover]:
        async with slot.lock:
            tps = [tp for tp in tps if tp in self._assignments]
            returned: dict[TopicPartition, LogHandover] | None = {}
            process = slot.process
            if process is not None and tps:
                try:
                    reply = await process.request(
                        REMOVE_PARTITIONS, {"partitions": [list(tp) for tp in tps]}, self._request_timeout_s
                    )
                    returned = _handovers(reply)
                except (IpcError, TimeoutError) as exc:
                    self._logger.error(
                        "remove_partitions failed; stopping the process before handing the logs back",
                        fetcher_id=slot.fetcher_id,
                        error=repr(exc),
                    )
                    await self._fence(process)
                    returned = None
            out = {}
            for tp in tps:
                entry = self._assignments.pop(tp)
                self._failed.pop(tp, None)
                handover = returned.get(tp) if returned is not None else None
                if handover is None:
                    handover = entry.handover if returned is not None else entry.handover.unclean()
                out[tp] = handover
            return out

    async def _fence(self, process: FollowerProcess) -> None:
        """Make sure ``process`` is dead (its supervisor task then restarts the slot)."""
        process.kill()
        await process.wait()

    async def set_broker_epoch(self, epoch: int) -> None:
        """The broker's new epoch goes into later Fetch requests (and into ``configure`` at launches).

        A fetcher id whose process is down or not launched yet only gets it in that ``configure``.
        """
        self._settings = replace(self._settings, broker_epoch=epoch)
        await asyncio.gather(*(self._send_epoch(slot, epoch) for slot in self._slots))

    async def _send_epoch(self, slot: _Slot, epoch: int) -> None:
        async with slot.lock:
            if slot.process is None:
                return
            try:
                await slot.process.request(SET_BROKER_EPOCH, {"epoch": epoch}, self._request_timeout_s)
            except (IpcError, TimeoutError) as exc:
                self._logger.warning(
                    "could not send the broker epoch", fetcher_id=slot.fetcher_id, error=repr(exc)
                )

    async def update_replication_quota(
        self, rate: int, throttled: Mapping[str, frozenset[int] | str]
    ) -> None:
        """The follower side of the replication quota for every process: its share of the broker's
        rate (Kafka's one follower quota spans all its fetcher threads: see
        :mod:`~broker.replication.followers.quota_shares`) and the throttled partitions; a process
        launched later gets them after its configure."""
        shares = quota_shares(rate, throttled, len(self._slots), self._assignments)
        listed = {t: p if isinstance(p, str) else sorted(p) for t, p in throttled.items()}
        self._replication_quota = {
            slot.fetcher_id: {"rate": shares[slot.fetcher_id], "throttled": listed} for slot in self._slots
        }
        await asyncio.gather(
            *(self._send_quota(slot, self._replication_quota[slot.fetcher_id]) for slot in self._slots)
        )

    def replication_quota_body(self, fetcher_id: int) -> JsonObject | None:
        """The follower replication quota last sent to (or kept for) process ``fetcher_id``."""
        return self._replication_quota.get(fetcher_id)

    async def _send_quota(self, slot: _Slot, body: JsonObject) -> None:
        async with slot.lock:
            if slot.process is None:
                return  # its launch sends the quota
            try:
                await slot.process.request(UPDATE_REPLICATION_QUOTA, body, self._request_timeout_s)
            except Exception:
                _log.warning(
                    "could not send the replication quota", fetcher_id=slot.fetcher_id, exc_info=True
                )

    async def update_log_configs(self, configs: Mapping[TopicPartition, LogConfig]) -> None:
        """A dynamic config change reaches the followed logs: the table takes the new configs (a
        restarted process opens its logs with them) and each running process gets its own."""
        by_slot: dict[int, list[JsonObject]] = {}
        for tp, config in configs.items():
            entry = self._assignments.get(tp)
            if entry is None or entry.log_config == config:
                continue
            self._assignments[tp] = replace(entry, log_config=config)
            by_slot.setdefault(self.fetcher_id_for(*tp), []).append(
                {"topic": tp[0], "partition": tp[1], "log_config": config.to_properties()}
            )
        await asyncio.gather(
            *(self._send_log_configs(self._slots[fid], entries) for fid, entries in by_slot.items())
        )

    async def _send_log_configs(self, slot: _Slot, entries: list[JsonObject]) -> None:
        async with slot.lock:
            if slot.process is None:
                return  # down or not launched: its launch sends the table, new configs included
            try:
                await slot.process.request(
                    UPDATE_LOG_CONFIGS, {"partitions": entries}, self._request_timeout_s
                )
            except (IpcError, TimeoutError) as exc:
                self._logger.warning(
                    "could not send new log configs", fetcher_id=slot.fetcher_id, error=repr(exc)
                )

    async def snapshot(self, fetcher_id: int) -> JsonObject:
        """The process's ``metrics_snapshot`` (per-partition offsets and fetch states, for diagnostics)."""
        slot = self._slots[fetcher_id]
        async with slot.lock:
            if slot.process is None:
                raise IpcClosedError(f"follower process {fetcher_id} is not running")
            return await slot.process.request(METRICS_SNAPSHOT, {}, self._request_timeout_s)

    # -- events --------------------------------------------------------------------------------------

    def _on_event(self, slot: _Slot, message_type: str, body: JsonObject) -> None:
        if message_type == OFFSETS:
            for item in body.get("partitions", []):
                self._offsets_reported(slot, PartitionOffsets.from_json(item))
            if "cleaner" in body:
                slot.cleaner_stats = CleanerStats.from_json(body["cleaner"])
        elif message_type == READ_OFFSETS:
            if self._read_replicas is not None:
                self._read_replicas.on_read_offsets(body.get("partitions", []))
        elif message_type == PARTITION_FAILED:
            self._partition_failed(slot, (str(body["topic"]), int(body["partition"])), str(body["reason"]))
        else:
            self._logger.warning("unknown event from a follower process", type=message_type)

    async def _on_request(self, message_type: str, body: JsonObject) -> JsonObject:
        """A follower process's request: the read fence before it truncates below what it
        announced (answered once no read can reach the cut)."""
        if message_type != FENCE_READS:
            raise ValueError(f"unknown request from a follower process: {message_type!r}")
        if self._read_replicas is not None:
            self._read_replicas.fence(str(body["topic"]), int(body["partition"]), int(body["offset"]))
        return {}

    def _offsets_reported(self, slot: _Slot, offsets: PartitionOffsets) -> None:
        tp = (offsets.topic, offsets.partition)
        entry = self._assignments.get(tp)
        if entry is None or self.fetcher_id_for(*tp) != slot.fetcher_id:
            return  # removed meanwhile: the handover it returned is newer
        handover = replace(
            entry.handover,
            log_end_offset=offsets.log_end_offset,
            high_watermark=offsets.high_watermark,
            recovery_point=offsets.recovery_point,
            log_start_offset=offsets.log_start_offset,
            clean=False,
        )
        self._assignments[tp] = replace(entry, handover=handover)
        if self._on_offsets is not None:
            extra = (
                {}
                if offsets.first_dirty_offset is None
                else {"first_dirty_offset": offsets.first_dirty_offset}
            )
            self._on_offsets(
                offsets.topic,
                offsets.partition,
                offsets.high_watermark,
                offsets.recovery_point,
                offsets.log_start_offset,
                **extra,
            )

    def _partition_failed(self, slot: _Slot, tp: TopicPartition, reason: str) -> None:
        if tp not in self._assignments:
            return
        self._failed[tp] = reason
        self._logger.error(
            "follower process gave a partition up",
            fetcher_id=slot.fetcher_id,
            topic=tp[0],
            partition=tp[1],
            reason=reason,
        )
        if self._on_partition_failed is not None:
            self._on_partition_failed(tp[0], tp[1], reason)

    # -- metrics -------------------------------------------------------------------------------------

    def cleaner_stats(self) -> list[CleanerStats]:
        """The running follower processes' latest log cleaner snapshots (the broker's cleaner gauges
        combine them with its own)."""
        return [s.cleaner_stats for s in self._slots if s.process is not None and s.cleaner_stats is not None]

    def register_collector(self, registry: CollectorRegistry) -> FollowerMetricsCollector:
        """Show the follower processes' metrics on ``registry`` (the broker's ``/metrics``)."""
        collector = FollowerMetricsCollector(self.metrics_dir, self._live_lag_series)
        registry.register(collector)
        return collector

    def _live_lag_series(self) -> Set[LagSeries]:
        return {
            (fetcher_client_id(self.fetcher_id_for(*tp), entry.leader_id), tp[0], str(tp[1]))
            for tp, entry in self._assignments.items()
            if tp not in self._failed
        }


def _first_dirty_offsets(log_dir: str) -> dict[TopicPartition, int]:
    """A log dir's ``cleaner-offset-checkpoint`` (written by this broker from its own cleaner and its
    follower processes' reports), sent with each assignment; unreadable: none (cleaned from start)."""
    try:
        return CleanerOffsetCheckpoint(pathlib.Path(log_dir)).read()
    except (OSError, StorageError) as exc:
        _log.warning("cannot read the cleaner checkpoint", log_dir=log_dir, error=str(exc))
        return {}


def _handovers(reply: Mapping[str, Any]) -> dict[TopicPartition, LogHandover]:
    handovers = (LogHandover.from_json(item) for item in reply.get("handovers", []))
    return {handover.topic_partition: handover for handover in handovers}


__all__ = ["FollowedPartition", "FollowerSupervisor", "fetcher_id_for"]
