"""Two rules of a Fetch that the partition's read, the fetch service and a parked fetch share.

- :func:`visible_end_offset`: how far a reader may read. A follower reads up to the log end offset
  (it must replicate what is not committed yet), a READ_UNCOMMITTED consumer up to the high
  watermark, a READ_COMMITTED one up to the last stable offset. It applies to anything that has
  the three offsets: the live :class:`~broker.replication.partition.Partition`, or the
  :class:`~broker.replication.partition.PartitionRead` taken when a read started.
- :func:`diverging_epoch`: the check of a fetch's LastFetchedEpoch (kafka-behaviour.md 6.6). The
  leader looks the epoch up in its epoch cache; the follower's log diverges when the leader cannot
  place that epoch, knows only an older one, or ended it below the fetch offset. The answer is
  what the follower truncates to.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET, IsolationLevel

__all__ = [
    "Divergence",
    "EpochLookup",
    "ReadOffsets",
    "diverging_epoch",
    "visible_end_offset",
]


class ReadOffsets(Protocol):
    """The offsets that bound a read (a partition, or a snapshot of one)."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...


class EpochLookup(Protocol):
    """OffsetForLeaderEpoch on a leader's epoch cache."""

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, its end offset); (NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET) if
        the cache cannot place ``epoch``."""
        ...


class Divergence(NamedTuple):
    """Where a follower's log stops matching the leader's: the leader's (epoch, end offset)."""

    epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        """The leader cannot place the follower's epoch at all: the read answers OFFSET_OUT_OF_RANGE."""
        return self.epoch == NO_LEADER_EPOCH or self.end_offset == UNDEFINED_EPOCH_OFFSET


def visible_end_offset(offsets: ReadOffsets, isolation_level: IsolationLevel, is_follower: bool) -> int:
    """What a reader may read up to: LEO for a follower, else HW (LSO for READ_COMMITTED).

    Only the offset the answer needs is read, so a caller may pass the live partition.
    """
    if is_follower:
        return offsets.log_end_offset
    if isolation_level == IsolationLevel.READ_COMMITTED:
        return offsets.last_stable_offset
    return offsets.high_watermark


def diverging_epoch(partition: EpochLookup, last_fetched_epoch: int, fetch_offset: int) -> Divergence | None:
    """None when the leader's log holds ``last_fetched_epoch`` as the follower has it, up to
    ``fetch_offset``; else the leader's answer for that epoch (possibly :attr:`Divergence.undefined`).

    A fetch without a LastFetchedEpoch (NO_LEADER_EPOCH: consumers, fetch v11 and older) never diverges.
    """
    if last_fetched_epoch == NO_LEADER_EPOCH:
        return None
    epoch, end_offset = partition.end_offset_for_epoch(last_fetched_epoch)
    divergence = Divergence(epoch, end_offset)
    if divergence.undefined or epoch < last_fetched_epoch or end_offset < fetch_offset:
        return divergence
    return None
