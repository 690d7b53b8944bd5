"""The leader epoch cache of one partition (kafka-behaviour.md 7.7).

It maps each leader epoch to the first offset written in it. Followers use it (through
OffsetForLeaderEpoch and diverging epochs in fetch responses) to find where their log diverges from
the leader's, so it must survive restarts: every change is written to leader-epoch-checkpoint before
the call returns. Kafka flushes truncations asynchronously; kipling flushes them synchronously too,
which is simpler and never less safe.

On a full disk the two kinds of change differ. A new epoch must be on disk before the batches that
carry it, so a failed write of one undoes it in memory and raises (the append fails, nothing is
lost). A truncation only removes entries: the file may keep naming more than the log holds, which
loading cuts away (entries at or past the log end, or before the log start), so a failed write of
one is logged and the next successful write catches up.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, NamedTuple

import structlog

from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET
from storage.errors import is_log_dir_full

if TYPE_CHECKING:
    from storage.checkpoint import LeaderEpochCheckpointFile

UNDEFINED_EPOCH = NO_LEADER_EPOCH
"""Kafka's name for it in LeaderEpochFileCache: no epoch at or below the one asked about."""

_log = structlog.get_logger(__name__)


class EpochEntry(NamedTuple):
    """Leader epoch ``epoch`` started at offset ``start_offset``."""

    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """Entries (epoch, start offset), strictly increasing in both, persisted to a checkpoint file.

    Not thread-safe: one owner (the broker or a follower process) drives each partition's log.
    """

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None) -> None:
        self._checkpoint = checkpoint
        self._entries: list[EpochEntry] = []
        if checkpoint is not None:
            for entry in checkpoint.read():
                self._assign(EpochEntry(*entry))

    # -- updates ---------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; flushes synchronously when anything changed.

        A negative epoch (a batch with no partition leader epoch) carries no information and is ignored.
        When the checkpoint cannot be written the entries stay as they were and the error is raised.
        """
        if epoch < 0:
            return
        if start_offset < 0:
            raise ValueError(f"invalid start offset {start_offset} for leader epoch {epoch}")
        before = list(self._entries)
        if self._assign(EpochEntry(epoch, start_offset)):
            try:
                self.flush()
            except BaseException:
                self._entries = before
                raise

    def _assign(self, new: EpochEntry) -> bool:
        """Apply the assign rule without flushing; True if the entries changed.

        Ignored when ``new`` is the latest epoch again at or after its start. Otherwise every tail entry
        with an epoch >= new's or a start offset >= new's is removed first, so both columns stay
        strictly increasing.
        """
        latest = self.latest_entry
        if latest is not None and new.epoch == latest.epoch and new.start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= new.epoch or self._entries[-1].start_offset >= new.start_offset
        ):
            self._entries.pop()
        self._entries.append(new)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated to it)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._flush_removal()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries starting at or before ``start_offset`` and re-add the last of them at it.

        Called when the log start offset moves (retention, DeleteRecords): the epoch that covered
        ``start_offset`` now starts there.
        """
        if start_offset < 0:
            return
        cut = bisect_right(self._entries, start_offset, key=lambda entry: entry.start_offset)
        if cut == 0:
            return
        covering = self._entries[cut - 1]
        self._entries[:cut] = [EpochEntry(covering.epoch, start_offset)]
        self._flush_removal()

    def clear(self) -> None:
        """Remove every entry (a pre-v2 batch was appended, or the log was fully truncated) and flush."""
        self._entries.clear()
        self._flush_removal()

    def _flush_removal(self) -> None:
        """Flush after entries were removed; on a full disk the file may lag (loading cuts it)."""
        try:
            self.flush()
        except OSError as exc:
            if not is_log_dir_full(exc):
                raise
            path = None if self._checkpoint is None else str(self._checkpoint.path)
            _log.warning("leader epoch checkpoint not rewritten: no space left on device", path=path)

    def flush(self) -> None:
        """Write the entries to the checkpoint file (atomically); no-op for an in-memory cache."""
        if self._checkpoint is not None:
            self._checkpoint.write(self._entries)

    # -- queries ---------------------------------------------------------------------------------

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The entry of the highest epoch, or None when empty."""
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The highest epoch, or None when empty."""
        return self._entries[-1].epoch if self._entries else None

    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, oldest first."""
        return list(self._entries)

    def previous_epoch(self) -> int | None:
        """The epoch before the latest one, or None if there are fewer than two entries."""
        return self._entries[-2].epoch if len(self._entries) >= 2 else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (latest entry starting <= offset), or None if before all."""
        slot = bisect_right(self._entries, offset, key=lambda entry: entry.start_offset)
        return self._entries[slot - 1].epoch if slot else None

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: where ``epoch`` ended in this log.

        - epoch -1 (undefined), or above every known epoch, or an empty cache: (-1, -1);
        - the latest epoch: (epoch, log end offset);
        - below every known epoch: (epoch itself, start offset of the first entry);
        - otherwise: (largest known epoch <= epoch, start offset of the next higher entry).
        """
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == epoch:
            return epoch, log_end_offset
        higher = bisect_right(self._entries, epoch, key=lambda entry: entry.epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self._entries!r})"
