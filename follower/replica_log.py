"""A partition log as the follower path uses it: append the leader's batches, truncate, follow the HW.

:class:`ReplicaLog` adapts storage.log.PartitionLog to the few operations a fetcher needs and adds
the follower's rules on top: the high watermark comes from the leader (clamped to what this replica
holds), the log start offset only ever moves up to the leader's, and a fetch response may end with
a partial batch that must not reach the log. Keeping this out of the fetcher lets the fetcher stay
a state machine over offsets.
"""

from __future__ import annotations

import structlog

from follower.fetch_state import LeaderEpoch, Offset
from protocol.records import iter_batches
from storage.log import PartitionLog

_log = structlog.get_logger(__name__)


class ReplicaLog:
    """The follower's handle on one partition's log. The follower process owns the log exclusively."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self._logger = _log.bind(topic=log.topic, partition=log.partition)

    # -- offsets and epochs ------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> Offset:
        return Offset(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> Offset:
        return Offset(self.log.log_start_offset)

    @property
    def high_watermark(self) -> Offset:
        return Offset(self.log.high_watermark)

    @property
    def latest_epoch(self) -> LeaderEpoch | None:
        """The epoch of the last batch appended (None for a log without epochs)."""
        epoch = self.log.leader_epoch_cache.latest_epoch
        return None if epoch is None else LeaderEpoch(epoch)

    def end_offset_for_epoch(self, epoch: int) -> tuple[LeaderEpoch, Offset] | None:
        """(largest local epoch <= ``epoch``, where it ends) from the leader epoch cache, or None.

        None when the cache cannot say (no entry, or ``epoch`` above every local epoch), which the
        truncation rules treat as "no local entry".
        """
        found_epoch, end_offset = self.log.leader_epoch_cache.end_offset_for(epoch, self.log.log_end_offset)
        if end_offset < 0:
            return None
        return LeaderEpoch(found_epoch), Offset(end_offset)

    # -- writes ------------------------------------------------------------------------------------

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> Offset:
        """Append the whole batches of a fetch response; returns the new log end offset.

        A trailing partial batch (the leader cut the response at its byte limit) is dropped, as
        Kafka's follower does. Raises what PartitionLog.append_as_follower raises: protocol's
        CorruptRecordError for a bad CRC, UnexpectedAppendOffsetError when the batches start below
        the log end offset.
        """
        whole = _whole_batches(records)
        if whole:
            self.log.append_as_follower(whole)
        return self.log_end_offset

    def truncate_to(self, offset: int) -> Offset:
        """Cut the log at ``offset`` (a whole batch holding it goes); returns the new log end offset."""
        if offset < self.log.high_watermark:
            self._logger.warning(
                "truncating below the high watermark",
                offset=offset,
                high_watermark=self.log.high_watermark,
                log_end_offset=self.log.log_end_offset,
            )
        if self.log.truncate_to(offset):
            self._logger.info("truncated", offset=offset, log_end_offset=self.log.log_end_offset)
        return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every local batch and restart empty at ``offset`` (the leader's log start moved past us)."""
        self._logger.warning(
            "deleting the whole log to start at the leader's log start offset",
            offset=offset,
            log_end_offset=self.log.log_end_offset,
        )
        self.log.truncate_fully_and_start_at(offset)

    def update_high_watermark(self, leader_high_watermark: int) -> bool:
        """Follow the leader's HW, clamped to [log start, LEO] (so it can go down); True if it moved."""
        before = self.log.high_watermark
        return self.log.update_high_watermark(leader_high_watermark) != before

    def maybe_increment_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """Raise the log start offset to the leader's if that is higher; True if it moved.

        Never above the high watermark (storage refuses): update the HW first.
        """
        if leader_log_start_offset <= self.log.log_start_offset:
            return False
        self.log.maybe_increment_log_start_offset(leader_log_start_offset)
        return True


def initial_fetch_offset(log: ReplicaLog, truncation_on_fetch: bool) -> Offset:
    """Where a partition starts fetching when this broker becomes its follower (5.2).

    The log end offset when the leader can detect divergence on fetch and the log has epochs to
    compare; otherwise the high watermark, the only offset known to be on the leader too.
    """
    if truncation_on_fetch and log.latest_epoch is not None:
        return log.log_end_offset
    return log.high_watermark


def _whole_batches(records: bytes | bytearray | memoryview) -> memoryview:
    """The prefix of ``records`` that consists of complete batches."""
    view = memoryview(records)
    end = 0
    for position, header in iter_batches(view):
        end = position + header.size
    return view[:end]
