"""Reading the controller's metadata log, the ``__cluster_metadata-0`` partition, at start-up.

The log is an ordinary partition log (segments, indexes, leader-epoch checkpoint, crash recovery);
the broker holds it as a Partition whose only replica is the controller
(broker/metadata_partition.py), which is what lets brokers fetch it with the ordinary Fetch
machinery. Here: the controller epoch it starts at, and the batches it replays.

Durability: every batch is fsynced before the controller applies it to its image and answers.
A metadata change that was answered (a created topic, an elected leader, a committed ISR) therefore
survives a crash of the controller; the log is tiny, so the fsync costs a few milliseconds per
change, not per produced record.

Epochs: the partition's leader epoch is the controller epoch, bumped at every controller start
(the latest epoch in the log's leader-epoch cache plus one), and stamped on every batch as its
partition leader epoch. A broker that fetched batches of an older epoch is told by the diverging
epoch of the next fetch, which is how a future quorum of controllers fences a deposed one.
"""

from __future__ import annotations

from collections.abc import Iterator

from metadata.serde import MetadataBatch, decode_metadata_batches
from storage.log import PartitionLog

__all__ = ["next_controller_epoch", "read_metadata_log"]

READ_CHUNK_BYTES = 8 * 1024 * 1024


def next_controller_epoch(log: PartitionLog) -> int:
    """One more than the latest epoch in the log (0 for a new log)."""
    latest = log.leader_epoch_cache.latest_epoch
    return 0 if latest is None else latest + 1


def read_metadata_log(log: PartitionLog) -> Iterator[MetadataBatch]:
    """Every batch of the metadata log, in order (the controller replays them at start-up)."""
    offset = log.log_start_offset
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
