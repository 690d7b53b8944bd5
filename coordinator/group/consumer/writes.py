"""Consumer-group writes in flight: answered in log order, taken back together (what Kafka's
CoordinatorRuntime does with its deferred event queue and its revert to the last committed state).

The service applies a write's records to its group at once, so the next operation on the group is
computed from them before they are durable. Hence:

* a write is answered only once it and every write of its group applied before it are written;
* when a write fails and its records are not in the log, the group goes back to its state before
  that write, and the write and every later write of the group (each computed from state that now
  never was) fail with its mapped error; their own answers from the log, when they come, are
  dropped. Taking back only the failed write (restoring its snapshot) also took back the later
  writes while they stayed answered as written;
* a failure after which the records may be in the log (a timeout waiting for the replicas) takes
  nothing back, as in Kafka: the member retries, and the later writes stand;
* a write with no records (a heartbeat that changed nothing) still read what the writes before it
  applied: it is answered after them and fails with them, as Kafka answers such a read after the
  last pending write.

A batch the log refuses is answered before the append returns (:class:`~coordinator.group.log.GroupLog`),
so it is taken back before the next operation is applied: nothing was built on it. A failure
reported later is that of a batch in the log (the leader moved, the partition went offline); the
later writes of the group are in the log after it and fail with it. Kafka also unloads the partition
then, and a new leader loads whatever its log holds.

Writes are ordered per group, not per partition of ``__consumer_offsets``: a write's records and its
snapshot concern its own group only (Kafka's snapshots are the partition's, as its writes are
batched per partition).

A write may carry a :class:`Conversion` (KIP-848's online upgrade or downgrade, or an empty group
changing kind): the other kind's records go into the same batch, so the log holds the group as one
kind or the other, never half converted. Taken back, the conversion's ``undo`` puts the previous
group back in the catalog, the group is restored to the write's snapshot, and ``resume`` restarts
what runs on it (its members' timers); once the write stands (written, or maybe written), its
``finish`` completes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from coordinator.group.consumer.group import ConsumerGroup, ConsumerGroupSnapshot
from coordinator.group.log import OffsetsRecord
from protocol.error_codes import ErrorCode

_log = structlog.get_logger("kipling.groups.consumer")

WriteDone = Callable[[ErrorCode | None], None]
"""Answers a write: None once written, else the error the member must see."""
Revert = Callable[[ConsumerGroup, ConsumerGroupSnapshot, bool], None]
"""Puts ``group`` back to ``snapshot``; the flag says whether the group existed before the write."""

_MAYBE_WRITTEN = frozenset({ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND})
"""Append errors after which the records are in the log (only the wait for replicas failed)."""


def write_error(error: ErrorCode) -> ErrorCode:
    """Kafka's ``CoordinatorOperationExceptionHelper.handleOperationException`` for a failed write."""
    if error is ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Conversion:
    """What a write that changes the group's kind adds to it: the records of the other kind, in the
    same batch as the consumer group's own (``leading`` before them, ``trailing`` after them, as
    Kafka orders them), how to put the previous group back if the batch fails, and what to do once
    it stands."""

    leading: Sequence[OffsetsRecord] = ()
    """Records written before the consumer group's (an upgrade: the classic group's tombstone)."""
    trailing: Sequence[OffsetsRecord] = ()
    """Records written after them (a downgrade: the consumer group's tombstones, the classic group)."""
    undo: Callable[[], None] = field(default=_nothing)
    """Put the group as it was before the conversion back in the catalog."""
    resume: Callable[[], None] = field(default=_nothing)
    """Once the group put back is restored to the write's snapshot: restart its timers."""
    finish: Callable[[], None] = field(default=_nothing)
    """The conversion stands: complete it (start the classic group's rebalance, ...)."""


@dataclass(eq=False, slots=True)
class _Write:
    done: WriteDone
    snapshot: ConsumerGroupSnapshot | None
    """The group before this write's records; None for a write without records."""
    existed: bool
    conversion: Conversion | None = None
    written: bool = False
    answered: bool = False


class PendingWrites:
    """The writes of each group whose answer is still due, in the order they were applied."""

    def __init__(self, revert: Revert) -> None:
        self._revert = revert
        self._in_flight: dict[ConsumerGroup, list[_Write]] = {}

    def track(
        self,
        group: ConsumerGroup,
        snapshot: ConsumerGroupSnapshot,
        existed: bool,
        done: WriteDone,
        conversion: Conversion | None = None,
    ) -> Callable[[ErrorCode], None]:
        """A write whose records were just applied to ``group`` (``snapshot``: the group before
        them), converting the group when ``conversion`` is given; returns the callback for the
        log's answer, which may run before this returns."""
        write = _Write(done, snapshot, existed, conversion)
        self._in_flight.setdefault(group, []).append(write)
        return lambda error: self._settle(group, write, error)

    def read(self, group: ConsumerGroup, done: WriteDone) -> None:
        """A write without records: answered once the writes of ``group`` before it are."""
        write = _Write(done, None, existed=True, written=True)
        self._in_flight.setdefault(group, []).append(write)
        self._answer_written(group)

    def _settle(self, group: ConsumerGroup, write: _Write, error: ErrorCode) -> None:
        if write.answered:
            _log.debug(
                "the log answered a write taken back with an earlier one",
                group=group.group_id,
                error=error.name,
            )
            return
        writes = self._in_flight[group]
        if error is ErrorCode.NONE:
            write.written = True
            _finish(write)
        else:
            _log.warning("writing consumer group records failed", group=group.group_id, error=error.name)
            if error in _MAYBE_WRITTEN:
                writes.remove(write)
                _finish(write)
                self._answer(write, write_error(error))
            else:
                self._take_back(group, writes, write, error)
        self._answer_written(group)

    def _take_back(self, group: ConsumerGroup, writes: list[_Write], write: _Write, error: ErrorCode) -> None:
        """The group as before ``write``; ``write`` and the writes after it fail."""
        index = writes.index(write)
        failed = writes[index:]
        del writes[index:]
        assert write.snapshot is not None
        conversions = [w.conversion for w in failed if w.conversion is not None]
        for conversion in reversed(conversions):
            conversion.undo()
        self._revert(group, write.snapshot, write.existed)
        for conversion in conversions:
            conversion.resume()
        if len(failed) > 1:
            _log.warning(
                "later writes of the consumer group were built on the failed one and fail with it",
                group=group.group_id,
                count=len(failed) - 1,
            )
        answer = write_error(error)
        for taken_back in failed:
            self._answer(taken_back, answer)

    def _answer_written(self, group: ConsumerGroup) -> None:
        writes = self._in_flight.get(group)
        if writes is None:
            return
        while writes and writes[0].written:
            self._answer(writes.pop(0), None)
        if not writes and self._in_flight.get(group) is writes:
            del self._in_flight[group]

    @staticmethod
    def _answer(write: _Write, error: ErrorCode | None) -> None:
        write.answered = True
        write.done(error)


def _finish(write: _Write) -> None:
    if write.conversion is not None:
        write.conversion.finish()


__all__ = ["Conversion", "PendingWrites", "WriteDone", "write_error"]
