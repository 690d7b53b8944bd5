"""A partition log as the follower path uses it: append the leader's batches, truncate, follow the HW.

:class:`ReplicaLog` adapts storage.log.PartitionLog to the few operations a fetcher needs and adds
the follower's rules on top: the high watermark comes from the leader (clamped to what this replica
holds), the log start offset only ever moves up to the leader's, and a fetch response may end with
a partial batch that must not reach the log. Keeping this out of the fetcher lets the fetcher stay
a state machine over offsets.

It also keeps the partition's idempotent-producer state current from the headers of the batches it
appends, as Kafka's follower does (``updateProducers`` in ``appendAsFollower``), and snapshots it
at every segment roll and before a handover. Without that, the first time this replica becomes
leader the broker would replay the batch headers of the whole log to rebuild the state; with it,
the new leader loads a snapshot and replays at most the batches since the last roll (none after a
clean handover).

The same applier as the leader's (:func:`storage.transactions.apply_batch`) keeps the transaction
state: a marker's control record is read, and an aborted transaction goes into the transaction
index of the segment holding its marker, so a follower that becomes leader serves read_committed
fetches from its own index.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import structlog

from follower.fetch_state import LeaderEpoch, Offset
from protocol.records import ProtocolError, RecordBatchHeader, iter_batches
from storage.clock import Clock, SystemClock
from storage.errors import CorruptLogError
from storage.handover import LogHandover, close_for_handover, describe_open_log, open_handed_over_log
from storage.log import PartitionLog
from storage.producer_recovery import rebuild_producer_state
from storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager
from storage.transactions import apply_batch, marker_of

_log = structlog.get_logger(__name__)


class ReplicaLog:
    """The follower's handle on one partition's log. The follower process owns the log exclusively.

    Invariant: ``producer_state.map_end_offset`` equals the log end offset after every operation
    (except after a storage failure, which fails the partition anyway).
    """

    def __init__(
        self,
        log: PartitionLog,
        *,
        clock: Clock | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        """Wrap ``log`` and rebuild its producer state from the newest snapshot (replaying the tail);
        a damaged batch met by the replay is repaired at once (:meth:`_repair`).

        ``clock`` gives the time producers expire against (the wall clock by default).
        """
        self.log = log
        self._generation_base = time.monotonic_ns()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._logger = _log.bind(topic=log.topic, partition=log.partition)
        self.producer_state = ProducerStateManager(log.directory, producer_id_expiration_ms)
        try:
            self._rebuild_producer_state()
        except CorruptLogError as exc:  # damaged while closed, met by the replay: repair it now
            self._repair(exc)

    # -- offsets and epochs ------------------------------------------------------------------------

    @property
    def segment_generation(self) -> int:
        """The log's segment generation (:attr:`PartitionLog.segment_generation`) as the broker is
        told it: counted from the moment this log was opened (the machine's monotonic clock, in
        nanoseconds), so a log opened again (a repair here, a restarted process) never announces a
        value of an earlier opening, whose files the opening may have recovered, cut or rebuilt
        (each change takes longer than a nanosecond, so a count never reaches a later opening's
        start)."""
        return self._generation_base + self.log.segment_generation

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
    def last_stable_offset(self) -> Offset:
        """The first offset of the oldest transaction not yet decided below the high watermark, else
        the high watermark (never below the log start offset): how far a read_committed consumer
        fetching from this replica may read, as the leader's ``Partition.last_stable_offset``."""
        high_watermark = self.log.high_watermark
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None or first_unstable >= high_watermark:
            return Offset(high_watermark)
        return Offset(max(first_unstable, self.log.log_start_offset))

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
        the log end offset. The producer state is updated only once the batches are in the log.
        """
        whole, batches = _whole_batches(records)
        if batches:
            active_before = self.log.active_segment
            self.log.append_as_follower(whole)
            # PartitionLog decides on a roll once per append, before writing any of its batches, so
            # every batch of this append is in the new segment and the state still ends at its base.
            if self.log.active_segment is not active_before:
                self._snapshot_at_roll()
            self._apply(whole, batches)
        return self.log_end_offset

    def _apply(self, data: memoryview, batches: Sequence[tuple[int, RecordBatchHeader]]) -> None:
        """Update the producer and transaction state from the batches as written (the leader
        stamped them): headers, and the marker record of control batches."""
        state = self.producer_state
        for position, header in batches:
            marker = marker_of(data[position:], header) if header.is_control else None
            apply_batch(self.log, state, header, header.base_offset, header.last_offset, marker)
        state.update_map_end_offset(self.log.log_end_offset)

    def truncate_to(self, offset: int) -> Offset:
        """Cut the log at ``offset`` (a whole batch holding it goes); returns the new log end offset.

        The producer state is reloaded from the newest snapshot at or below the new end (those
        above it describe batches that are gone) and the batches after that snapshot replayed.
        """
        if offset < self.log.high_watermark:
            self._logger.warning(
                "truncating below the high watermark",
                offset=offset,
                high_watermark=self.log.high_watermark,
                log_end_offset=self.log.log_end_offset,
            )
        try:
            if self.log.truncate_to(offset):
                self._logger.info("truncated", offset=offset, log_end_offset=self.log.log_end_offset)
                self._rebuild_producer_state()
        except (CorruptLogError, ProtocolError) as exc:
            self._repair(exc)
            if self.log.truncate_to(offset):  # the repaired log may still hold the diverging tail
                self._rebuild_producer_state()
        return self.log_end_offset

    def _repair(self, cause: Exception) -> None:
        """This replica's own log is damaged (found while truncating it): reopen it with crash
        recovery, which re-validates it and cuts it at its last valid batch. A follower loses
        nothing by that: it fetches the rest again from its leader, which holds every committed
        batch. Recovery starts at the damaged segment when a read located it, else at the log start.
        """
        log = self.log
        recover_from = log.damaged_from if log.damaged_from is not None else log.log_start_offset
        self._logger.error(
            "local log damaged: cutting it back to its last valid batch to fetch the rest again",
            error=str(cause),
            recover_from=recover_from,
            log_end_offset=log.log_end_offset,
        )
        handover = dataclasses.replace(describe_open_log(log), recovery_point=recover_from, clean=False)
        config, clock = log.config, log.clock
        log.close()
        self.log = open_handed_over_log(handover, config, clock)
        self._generation_base = time.monotonic_ns()
        try:
            self._rebuild_producer_state()
        except BaseException:
            self.log.close()  # whoever gives the partition up closes only the log it handed in
            raise
        self._logger.warning("local log repaired", log_end_offset=self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every local batch and restart empty at ``offset`` (the leader's log start moved past us)."""
        self._logger.warning(
            "deleting the whole log to start at the leader's log start offset",
            offset=offset,
            log_end_offset=self.log.log_end_offset,
        )
        self.log.truncate_fully_and_start_at(offset)
        self.producer_state.truncate_fully_and_start_at(offset)

    def update_high_watermark(self, leader_high_watermark: int) -> bool:
        """Follow the leader's HW, clamped to [log start, LEO] (so it can go down); True if it moved."""
        before = self.log.high_watermark
        moved = self.log.update_high_watermark(leader_high_watermark) != before
        if moved:
            self.producer_state.on_high_watermark_updated(self.log.high_watermark)
        return moved

    def maybe_increment_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """Raise the log start offset to the leader's if that is higher; True if it moved.

        Never above the high watermark (storage refuses): update the HW first. Snapshots below the
        new log start go: recovery would discard them anyway, and this keeps the directory tidy.
        """
        if leader_log_start_offset <= self.log.log_start_offset:
            return False
        self.log.maybe_increment_log_start_offset(leader_log_start_offset)
        self.producer_state.delete_snapshots_before(self.log.log_start_offset)
        self.producer_state.on_log_start_offset_incremented(self.log.log_start_offset)
        return True

    # -- maintenance -------------------------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Apply retention; returns how many segments went.

        Retention may roll (a log always keeps one segment), which gets its snapshot like any roll,
        and may move the log start offset, which takes the snapshots below it along.
        """
        active_before = self.log.active_segment
        start_before = self.log.log_start_offset
        deleted = self.log.delete_old_segments()
        if self.log.active_segment is not active_before:
            self._snapshot_at_roll()
        if self.log.log_start_offset != start_before:
            self.producer_state.delete_snapshots_before(self.log.log_start_offset)
            self.producer_state.on_log_start_offset_incremented(self.log.log_start_offset)
        return deleted

    def remove_expired_producers(self) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms: keeps the state and snapshots small."""
        return self.producer_state.remove_expired_producers(self._clock.time_ms())

    def close_for_handover(self) -> LogHandover:
        """Snapshot the producer state at the log end, then flush and close the log for its next owner.

        With the snapshot at the log end offset, the broker that takes the lead replays no batch.
        A failed snapshot only costs that replay, so it never blocks the handover.
        """
        if self.producer_state.map_end_offset == self.log.log_end_offset:
            self._take_snapshot(self.log.log_end_offset, "handover")
        return close_for_handover(self.log)

    # -- producer state ----------------------------------------------------------------------------

    def _rebuild_producer_state(self) -> int:
        """Newest snapshot at or below the log end, then the headers after it; returns batches replayed."""
        return rebuild_producer_state(self.log, self.producer_state, self._clock.time_ms())

    def _snapshot_at_roll(self) -> None:
        """Kafka snapshots at each new segment's base offset, before any batch of that segment."""
        self._take_snapshot(self.log.active_segment.base_offset, "roll")

    def _take_snapshot(self, offset: int, reason: str) -> None:
        try:
            self.producer_state.take_snapshot(offset)
        except OSError as exc:  # the data is in the log: a missing snapshot only lengthens a replay
            self._logger.warning("producer snapshot failed", offset=offset, reason=reason, error=str(exc))


def initial_fetch_offset(log: ReplicaLog, truncation_on_fetch: bool) -> Offset:
    """Where a partition starts fetching when this broker becomes its follower (5.2).

    The log end offset when the leader can detect divergence on fetch and the log has epochs to
    compare; otherwise the high watermark, the only offset known to be on the leader too.
    """
    if truncation_on_fetch and log.latest_epoch is not None:
        return log.log_end_offset
    return log.high_watermark


def _whole_batches(
    records: bytes | bytearray | memoryview,
) -> tuple[memoryview, list[tuple[int, RecordBatchHeader]]]:
    """The prefix of ``records`` that consists of complete batches, and (position, header) of each."""
    view = memoryview(records)
    end = 0
    batches = []
    for position, header in iter_batches(view):
        end = position + header.size
        batches.append((position, header))
    return view[:end], batches
