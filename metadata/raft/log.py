"""The replicated log as the quorum sees it: opaque entries, each tagged with the epoch that wrote it.

The quorum needs only what Raft needs from a log: where it ends, the epoch of its last entry, where
an epoch ends (the leader-epoch cache's OffsetForLeaderEpoch answer, which drives diverging-epoch
truncation exactly as for partition followers), append, truncate and read. :class:`RaftLog` is that
contract; :class:`~metadata.raft.segment_log.SegmentRaftLog` is the metadata log on segment files,
:class:`InMemoryRaftLog` serves tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from storage.epoch import LeaderEpochFileCache

INITIAL_EPOCH = 0
"""The epoch before any election; the last fetched epoch of an empty log."""


@dataclass(frozen=True)
class Entry:
    """One log entry: its first offset, the leader epoch that appended it, and an opaque payload.

    An entry may span several offsets (``record_count``): on segment files an entry is one record
    batch, appended and replicated whole, which is what keeps a controller's multi-record change
    atomic on every replica.
    """

    offset: int
    epoch: int
    payload: bytes
    record_count: int = 1

    @property
    def last_offset(self) -> int:
        return self.offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        """The offset of the entry after this one."""
        return self.offset + self.record_count


class RaftLog(Protocol):
    """What the quorum reads and writes; every method takes effect durably before it returns."""

    @property
    def end_offset(self) -> int:
        """The log end offset: the offset the next entry gets."""
        ...

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last entry (:data:`INITIAL_EPOCH` when empty)."""
        ...

    @property
    def start_offset(self) -> int:
        """The first offset still in the log; what is before it is only in a snapshot (KIP-630)."""
        ...

    @property
    def latest_snapshot_id(self) -> tuple[int, int] | None:
        """(end offset, epoch) of the newest snapshot of the committed log, if any."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch`` in the log, the offset where it ends), as the epoch cache answers."""
        ...

    def append_as_leader(
        self, epoch: int, payloads: Sequence[bytes], *, control: bool = False
    ) -> list[Entry]:
        """Append ``payloads`` at the log end, written in ``epoch``; returns the new entries.

        ``control`` marks Raft's own entries (a new leader's LeaderChange), which the state machine
        on top of the log skips, as Kafka writes them in control batches.
        """
        ...

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        """Append entries copied from the leader; the first must sit at the log end."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every entry at ``offset`` or after (no-op when the log ends at or before it)."""
        ...

    def read(self, start_offset: int, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` entries from ``start_offset`` on (empty at or past the end)."""
        ...

    def write_snapshot_chunk(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None:
        """Keep ``data`` at ``position`` of the snapshot being fetched (not yet part of the log)."""
        ...

    def install_snapshot(self, snapshot_id: tuple[int, int]) -> None:
        """The fetched snapshot is complete: the log now starts at its end (everything before,
        including this log's own entries, is replaced by it). Durable when it returns."""
        ...


class InMemoryRaftLog:
    """A :class:`RaftLog` held in a list, with the storage layer's epoch cache (kept in memory)."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._epochs = LeaderEpochFileCache(None)

    @property
    def end_offset(self) -> int:
        return len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else INITIAL_EPOCH

    @property
    def start_offset(self) -> int:
        return 0

    @property
    def latest_snapshot_id(self) -> tuple[int, int] | None:
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        if not self._entries:
            return INITIAL_EPOCH, 0
        return self._epochs.end_offset_for(epoch, self.end_offset)

    def append_as_leader(
        self, epoch: int, payloads: Sequence[bytes], *, control: bool = False
    ) -> list[Entry]:
        if epoch < self.last_fetched_epoch:
            raise ValueError(f"cannot append at epoch {epoch} after epoch {self.last_fetched_epoch}")
        start = self.end_offset
        new = [Entry(start + i, epoch, payload) for i, payload in enumerate(payloads)]
        self._extend(new)
        return new

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        if entries[0].offset != self.end_offset:
            raise ValueError(f"entries start at {entries[0].offset}, the log ends at {self.end_offset}")
        self._extend(entries)

    def _extend(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.epoch < self.last_fetched_epoch:
                raise ValueError(f"epoch {entry.epoch} after epoch {self.last_fetched_epoch}")
            self._epochs.assign(entry.epoch, entry.offset)
            self._entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset ({offset})")
        if offset < self.end_offset:
            del self._entries[offset:]
            self._epochs.truncate_from_end(offset)

    def read(self, start_offset: int, max_entries: int) -> list[Entry]:
        return list(self._entries[start_offset : start_offset + max_entries])

    def write_snapshot_chunk(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None:
        raise NotImplementedError("an in-memory log keeps no snapshots; the log start never moves")

    def install_snapshot(self, snapshot_id: tuple[int, int]) -> None:
        raise NotImplementedError("an in-memory log keeps no snapshots; the log start never moves")

    def entries(self) -> list[Entry]:
        """Every entry (tests compare logs with it)."""
        return list(self._entries)
