"""Snapshots of the committed metadata log on a voter, and the log cleaned below them (KIP-630).

:class:`MetadataSnapshots` replays every batch as it commits into an image of its own, and once
``metadata.log.max.record.bytes.between.snapshots`` of committed batches have accumulated since
the last snapshot it writes the image as ``<end offset>-<epoch>.checkpoint`` into the log's
directory (:mod:`metadata.snapshot`). The log before the newest snapshot may then be forgotten,
but only as far as :meth:`RaftNode.cleanable_below <metadata.raft.quorum.RaftNode.cleanable_below>`
allows (every voter keeps what another voter might still need); an observer (a broker) asking for
an offset before the log start is pointed to the snapshot and fetches it with FetchSnapshot.

Replaying runs on the event loop as the high watermark moves: the metadata log is small (records
per topic, partition change and broker), so a batch costs microseconds.
"""

from __future__ import annotations

import structlog

from metadata.image import MetadataImage
from metadata.raft.segment_log import SegmentRaftLog
from metadata.serde import decode_metadata_batches
from metadata.snapshot import (
    SnapshotId,
    delete_snapshots_before,
    latest_snapshot,
    load_snapshot,
    remove_partial_snapshots,
    write_snapshot,
)
from storage.clock import Clock

__all__ = ["MetadataSnapshots"]

_log = structlog.get_logger("kipling.raft.snapshots")

READ_BATCHES = 64


class MetadataSnapshots:
    """The committed image of one voter's metadata log, written out every so many bytes."""

    def __init__(self, log: SegmentRaftLog, clock: Clock, max_bytes_between: int) -> None:
        self._log = log
        self._clock = clock
        self._max_bytes_between = max_bytes_between
        self._directory = log.partition_log.directory
        remove_partial_snapshots(self._directory)
        self._bytes_since = 0
        self._load_latest()

    def _load_latest(self) -> None:
        latest = latest_snapshot(self._directory)
        self._image = MetadataImage() if latest is None else load_snapshot(self._directory, latest)
        self._next_offset = 0 if latest is None else latest.end_offset
        self._epoch = 0 if latest is None else latest.epoch

    @property
    def latest(self) -> SnapshotId | None:
        return latest_snapshot(self._directory)

    def on_committed(self, high_watermark: int) -> SnapshotId | None:
        """Replay what committed up to ``high_watermark``; returns a snapshot if one was written."""
        if self._next_offset < self._log.start_offset:  # the log restarted at a fetched snapshot
            self._load_latest()
        while self._next_offset < high_watermark:
            entries = self._log.read(self._next_offset, READ_BATCHES)
            if not entries:
                break
            for entry in entries:
                if entry.offset >= high_watermark:
                    break
                for batch in decode_metadata_batches(entry.payload):
                    self._image.apply_batch(batch.records, batch.epoch)
                self._image.skip_to(entry.last_offset)
                self._next_offset = entry.next_offset
                self._epoch = entry.epoch
                self._bytes_since += len(entry.payload)
            else:
                continue
            break
        if self._bytes_since < self._max_bytes_between or self._next_offset == 0:
            return None
        return self._write()

    def _write(self) -> SnapshotId:
        snapshot = write_snapshot(
            self._directory,
            self._image,
            end_offset=self._next_offset,
            epoch=max(self._epoch, self._image.epoch),
            timestamp_ms=self._clock.time_ms(),
        )
        self._bytes_since = 0
        self._log.note_snapshot(snapshot.end_offset, snapshot.epoch)
        _log.info("metadata snapshot written", end_offset=snapshot.end_offset, epoch=snapshot.epoch)
        return snapshot

    def clean(self, bound: int) -> None:
        """Forget the log before ``bound`` (at most the newest snapshot's end), and older snapshots."""
        latest = self._log.latest_snapshot_id
        if latest is None:
            return
        end = min(bound, latest[0])
        if self._log.advance_start(end):
            deleted = delete_snapshots_before(self._directory, latest[0])
            _log.info("metadata log cleaned", log_start_offset=end, snapshots_deleted=deleted)
