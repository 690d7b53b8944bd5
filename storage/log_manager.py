"""All partition logs of a broker (or follower process) across its log directories.

Per log dir it owns what Kafka keeps there besides the partitions: the ``.lock`` file (so two
processes never write the same logs), the offset checkpoints (recovery points, high watermarks, log
start offsets) and the clean-shutdown marker. On startup it loads every ``<topic>-<partition>``
directory, telling each log whether it may skip recovery; on shutdown it flushes, checkpoints and
leaves the marker behind. The marker is deleted right after loading so that a crash later is noticed.

A log may be *released* to a follower process (storage/handover.py): it is closed here and opened
there, and while the follower process owns it this LogManager keeps only an *external entry* with
the offsets the follower reports, so that the checkpoint files keep one writer and still cover
every partition of the log dir. :meth:`LogManager.adopt_log` takes such a log back.

One owner drives a LogManager at a time (it is not thread-safe).
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import re
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

import structlog

from storage.checkpoint import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    fsync_directory,
)
from storage.cleaner.checkpoint import CleanerOffsetCheckpoint
from storage.clock import Clock
from storage.config import LogConfig
from storage.errors import LOW_SPACE_BYTES, KiplingStorageError, LogDirFullError, free_bytes
from storage.handover import LogHandover, close_for_handover, open_handed_over_log
from storage.log import PartitionLog

LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
MAX_FILE_NAME_LENGTH = 255
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")

TopicPartition = tuple[str, int]
_CHECKPOINT_FILES = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
_log = structlog.get_logger(__name__)


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    """(topic, partition) of a "<topic>-<partition>" directory, or None for any other directory.

    Topic names may contain '-' and '.', so the partition is what follows the LAST '-'.
    """
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isascii() or not partition.isdigit():
        return None
    return topic, int(partition)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def delete_dir_name(topic: str, partition: int, kind: str = DELETE_DIR_SUFFIX) -> str:
    """ "<topic>-<partition>.<uuid hex>-delete" (or "-stray"), the topic cut to fit in 255 characters."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{kind}"
    return topic[: MAX_FILE_NAME_LENGTH - len(suffix)] + suffix


def validate_topic_partition(topic: str, partition: int) -> None:
    """Refuse names Kafka refuses: they could not be parsed back from the directory name."""
    if topic in (".", "..") or len(topic) > MAX_TOPIC_NAME_LENGTH or not _LEGAL_TOPIC.fullmatch(topic):
        raise ValueError(f"illegal topic name {topic!r}")
    if partition < 0:
        raise ValueError(f"illegal partition {partition} for topic {topic!r}")


def is_new_log_dir(log_dir: pathlib.Path) -> bool:
    """Whether no LogManager ever ran on ``log_dir``: no clean-shutdown marker, no offset
    checkpoint (written at every shutdown and periodically) and no partition directory."""
    if any((log_dir / name).exists() for name in (CLEAN_SHUTDOWN_MARKER, *_CHECKPOINT_FILES)):
        return False
    return not any(
        child.is_dir() and parse_partition_dir_name(child.name) is not None for child in log_dir.iterdir()
    )


class ExternallyOwnedLogError(KiplingStorageError):
    """The log is owned by a follower process: take it back (adopt_log) before touching its files."""


@dataclass(slots=True)
class ExternalLog:
    """A log owned by a follower process, as this LogManager still knows it (for its checkpoints).

    ``closed`` is True once its owner reported closing it for good (a clean handover); until then a
    shutdown of this LogManager must not claim a clean shutdown for its log dir.
    """

    log_dir: pathlib.Path
    high_watermark: int
    recovery_point: int
    log_start_offset: int
    closed: bool = False
    first_dirty_offset: int | None = None
    """The cleaner's first dirty offset its owner last reported (written into the checkpoint)."""


_OffsetOf = Callable[[PartitionLog | ExternalLog], int]
"""Reads one checkpointed offset from an open log or an external entry (same attribute names)."""


class LogDirLock:
    """An exclusive flock on ``<log dir>/.lock``, held for the life of the LogManager."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.path = directory / LOCK_FILE
        self._file: TextIO | None = open(self.path, "a")  # noqa: SIM115 (held until release)
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._file.close()
            self._file = None
            raise KiplingStorageError(
                f"log directory {directory} is in use by another broker (could not lock {self.path})"
            ) from exc

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


class LogManager:
    """Loads, creates, checkpoints, retains and deletes the partition logs of a set of log dirs."""

    def __init__(
        self,
        log_dirs: Sequence[pathlib.Path],
        config: LogConfig,
        clock: Clock,
        topic_configs: Callable[[str], LogConfig] | None = None,
        placement_dirs: Sequence[pathlib.Path] | None = None,
    ) -> None:
        """``placement_dirs`` (default: all of ``log_dirs``) are where new logs go; a log dir outside
        them (a separate ``metadata.log.dir``) only takes logs created there by name."""
        if not log_dirs:
            raise ValueError("at least one log directory is required")
        self._log_dirs = [pathlib.Path(directory) for directory in log_dirs]
        self._placement_dirs = [pathlib.Path(d) for d in placement_dirs] if placement_dirs else self._log_dirs
        self._config = config
        self._clock = clock
        self._topic_configs = topic_configs
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, pathlib.Path] = {}
        self._external: dict[TopicPartition, ExternalLog] = {}
        self._locks: list[LogDirLock] = []
        self._shut_down = False
        try:
            for directory in self._log_dirs:
                directory.mkdir(parents=True, exist_ok=True)
                self._locks.append(LogDirLock(directory))
            for directory in self._log_dirs:
                self._load_log_dir(directory)
        except BaseException:
            self._abandon()
            raise

    # -- loading ---------------------------------------------------------------------------------

    def _load_log_dir(self, log_dir: pathlib.Path) -> None:
        """Open every partition of ``log_dir``, then delete the marker and restore high watermarks.

        Says which of three starts this is: the first one (a new log dir, nothing to recover), one
        after a clean shutdown (the marker: no log is recovered), or one after a crash or a kill
        (no marker: every log is recovered from its recovery point).
        """
        marker = log_dir / CLEAN_SHUTDOWN_MARKER
        clean_shutdown = marker.exists()
        first_start = not clean_shutdown and is_new_log_dir(log_dir)
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        log_start_offsets = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        configs: dict[str, LogConfig] = {}  # one per topic, not one per partition
        for child in sorted(log_dir.iterdir()):
            key = self._partition_of(child)
            if key is None:
                continue
            if key in self._logs:
                raise KiplingStorageError(
                    f"partition {key[0]}-{key[1]} is in both {self._dir_of[key]} and {log_dir}"
                )
            config = configs.get(key[0])
            if config is None:
                config = configs[key[0]] = self._config_for(key[0])
            self._logs[key] = PartitionLog.open(
                child,
                config,
                self._clock,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=log_start_offsets.get(key),
                clean_shutdown=clean_shutdown,
            )  # no topic id given: the log reads it from its partition.metadata
            self._dir_of[key] = log_dir
        marker.unlink(missing_ok=True)
        fsync_directory(log_dir)
        self._restore_high_watermarks(log_dir)
        _warn_if_full(log_dir)
        logs = sum(1 for directory in self._dir_of.values() if directory == log_dir)
        if first_start:
            _log.info("first start: new log directory", log_dir=str(log_dir))
        elif clean_shutdown:
            _log.info("log dir loaded after a clean shutdown: no recovery", log_dir=str(log_dir), logs=logs)
        else:
            _log.warning(
                "log dir loaded after an unclean shutdown: logs recovered from their recovery points",
                log_dir=str(log_dir),
                logs=logs,
            )

    def _partition_of(self, child: pathlib.Path) -> TopicPartition | None:
        """The partition held by ``child``; removes leftovers of interrupted deletions."""
        if not child.is_dir():
            return None
        if child.name.endswith(DELETE_DIR_SUFFIX):
            _log.info("removing partition directory left pending deletion", directory=str(child))
            shutil.rmtree(child, ignore_errors=True)
            return None
        if child.name.endswith(STRAY_DIR_SUFFIX):
            return None  # set aside for the operator; never loaded
        key = parse_partition_dir_name(child.name)
        if key is None:
            _log.warning("skipping directory that is not a partition", directory=str(child))
        return key

    def _restore_high_watermarks(self, log_dir: pathlib.Path) -> None:
        """Set each log's high watermark from replication-offset-checkpoint, clamped to [start, LEO]."""
        for key, high_watermark in (
            OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read().items()
        ):
            log = self._logs.get(key)
            if log is None or self._dir_of[key] != log_dir:
                continue
            log.update_high_watermark(min(max(high_watermark, log.log_start_offset), log.log_end_offset))

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs(topic) if self._topic_configs is not None else self._config

    # -- access ----------------------------------------------------------------------------------

    @property
    def log_dirs(self) -> list[pathlib.Path]:
        return list(self._log_dirs)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> pathlib.Path | None:
        """The log dir holding the partition, or None if it has no log here."""
        return self._dir_of.get((topic, partition))

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config: LogConfig | None = None,
        log_dir: pathlib.Path | None = None,
    ) -> PartitionLog:
        """The partition's log, created (with its partition.metadata) if absent: in ``log_dir`` when
        given (one of the manager's), else in the least loaded of the placement dirs.

        An existing log whose recorded topic id differs from ``topic_id`` belongs to an older topic of
        the same name: that is an error rather than silently mixing the two.
        """
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            self._check_topic_id(existing, topic_id)
            return existing
        self._check_not_external(key, "open")
        validate_topic_partition(topic, partition)
        if log_dir is None:
            log_dir = self._least_loaded_log_dir()
        else:
            log_dir = self._own_log_dir(log_dir)
        directory = log_dir / partition_dir_name(topic, partition)
        directory.mkdir(exist_ok=True)
        if topic_id is not None:
            PartitionMetadataFile(directory / PARTITION_METADATA).write(topic_id)
        fsync_directory(log_dir)
        log = PartitionLog.open(directory, config or self._config_for(topic), self._clock, topic_id=topic_id)
        self._logs[key], self._dir_of[key] = log, log_dir
        _log.info("created log", topic=topic, partition=partition, log_dir=str(log_dir))
        return log

    def _check_topic_id(self, log: PartitionLog, topic_id: uuid.UUID | None) -> None:
        known = log.topic_id
        if topic_id is not None and known is not None and known != topic_id:
            raise KiplingStorageError(
                f"log {log.directory} belongs to topic id {known}, not {topic_id}: delete it first"
            )

    def _own_log_dir(self, log_dir: pathlib.Path) -> pathlib.Path:
        """The manager's log dir that ``log_dir`` names, however it is spelled (relative, ``..``)."""
        wanted = os.path.abspath(log_dir)
        for directory in self._log_dirs:
            if os.path.abspath(directory) == wanted:
                return directory
        raise ValueError(f"{log_dir} is not one of this log manager's log dirs")

    def _least_loaded_log_dir(self) -> pathlib.Path:
        """The placement dir holding the fewest logs (Kafka's nextLogDirs). Counting is O(logs), so
        a single dir, the common case, skips it: creating 100,000 partitions must not be quadratic."""
        if len(self._placement_dirs) == 1:
            return self._placement_dirs[0]
        counts = Counter(self._dir_of.values())
        counts.update(external.log_dir for external in self._external.values())
        return min(self._placement_dirs, key=lambda directory: counts[directory])

    # -- deletion --------------------------------------------------------------------------------

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the log and remove its files; a crash midway leaves a "-delete" dir removed at load."""
        key = (topic, partition)
        self._check_not_external(key, "delete")
        log = self._logs.pop(key, None)
        if log is None:
            return
        log_dir = self._dir_of.pop(key)
        log.close()
        pending = log_dir / delete_dir_name(topic, partition)
        os.replace(log.directory, pending)
        fsync_directory(log_dir)
        shutil.rmtree(pending)
        self._write_checkpoints(log_dir)
        _log.info("deleted log", topic=topic, partition=partition, log_dir=str(log_dir))

    def mark_stray(self, topic: str, partition: int) -> pathlib.Path | None:
        """Close the log and set its directory aside as "<dir>.<uuid>-stray", data intact.

        For a log the cluster metadata does not recognise (another incarnation of the topic):
        it must stop blocking the partition's name, but its data is the operator's to inspect.
        """
        key = (topic, partition)
        self._check_not_external(key, "set aside")
        log = self._logs.pop(key, None)
        if log is None:
            return None
        log_dir = self._dir_of.pop(key)
        log.close()
        stray = log_dir / delete_dir_name(topic, partition, STRAY_DIR_SUFFIX)
        os.replace(log.directory, stray)
        fsync_directory(log_dir)
        self._write_checkpoints(log_dir)
        _log.warning("set a stray log aside", topic=topic, partition=partition, directory=str(stray))
        return stray

    # -- handover to and from follower processes -------------------------------------------------

    def release_log(self, topic: str, partition: int) -> LogHandover:
        """Flush, close and forget the log so that a follower process can own it; returns the handover.

        From here on the partition is an external entry: its offsets come from
        :meth:`update_external_offsets` and still go into this log dir's checkpoint files.
        """
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            raise KiplingStorageError(f"no open log for {topic}-{partition} to release")
        log_dir = self._dir_of[key]
        handover = close_for_handover(log)
        del self._logs[key], self._dir_of[key]
        self._external[key] = ExternalLog(
            log_dir, handover.high_watermark, handover.recovery_point, handover.log_start_offset
        )
        _log.info(
            "released log to a follower process",
            topic=topic,
            partition=partition,
            log_end_offset=handover.log_end_offset,
        )
        return handover

    def adopt_log(self, handover: LogHandover, config: LogConfig | None = None) -> PartitionLog:
        """Take back a log its follower process closed (or that died holding it) and open it here.

        An unclean handover (its owner died) is recovered from its recovery point while opening.
        """
        key = handover.topic_partition
        if key in self._logs:
            raise KiplingStorageError(f"{key[0]}-{key[1]} is already open here; cannot adopt it")
        external = self._external.get(key)
        if external is None:
            raise KiplingStorageError(f"{key[0]}-{key[1]} was not released to a follower process")
        log_dir = pathlib.Path(handover.log_dir)
        if log_dir != external.log_dir:
            raise KiplingStorageError(
                f"handover of {key[0]}-{key[1]} names log dir {log_dir}, not {external.log_dir}"
            )
        log = open_handed_over_log(handover, config or self._config_for(key[0]), self._clock)
        del self._external[key]
        self._logs[key], self._dir_of[key] = log, log_dir
        _log.info(
            "adopted log from a follower process",
            topic=key[0],
            partition=key[1],
            log_end_offset=log.log_end_offset,
            clean=handover.clean,
        )
        return log

    def update_external_offsets(
        self,
        topic: str,
        partition: int,
        high_watermark: int,
        recovery_point: int,
        log_start_offset: int,
        *,
        first_dirty_offset: int | None = None,
    ) -> bool:
        """Record the offsets a follower process reported for a log it owns; False if not external.

        A report after the log was adopted back (or for an unknown partition) is ignored: the
        follower's reports and its handover reply travel on one ordered channel, so this is a late
        duplicate and the log's own offsets are newer.

        ``first_dirty_offset`` is the follower process's cleaner's (the one cleaning this log): it
        goes into the log dir's ``cleaner-offset-checkpoint``, of which this process is the only
        writer, so that the next owner of the log (a restarted follower process, this broker when
        it leads again, the next start) does not clean it from its start again.
        """
        external = self._external.get((topic, partition))
        if external is None:
            return False
        external.high_watermark = high_watermark
        external.recovery_point = recovery_point
        external.log_start_offset = log_start_offset
        external.closed = False
        if first_dirty_offset is not None and external.first_dirty_offset != first_dirty_offset:
            CleanerOffsetCheckpoint(external.log_dir).update(topic, partition, first_dirty_offset)
            external.first_dirty_offset = first_dirty_offset
        return True

    def external_log_closed(self, handover: LogHandover) -> None:
        """The follower process closed this log for good (it shut down): keep its final offsets.

        The entry stays external, but a clean handover lets :meth:`shutdown` leave the clean
        shutdown marker; an unclean one (the process died) makes the next start recover the log dir.
        """
        external = self._external.get(handover.topic_partition)
        if external is None:
            return
        external.high_watermark = handover.high_watermark
        external.recovery_point = handover.recovery_point
        external.log_start_offset = handover.log_start_offset
        external.closed = handover.clean

    def is_external(self, topic: str, partition: int) -> bool:
        """True while the partition's log is owned by a follower process."""
        return (topic, partition) in self._external

    def external_logs(self) -> Mapping[TopicPartition, ExternalLog]:
        """The logs owned by follower processes, with their last reported offsets (a copy)."""
        return dict(self._external)

    def held_logs(self) -> list[tuple[TopicPartition, pathlib.Path, PartitionLog | None]]:
        """Every partition with a log in this manager's log dirs: its log dir and its open log, or
        None while a follower process owns the log (its files must then not be opened here)."""
        held: list[tuple[TopicPartition, pathlib.Path, PartitionLog | None]] = [
            (key, self._dir_of[key], log) for key, log in self._logs.items()
        ]
        held.extend((key, external.log_dir, None) for key, external in self._external.items())
        return held

    def _check_not_external(self, key: TopicPartition, action: str) -> None:
        if key in self._external:
            raise ExternallyOwnedLogError(
                f"cannot {action} the log of {key[0]}-{key[1]}: a follower process owns it"
            )

    # -- checkpoints, flush, retention -----------------------------------------------------------

    def _logs_in(self, log_dir: pathlib.Path) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        return ((key, log) for key, log in self._logs.items() if self._dir_of[key] == log_dir)

    def _checkpoint(self, name: str, offset: _OffsetOf, log_dir: pathlib.Path) -> None:
        """Write ``name`` for ``log_dir``: its own logs' offsets plus those reported for external logs."""
        offsets = {key: offset(log) for key, log in self._logs_in(log_dir)}
        for key, external in self._external.items():
            if external.log_dir == log_dir:
                offsets[key] = offset(external)
        try:
            OffsetCheckpointFile(log_dir / name).write(offsets)
        except LogDirFullError as exc:
            # The old file stays whole; an older checkpoint only means more recovery (recovery
            # points) or a lower restored high watermark, so a full disk must not stop the caller
            # (a periodic task, a topic deletion freeing space, a shutdown).
            _log.warning(
                "checkpoint not written: no space left on device", log_dir=str(log_dir), error=str(exc)
            )

    def _write_checkpoints(self, log_dir: pathlib.Path) -> None:
        self._checkpoint(RECOVERY_POINT_CHECKPOINT, _recovery_point, log_dir)
        self._checkpoint(LOG_START_OFFSET_CHECKPOINT, _log_start_offset, log_dir)
        self._checkpoint(REPLICATION_OFFSET_CHECKPOINT, _high_watermark, log_dir)

    def checkpoint_recovery_points(self) -> None:
        """Record, per log dir, the offset up to which each log is known to be on disk."""
        for log_dir in self._log_dirs:
            self._checkpoint(RECOVERY_POINT_CHECKPOINT, _recovery_point, log_dir)

    def checkpoint_high_watermarks(self) -> None:
        """Record, per log dir, each log's high watermark (restored, clamped, at the next start)."""
        for log_dir in self._log_dirs:
            self._checkpoint(REPLICATION_OFFSET_CHECKPOINT, _high_watermark, log_dir)

    def checkpoint_log_start_offsets(self) -> None:
        """Record, per log dir, each log's log start offset (it may be above its first segment's base)."""
        for log_dir in self._log_dirs:
            self._checkpoint(LOG_START_OFFSET_CHECKPOINT, _log_start_offset, log_dir)

    def flush_all(self) -> None:
        for log in self._logs.values():
            log.flush()

    def flush_dirty_logs(self) -> int:
        """fsync the logs whose ``flush.ms`` has passed with unflushed data; returns how many."""
        unlimited = LogConfig().flush_ms
        return sum(
            1 for log in list(self._logs.values()) if log.config.flush_ms < unlimited and log.flush_if_due()
        )

    def run_retention(self) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        deleted = sum(log.delete_old_segments() for log in self._logs.values())
        if deleted:
            self.checkpoint_log_start_offsets()
        return deleted

    # -- shutdown --------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Flush, checkpoint, close every log and leave the clean-shutdown marker; idempotent.

        Checkpoints include the logs owned by follower processes (their last reported offsets); a
        log dir holding one that was not closed cleanly (:meth:`external_log_closed`) gets no
        marker, so the next start recovers it. The marker is written only once everything before it
        succeeded, so that any failure means a full recovery at the next start. The directory locks
        are released in every case.
        """
        if self._shut_down:
            return
        self._shut_down = True
        try:
            self.flush_all()
            for log_dir in self._log_dirs:
                self._write_checkpoints(log_dir)
            for log in self._logs.values():
                log.close()
            for log_dir in self._log_dirs:
                self._leave_clean_shutdown_marker(log_dir)
            _log.info("log manager shut down", log_dirs=[str(d) for d in self._log_dirs])
        finally:
            self._logs.clear()
            self._dir_of.clear()
            self._external.clear()
            self._release_locks()

    def _leave_clean_shutdown_marker(self, log_dir: pathlib.Path) -> None:
        """Mark ``log_dir`` clean unless a follower process may have left one of its logs unflushed,
        or a read found one of its logs damaged (the next start recovers it from the damaged segment)."""
        damaged = sorted(key for key, log in self._logs_in(log_dir) if log.damaged_from is not None)
        if damaged:
            _log.warning(
                "not marking the log dir clean: logs found damaged will be recovered at the next start",
                log_dir=str(log_dir),
                partitions=[f"{topic}-{partition}" for topic, partition in damaged[:10]],
            )
            return
        open_external = sorted(
            key
            for key, external in self._external.items()
            if external.log_dir == log_dir and not external.closed
        )
        if open_external:
            _log.warning(
                "not marking the log dir clean: follower processes did not close all their logs",
                log_dir=str(log_dir),
                partitions=[f"{topic}-{partition}" for topic, partition in open_external[:10]],
                count=len(open_external),
            )
            return
        try:
            (log_dir / CLEAN_SHUTDOWN_MARKER).touch()
        except OSError as exc:  # no marker: the next start recovers the logs, which is always safe
            _log.warning("clean shutdown marker not written", log_dir=str(log_dir), error=str(exc))
            return
        fsync_directory(log_dir)

    def _abandon(self) -> None:
        """Undo a failed start: close what was opened and release the locks, without a marker."""
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        self._dir_of.clear()
        self._external.clear()
        self._release_locks()

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks.clear()


def _warn_if_full(log_dir: pathlib.Path) -> None:
    """Say once at startup that a log dir has no space left: it serves reads, appends fail until freed."""
    free = free_bytes(log_dir)
    if free < LOW_SPACE_BYTES:
        _log.error(
            "no space left on device in log dir: serving reads, refusing writes (KAFKA_STORAGE_ERROR) "
            "until space is freed",
            log_dir=str(log_dir),
            free_bytes=free,
        )


def _recovery_point(log: PartitionLog | ExternalLog) -> int:
    """A log a read found damaged is checkpointed to recover from its damaged segment."""
    return log.recovery_start_offset if isinstance(log, PartitionLog) else log.recovery_point


def _log_start_offset(log: PartitionLog | ExternalLog) -> int:
    return log.log_start_offset


def _high_watermark(log: PartitionLog | ExternalLog) -> int:
    return log.high_watermark
