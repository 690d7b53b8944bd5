"""Where a follower must cut its log so that it is a prefix of the leader's (kafka-behaviour.md 5.4, 5.5).

Pure decisions, no I/O: the fetcher gathers what the leader said (an OffsetForLeaderEpoch result, a
DivergingEpoch in a fetch response, or ListOffsets answers after OFFSET_OUT_OF_RANGE) and what the
local log knows, asks this module for the offset, and applies it. The same function serves
OffsetForLeaderEpoch and diverging epochs, as in Kafka, so the two paths cannot disagree.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from follower.fetch_state import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpoch, Offset
from follower.leader_endpoint import EpochEndOffset


class LocalEpochs(Protocol):
    """What truncation needs from the local log (ReplicaLog provides it)."""

    @property
    def log_end_offset(self) -> Offset: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[LeaderEpoch, Offset] | None: ...


class OffsetTruncationState(NamedTuple):
    """Truncate to ``offset``; ``truncation_completed`` is False when another round is needed.

    Another round is needed when the local log's epoch at the leader's epoch is a different,
    older one: after cutting there the follower must compare its new latest epoch again.
    """

    offset: Offset
    truncation_completed: bool


class ResetDecision(NamedTuple):
    """What to do after OFFSET_OUT_OF_RANGE (5.5): truncate and fetch on, or restart at the leader's start."""

    truncate_to: Offset | None
    """Truncate to this offset first (the leader's log end is below ours), or None."""
    start_at: Offset | None
    """Delete everything and start at this offset (we are below the leader's log start), or None."""
    fetch_offset: Offset
    lag: int


def truncation_offset(
    leader: EpochEndOffset, fallback_offset: int, log: LocalEpochs
) -> OffsetTruncationState:
    """The truncation point for the leader's (epoch Le, end offset Lo), given the local log.

    - Lo undefined: the leader cannot say; fall back to ``fallback_offset`` (the HW the state
      started from), done.
    - Le undefined but Lo given (old protocol): min(Lo, LEO), done.
    - no local entry for Le: min(Lo, LEO), done.
    - local (Fe, Fo) with Fe == Le: both logs hold Le; cut where the first of them ends it,
      min(Fo, Lo, LEO), done.
    - Fe != Le (Le is unknown locally, Fe is an older local epoch): cut where Fe ends, min(Fo, LEO),
      and compare again from there.
    """
    leo = log.log_end_offset
    if leader.end_offset == UNDEFINED_EPOCH_OFFSET:
        return OffsetTruncationState(Offset(min(fallback_offset, leo)), True)
    if leader.leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(Offset(min(leader.end_offset, leo)), True)
    local = log.end_offset_for_epoch(leader.leader_epoch)
    if local is None:
        return OffsetTruncationState(Offset(min(leader.end_offset, leo)), True)
    local_epoch, local_end = local
    if local_epoch == leader.leader_epoch:
        return OffsetTruncationState(Offset(min(local_end, leader.end_offset, leo)), True)
    return OffsetTruncationState(Offset(min(local_end, leo)), False)


def out_of_range_reset(
    log_end_offset: int, leader_end: int, leader_start: int | None = None
) -> ResetDecision:
    """Kafka's fetchOffsetAndTruncate, from the leader's log end (and, if needed, its log start).

    The leader's log ends below ours (an unclean election lost data): truncate to its end and fetch
    from there, lag 0; the leader's start is not needed. Otherwise, if its log starts above our end
    (retention deleted what we lack), delete everything and restart at its start. Else fetch on
    from our end.
    """
    if leader_end < log_end_offset:
        return ResetDecision(Offset(leader_end), None, Offset(leader_end), 0)
    if leader_start is None:
        raise ValueError("the leader's log start offset is needed when its log end is not below ours")
    if leader_start > log_end_offset:
        return ResetDecision(None, Offset(leader_start), Offset(leader_start), leader_end - leader_start)
    return ResetDecision(None, None, Offset(log_end_offset), leader_end - log_end_offset)


def needs_leader_start(log_end_offset: int, leader_end: int) -> bool:
    """Whether out_of_range_reset needs the leader's log start (ListOffsets EARLIEST) too."""
    return leader_end >= log_end_offset
