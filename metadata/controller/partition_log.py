"""Reading the controller's metadata log, the ``__cluster_metadata-0`` partition.

The log is an ordinary partition log (segments, indexes, leader-epoch checkpoint, crash recovery)
that the metadata quorum replicates (broker/quorum/, metadata/raft/segment_log.py). Each batch
carries the epoch of the Raft leader that wrote it as its partition leader epoch; the leader's own
LeaderChange entries are control batches, which replay skips. Here: the batches a new active
controller replays.

Durability: every batch is fsynced on each voter before it counts towards the commit, and the
controller answers only once a majority holds it (broker/quorum/controller_role.py: CommitGate), so a
metadata change that was answered survives the crash of any minority of voters.
"""

from __future__ import annotations

from collections.abc import Iterator

from metadata.serde import MetadataBatch, decode_metadata_batches
from storage.log import PartitionLog

__all__ = ["read_metadata_log"]

READ_CHUNK_BYTES = 8 * 1024 * 1024


def read_metadata_log(log: PartitionLog, start_offset: int = 0) -> Iterator[MetadataBatch]:
    """Every batch of the metadata log from the one holding ``start_offset`` on, in order (the
    controller replays them at start-up, after its newest snapshot)."""
    offset = max(start_offset, log.log_start_offset)
    while offset < log.log_end_offset:
        result = log.read(offset, READ_CHUNK_BYTES)
        if result.slice is None:
            return
        data = result.slice.read_bytes()
        last = offset - 1
        for batch in decode_metadata_batches(data):
            last = batch.last_offset
            yield batch
        if last < offset:
            raise ValueError(f"no complete metadata batch at offset {offset}")
        offset = last + 1
