"""The owner's side of log cleaning: cleaner processes fed by a LogCleanerManager, results installed here.

Used by whichever process owns logs: the broker for the logs it leads (broker/log_cleaner), a
follower process for the logs it follows (follower/log_cleaner.py). A cleaning round holds the GIL
for as long as it reads and rewrites segments, so it never runs in the owner's process. Per log dir a
worker loop here takes the filthiest compacted log the owner offers
(:class:`~cleaner.manager.LogCleanerManager`), builds the round's task from the log as it is now
(:func:`storage.cleaner.plan_clean`: only inactive segments, the first uncleanable offset bounded by
the last stable offset and the active segment, the aborted transactions, the active producers' last
records, the topic's config, now) and sends it to its cleaner process. The process writes fsynced
``.cleaned`` files; back on the owner's loop each group is installed with
:meth:`PartitionLog.replace_segments`, which refuses a group whose segments changed meanwhile
(retention, DeleteRecords, truncation): its files are deleted and the checkpoint is left as it was.
A log that is no longer the owner's (handed over, closed) is not installed into; the round's own
``.cleaned`` files are still removed (they carry the round's token, so two owners' rounds never
write the same file, and the new owner's loader may have run before they were written).

A worker starts its process the first time it has a log to clean (a log dir without compacted logs
costs no process). A dead cleaner process is restarted (after a backoff, doubling while starts keep
failing); its round is abandoned. Nothing to clean: the worker sleeps ``log.cleaner.backoff.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import structlog

from cleaner.manager import CleanableLog, LogCleanerManager, LogToClean
from cleaner.process import CleanerProcess
from cleaner.stats import CleanerStats, RoundStats, UncleanableStats
from client.cleaner_messages import CLEAN, CONFIGURE, CleanerSettings
from client.replica_ipc import IpcError, IpcRemoteError
from client.tasks import cancel_and_wait
from storage.cleaner import CleanResult, plan_clean, remove_cleaned_files
from storage.clock import Clock

_log = structlog.get_logger(__name__)

Spawn = Callable[[int], Awaitable[CleanerProcess]]
_RESTART_BACKOFF_S = 1.0
_MAX_RESTART_BACKOFF_S = 30.0
_STOP_TIMEOUT_S = 5.0
_MAX_DEATHS_PER_LOG = 2
"""Rounds of one log in a row during which the cleaner process died before the log is marked
uncleanable: a log that kills its cleaner (memory, a crash in a codec) must not keep the
filthiest slot of its log dir, and every other log there from being cleaned, forever."""


@dataclass(eq=False)
class _Worker:
    cleaner_id: int
    log_dir: pathlib.Path
    process: CleanerProcess | None = None
    task: asyncio.Task[None] | None = None
    restart_backoff_s: float = _RESTART_BACKOFF_S
    in_flight: tuple[pathlib.Path, str] | None = None
    """(directory, token) of the round its process is writing: removed once the process is gone."""
    died_cleaning: tuple[tuple[str, int], int] | None = None
    """(partition, how many rounds of it in a row) while its process dies during its rounds."""
    last_round: RoundStats | None = None

    @property
    def running(self) -> bool:
        return (
            self.process is not None and self.process.returncode is None and not self.process.channel.closed
        )

    @property
    def dead(self) -> bool:
        """Kafka's dead cleaner thread: the loop ended, or its process died and is not back yet (a
        process never started, in a log dir without compacted logs, is not dead)."""
        loop_ended = self.task is not None and self.task.done()
        return loop_ended or (self.process is not None and not self.running)


class LogCleaner:
    """Kafka's LogCleaner for the logs one owner holds, cleaning in child processes."""

    def __init__(
        self,
        *,
        broker_id: int,
        manager: LogCleanerManager,
        candidates: Callable[[], Iterable[CleanableLog]],
        clock: Clock,
        settings: CleanerSettings,
        backoff_ms: int,
        spawn: Spawn | None = None,
        log_level: str = "INFO",
        log_json: bool = False,
        first_cleaner_id: int = 0,
    ) -> None:
        """``first_cleaner_id`` numbers this owner's cleaner processes (log lines tell the broker's
        from a follower process's)."""
        self._broker_id = broker_id
        self.manager = manager
        self._candidates = candidates
        self._clock = clock
        self._settings = settings
        self._backoff_s = backoff_ms / 1000
        self._spawn = spawn or self._spawn_process
        self._log_level = log_level
        self._log_json = log_json
        self._workers = [_Worker(first_cleaner_id + i, d) for i, d in enumerate(manager.log_dirs)]
        self._stopping = asyncio.Event()
        self.rounds = 0
        """Rounds installed since start (tests wait on it)."""
        self._round_done = asyncio.Event()

    def stats(self) -> CleanerStats:
        """This owner's figures for the LogCleaner and LogCleanerManager gauges (cleaner/stats.py)."""
        manager = self.manager
        return CleanerStats(
            max_dirty_percent=manager.max_dirty_percent,
            last_run_ms=manager.last_run_ms,
            max_compaction_delay_ms=manager.max_compaction_delay_ms,
            dead_count=sum(1 for w in self._workers if w.dead),
            last_rounds=tuple(w.last_round for w in self._workers if w.last_round is not None),
            uncleanable={
                str(d): UncleanableStats(
                    manager.uncleanable_partitions_count(d), manager.uncleanable_bytes(d)
                )
                for d in manager.log_dirs
            },
        )

    async def _spawn_process(self, cleaner_id: int) -> CleanerProcess:
        return await CleanerProcess.spawn(
            python_executable=sys.executable,
            broker_id=self._broker_id,
            cleaner_id=cleaner_id,
            env=os.environ,
            log_level=self._log_level,
            log_json=self._log_json,
        )

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for worker in self._workers:
            worker.task = loop.create_task(self._run(worker), name=f"log-cleaner-{worker.cleaner_id}")

    async def stop(self) -> None:
        """Stop the loops (a round in flight is abandoned) and the processes."""
        self._stopping.set()
        for worker in self._workers:
            if worker.task is not None:
                await cancel_and_wait(worker.task)
            if worker.process is not None:
                await worker.process.stop(_STOP_TIMEOUT_S)
                worker.process = None
            if worker.in_flight is not None:  # the process is gone: nothing writes these files now
                _discard_cleaned_files(*worker.in_flight)
                worker.in_flight = None

    async def wait_for_round(self, timeout_s: float) -> None:
        """Wait until the next round is installed (tests)."""
        self._round_done.clear()
        async with asyncio.timeout(timeout_s):
            await self._round_done.wait()

    # -- the loop ------------------------------------------------------------------------------------

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()

    async def _run(self, worker: _Worker) -> None:
        while not self._stopping.is_set():
            taken = self.manager.grab_filthiest(worker.log_dir, self._candidates())
            if taken is None:
                await self._sleep(self._backoff_s)
                continue
            try:
                if not worker.running and not await self._launch(worker):
                    self.manager.abort_cleaning(taken)
                    continue
                if not await self._clean(worker, taken):
                    await self._sleep(self._backoff_s)  # never spin on a log that cannot be cleaned now
            except asyncio.CancelledError:
                self.manager.abort_cleaning(taken)
                raise
            except Exception:
                _log.exception("log cleaner round failed", topic_partition=taken.candidate.topic_partition)
                self.manager.mark_uncleanable(taken)
                await self._sleep(self._backoff_s)

    async def _launch(self, worker: _Worker) -> bool:
        if worker.process is not None:
            code = worker.process.returncode
            _log.error("cleaner process died; restarting it", cleaner_id=worker.cleaner_id, exit_code=code)
            with contextlib.suppress(Exception):
                await worker.process.stop(_STOP_TIMEOUT_S)
            worker.process = None
            await self._sleep(worker.restart_backoff_s)
            worker.restart_backoff_s = min(worker.restart_backoff_s * 2, _MAX_RESTART_BACKOFF_S)
            if self._stopping.is_set():
                return False
        process: CleanerProcess | None = None
        try:
            process = await self._spawn(worker.cleaner_id)
            await process.request(CONFIGURE, self._settings.to_json(), 30.0)
        except asyncio.CancelledError:
            worker.process = process  # stop() ends it
            raise
        except Exception:
            _log.exception("cleaner process failed to start", cleaner_id=worker.cleaner_id)
            if process is not None:  # spawned but not configured: it would wait on its channel forever
                with contextlib.suppress(Exception):
                    await process.stop(_STOP_TIMEOUT_S)
            await self._sleep(worker.restart_backoff_s)
            worker.restart_backoff_s = min(worker.restart_backoff_s * 2, _MAX_RESTART_BACKOFF_S)
            return False
        worker.process = process
        return True

    async def _clean(self, worker: _Worker, taken: LogToClean) -> bool:
        """One round of ``taken``; whether it was installed."""
        candidate = taken.candidate
        log = candidate.log
        if not candidate.is_current():
            self.manager.abort_cleaning(taken)
            return False
        task = plan_clean(
            log,
            first_dirty_offset=taken.range.first_dirty_offset,
            first_uncleanable_offset=taken.range.first_uncleanable_offset,
            now_ms=self._clock.time_ms(),
            delete_retention_ms=log.config.delete_retention_ms,
            active_producers=candidate.active_producers(),
        )
        assert worker.process is not None
        truncations = log.truncations
        started = time.monotonic()
        worker.in_flight = (log.directory, task.token)
        try:
            reply = await worker.process.request(CLEAN, {"task": task.to_json()})
        except IpcRemoteError as exc:
            _log.error(
                "cleaner failed on a log; marking it uncleanable",
                topic_partition=candidate.topic_partition,
                error=str(exc),
            )
            _discard_cleaned_files(log.directory, task.token)
            worker.in_flight = None
            self.manager.mark_uncleanable(taken)
            return False
        except IpcError as exc:
            _log.warning("cleaner process went away during a round", error=str(exc))
            _discard_cleaned_files(log.directory, task.token)
            worker.in_flight = None
            tp = candidate.topic_partition
            previous = worker.died_cleaning
            deaths = previous[1] + 1 if previous is not None and previous[0] == tp else 1
            worker.died_cleaning = (tp, deaths)
            if deaths >= _MAX_DEATHS_PER_LOG and not self._stopping.is_set():
                _log.error(
                    "the cleaner process keeps dying on a log; marking it uncleanable", topic_partition=tp
                )
                worker.died_cleaning = None
                self.manager.mark_uncleanable(taken)
            else:
                self.manager.abort_cleaning(taken)
            return False
        worker.died_cleaning = None
        worker.restart_backoff_s = _RESTART_BACKOFF_S
        if "aborted" in reply:
            worker.in_flight = None
            self.manager.abort_cleaning(taken)
            return False
        result = CleanResult.from_json(reply["result"])
        # in flight until installed: stop() between two groups removes the groups not installed
        try:
            installed = await self._install(candidate, result, truncations)
        except OSError as exc:
            worker.in_flight = None
            self._storage_failed(taken, exc)
            return False
        worker.in_flight = None
        if installed:
            self.manager.done_cleaning(taken, result.end_offset)
            self.rounds += 1
            self._round_done.set()
            _log.info(
                "log cleaned",
                topic=candidate.topic_partition[0],
                partition=candidate.topic_partition[1],
                first_dirty_offset=task.first_dirty_offset,
                end_offset=result.end_offset,
                bytes_read=result.bytes_read,
                bytes_written=result.bytes_written,
                records_removed=result.records_removed,
            )
        else:
            self.manager.abort_cleaning(taken)
        worker.last_round = RoundStats(
            result.map_utilization, result.bytes_read, result.bytes_written, time.monotonic() - started
        )
        return installed

    async def _install(self, candidate: CleanableLog, result: CleanResult, truncations: int) -> bool:
        """Install every group on this loop, yielding between groups (each costs a few fsyncs: a
        round of many groups must not hold the loop); the first refused one discards it and the rest."""
        directory = candidate.log.directory
        installing = True
        for i, group in enumerate(result.groups):
            if i:
                await asyncio.sleep(0)
            # a truncation since the plan may have grown a segment back to the same base and size
            installing = installing and candidate.is_current() and candidate.log.truncations == truncations
            if installing:
                try:
                    replaced = candidate.log.replace_segments(group.replaced, token=result.token)
                    installing = replaced is not None
                    if installing:
                        candidate.on_replaced()
                    continue
                except OSError:
                    # the segment list may now be out of step with the files: the caller takes the
                    # log offline; what this round left (.cleaned, a .swap) the next open finishes
                    with contextlib.suppress(OSError):
                        _discard_cleaned_files(directory, result.token)
                    raise
            # also when the log was handed over: the new owner's loader ran when it opened the
            # log, maybe before this round wrote these files; only this round uses its token
            remove_cleaned_files(directory, group, result.token)
        return installing

    def _storage_failed(self, taken: LogToClean, exc: OSError) -> None:
        """An I/O error in the middle of an install: a log dir failure, as Kafka's cleaner reports an
        IOException to the LogDirFailureChannel. The owner takes the log offline (the broker: the
        partition answers KAFKA_STORAGE_ERROR and resigns its leadership; a follower process: the
        partition is given up and reported failed, as after a failed append), and the log is not
        offered again until it is reopened (a restart, or a repair by the next owner)."""
        candidate = taken.candidate
        _log.error(
            "installing a cleaned segment failed; taking the log offline",
            topic=candidate.topic_partition[0],
            partition=candidate.topic_partition[1],
            directory=str(candidate.log.directory),
            error=str(exc),
        )
        self.manager.mark_uncleanable(taken)
        try:
            candidate.on_storage_error(exc)
        except Exception:
            _log.exception("taking the log offline failed", topic_partition=candidate.topic_partition)


def _discard_cleaned_files(directory: pathlib.Path, token: str) -> None:
    """Remove the ``.cleaned`` files of a round that ended without being installed.

    Whoever owns the directory now: the files carry the round's token, so they are this round's
    only (no other round, of this owner or the next, reads or writes them), and a new owner's
    loader may have run before they were written (a handover mid-round), leaving them forever.
    """
    for path in directory.glob(f"*.{token}.cleaned"):
        path.unlink(missing_ok=True)
