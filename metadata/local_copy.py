"""This node's local copy of the committed metadata log, for starting while no controller answers.

Every broker keeps the metadata log on its own disk, as KRaft's brokers do: a voter's broker side
reads the ``__cluster_metadata-0`` log its voter replicates, up to the high watermark the voter last
recorded there (:meth:`~metadata.raft.segment_log.SegmentRaftLog.note_committed`); a broker that is
not a voter writes the committed batches it fetches into a log of its own. At start-up the
:class:`~broker.cluster.metadata_loader.MetadataLoader` replays this copy before it fetches, so a
broker that restarts while the quorum is down still knows its partitions and can serve them.

Only committed batches are ever replayed: they are on every future leader's log too, so the fetch
that follows the replay continues the same history. :func:`replay_committed` is that replay, shared
by the loader's start and by :class:`~metadata.committed_image.CommittedMetadataImage`, which keeps a
controller-only voter's image of its committed log for its listener's logins and ACLs.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from dataclasses import dataclass

from metadata.controller.partition_log import read_metadata_log
from metadata.image import MetadataImage
from metadata.raft.segment_log import batch_entries
from metadata.serde import MetadataBatch
from metadata.snapshot import SnapshotId, latest_snapshot, load_snapshot
from protocol.sentinels import NO_LEADER_EPOCH
from storage.log import PartitionLog

__all__ = ["LocalMetadataCopy", "ReplayPosition", "replay_committed"]


class LocalMetadataCopy:
    """The committed prefix of a local ``__cluster_metadata-0`` log.

    ``writable`` is for a broker that is not a voter: the copy is its own, and fetched committed
    batches are appended to it. A voter's log is written by the quorum only.
    """

    def __init__(self, log: PartitionLog, *, writable: bool) -> None:
        self._log = log
        self._writable = writable

    @property
    def committed_end(self) -> int:
        """The offset after the last batch known committed."""
        return self._log.high_watermark

    @property
    def log_start(self) -> int:
        """The first offset the log still holds: a snapshot stands for everything before it."""
        return self._log.log_start_offset

    @property
    def directory(self) -> pathlib.Path:
        """Where the copy's snapshots are (the log's own directory, as Kafka keeps them)."""
        return self._log.directory

    def latest_snapshot(self) -> SnapshotId | None:
        """The newest complete snapshot here, if any: the replay starts from it."""
        return latest_snapshot(self._log.directory)

    def committed_batches(self, start_offset: int = 0) -> Iterator[MetadataBatch]:
        """Every batch from ``start_offset`` and below :attr:`committed_end`, in order."""
        end = self.committed_end
        for batch in read_metadata_log(self._log, start_offset):
            if batch.last_offset < start_offset:
                continue
            if batch.last_offset >= end:
                return
            yield batch

    def snapshot_installed(self, snapshot: SnapshotId) -> None:
        """A fetched snapshot replaced everything before its end: a copy of its own restarts there."""
        if self._writable:
            self._log.truncate_fully_and_start_at(snapshot.end_offset)

    def append_committed(self, records: bytes) -> None:
        """Keep the fetched committed ``records`` (whole batches) that the copy does not hold yet."""
        if not self._writable:
            return
        fresh = [entry for entry in batch_entries(records) if entry.offset >= self._log.log_end_offset]
        if not fresh or fresh[0].offset != self._log.log_end_offset:
            return  # nothing new, or a gap (an earlier append failed): the copy stays a prefix
        self._log.append_as_follower(b"".join(entry.payload for entry in fresh))
        self._log.update_high_watermark(self._log.log_end_offset)


@dataclass
class ReplayPosition:
    """Where a replay of the committed log stands: the offset of the next batch to apply and the
    epoch of the last one applied (what a fetch that goes on from there names)."""

    next_offset: int = 0
    epoch: int = NO_LEADER_EPOCH


def replay_committed(local: LocalMetadataCopy, image: MetadataImage, position: ReplayPosition) -> None:
    """Bring ``image``, which holds the committed log below ``position``, up to the copy's
    :attr:`~LocalMetadataCopy.committed_end`, moving ``position`` along batch by batch.

    The newest snapshot is loaded first when nothing was replayed yet (it is quicker than the batches
    before it) or when the log no longer holds ``position`` (a snapshot was taken and the log's start
    moved past it, or a snapshot fetched from the leader replaced the whole log). Without a committed
    snapshot to bridge such a gap nothing is applied: the batches after it would skip records.

    Raises what reading or replaying raises (MetadataReplayError, CorruptSnapshotError, ProtocolError,
    OSError): ``position`` then names the last whole batch applied (the image may hold the first
    records of the next one, which a retry skips), and a snapshot replaces ``image`` only once it
    loaded whole, so the image stays a committed prefix of the log and a retry goes on from there.
    """
    if position.next_offset == 0 or position.next_offset < local.log_start:
        snapshot = local.latest_snapshot()
        if snapshot is not None and position.next_offset < snapshot.end_offset <= local.committed_end:
            image.replace_with(load_snapshot(local.directory, snapshot))
            position.next_offset, position.epoch = snapshot.end_offset, snapshot.epoch
    if position.next_offset < local.log_start:
        return
    for batch in local.committed_batches(position.next_offset):
        image.apply_batch(batch.records, batch.epoch)
        position.next_offset, position.epoch = batch.last_offset + 1, batch.epoch
