"""What a leader tracks about its replicas: fetch offsets, the high watermark, check quorum.

Kept apart from the node so the commit rule is one small piece to read: the high watermark is the
largest offset a majority of voters has reached, it only moves forward, and it starts moving only once
an entry of the leader's own epoch (its leader-change entry at ``epoch_start_offset``) is replicated
to a majority: committing earlier epochs' entries by counting replicas alone is unsafe (Raft §5.4.2).
Observers are tracked for DescribeQuorum but never counted.
"""

from __future__ import annotations

from dataclasses import dataclass

OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""An observer not heard from for this long is forgotten (Kafka's observer session, 5 minutes)."""


@dataclass
class ReplicaState:
    """The leader's view of one replica (voter or observer)."""

    replica_id: int
    end_offset: int | None = None
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None


@dataclass(frozen=True)
class ReplicaInfo:
    """One row of DescribeQuorum."""

    replica_id: int
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


@dataclass(frozen=True)
class QuorumInfo:
    """DescribeQuorum's data: who leads which epoch, the HW, and each replica's progress."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaInfo, ...]
    observers: tuple[ReplicaInfo, ...]


class LeaderTracker:
    """Replication progress of one leader's epoch; volatile (a restarted leader resigns)."""

    def __init__(
        self,
        local_id: int,
        voters: frozenset[int],
        epoch_start_offset: int,
        high_watermark: int,
        now_ms: int,
        check_quorum_timeout_ms: int,
    ) -> None:
        self.local_id = local_id
        self.voters = voters
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        self.voter_states = {voter: ReplicaState(voter) for voter in voters}
        self.observer_states: dict[int, ReplicaState] = {}
        self._check_quorum_timeout_ms = check_quorum_timeout_ms
        self.check_quorum_deadline_ms = now_ms + check_quorum_timeout_ms
        self._fetched_since_check: set[int] = {local_id}
        self.begin_quorum_acked: set[int] = {local_id}

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def epoch_committed(self) -> bool:
        """Whether an entry of this epoch is committed. Only then is the high watermark known to
        cover everything any earlier leader committed; before, it is a stale lower bound."""
        return self.high_watermark > self.epoch_start_offset

    def update_local(self, end_offset: int, now_ms: int) -> bool:
        """The leader's own log grew; True if the high watermark moved."""
        state = self.voter_states[self.local_id]
        state.end_offset = end_offset
        state.last_fetch_ms = state.last_caught_up_ms = now_ms
        self._record_fetch(self.local_id, now_ms)
        return self._advance_high_watermark()

    def update_replica(self, replica_id: int, end_offset: int, leader_end: int, now_ms: int) -> bool:
        """A valid fetch from ``replica_id`` at ``end_offset``; True if the high watermark moved."""
        if replica_id in self.voters:
            state = self.voter_states[replica_id]
            self.begin_quorum_acked.add(replica_id)
        else:
            self._forget_silent_observers(now_ms)
            state = self.observer_states.setdefault(replica_id, ReplicaState(replica_id))
        state.end_offset = end_offset
        state.last_fetch_ms = now_ms
        if end_offset >= leader_end:
            state.last_caught_up_ms = now_ms
        if replica_id not in self.voters:
            return False
        self._record_fetch(replica_id, now_ms)
        return self._advance_high_watermark()

    def _forget_silent_observers(self, now_ms: int) -> None:
        """Observers that stopped fetching (a broker gone for good) leave the list, as in Kafka,
        so that the leader's memory does not grow with every broker that ever fetched."""
        silent = [
            replica_id
            for replica_id, state in self.observer_states.items()
            if state.last_fetch_ms is not None and now_ms - state.last_fetch_ms > OBSERVER_SESSION_TIMEOUT_MS
        ]
        for replica_id in silent:
            del self.observer_states[replica_id]

    def _record_fetch(self, voter: int, now_ms: int) -> None:
        self._fetched_since_check.add(voter)
        if len(self._fetched_since_check) >= self.majority:
            self.check_quorum_deadline_ms = now_ms + self._check_quorum_timeout_ms
            self._fetched_since_check = {self.local_id}

    def _advance_high_watermark(self) -> bool:
        offsets = sorted((s.end_offset or 0 for s in self.voter_states.values()), reverse=True)
        candidate = offsets[self.majority - 1]
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def describe(self, epoch: int) -> QuorumInfo:
        def rows(states: dict[int, ReplicaState]) -> tuple[ReplicaInfo, ...]:
            return tuple(
                ReplicaInfo(
                    s.replica_id,
                    -1 if s.end_offset is None else s.end_offset,
                    -1 if s.last_fetch_ms is None else s.last_fetch_ms,
                    -1 if s.last_caught_up_ms is None else s.last_caught_up_ms,
                )
                for _, s in sorted(states.items())
            )

        return QuorumInfo(
            self.local_id, epoch, self.high_watermark, rows(self.voter_states), rows(self.observer_states)
        )

    def preferred_successors(self) -> tuple[int, ...]:
        """Other voters, most caught up first (EndQuorumEpoch's order)."""
        others = [s for v, s in self.voter_states.items() if v != self.local_id]
        others.sort(key=lambda s: (-(s.end_offset or 0), s.replica_id))
        return tuple(s.replica_id for s in others)
