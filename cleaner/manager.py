"""Which compacted log to clean next, and the cleaner's bookkeeping (Kafka's ``LogCleanerManager``).

Synchronous and clock-driven, so tests run it on a fake clock. The broker's cleaner service
(:mod:`broker.log_cleaner.service`) asks :meth:`LogCleanerManager.grab_filthiest` for a log of one
log dir, sends the round to a cleaner process and reports back with :meth:`done_cleaning`,
:meth:`abort_cleaning` or :meth:`mark_uncleanable`.

- Candidates are the compacted logs this process owns (the broker's led partitions; a log owned
  by a follower process is not offered), with their last stable offset (Kafka's first uncleanable
  offset is bounded by it and by the active segment).
- The first dirty offset of each comes from the log dir's ``cleaner-offset-checkpoint``, reset to
  the log start offset when it is out of the log's range (:func:`storage.cleaner.cleanable_range`).
- A log is dirty when it must be cleaned now (``max.compaction.lag.ms`` passed for some dirty
  record and there are cleanable bytes) or its dirty ratio exceeds ``min.cleanable.dirty.ratio``;
  the filthiest (highest ratio) dirty log is taken and stays *in progress* until reported back.
- A log whose round failed in the cleaner itself (not because a segment went away) is marked
  uncleanable and skipped until the owner restarts, as Kafka does.
- The first dirty offsets are kept per log dir in ``cleaner-offset-checkpoint`` by the broker; a
  follower process keeps them in memory (:class:`InMemoryOffsets`: the broker is the checkpoint
  file's only writer), reports them with its offsets (:meth:`LogCleanerManager.first_dirty_offset`)
  for the broker to write, and is given them back with each log it takes
  (:meth:`LogCleanerManager.take_first_dirty_offset`).
- A log truncated below its first dirty offset has it lowered to the end the truncation left
  (Kafka's ``maybeTruncateCheckpoint``), before the offset is used or reported.
"""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from storage.cleaner import CleanableRange, CleanerOffsetCheckpoint, LastRecord, cleanable_range
from storage.clock import Clock
from storage.log import PartitionLog

_log = structlog.get_logger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CleanableLog:
    """A compacted log its owner offers for cleaning, with what the round needs from the owner."""

    topic_partition: TopicPartition
    log_dir: pathlib.Path
    log: PartitionLog
    last_stable_offset: int
    active_producers: Callable[[], Mapping[int, LastRecord]]
    is_current: Callable[[], bool]
    """Whether this owner still holds ``log`` (led here, not handed over, not closed)."""
    on_storage_error: Callable[[OSError], None] = lambda exc: None
    """Told of an I/O error while installing a cleaned round, which leaves the log's segment list
    out of step with its files: the owner's storage-error path (Kafka's LogDirFailureChannel) takes
    the log offline. The default (tests) only lets the driver mark the log uncleanable."""
    on_replaced: Callable[[], None] = lambda: None
    """Told after each cleaned segment installed (segment files were replaced): a follower process
    announces the log's new segment generation to its broker, which reads the files too."""


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A log taken for cleaning and its range."""

    candidate: CleanableLog
    range: CleanableRange


class OffsetStore(Protocol):
    """Where a log dir's first dirty offsets are kept."""

    def read(self) -> dict[TopicPartition, int]: ...

    def get(self, topic_partition: TopicPartition) -> int | None: ...

    def write(self, offsets: Mapping[TopicPartition, int]) -> None: ...


class InMemoryOffsets:
    """First dirty offsets kept in memory only (a follower process: not the checkpoint's writer)."""

    def __init__(self) -> None:
        self._offsets: dict[TopicPartition, int] = {}

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._offsets)

    def get(self, topic_partition: TopicPartition) -> int | None:
        return self._offsets.get(topic_partition)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._offsets = dict(offsets)


@dataclass(slots=True)
class _DirState:
    checkpoint: OffsetStore
    uncleanable: dict[TopicPartition, int] = field(default_factory=dict)
    """Partition -> its size when marked uncleanable."""
    topic_ids: dict[TopicPartition, uuid.UUID | None] = field(default_factory=dict)
    """Partition -> the topic id of the log whose first dirty offset this process stored."""
    truncations_seen: dict[TopicPartition, tuple[PartitionLog, int]] = field(default_factory=dict)
    """Partition -> (its log, how many of that log's truncations were applied to its offset)."""


class LogCleanerManager:
    """The cleaner's choice of logs, its checkpoints and the figures its metrics report."""

    def __init__(
        self,
        log_dirs: Iterable[pathlib.Path],
        clock: Clock,
        offsets: Callable[[pathlib.Path], OffsetStore] = CleanerOffsetCheckpoint,
    ) -> None:
        """``offsets`` gives each log dir's store (the checkpoint file by default)."""
        self._clock = clock
        self._dirs = {_dir(d): _DirState(offsets(_dir(d))) for d in log_dirs}
        self._in_progress: set[TopicPartition] = set()
        self.max_dirty_percent = 0
        self.max_compaction_delay_ms = 0
        self._last_run_ms = clock.time_ms()

    @property
    def log_dirs(self) -> list[pathlib.Path]:
        return list(self._dirs)

    @property
    def last_run_ms(self) -> int:
        """When a log was last looked for (the owner's clock)."""
        return self._last_run_ms

    def in_progress(self, topic_partition: TopicPartition) -> bool:
        return topic_partition in self._in_progress

    def first_dirty_offsets(self, log_dir: pathlib.Path) -> dict[TopicPartition, int]:
        return self._dirs[_dir(log_dir)].checkpoint.read()

    def first_dirty_offset(self, log_dir: pathlib.Path, log: PartitionLog) -> int | None:
        """The first dirty offset of ``log`` (None: none stored, or not a log dir of this cleaner),
        lowered first below any truncation of the log not applied yet: what an owner reports to
        the checkpoint's writer must never be above the records written again since."""
        state = self._dirs.get(_dir(log_dir))
        if state is None:
            return None
        tp = (log.topic, log.partition)
        seen = state.truncations_seen.get(tp)
        if seen is not None and seen[0] is log and seen[1] == log.truncations:
            return state.checkpoint.get(tp)  # nothing to apply: no copy of every entry per report
        offsets = state.checkpoint.read()
        self._apply_truncations(state, tp, log, offsets)
        return offsets.get(tp)

    def take_first_dirty_offset(
        self, log_dir: pathlib.Path, topic_partition: TopicPartition, offset: int | None
    ) -> None:
        """A log given to this owner comes with the checkpoint writer's first dirty offset for it
        (None: none, cleaned from its start): it replaces whatever this owner kept from an earlier
        time it owned the log, since the writer's is the newer (it led or was told since)."""
        state = self._dirs.get(_dir(log_dir))
        if state is None:
            return
        offsets = state.checkpoint.read()
        if offsets.get(topic_partition) == offset:
            return
        if offset is None:
            del offsets[topic_partition]
        else:
            offsets[topic_partition] = offset
        state.checkpoint.write(offsets)
        state.topic_ids.pop(topic_partition, None)
        state.truncations_seen.pop(topic_partition, None)

    def grab_filthiest(self, log_dir: pathlib.Path, candidates: Iterable[CleanableLog]) -> LogToClean | None:
        """The dirtiest cleanable log of ``log_dir`` now, marked in progress; None when none is dirty."""
        log_dir = _dir(log_dir)
        state = self._dirs[log_dir]
        now = self._clock.time_ms()
        self._last_run_ms = now
        checkpointed = state.checkpoint.read()
        best: LogToClean | None = None
        max_ratio = 0.0
        max_delay = 0
        for candidate in candidates:
            tp = candidate.topic_partition
            if _dir(candidate.log_dir) != log_dir or tp in self._in_progress:
                continue
            if tp in state.uncleanable or not candidate.log.config.compact:
                continue
            config = candidate.log.config
            self._apply_truncations(state, tp, candidate.log, checkpointed)
            last_clean = checkpointed.get(tp)
            if last_clean is not None and _another_incarnation(state, tp, candidate.log):
                # the topic was deleted and created again since: its offset says nothing of this log
                # (Kafka drops a deleted log's checkpoint entry when it deletes the log)
                _log.info("cleaner checkpoint of a deleted topic ignored", topic=tp[0], partition=tp[1])
                last_clean = None
            found = cleanable_range(
                candidate.log,
                now,
                last_clean_offset=last_clean,
                last_stable_offset=candidate.last_stable_offset,
                min_compaction_lag_ms=config.min_compaction_lag_ms,
                max_compaction_lag_ms=config.max_compaction_lag_ms,
                min_cleanable_ratio=config.min_cleanable_dirty_ratio,
            )
            if found.checkpoint_reset and last_clean is not None:
                _log.warning(
                    "cleaner checkpoint out of the log's range; cleaning from the log start offset",
                    topic=tp[0],
                    partition=tp[1],
                    checkpointed=checkpointed[tp],
                    log_start_offset=candidate.log.log_start_offset,
                )
            if found.total_bytes > 0:
                max_ratio = max(max_ratio, found.dirty_ratio)
            max_delay = max(max_delay, found.max_compaction_delay_ms)
            dirty = found.should_clean and found.cleanable_bytes > 0
            if dirty and (best is None or found.dirty_ratio > best.range.dirty_ratio):
                best = LogToClean(candidate, found)
        self.max_dirty_percent = int(100 * max_ratio)
        self.max_compaction_delay_ms = max_delay
        if best is not None:
            self._in_progress.add(best.candidate.topic_partition)
        return best

    def _apply_truncations(
        self, state: _DirState, tp: TopicPartition, log: PartitionLog, checkpointed: dict[TopicPartition, int]
    ) -> None:
        """Lower the first dirty offset of a log truncated below it to the end the truncation left
        (Kafka's ``maybeTruncateCheckpoint``): the records written again above it are dirty.

        Truncations are counted per log object: a log opened here (handed over, reopened) brings
        none of another process's; those reach this owner with the offsets it is given.
        """
        seen = state.truncations_seen.get(tp)
        applied = seen[1] if seen is not None and seen[0] is log else 0
        if log.truncations == applied:
            if seen is None or seen[0] is not log:
                state.truncations_seen[tp] = (log, applied)
            return
        state.truncations_seen[tp] = (log, log.truncations)
        lowest = log.lowest_truncation_end(applied)
        offset = checkpointed.get(tp)
        if lowest is None or offset is None or offset <= lowest:
            return
        _log.info(
            "log truncated below its first dirty offset; lowering it",
            topic=tp[0],
            partition=tp[1],
            first_dirty_offset=offset,
            truncated_to=lowest,
        )
        checkpointed[tp] = lowest
        state.checkpoint.write(checkpointed)

    def done_cleaning(self, taken: LogToClean, end_offset: int) -> None:
        """A round was installed: its end offset is the log's new first dirty offset.

        Entries of partitions whose directory is gone from the log dir (deleted, moved) are dropped
        as the checkpoint is rewritten, as Kafka's ``updateCheckpoints`` keeps only live logs, so a
        topic created again under the same name starts clean.
        """
        tp = taken.candidate.topic_partition
        self._in_progress.discard(tp)
        log_dir = _dir(taken.candidate.log_dir)
        checkpoint = self._dirs[log_dir].checkpoint
        offsets = {
            key: offset
            for key, offset in checkpoint.read().items()
            if key == tp or (log_dir / f"{key[0]}-{key[1]}").is_dir()
        }
        offsets[tp] = end_offset
        checkpoint.write(offsets)
        self._dirs[log_dir].topic_ids[tp] = taken.candidate.log.topic_id

    def abort_cleaning(self, taken: LogToClean) -> None:
        """A round that changed nothing (its segments changed, or its owner let the log go)."""
        self._in_progress.discard(taken.candidate.topic_partition)

    def mark_uncleanable(self, taken: LogToClean) -> None:
        """The cleaner failed on this log: skip it until restart (Kafka's markPartitionUncleanable)."""
        tp = taken.candidate.topic_partition
        self._in_progress.discard(tp)
        state = self._dirs[_dir(taken.candidate.log_dir)]
        state.uncleanable[tp] = taken.candidate.log.size_in_bytes

    def uncleanable_partitions_count(self, log_dir: pathlib.Path) -> int:
        return len(self._dirs[_dir(log_dir)].uncleanable)

    def uncleanable_bytes(self, log_dir: pathlib.Path) -> int:
        return sum(self._dirs[_dir(log_dir)].uncleanable.values())


def _another_incarnation(state: _DirState, tp: TopicPartition, log: PartitionLog) -> bool:
    """Whether ``log`` is not the topic whose first dirty offset this process stored for ``tp``."""
    if tp not in state.topic_ids:
        return False  # stored before this process started (or by another): nothing to compare
    known = state.topic_ids[tp]
    return known is not None and log.topic_id is not None and known != log.topic_id


def _dir(path: pathlib.Path | str) -> pathlib.Path:
    """A log dir as one key whatever its spelling (relative, trailing slash): the broker's and a
    follower process's paths of one log dir come from the same configuration, in the same cwd."""
    return pathlib.Path(os.path.abspath(path))
