"""The Raft log of the KRaft metadata partition (``__cluster_metadata-0``) on segment files.

:class:`SegmentRaftLog` implements :class:`~metadata.raft.log.RaftLog` over a
:class:`storage.log.PartitionLog`, so the metadata log has the same segments, indexes, leader-epoch
checkpoint and crash recovery as any partition.

One :class:`~metadata.raft.log.Entry` is one v2 record batch: its offset is the batch's base
offset, its epoch the batch's partition leader epoch, its payload the batch's bytes exactly as on
disk and on the wire, and it spans ``last_offset - base_offset + 1`` offsets. Batches are appended,
replicated, truncated and read whole, so a controller change written as one batch of several
records is atomic on every replica: a follower never holds half of it, and the state machine never
replays half of it. Only batch headers are parsed here; records stay opaque.

Every append is fsynced before it returns: Raft's safety rests on durable logs (a voter compares
its log with a candidate's before granting a vote, and the leader counts a follower's fetch offset
towards the commit), so an entry acknowledged by fetching past it, or weighed in a vote, must not
vanish in a crash. Truncations are fsynced too.

Raft truncates only at epoch boundaries, which are batch boundaries; :meth:`SegmentRaftLog.truncate_to`
at an offset inside a batch removes that whole batch (the log then ends at its base offset).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import structlog

from metadata.raft.log import INITIAL_EPOCH, Entry
from metadata.snapshot import SnapshotId, finish_fetched_snapshot, latest_snapshot, write_snapshot_chunk
from protocol.errors import ProtocolError
from protocol.records.batch import RecordBatchHeader, iter_batches, read_header
from protocol.records.builder import Record, build_batch
from storage.checkpoint import fsync_directory
from storage.clock import Clock
from storage.log import PartitionLog

_log = structlog.get_logger("kipling.raft.log")
_READ_CHUNK_BYTES = 1 << 20
"""Bytes asked of the partition log per read; reads continue chunk by chunk, batch by batch."""


class SegmentRaftLog:
    """A :class:`~metadata.raft.log.RaftLog` whose entries are the record batches of a partition log.

    The high watermark is not kept here: Raft keeps it volatile and learns it again after a restart.
    """

    def __init__(self, log: PartitionLog, clock: Clock) -> None:
        self._log = log
        self._clock = clock
        latest = latest_snapshot(log.directory)
        self._latest_snapshot: tuple[int, int] | None = (
            None if latest is None else (latest.end_offset, latest.epoch)
        )

    @property
    def partition_log(self) -> PartitionLog:
        """The partition log underneath (for inspection and tools)."""
        return self._log

    # -- queries ----------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last entry; for a log that starts at a snapshot's end and holds nothing
        yet, the snapshot's epoch (what the leader checks the next fetch against)."""
        latest = self._log.leader_epoch_cache.latest_epoch
        if latest is not None:
            return latest
        snapshot = self._latest_snapshot
        if snapshot is not None and snapshot[0] == self._log.log_end_offset:
            return snapshot[1]
        return INITIAL_EPOCH

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        if self._log.log_end_offset == self._log.log_start_offset:
            return INITIAL_EPOCH, self._log.log_end_offset
        return self._log.leader_epoch_cache.end_offset_for(epoch, self._log.log_end_offset)

    # -- appends ----------------------------------------------------------------------------------

    def append_as_leader(
        self, epoch: int, payloads: Sequence[bytes], *, control: bool = False
    ) -> list[Entry]:
        """Append one batch holding a record per payload (value = payload, no key), fsynced.

        ``control`` sets the batch's control attribute, so the metadata replay skips it. Returns the
        one entry written (none for no payloads).
        """
        if not payloads:
            return []
        now = self._clock.time_ms()
        batch = build_batch(
            [Record(value=payload, timestamp=now) for payload in payloads],
            partition_leader_epoch=epoch,
            is_control=control,
        )
        return [self._append_batch(epoch, batch)]

    def append_records(self, epoch: int, batch_bytes: bytes | bytearray | memoryview) -> Entry:
        """Append one already encoded batch (e.g. ``metadata.serde.encode_metadata_batch``) as leader
        in ``epoch``, fsynced; returns its entry with the offsets the log assigned."""
        header = read_header(batch_bytes)
        if header.size != len(batch_bytes):
            raise ValueError(
                f"expected exactly one record batch of {header.size} bytes, got {len(batch_bytes)}"
            )
        return self._append_batch(epoch, batch_bytes)

    def _append_batch(self, epoch: int, batch: bytes | bytearray | memoryview) -> Entry:
        if epoch < self.last_fetched_epoch:
            raise ValueError(f"cannot append at epoch {epoch} after epoch {self.last_fetched_epoch}")
        # A writable view is validated and stamped in place (offsets, epoch, LogAppendTime), so
        # ``buf`` ends up holding exactly the bytes written to the segment.
        buf = bytearray(batch)
        self._log.append_as_leader(memoryview(buf), epoch)
        self._log.flush()
        payload = bytes(buf)
        return _entry(read_header(payload), payload)

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        """Append batches copied from the leader, keeping their offsets and epochs; fsynced."""
        if not entries:
            return
        if entries[0].offset != self.end_offset:
            raise ValueError(f"entries start at {entries[0].offset}, the log ends at {self.end_offset}")
        expected_offset, last_epoch = self.end_offset, self.last_fetched_epoch
        for entry in entries:
            try:
                header = read_header(entry.payload)
            except ProtocolError as exc:
                raise ValueError(f"entry at offset {entry.offset} is not a record batch: {exc}") from exc
            if (header.size, header.base_offset, header.partition_leader_epoch, header.last_offset) != (
                len(entry.payload),
                entry.offset,
                entry.epoch,
                entry.last_offset,
            ):
                raise ValueError(f"entry at offset {entry.offset} is not the one record batch it carries")
            if entry.offset != expected_offset:
                raise ValueError(
                    f"entry at offset {entry.offset} does not follow offset {expected_offset - 1}"
                )
            if entry.epoch < last_epoch:
                raise ValueError(f"epoch {entry.epoch} after epoch {last_epoch}")
            expected_offset, last_epoch = entry.next_offset, entry.epoch
        self._log.append_as_follower(b"".join(entry.payload for entry in entries))
        self._log.flush()

    # -- truncation -------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at ``offset`` or after; a batch holding ``offset`` goes whole.

        Raft calls this at epoch boundaries only, which are batch boundaries, so the log then ends
        exactly at ``offset``. The partition log fixes the leader-epoch cache (and its checkpoint);
        the segment file and the directory are fsynced before returning.
        """
        if self._log.truncate_to(offset):
            self._log.active_segment.flush()
            fsync_directory(self._log.directory)

    # -- reads ------------------------------------------------------------------------------------

    def read(self, start_offset: int, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` whole batches from the one starting at ``start_offset``.

        Empty at or past the log end. ``start_offset`` inside a batch is a caller error (ValueError).
        """
        entries: list[Entry] = []
        if max_entries <= 0:
            return entries
        for header, payload in self._batches(start_offset):
            entries.append(_entry(header, payload))
            if len(entries) >= max_entries:
                break
        return entries

    def _batches(self, start_offset: int) -> Iterator[tuple[RecordBatchHeader, bytes]]:
        """(header, bytes) of each whole batch from ``start_offset``."""
        if start_offset < 0:
            raise ValueError(f"cannot read from a negative offset ({start_offset})")
        offset = start_offset
        while offset < self._log.log_end_offset:
            result = self._log.read(offset, _READ_CHUNK_BYTES)
            if result.slice is None:
                return
            if result.first_offset != offset:
                raise ValueError(f"offset {offset} is inside the batch starting at {result.first_offset}")
            data = result.slice.read_bytes()
            before = offset
            for position, header in iter_batches(data):
                yield header, data[position : position + header.size]
                offset = header.next_offset
            if offset == before:
                raise RuntimeError(
                    f"reading {self._log.directory} at offset {offset} returned no whole batch"
                )

    @property
    def start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def latest_snapshot_id(self) -> tuple[int, int] | None:
        return self._latest_snapshot

    def note_snapshot(self, end_offset: int, epoch: int) -> None:
        """A snapshot of the committed log up to ``end_offset`` was written or fetched here."""
        if self._latest_snapshot is None or end_offset > self._latest_snapshot[0]:
            self._latest_snapshot = (end_offset, epoch)

    def write_snapshot_chunk(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None:
        write_snapshot_chunk(self._log.directory, SnapshotId(*snapshot_id), position, data)

    def install_snapshot(self, snapshot_id: tuple[int, int]) -> None:
        """The fetched snapshot is whole: check and keep it, then restart the log at its end (every
        entry of this log is replaced: a voter lands here only after losing its log)."""
        snapshot = SnapshotId(*snapshot_id)
        finish_fetched_snapshot(self._log.directory, snapshot)
        self._log.truncate_fully_and_start_at(snapshot.end_offset)
        self._log.flush()
        self.note_snapshot(snapshot.end_offset, snapshot.epoch)
        _log.info("metadata snapshot installed", end_offset=snapshot.end_offset, epoch=snapshot.epoch)

    def advance_start(self, offset: int) -> bool:
        """Forget the log before ``offset`` (covered by a snapshot, at or below the high watermark):
        reads below it are refused from now on, and its whole segments go at the next retention
        pass. True if the start moved."""
        if offset <= self._log.log_start_offset:
            return False
        self._log.maybe_increment_log_start_offset(offset)
        return True

    def note_committed(self, high_watermark: int) -> None:
        """Record the quorum's high watermark on the partition log, whose checkpoint file keeps it
        across restarts: Raft itself relearns it from the leader, but this node's broker side
        replays its local copy up to it while no leader is reachable (committed entries are never
        truncated, so an old value is only a smaller safe prefix)."""
        if high_watermark > self._log.high_watermark:
            self._log.update_high_watermark(high_watermark)

    # -- lifecycle --------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything appended (appends already do; for symmetry with the partition log)."""
        self._log.flush()

    def close(self) -> None:
        """Close the partition log (fsynced first)."""
        self._log.close()


if TYPE_CHECKING:
    from metadata.raft.log import RaftLog

    def _is_a_raft_log(log: SegmentRaftLog) -> RaftLog:
        return log  # mypy checks that the class satisfies the protocol


def _entry(header: RecordBatchHeader, payload: bytes) -> Entry:
    return Entry(
        offset=header.base_offset,
        epoch=header.partition_leader_epoch,
        payload=payload,
        record_count=header.last_offset_delta + 1,
    )


def batch_entries(data: bytes | bytearray | memoryview) -> list[Entry]:
    """The entries (whole batches) of fetched record bytes, as a follower appends them; a partial
    batch at the end (a fetch cut by its byte limit) is left out."""
    view = memoryview(data)
    return [
        _entry(header, bytes(view[position : position + header.size]))
        for position, header in iter_batches(view)
    ]
