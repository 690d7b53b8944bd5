"""The log of one partition replica: ordered segments, offsets, appends, reads, truncation, retention.

A :class:`PartitionLog` owns the directory ``<topic>-<partition>``. It keeps Kafka's offsets:
the log start offset (first offset a reader may ask for), the log end offset (LEO, the offset the
next appended record gets), the high watermark (HW, set by the replication layer; reads bounded by
it never return uncommitted batches) and the recovery point (everything below it is fsynced, so
recovery after a crash starts there).

Appends copy the incoming bytes once, validate and stamp them in place, and write them with one
system call. Reads return :class:`FileSlice` ranges of whole batches. Everything is synchronous:
the broker and follower processes call in from their own event loop and own their logs exclusively.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import random
import re
import shutil
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import structlog

from protocol.records import ProtocolError
from protocol.records.batch import read_header
from protocol.sentinels import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_LEADER_EPOCH,
    NO_TIMESTAMP,
    UNKNOWN_OFFSET,
)
from storage import retention
from storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    LeaderEpochCheckpointFile,
    PartitionMetadataFile,
    fsync_directory,
)
from storage.cleaner.files import cleaned_file_name
from storage.clock import Clock
from storage.config import LogConfig
from storage.epoch import LeaderEpochFileCache
from storage.errors import (
    CorruptLogError,
    KiplingStorageError,
    LogDirFullError,
    OffsetOutOfRangeError,
    no_space_is_log_dir_full,
)
from storage.loader import load_log
from storage.producer_snapshot import delete_snapshots_after
from storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from storage.slices import FileSlice
from storage.timestamps import first_record_at_or_after
from storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from storage.validation import ValidatedAppend, assign_offsets_as_leader, validate_as_follower

__all__ = ["AppendInfo", "FileSlice", "PartitionLog", "ReadResult", "parse_topic_partition"]

_log = structlog.get_logger(__name__)
_SUFFIXED_DIR = re.compile(r"^(?P<tp>.+)\.[0-9a-f]{32}-(?:delete|future|stray)$")


class ReadResult(NamedTuple):
    """Whole batches read from the log, with the offsets a fetch response reports.

    ``first_offset`` is the base offset of the first batch in ``slice`` (it may be below the
    requested offset: reads have batch granularity). Both are None when nothing could be read.
    """

    slice: FileSlice | None
    first_offset: int | None
    log_start_offset: int
    log_end_offset: int


class AppendInfo(NamedTuple):
    """What an append wrote (Kafka's LogAppendInfo, reduced to what the broker reports)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    """The broker time stamped into the batches for LogAppendTime topics, else -1."""
    num_records: int
    size_in_bytes: int


def parse_topic_partition(directory_name: str) -> tuple[str, int]:
    """(topic, partition) from "<topic>-<partition>" (also with a ".<uuid>-delete/-future/-stray" suffix).

    Topic names may contain '-', so the partition is what follows the last '-'.
    """
    suffixed = _SUFFIXED_DIR.match(directory_name)
    name = suffixed.group("tp") if suffixed else directory_name
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isascii() or not partition.isdigit():
        raise ValueError(f"{directory_name!r} is not a partition directory name (<topic>-<partition>)")
    return topic, int(partition)


class PartitionLog:
    """The segments of one partition and its offsets. One owner at a time; not thread-safe."""

    def __init__(
        self,
        directory: pathlib.Path,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        leader_epoch_cache: LeaderEpochFileCache,
        *,
        log_start_offset: int,
        topic_id: uuid.UUID | None,
    ) -> None:
        """Use :meth:`open`; this only wires already loaded state together."""
        self.directory = directory
        self.topic, self.partition = parse_topic_partition(directory.name)
        self.config = config
        self.topic_id = topic_id
        self.leader_epoch_cache = leader_epoch_cache
        self._clock = clock
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        self.log_start_offset = log_start_offset
        self.log_end_offset = segments[-1].next_offset
        self.high_watermark = log_start_offset
        self.recovery_point = self.log_end_offset
        self._last_flush_ms = clock.time_ms()
        self._pending_deletions: list[tuple[int, LogSegment]] = []
        self._directory_dirty = False
        self._closed = False
        self.damaged_from: int | None = None
        """Base offset of the first segment a read found damaged, or None (see :meth:`mark_damaged`)."""
        self.truncations = 0
        """How many times the log was truncated: a cleaning round planned before one is not installed
        (a truncated segment can grow back to the same base and size with other records)."""
        self.segment_generation = 0
        """Counts the changes to the segment files other than appends and rolls: segments removed
        (retention, truncation, a start-over, the cleaner's replacement), a segment or its
        transaction index cut in place. A reader of the files from another process (a broker
        serving the follower's log: storage/read_view.py) drops the files it holds when told this
        moved."""
        self._truncation_ends: list[int] = []
        """The log end offset each truncation left, in order: the cleaner lowers a first dirty offset
        above one to it (Kafka's maybeTruncateCheckpoint), else the records written again there
        would count as clean forever."""

    # -- opening -----------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: pathlib.Path,
        config: LogConfig,
        clock: Clock,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clean_shutdown: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> PartitionLog:
        """Open (creating if needed) the log in ``directory``, recovering it unless shut down cleanly.

        After a crash every segment from the one holding ``recovery_point`` is re-validated, torn
        or corrupt tails are cut, and the result is fsynced, so the recovery point is the log end
        offset in both cases.
        """
        directory = pathlib.Path(directory)
        parse_topic_partition(directory.name)  # fail before touching the disk
        directory.mkdir(parents=True, exist_ok=True)
        topic_id = _check_topic_id(directory, topic_id)
        epoch_cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT))
        loaded = load_log(
            directory,
            config,
            clock.time_ms(),
            epoch_cache,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            roll_jitter=lambda: _roll_jitter(config),
        )
        if loaded.recovered:
            fsync_directory(directory)  # the recovery point is about to claim all of this is durable
        log = cls(
            directory,
            config,
            clock,
            loaded.segments,
            epoch_cache,
            log_start_offset=loaded.log_start_offset,
            topic_id=topic_id,
        )
        log._directory_dirty = not loaded.recovered  # files may have been created: fsync at the next flush
        _log.info(
            "log loaded",
            topic=log.topic,
            partition=log.partition,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            segments=len(loaded.segments),
            recovered=loaded.recovered,
        )
        return log

    # -- appends -----------------------------------------------------------------------------------

    def append_as_leader(self, batches: bytes | bytearray | memoryview, leader_epoch: int) -> AppendInfo:
        """Validate, assign offsets from the log end offset, stamp ``leader_epoch``, and append.

        Raises (nothing is written): CorruptRecordError / UnsupportedMagicError (protocol) for a bad
        batch, RecordTooLargeError, RecordBatchTooLargeError, InvalidRecordError.
        """
        self._check_open()
        # Stamping needs writable bytes: a writable view (a produce request's frame) is stamped
        # in place; anything else is copied once.
        buf = batches if isinstance(batches, memoryview) and not batches.readonly else bytearray(batches)
        now = self._clock.time_ms()
        validated = assign_offsets_as_leader(buf, self.log_end_offset, leader_epoch, self.config, now)
        if validated.batches:
            with self._undo_epochs_on_failure():
                if leader_epoch != self.leader_epoch_cache.latest_epoch:
                    self.leader_epoch_cache.assign(leader_epoch, validated.first_offset)
                self._append(buf, validated, now)
        return _append_info(validated, now if self.config.log_append_time else NO_TIMESTAMP)

    def append_as_follower(self, batches: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches replicated from the leader, keeping their offsets and leader epochs.

        Raises UnexpectedAppendOffsetError when the first offset is below the log end offset.
        """
        self._check_open()
        validated = validate_as_follower(batches, self.log_end_offset, self.config)
        if validated.batches:
            with self._undo_epochs_on_failure():
                for epoch, start_offset in validated.epoch_starts:
                    if epoch != self.leader_epoch_cache.latest_epoch:
                        self.leader_epoch_cache.assign(epoch, start_offset)
                self._append(batches, validated, self._clock.time_ms())
        return _append_info(validated, NO_TIMESTAMP)

    @contextlib.contextmanager
    def _undo_epochs_on_failure(self) -> Iterator[None]:
        """An append that found the disk full wrote nothing: forget the epochs it assigned for it.

        Epochs are assigned (and checkpointed) before the batches that carry them, so a failed
        append would otherwise leave the cache naming an epoch that starts at the log end offset
        with nothing in it. The same append, retried once space returns, assigns them again. An
        entry that was there before the append (a new leader's epoch, recorded at the log end when
        it took the lead) stays.
        """
        cache = self.leader_epoch_cache
        before = cache.entries()
        try:
            yield
        except LogDirFullError:
            if cache.entries() != before:
                cache.truncate_from_end(self.log_end_offset)
                for entry in before:
                    if entry.start_offset >= self.log_end_offset:
                        cache.assign(entry.epoch, entry.start_offset)
            raise

    def _append(self, data: bytes | bytearray | memoryview, validated: ValidatedAppend, now: int) -> None:
        """Roll if due, then append; a full disk (LogDirFullError) leaves the log exactly as it was."""
        segment = self._segments[-1]
        previous = segment
        if segment.should_roll(
            self.config, validated.size, validated.max_timestamp, validated.last_offset, now
        ):
            segment = self._roll(max(validated.first_offset, self.log_end_offset), now)
        try:
            segment.append(data, validated.batches)
        except LogDirFullError:
            if segment is not previous:
                self._undo_roll(segment)
            raise
        self.log_end_offset = validated.last_offset + 1
        self._maybe_flush(now)

    def _maybe_flush(self, now: int) -> None:
        """flush.messages counts messages since the recovery point; flush.ms time since the last flush."""
        config = self.config
        if self.log_end_offset - self.recovery_point >= config.flush_messages or (
            now - self._last_flush_ms >= config.flush_ms
        ):
            self.flush()

    def flush_if_due(self) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush and data is unflushed.

        The append path checks this too, but an idle partition gets no more appends: the log
        manager's periodic task calls this so the tail of an idle log is fsynced on time.
        """
        if self._closed or self.log_end_offset <= self.recovery_point:
            return False
        if self._clock.time_ms() - self._last_flush_ms < self.config.flush_ms:
            return False
        self.flush()
        return True

    # -- reads -------------------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes`` of them.

        ``max_offset`` is an exclusive bound (the high watermark for consumers): only batches lying
        wholly below it are returned, so a batch at or above it never is. With ``min_one_batch`` the
        first batch comes whole even when larger than ``max_bytes``. Reading at the log end offset
        gives an empty result; below the log start offset or above the LEO raises
        OffsetOutOfRangeError.
        """
        self._check_open()
        log_start, log_end = self.log_start_offset, self.log_end_offset
        if start_offset == log_end:
            return ReadResult(None, None, log_start, log_end)
        if not log_start <= start_offset < log_end:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is out of range [{log_start}, {log_end}] "
                f"for {self.topic}-{self.partition}"
            )
        for segment in self._segments[self._floor_index(start_offset) :]:
            if max_offset is not None and segment.base_offset >= max_offset:
                break
            try:
                found = segment.read(start_offset, max_bytes, max_offset, min_one_batch)
            except ProtocolError as exc:
                raise self.mark_damaged(segment.base_offset, exc) from exc
            if found is not None:
                file_slice, first_offset = found
                if file_slice.length == 0:
                    break
                return ReadResult(file_slice, first_offset, log_start, log_end)
        return ReadResult(None, None, log_start, log_end)

    def segment_for(self, offset: int) -> LogSegment:
        """The segment with the largest base offset <= ``offset`` (the oldest when below all)."""
        return self._segments[self._floor_index(offset)]

    def _floor_index(self, offset: int) -> int:
        """Index of the segment with the largest base offset <= ``offset`` (0 when below all)."""
        return max(0, bisect_right(self._bases, offset) - 1)

    # -- damage found while reading ----------------------------------------------------------------

    def mark_damaged(self, offset: int, cause: BaseException) -> CorruptLogError:
        """A read of the segment holding ``offset`` met an impossible batch: remember that segment.

        Returns the error for the caller to raise. A log loaded after a clean shutdown is trusted
        without re-validation (as in Kafka), so damage done while it was closed is only found by a
        read. The log does not repair itself here (a reader may still hold slices of it); whoever
        reopens it next recovers it from :attr:`recovery_start_offset`, with the same re-validation
        crash recovery uses, which cuts the segment at its last valid batch. The caller logs it.
        """
        base = self.segment_for(offset).base_offset
        if self.damaged_from is None or base < self.damaged_from:
            self.damaged_from = base
        return CorruptLogError(
            f"{self.topic}-{self.partition}, segment {segment_file_name(base, LOG_SUFFIX)}: {cause}", base
        )

    @property
    def recovery_start_offset(self) -> int:
        """Where recovery must start when this log is opened again.

        The recovery point, or the first damaged segment's base offset when a read found one below it.
        """
        if self.damaged_from is None:
            return self.recovery_point
        return min(self.recovery_point, self.damaged_from)

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped to [log start offset, log end offset]; returns the value set."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets: (offset, timestamp, leader epoch) of the first record stamped >= ``timestamp``.

        The sentinels -2 (earliest), -1 (latest), -3 (max timestamp) and -4 (earliest local) give the
        log start offset, the log end offset and the record with the largest timestamp. None when no
        record qualifies. The leader epoch is -1 when unknown.
        """
        self._check_open()
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return self.log_start_offset, NO_TIMESTAMP, self._epoch_for(self.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            latest = self.leader_epoch_cache.latest_epoch
            return self.log_end_offset, NO_TIMESTAMP, NO_LEADER_EPOCH if latest is None else latest
        if timestamp == MAX_TIMESTAMP:
            max_timestamp, offset = self.max_timestamp_and_offset()
            return None if offset < 0 else (offset, max_timestamp, self._epoch_for(offset))
        for segment in self._segments:
            if segment.max_timestamp_so_far >= timestamp:
                found = self._find_in_segment(segment, timestamp)
                if found is not None:
                    return found
        return None

    def _find_in_segment(self, segment: LogSegment, timestamp: int) -> tuple[int, int, int] | None:
        """Time index, then batch headers, then the records of the first candidate batches."""
        try:
            return self._find_in_segment_unchecked(segment, timestamp)
        except ProtocolError as exc:
            raise self.mark_damaged(segment.base_offset, exc) from exc

    def _find_in_segment_unchecked(self, segment: LogSegment, timestamp: int) -> tuple[int, int, int] | None:
        log_start = self.log_start_offset
        start = segment.find_offset_by_timestamp(timestamp, log_start)
        if start is None:
            return None
        for batch in segment.iter_batches(start.position):
            if batch.max_timestamp < timestamp or batch.last_offset < log_start:
                continue
            data = segment.file.pread(batch.size, batch.position)
            record = first_record_at_or_after(data, read_header(data), timestamp, log_start)
            if record is not None:
                epoch = batch.partition_leader_epoch
                return record[0], record[1], epoch if epoch >= 0 else NO_LEADER_EPOCH
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(largest record timestamp, offset of the first record carrying it); (-1, -1) when none."""
        self._check_open()
        best = max(self._segments, key=lambda segment: segment.max_timestamp_so_far)
        if best.max_timestamp_so_far < 0:
            return NO_TIMESTAMP, UNKNOWN_OFFSET
        found = self._find_in_segment(best, best.max_timestamp_so_far)
        if found is None:
            return best.max_timestamp_so_far, best.offset_of_max_timestamp_so_far
        return found[1], found[0]

    def _epoch_for(self, offset: int) -> int:
        epoch = self.leader_epoch_cache.epoch_for_offset(offset)
        return NO_LEADER_EPOCH if epoch is None else epoch

    # -- roll and flush ----------------------------------------------------------------------------

    def roll(self) -> None:
        """Start a new segment at the log end offset (no-op when the active segment is empty)."""
        self._check_open()
        self._roll(self.log_end_offset, self._clock.time_ms())

    def _roll(self, base_offset: int, now: int) -> LogSegment:
        """Make a new active segment at ``base_offset`` and fsync the one it replaces."""
        active = self._segments[-1]
        if active.size == 0 and active.base_offset == base_offset:
            return active
        if base_offset <= active.base_offset:
            raise KiplingStorageError(
                f"cannot roll {self.directory} to base offset {base_offset}: "
                f"the active segment starts at {active.base_offset}"
            )
        self._delete_stale_files(base_offset)
        with no_space_is_log_dir_full(self.directory):
            segment = LogSegment(
                self.directory,
                base_offset,
                self.config,
                created_ms=now,
                roll_jitter_ms=_roll_jitter(self.config),
            )
        active.on_becoming_inactive()
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._directory_dirty = True
        self._flush_up_to(base_offset)
        self._delete_expired(now)
        return segment

    def _undo_roll(self, segment: LogSegment) -> None:
        """The first append to a segment just rolled failed: drop it (empty) and reactivate the last one.

        The log is then as before the roll, so the roll and its producer snapshot happen again,
        together, with the retried append. Removing an empty segment needs no space.
        """
        del self._segments[-1], self._bases[-1]
        segment.delete()
        self._segments[-1].resize_indexes(self.config.max_index_size)

    def _delete_stale_files(self, base_offset: int) -> None:
        """Files at a new segment's name can only be leftovers of an old truncation; Kafka deletes them."""
        for path in self.directory.glob(segment_file_name(base_offset, ".*")):
            if path.suffix in (LOG_SUFFIX, ".index", ".timeindex", TXN_INDEX_SUFFIX):
                _log.warning("deleting stale file before roll", path=str(path))
                path.unlink()

    def flush(self, up_to: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``up_to``) and advance the recovery point.

        ``up_to`` defaults to (and is capped at) the log end offset.
        """
        self._check_open()
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        self._flush_up_to(target)

    def _flush_up_to(self, offset: int) -> None:
        if offset <= self.recovery_point:
            return
        first = self._floor_index(self.recovery_point)
        last = bisect_right(self._bases, offset - 1)
        for segment in self._segments[first:last]:
            segment.flush()
        if self._directory_dirty:
            fsync_directory(self.directory)
            self._directory_dirty = False
        self.recovery_point = offset
        self._last_flush_ms = self._clock.time_ms()

    # -- aborted transactions ----------------------------------------------------------------------

    def append_aborted_txn(self, aborted: AbortedTxn) -> None:
        """Record an aborted transaction in the index of the segment holding its marker.

        On the append path that is the active segment (the marker was just appended); a replay
        writes into the segment where the marker lies. Last offsets must increase within a segment
        (ValueError otherwise). A failed write raises KiplingStorageError, never LogDirFullError:
        the marker is already in the log, so the log is not as it was before, and read_committed
        readers would take the aborted records for committed ones. The partition must go offline;
        the replay when it is opened again writes the entry.
        """
        self._check_open()
        if not self._segments[0].base_offset <= aborted.last_offset < self.log_end_offset:
            raise ValueError(
                f"aborted transaction {aborted} ends outside the log of {self.topic}-{self.partition} "
                f"[{self._segments[0].base_offset}, {self.log_end_offset})"
            )
        index = self.segment_for(aborted.last_offset).txn_index
        created = not index.exists
        try:
            index.append(aborted)
        except OSError as exc:
            raise KiplingStorageError(
                f"could not record aborted transaction {aborted} in {index.path}: {exc}"
            ) from exc
        if created:
            self._directory_dirty = True

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [``start_offset``, ``upper_bound_offset``).

        Walks the transaction indexes from the segment holding ``start_offset`` until one says the
        search is complete (Kafka's UnifiedLog.collectAbortedTransactions). The fetch path asks with
        the first offset it returns and the offset after the last batch it returns.
        """
        self._check_open()
        found: list[AbortedTxn] = []
        for segment in self._segments[self._floor_index(start_offset) :]:
            result = segment.txn_index.collect_aborted(start_offset, upper_bound_offset)
            found.extend(result.aborted)
            if result.is_complete:
                break
        return found

    def drop_aborted_txns_from(self, offset: int) -> None:
        """Remove the entries whose last offset (marker) is >= ``offset``: a replay of the producer
        state from ``offset`` writes them again."""
        self._check_open()
        self.segment_generation += 1
        for segment in self._segments[self._floor_index(offset) :]:
            segment.txn_index.truncate_to(offset)

    # -- truncation --------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and above ``offset`` (a follower diverged); False when nothing changed.

        A batch holding ``offset`` is removed whole, so the new log end offset is the first offset no
        longer in the log (``offset`` itself when it is a batch boundary).

        At or past the log end no batch goes, but the leader epoch cache is still cut at the log end,
        as Kafka's ``UnifiedLog.truncateTo`` does: an entry starting at the log end covers no batch
        and may conflict with the leader's epochs (this replica assigned it as leader and appended
        nothing before losing the lead, or retention moved the log start up to the log end). Left in
        place, it stays the follower's last fetched epoch, the leader answers every fetch with the
        same diverging epoch, and the truncation it asks for is this no-op again.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset ({offset})")
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        now = self._clock.time_ms()
        self.truncations += 1
        self.segment_generation += 1
        keep = bisect_right(self._bases, offset)
        self._remove_segments(self._segments[keep:], now)
        del self._segments[keep:], self._bases[keep:]
        active = self._segments[-1]
        active.truncate_to(offset, now)
        active.resize_indexes(self.config.max_index_size)
        self.log_end_offset = active.next_offset
        self._truncation_ends.append(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        delete_snapshots_after(self.directory, self.log_end_offset)
        self._clamp_offsets_to_end()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at ``offset``."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot start a log at a negative offset ({offset})")
        now = self._clock.time_ms()
        self.truncations += 1
        self._remove_segments(self._segments, now)
        segment = LogSegment(
            self.directory, offset, self.config, created_ms=now, roll_jitter_ms=_roll_jitter(self.config)
        )
        self._segments, self._bases = [segment], [offset]
        self._directory_dirty = True
        self.leader_epoch_cache.clear()
        delete_snapshots_after(self.directory, -1)  # none describes the restarted log
        self.log_start_offset = self.log_end_offset = self.high_watermark = self.recovery_point = offset
        self._truncation_ends.append(offset)

    def lowest_truncation_end(self, since: int) -> int | None:
        """The lowest log end offset left by the truncations after the first ``since`` ones (counted
        by :attr:`truncations` since this log was opened), or None when there were none."""
        later = self._truncation_ends[since:]
        return min(later) if later else None

    def _clamp_offsets_to_end(self) -> None:
        end = self.log_end_offset
        self.log_start_offset = min(self.log_start_offset, end)
        self.high_watermark = min(self.high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)

    # -- retention ---------------------------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Apply retention (log start offset, then size, then time); returns how many segments went.

        Size and time retention apply only to a log whose cleanup.policy includes delete (Kafka's
        ``UnifiedLog.deleteOldSegments``); a compact-only log loses records only to the cleaner.
        Also removes the files of earlier deletions whose file.delete.delay.ms has passed.
        """
        self._check_open()
        now = self._clock.time_ms()
        self._delete_expired(now)
        deleted = self._delete_prefix(retention.log_start_offset_breached(self.log_start_offset), now)
        if not self.config.delete:
            return deleted
        by_size = retention.retention_size_breached(self.size_in_bytes, self.config.retention_bytes)
        if by_size is not None:
            deleted += self._delete_prefix(by_size, now)
        by_time = retention.retention_time_breached(now, self.config.retention_ms)
        if by_time is not None:
            deleted += self._delete_prefix(by_time, now)
        return deleted

    def delete_segments_below_log_start(self) -> int:
        """Delete the segments wholly below the log start offset now (after DeleteRecords moved it),
        the first step of retention; returns how many went."""
        self._check_open()
        now = self._clock.time_ms()
        return self._delete_prefix(retention.log_start_offset_breached(self.log_start_offset), now)

    def _delete_prefix(self, predicate: retention.SegmentPredicate, now: int) -> int:
        count = retention.deletable_prefix(
            self._segments, self.log_end_offset, self.high_watermark, predicate
        )
        if count == 0:
            return 0
        if count == len(self._segments):
            self._roll(self.log_end_offset, now)  # a log always keeps one segment
        doomed = self._segments[:count]
        del self._segments[:count], self._bases[:count]
        self._remove_segments(doomed, now)
        self.maybe_increment_log_start_offset(self._segments[0].base_offset)
        return count

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        """Raise the log start offset (retention, DeleteRecords); it may never pass the high watermark."""
        self._check_open()
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset of {self.topic}-{self.partition} to {offset}, "
                f"above the high watermark {self.high_watermark}"
            )
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self.recovery_point = max(self.recovery_point, offset)

    def _remove_segments(self, segments: list[LogSegment], now: int) -> None:
        """Rename to .deleted now; remove the files after file.delete.delay.ms (readers may hold slices)."""
        delay = self.config.file_delete_delay_ms
        self.segment_generation += 1
        for segment in segments:
            segment.change_file_suffix(DELETED_SUFFIX)
            if delay == 0:
                segment.delete()
            else:
                self._pending_deletions.append((now + delay, segment))
        self._directory_dirty = True

    def _delete_expired(self, now: int) -> None:
        if not self._pending_deletions:
            return
        due = [segment for deadline, segment in self._pending_deletions if deadline <= now]
        self._pending_deletions = [entry for entry in self._pending_deletions if entry[0] > now]
        for segment in due:
            segment.delete()

    # -- compaction --------------------------------------------------------------------------------

    def replace_segments(
        self,
        replaced: Sequence[tuple[int, int]],
        *,
        token: str = "",
        step_hook: Callable[[str], None] | None = None,
    ) -> LogSegment | None:
        """Install a cleaned segment in place of ``replaced`` ((base offset, size) of consecutive
        inactive segments), Kafka's ``LocalLog.replaceSegments``; None when they changed meanwhile.

        The cleaner wrote ``<base>.log.<token>.cleaned`` and ``<base>.txnindex.<token>.cleaned``
        (:func:`storage.cleaner.files.cleaned_file_name`, fsynced) from the segments as they were.
        When retention, DeleteRecords or a truncation removed or changed any of them since, or one
        became the active segment, the cleaned files are deleted and nothing else happens.
        Otherwise, in the order :mod:`storage.cleaner.recovery` finishes or undoes after a crash:
        both files are renamed to ``.swap``; the old segments go to ``.deleted`` and are removed
        after file.delete.delay.ms as retention does (readers may still hold slices of them); the
        ``.swap`` files take their final names; the new segment is opened (indexes built from the
        file) and takes the old ones' place in the segment list.
        ``step_hook`` is called after each file operation (the crash tests raise there).
        """
        self._check_open()
        directory = self.directory
        base = replaced[0][0]
        cleaned_log = directory / cleaned_file_name(base, LOG_SUFFIX, token)
        cleaned_txn = directory / cleaned_file_name(base, TXN_INDEX_SUFFIX, token)
        first = bisect_right(self._bases, base) - 1
        old = self._segments[first : first + len(replaced)] if first >= 0 else []
        unchanged = (
            len(old) == len(replaced)
            and first + len(old) < len(self._segments)  # never the active segment
            and [(s.base_offset, s.size) for s in old] == [tuple(entry) for entry in replaced]
        )
        if not unchanged:
            for suffix in (LOG_SUFFIX, TXN_INDEX_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (directory / cleaned_file_name(base, suffix, token)).unlink(missing_ok=True)
            _log.info(
                "discarding cleaned segment: the segments it replaces changed",
                topic=self.topic,
                partition=self.partition,
                base_offset=base,
            )
            return None

        def step(name: str) -> None:
            if step_hook is not None:
                step_hook(name)

        swap_log = directory / segment_file_name(base, LOG_SUFFIX + SWAP_SUFFIX)
        swap_txn = directory / segment_file_name(base, TXN_INDEX_SUFFIX + SWAP_SUFFIX)
        mtime = cleaned_log.stat().st_mtime_ns
        os.replace(cleaned_txn, swap_txn)
        step("txnindex cleaned -> swap")
        os.replace(cleaned_log, swap_log)
        fsync_directory(directory)
        step("log cleaned -> swap")
        now = self._clock.time_ms()
        for segment in old:
            self._remove_segments([segment], now)
            step(f"segment {segment.base_offset} -> deleted")
        fsync_directory(directory)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # the cleaner built them (a crash: rebuilt)
            cleaned_index = directory / cleaned_file_name(base, suffix, token)
            if cleaned_index.exists():
                os.replace(cleaned_index, directory / segment_file_name(base, suffix))
        final_txn = directory / segment_file_name(base, TXN_INDEX_SUFFIX)
        os.replace(swap_txn, final_txn)
        step("txnindex swap -> final")
        os.replace(swap_log, directory / segment_file_name(base, LOG_SUFFIX))
        fsync_directory(directory)
        step("log swap -> final")
        if final_txn.stat().st_size == 0:
            final_txn.unlink()
        new = LogSegment(directory, base, self.config, created_ms=old[0].created_ms)
        if new.needs_recovery:  # no index from the cleaner: rebuild them (a scan of the whole file)
            new.recover()
        new.needs_recovery = False
        new.on_becoming_inactive()
        new.flush()
        os.utime(new.log_path, ns=(mtime, mtime))
        self._segments[first : first + len(old)] = [new]
        self._bases[first : first + len(old)] = [base]
        self.segment_generation += 1
        return new

    # -- inspection --------------------------------------------------------------------------------

    def segments(self) -> list[LogSegment]:
        """The live segments, oldest first (a copy of the list)."""
        return list(self._segments)

    @property
    def closed(self) -> bool:
        """Closed (or deleted): its owner let it go; a cleaned segment must not be installed."""
        return self._closed

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def clock(self) -> Clock:
        """The clock the log rolls, flushes and stamps by (a log reopened in place keeps it)."""
        return self._clock

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def reconfigure(self, config: LogConfig) -> None:
        """Take a new configuration (a dynamic config change) without reopening the log.

        Everything reads ``self.config`` when it acts, so the change applies from the next append
        (max.message.bytes, timestamps, compression, flush.*), the next roll check (segment.bytes,
        segment.ms) and the next retention pass (retention.*, file.delete.delay.ms). Settings a
        segment fixed when it was created (index sizes and interval, its roll jitter) apply from
        the next segment, as in Kafka.
        """
        self.config = config

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """fsync, then close every segment (final time index entries, trimmed indexes); idempotent.

        Segments waiting for their delayed deletion are removed now: no reader survives a close.
        """
        if self._closed:
            return
        self.flush()
        for segment in self._segments:
            segment.close()
        self._delete_expired(_FAR_FUTURE)
        self._closed = True

    def delete(self) -> None:
        """Close without flushing and remove the whole directory."""
        if not self._closed:
            for segment in self._segments:
                segment.close()
            self._delete_expired(_FAR_FUTURE)
            self._closed = True
        shutil.rmtree(self.directory, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise KiplingStorageError(f"log {self.directory} is closed")

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, hw={self.high_watermark}, segments={len(self._segments)})"
        )


_FAR_FUTURE = 2**63 - 1


def _append_info(validated: ValidatedAppend, log_append_time: int) -> AppendInfo:
    return AppendInfo(
        validated.first_offset,
        validated.last_offset,
        validated.max_timestamp,
        validated.offset_of_max_timestamp,
        log_append_time,
        validated.num_records,
        validated.size,
    )


def _roll_jitter(config: LogConfig) -> int:
    """Random per-segment jitter in [0, min(segment.jitter.ms, segment.ms)) so partitions roll apart."""
    if config.segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.segment_ms))


def _check_topic_id(directory: pathlib.Path, topic_id: uuid.UUID | None) -> uuid.UUID | None:
    """Write partition.metadata on first use; refuse a directory that belongs to another topic id."""
    metadata = PartitionMetadataFile(directory / PARTITION_METADATA)
    known = metadata.read()
    if topic_id is None:
        return known
    if known is None:
        metadata.write(topic_id)
    elif known != topic_id:
        raise KiplingStorageError(f"{directory} belongs to topic id {known}, not {topic_id}")
    return topic_id
