"""The leader's view of its followers: fetch state, high watermark, ISR shrink/expand, acks=-1 checks.

Pure domain logic (no I/O, no clock, no asyncio): every time is an argument in milliseconds, so the
rules of kafka-behaviour.md section 6 can be tested on plain integers.

* :class:`ReplicaState` is one follower's state as the leader sees it (6.1).
* :class:`LeaderReplicaSet` is the replica set of one partition led here: committed ISR and the
  "maximal" ISR (the committed ISR plus additions proposed to the controller but not yet committed),
  the high watermark rule (6.2, and only offsets of the current leader epoch are committed),
  expansion (6.3) and shrink (6.4) candidates, AlterPartition proposals guarded by the partition
  epoch, the acks=-1 checks (6.5, 9.7), and the credit of fetches a follower made while its fetch
  session held the partition idle (DESIGN "Follower liveness without touching idle partitions").

:class:`broker.replication.partition.Partition` drives it; nothing here sends or notifies.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from protocol.error_codes import ErrorCode
from protocol.sentinels import UNKNOWN_OFFSET

__all__ = [
    "DEFAULT_REPLICA_LAG_TIME_MAX_MS",
    "BrokerEligibility",
    "IsrProposal",
    "LeaderReplicaSet",
    "ProposalOutcome",
    "ReplicaState",
    "check_alter_partition",
]

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000

BrokerEligibility = Callable[[int, int], bool]
"""``(replica_id, broker epoch seen on its fetches or -1) -> may it be in the ISR``: not fenced, not in
controlled shutdown, and the fetch's broker epoch is -1 or the one in the metadata cache."""


def _always_eligible(replica_id: int, broker_epoch: int) -> bool:
    return True


@dataclass
class ReplicaState:
    """One follower's fetch state, kept by the leader (6.1)."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    """UNKNOWN_OFFSET before the follower's first fetch to this leader (also its log start offset)."""
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = 0
    broker_epoch: int = -1
    lost_committed: bool = False
    """The follower's log went back below the high watermark (a replica cut short by its own repair,
    or wiped): it lacks committed records, so it is out of sync until it reaches the HW again."""

    def update_fetch_state(
        self,
        fetch_offset: int,
        follower_log_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        broker_epoch: int = -1,
    ) -> None:
        """Record a fetch at ``fetch_offset``; ``leader_end_offset`` is the leader LEO read before the read.

        Caught up to the leader's LEO of this fetch: caught up now. Else caught up to the leader's LEO of
        the previous fetch: caught up at the previous fetch's time. Else unchanged. So a follower that
        keeps up with a steady trickle of appends stays in sync although it is behind at every fetch.
        """
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = follower_log_start_offset
        self.last_fetch_leader_log_end_offset = max(leader_end_offset, self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = fetch_time_ms
        self.broker_epoch = broker_epoch

    def is_caught_up(self, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        """At the leader's LEO, or caught up within the last ``replica.lag.time.max.ms`` and holding every
        committed record it once had."""
        if self.log_end_offset == leader_end_offset:
            return True
        return not self.lost_committed and now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms

    def reset(self, now_ms: int, leader_end_offset: int, *, new_leader: bool, in_isr: bool) -> None:
        """makeLeader (6.4): a new leader forgets the follower; a re-elected one keeps its LEO."""
        if new_leader:
            self.lost_committed = False
            self.log_end_offset = UNKNOWN_OFFSET
            self.log_start_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = 0
            self.last_fetch_time_ms = 0
            self.broker_epoch = -1
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_isr else 0
        self.last_caught_up_time_ms = now_ms if in_isr else 0


@dataclass(frozen=True)
class IsrProposal:
    """An AlterPartition request: the new ISR, based on ``partition_epoch`` under ``leader_epoch``."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


class ProposalOutcome(enum.Enum):
    COMMITTED = "committed"
    """The controller accepted it: ISR = maximal ISR = the returned ISR, partition epoch updated."""
    FAILED = "failed"
    """The controller refused it (e.g. INVALID_UPDATE_VERSION): pending cleared, ISR unchanged; or
    NEW_LEADER_ELECTED: pending kept until the metadata replaces this leader's state."""
    IGNORED = "ignored"
    """Not the proposal in flight, or an answer no newer than the state we already hold."""


def check_alter_partition(
    proposal: IsrProposal, *, leader_epoch: int, partition_epoch: int, replicas: Iterable[int]
) -> ErrorCode:
    """The controller's check of a proposal against the committed state (a fake controller for tests)."""
    if proposal.leader_epoch != leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if proposal.partition_epoch != partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if not set(proposal.new_isr) <= set(replicas) or not proposal.new_isr:
        return ErrorCode.INVALID_REQUEST
    return ErrorCode.NONE


class LeaderReplicaSet:
    """Replicas, ISR and high watermark of one partition this broker leads (6.2-6.5)."""

    def __init__(
        self,
        *,
        leader_id: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        leader_epoch: int,
        leader_epoch_start_offset: int,
        partition_epoch: int,
        min_insync_replicas: int,
        high_watermark: int,
        now_ms: int,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        is_eligible: BrokerEligibility | None = None,
        leader_log_end_offset: int | None = None,
    ) -> None:
        """``leader_log_end_offset`` defaults to the epoch start offset (the LEO at makeLeader);
        ``is_eligible`` defaults to "every replica may join the ISR"."""
        self.leader_id = leader_id
        self.replicas: tuple[int, ...] = tuple(replicas)
        self.isr: tuple[int, ...] = tuple(isr)
        """The committed ISR (what acks=-1 admission checks)."""
        self.maximal_isr: tuple[int, ...] = self.isr
        """The committed ISR plus pending additions (what the HW and produce completion wait for)."""
        self.pending: IsrProposal | None = None
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self.partition_epoch = partition_epoch
        self.configured_min_insync_replicas = min_insync_replicas
        self.high_watermark = high_watermark
        self.leader_log_end_offset = (
            leader_epoch_start_offset if leader_log_end_offset is None else leader_log_end_offset
        )
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.is_eligible: BrokerEligibility = is_eligible or _always_eligible
        self.leadership_start_ms = now_ms
        """When the follower states were last reset (makeLeader): idle reports from before are void."""
        self.followers: dict[int, ReplicaState] = {}
        for rid in self.replicas:
            if rid != leader_id:
                state = ReplicaState(rid)
                state.reset(now_ms, leader_epoch_start_offset, new_leader=True, in_isr=rid in self.isr)
                self.followers[rid] = state

    # -- leadership ----------------------------------------------------------------------------------

    def become_leader(
        self,
        *,
        leader_epoch: int,
        leader_epoch_start_offset: int,
        partition_epoch: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        now_ms: int,
        new_leader: bool,
        leader_log_end_offset: int | None = None,
        high_watermark: int | None = None,
    ) -> bool:
        """makeLeader for a new epoch. A partition epoch older than ours is stale: ignored (False).

        ``leader_log_end_offset`` and ``high_watermark`` resynchronise with the log when this broker
        takes the lead again after following (its log moved meanwhile); by default they are kept.
        """
        if partition_epoch < self.partition_epoch:
            return False
        self.replicas = tuple(replicas)
        self.isr = self.maximal_isr = tuple(isr)
        self.pending = None
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = leader_epoch_start_offset
        if leader_log_end_offset is not None:
            self.leader_log_end_offset = leader_log_end_offset
        self.leader_log_end_offset = max(self.leader_log_end_offset, leader_epoch_start_offset)
        if high_watermark is not None:
            self.high_watermark = high_watermark
        self.partition_epoch = partition_epoch
        self.leadership_start_ms = now_ms
        followers: dict[int, ReplicaState] = {}
        for rid in self.replicas:
            if rid == self.leader_id:
                continue
            state = self.followers.get(rid) or ReplicaState(rid)
            state.reset(now_ms, leader_epoch_start_offset, new_leader=new_leader, in_isr=rid in self.isr)
            followers[rid] = state
        self.followers = followers
        return True

    # -- follower fetches ----------------------------------------------------------------------------

    def follower_fetch_error(
        self,
        replica_id: int,
        *,
        has_current_leader_epoch: bool,
        replica_epoch: int = -1,
        cached_broker_epoch: int = -1,
    ) -> ErrorCode:
        """6.1: a fetch from a replica outside the assignment, or with a stale broker epoch, is refused."""
        if replica_id not in self.followers:
            return (
                ErrorCode.UNKNOWN_LEADER_EPOCH
                if has_current_leader_epoch
                else ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        if replica_epoch != -1 and replica_epoch < cached_broker_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def update_leader_log_end_offset(self, leader_log_end_offset: int, now_ms: int) -> bool:
        """After a local append: record the LEO and try to raise the HW; True if the HW rose."""
        self.leader_log_end_offset = leader_log_end_offset
        return self.maybe_increment_high_watermark(now_ms)

    def update_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        follower_log_start_offset: int,
        fetch_time_ms: int,
        broker_epoch: int = -1,
        leader_end_offset: int | None = None,
    ) -> bool:
        """6.1 for a fetch that read (not diverged, no error). True if the HW rose.

        A follower whose fetch offset went back below the HW has lost committed records (it
        repaired a damaged log by cutting it, or its disk was replaced): it is out of sync at once,
        not after ``replica.lag.time.max.ms``, so that no election can pick it while it lacks them.
        Kafka learns the same from the replica's offline log dir; here the fetch offset says it.

        ``leader_end_offset`` is the leader LEO read before the read (default: the LEO now). The
        caller then checks :meth:`expansion_candidate` and proposes an expansion if it is one.
        """
        state = self.followers[replica_id]
        old_leo = state.log_end_offset
        leader_leo = self.leader_log_end_offset if leader_end_offset is None else leader_end_offset
        state.update_fetch_state(
            fetch_offset, follower_log_start_offset, fetch_time_ms, leader_leo, broker_epoch
        )
        if old_leo != UNKNOWN_OFFSET and fetch_offset < min(old_leo, self.high_watermark):
            state.lost_committed = True
        elif fetch_offset >= self.high_watermark:
            state.lost_committed = False  # every committed record again: it may rejoin (6.3)
        if state.log_end_offset != old_leo:
            return self.maybe_increment_high_watermark(fetch_time_ms)
        return False

    def mark_fetched_at_session_time(self, replica_id: int, last_used_ms: int, cached_offset: int) -> bool:
        """DESIGN: a partition not dirty at a follower's fetch counts as fetched at the session's last-used
        time with its cached offset (and the follower's last known log start offset). True if the HW rose.

        A partition of a follower session is clean only while nothing was readable past its cached
        offset and nothing changed since, so the leader LEO of that fetch was the cached offset itself:
        the report is a fetch at the leader's LEO, made at ``last_used_ms``. A report older than the
        follower's latest real fetch, or than the last makeLeader, or for a replica outside the
        assignment, is dropped.
        """
        state = self.followers.get(replica_id)
        if (
            state is None
            or last_used_ms < state.last_fetch_time_ms
            or last_used_ms < self.leadership_start_ms
        ):
            return False
        return self.update_follower_fetch(
            replica_id,
            cached_offset,
            state.log_start_offset,
            last_used_ms,
            state.broker_epoch,
            leader_end_offset=cached_offset,
        )

    # -- high watermark ------------------------------------------------------------------------------

    @property
    def min_insync_replicas(self) -> int:
        """min(min.insync.replicas, replication factor), at least 1 (9.7)."""
        return max(1, min(self.configured_min_insync_replicas, len(self.replicas)))

    def _waits_for(self, state: ReplicaState, now_ms: int) -> bool:
        if state.replica_id in self.maximal_isr:
            return True
        return state.is_caught_up(
            self.leader_log_end_offset, now_ms, self.replica_lag_time_max_ms
        ) and self.is_eligible(state.replica_id, state.broker_epoch)

    def high_watermark_candidate(self, now_ms: int) -> int:
        """Min LEO over the leader, the maximal ISR and caught-up eligible followers about to join."""
        candidate = self.leader_log_end_offset
        for state in self.followers.values():
            if state.log_end_offset < candidate and self._waits_for(state, now_ms):
                candidate = state.log_end_offset
        return candidate

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Raise the HW to the candidate; never backwards, and frozen below the effective min ISR (3.7+).

        A follower of the ISR that has not fetched in this leader epoch has LEO -1 and holds the HW.
        The HW only ever commits offsets of the current leader epoch: a candidate below the epoch's
        start offset (followers still copying what earlier leaders wrote) leaves it where it is, as a
        Raft leader commits nothing of an older term before an entry of its own.
        """
        if len(self.isr) < self.min_insync_replicas:
            return False
        candidate = self.high_watermark_candidate(now_ms)
        if candidate < self.leader_epoch_start_offset:
            return False
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    # -- ISR changes ---------------------------------------------------------------------------------

    def shrink_candidates(self, now_ms: int, replica_lag_time_max_ms: int | None = None) -> list[int]:
        """6.4: ISR followers neither at the leader LEO nor caught up within the lag max. Never the leader;
        nothing while an AlterPartition is in flight."""
        if self.pending is not None:
            return []
        lag = self.replica_lag_time_max_ms if replica_lag_time_max_ms is None else replica_lag_time_max_ms
        out = []
        for rid in self.isr:
            state = self.followers.get(rid)
            if state is not None and not state.is_caught_up(self.leader_log_end_offset, now_ms, lag):
                out.append(rid)
        return out

    def expansion_candidate(self, replica_id: int) -> bool:
        """6.3 (with KAFKA-7128): may ``replica_id`` be proposed for the ISR now?"""
        state = self.followers.get(replica_id)
        if state is None or self.pending is not None or replica_id in self.isr:
            return False
        if not self.is_eligible(replica_id, state.broker_epoch):
            return False
        return (
            state.log_end_offset >= self.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        )

    def expansion_candidates(self, now_ms: int) -> list[int]:
        """Followers that :meth:`expansion_candidate` accepts and that are caught up (6.2 rule).

        Used when a proposal in flight is answered: a follower that caught up meanwhile may sit on an
        idle partition that no fetch re-evaluates, so the leader looks for it itself.
        """
        return [
            rid
            for rid, state in self.followers.items()
            if self.expansion_candidate(rid)
            and state.is_caught_up(self.leader_log_end_offset, now_ms, self.replica_lag_time_max_ms)
        ]

    def propose_isr(self, new_isr: Iterable[int]) -> IsrProposal:
        """Put an AlterPartition in flight. Until it commits, the ISR stays the old one and the maximal ISR
        is old + new (a pending shrink therefore keeps the larger ISR)."""
        if self.pending is not None:
            raise RuntimeError("an AlterPartition is already in flight")
        proposal = IsrProposal(tuple(new_isr), self.leader_epoch, self.partition_epoch)
        self.pending = proposal
        self.maximal_isr = self.isr + tuple(r for r in proposal.new_isr if r not in self.isr)
        return proposal

    def apply_proposal_result(
        self,
        proposal: IsrProposal,
        error: ErrorCode,
        *,
        isr: Iterable[int] = (),
        partition_epoch: int = -1,
        now_ms: int = 0,
    ) -> ProposalOutcome:
        """The controller's answer to ``proposal``."""
        if self.pending is not proposal:
            return ProposalOutcome.IGNORED
        if error is ErrorCode.NEW_LEADER_ELECTED:
            # Committed, but it completed a reassignment that removed this leader: keep the proposal
            # until the metadata replaces this state (Kafka's handleAlterPartitionError), so that its
            # maximal ISR, which holds the replica just added and maybe now leading, still holds the HW
            return ProposalOutcome.FAILED
        if error != ErrorCode.NONE:
            self._clear_pending()
            return ProposalOutcome.FAILED
        if partition_epoch <= self.partition_epoch:
            self._clear_pending()
            return ProposalOutcome.IGNORED
        self.isr = self.maximal_isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending = None
        self.maybe_increment_high_watermark(now_ms)
        return ProposalOutcome.COMMITTED

    def on_isr_changed(
        self,
        new_isr: Iterable[int],
        partition_epoch: int,
        now_ms: int = 0,
        *,
        replicas: Iterable[int] | None = None,
    ) -> bool:
        """A metadata update of the ISR in the same leader epoch. Older partition epochs are ignored;
        a newer one replaces the ISR and drops any proposal in flight (it was based on an old epoch).

        ``replicas`` (a reassignment) adds fresh states for new followers and forgets removed ones;
        the others keep their fetch state, since the leader epoch did not change.
        """
        if partition_epoch < self.partition_epoch:
            return False
        if replicas is not None:
            self._update_assignment(tuple(replicas), tuple(new_isr), now_ms)
        self.isr = self.maximal_isr = tuple(new_isr)
        self.partition_epoch = partition_epoch
        self.pending = None
        self.maybe_increment_high_watermark(now_ms)
        return True

    def _update_assignment(self, replicas: tuple[int, ...], isr: tuple[int, ...], now_ms: int) -> None:
        self.replicas = replicas
        followers: dict[int, ReplicaState] = {}
        for rid in replicas:
            if rid == self.leader_id:
                continue
            state = self.followers.get(rid)
            if state is None:
                state = ReplicaState(rid)
                state.reset(now_ms, self.leader_epoch_start_offset, new_leader=True, in_isr=rid in isr)
            followers[rid] = state
        self.followers = followers

    def clear_pending(self) -> None:
        """Forget the proposal in flight (leadership lost, or its answer is void): ISR = the committed one."""
        self._clear_pending()

    def _clear_pending(self) -> None:
        self.pending = None
        self.maximal_isr = self.isr

    # -- acks=-1 -------------------------------------------------------------------------------------

    def acks_all_allowed(self) -> bool:
        """acks=-1 admission (6.5): NOT_ENOUGH_REPLICAS when the committed ISR < the effective min ISR."""
        return len(self.isr) >= self.min_insync_replicas

    def acks_all_completion_error(self) -> ErrorCode:
        """The error of an acks=-1 produce whose offset the HW reached (6.5)."""
        if len(self.maximal_isr) >= self.min_insync_replicas:
            return ErrorCode.NONE
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
