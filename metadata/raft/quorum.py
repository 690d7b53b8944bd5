"""One member of the metadata quorum: Raft elections (KIP-595, KIP-996 pre-vote) and pull replication.

:class:`RaftNode` is a synchronous, sans-IO state machine. Each ``handle_*`` method takes a received
message and returns the messages to send; :meth:`RaftNode.poll` fires the timers (election, fetch,
backoff, check quorum, resends) and says when it next needs to run. Time comes from the injected clock,
randomness from the injected ``random.Random``. The persisted part of the state (epoch, vote, leader)
is written to the :class:`~metadata.raft.store.QuorumStateStore` inside every transition, before any
message that depends on it is returned, so a vote is never given twice in an epoch across a restart.

Replication is Kafka's pull model: followers and observers fetch from the leader with
``(fetch_offset, last_fetched_epoch)``; the leader answers with entries and its high watermark, or a
diverging epoch when that pair is not on its log, and the follower truncates and fetches again.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from metadata.raft.config import RaftConfig
from metadata.raft.leader import LeaderTracker, QuorumInfo
from metadata.raft.log import Entry, RaftLog
from metadata.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftError,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from metadata.raft.state import (
    Candidate,
    EpochState,
    Follower,
    Kind,
    Leader,
    Prospective,
    Resigned,
    Unattached,
    check_transition,
)
from metadata.raft.store import QuorumStateStore
from storage.clock import Clock

UNREACHABLE_SLOTS = 4
"""A follower that lost the leader's process stands in its slot: a quarter of the election timeout
per rank among the remaining voters."""


class NotLeaderError(RuntimeError):
    """An operation only the leader may perform was asked of another node."""


def leader_change_payload(leader_id: int, voters: frozenset[int]) -> bytes:
    """The entry a new leader appends first (Kafka's LeaderChangeMessage control record, as JSON)."""
    return json.dumps({"type": "LeaderChange", "leaderId": leader_id, "voters": sorted(voters)}).encode()


@dataclass
class PollResult:
    """Messages the timers produced and when :meth:`RaftNode.poll` next needs to run."""

    messages: list[RaftMessage] = field(default_factory=list)
    next_deadline_ms: int = 0


@dataclass
class _Ballot:
    """Votes of one (pre-)election round."""

    granted: set[int]
    rejected: set[int] = field(default_factory=set)


UNKNOWN_HIGH_WATERMARK = -1
"""A Fetch answer's HW while the leader has not committed an entry of its epoch (Kafka's -1)."""


class RaftNode:
    """One node of a fixed voter set (or an observer when ``node_id`` is not a voter)."""

    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: RaftLog,
        store: QuorumStateStore,
        clock: Clock,
        rng: random.Random,
        config: RaftConfig | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.log = log
        self.config = config or RaftConfig()
        self._store = store
        self._clock = clock
        self._rng = rng
        self.high_watermark = 0
        """Volatile: learnt again from the leader after a restart (never persisted, never moves back)."""
        self._leader: LeaderTracker | None = None
        self._ballot: _Ballot | None = None
        self._timer_ms = 0
        """The deadline of the state's main timer: election, fetch, or backoff timeout."""
        self._lost = False
        """Prospective/Candidate: this round was lost and ``_timer_ms`` is the backoff's end."""
        self._lost_rounds = 0
        self._fetch_in_flight: FetchRequest | FetchSnapshotRequest | None = None
        self._snapshot_fetch: tuple[int, int] | None = None
        """The leader's snapshot being fetched (KIP-630) and, below, the bytes received so far."""
        self._snapshot_position = 0
        self._fetch_sent_ms = 0
        self._next_fetch_ms = 0
        self._last_leader_contact_ms: int | None = None
        self._resigned_epoch: int | None = None
        """The epoch whose leader announced its resignation (EndQuorumEpoch) to us: we do not go back to
        following it, and grant pre-votes although we heard from it lately. Kept across the
        Follower -> Prospective transition, unlike the per-state data."""
        self._begin_sent_ms: dict[int, int] = {}
        self.leader_log_start = 0
        """The log start the leader last reported: this node cleans its own log no further."""
        self.state: EpochState = self._initial_state()
        self._enter(self.state, self._now())

    # -- queries ----------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int | None:
        return self.state.election.leader_id if self.state.kind in (Kind.LEADER, Kind.FOLLOWER) else None

    @property
    def is_leader(self) -> bool:
        return self.state.kind is Kind.LEADER

    @property
    def epoch_start_offset(self) -> int | None:
        """The leader's first offset of its epoch (its leader-change entry); None unless leading.
        Once the high watermark passes it, everything in the log before it is committed."""
        return None if self._leader is None else self._leader.epoch_start_offset

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    def describe_quorum(self) -> QuorumInfo:
        """DescribeQuorum's answer; only the leader has it."""
        if self._leader is None:
            raise NotLeaderError(f"node {self.node_id} is {self.state.kind.value} in epoch {self.epoch}")
        return self._leader.describe(self.epoch)

    # -- start-up and transitions -----------------------------------------------------------------

    def _initial_state(self) -> EpochState:
        stored = self._store.read()
        log_epoch = self.log.last_fetched_epoch
        if stored is None or stored.epoch < log_epoch:
            # no quorum state yet, or one older than the log (a log written before the quorum
            # state was kept): the node has seen at least the log's epoch, never votes below it
            state: EpochState = Unattached(max(0, log_epoch))
            self._store.write(state.election)
            return state
        if stored.leader_id == self.node_id:
            return Resigned(stored.epoch, local_id=self.node_id)
        if stored.leader_id is not None:
            return Follower(stored.epoch, leader_id=stored.leader_id, voted_id=stored.voted_id)
        if stored.voted_id == self.node_id:
            return Prospective(stored.epoch, voted_id=self.node_id)
        return Unattached(stored.epoch, voted_id=stored.voted_id)

    def _transition(self, new: EpochState) -> None:
        """Check ``new`` against the table, persist it, then reset the volatile per-state data."""
        check_transition(self.state, new)
        if new.election != self.state.election:
            self._store.write(new.election)
        self.state = new
        self._enter(new, self._now())

    def _enter(self, state: EpochState, now: int) -> None:
        self._leader = None
        self._ballot = None
        self._lost = False
        self._fetch_in_flight = None
        self._snapshot_fetch = None
        self._next_fetch_ms = now
        self._begin_sent_ms = {}
        if isinstance(state, Follower):
            self._timer_ms = now + self.config.fetch_timeout_ms
            # no contact until a fetch succeeds: a node that re-follows a leader it only heard of
            # (a voter still naming a dead leader) must not refuse the pre-votes that replace it
            self._last_leader_contact_ms = None
        else:
            # the only voter need not wait for anyone: it stands for election at once (as Kafka's)
            only_voter = self.voters == {self.node_id}
            self._timer_ms = now if only_voter else now + self._random_election_timeout()
            self._last_leader_contact_ms = None

    def _random_election_timeout(self) -> int:
        base = self.config.election_timeout_ms
        return base + self._rng.randrange(base)

    def _election_backoff(self) -> int:
        self._lost_rounds += 1
        ceiling = min(
            self.config.election_backoff_max_ms, self.config.retry_backoff_ms << min(self._lost_rounds, 20)
        )
        return self._rng.randint(1, max(1, ceiling))

    def _step_down(self, epoch: int, leader_id: int | None) -> None:
        """A message from a higher epoch: follow its leader if named, else wait unattached in it."""
        if leader_id is not None and leader_id != self.node_id:
            self._transition(Follower(epoch, leader_id=leader_id))
        else:
            self._transition(Unattached(epoch))

    def _follow(self, epoch: int, leader_id: int) -> None:
        """Learnt the leader of ``epoch`` (>= ours)."""
        if epoch > self.epoch:
            self._transition(Follower(epoch, leader_id=leader_id))
        elif isinstance(self.state, Follower):
            if self.state.leader_id != leader_id:
                check_transition(self.state, Follower(epoch, leader_id=leader_id))
        elif self.state.kind in (Kind.LEADER, Kind.RESIGNED):
            check_transition(self.state, Follower(epoch, leader_id=leader_id))  # raises: two leaders
        else:
            voted = self.state.election.voted_id
            self._transition(Follower(epoch, leader_id=leader_id, voted_id=voted))

    # -- elections --------------------------------------------------------------------------------

    def _log_is_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_fetched_epoch, self.log.end_offset)

    def _vote_response(self, request: VoteRequest, granted: bool, error: RaftError) -> VoteResponse:
        return VoteResponse(
            self.node_id, request.source, self.epoch, self.leader_id, granted, request.pre_vote, error
        )

    def handle_vote_request(self, request: VoteRequest) -> list[RaftMessage]:
        """Grant or refuse a (pre-)vote; a real vote is persisted before the answer is returned."""
        if request.source not in self.voters or not self.is_voter:
            return [self._vote_response(request, False, RaftError.INCONSISTENT_VOTER_SET)]
        up_to_date = self._log_is_up_to_date(request.last_epoch, request.end_offset)
        if request.pre_vote:
            return [self._vote_response(request, self._grants_pre_vote(request, up_to_date), RaftError.NONE)]
        if request.candidate_epoch < self.epoch:
            return [self._vote_response(request, False, RaftError.FENCED_LEADER_EPOCH)]
        if request.candidate_epoch > self.epoch:
            self._transition(Unattached(request.candidate_epoch))
        granted = False
        state = self.state
        if (
            isinstance(state, Unattached | Prospective)
            and state.election.leader_id is None
            and up_to_date
            and state.voted_id in (None, request.source)
        ):
            granted = True
            if state.voted_id is None or isinstance(state, Prospective):
                self._transition(Unattached(self.epoch, voted_id=request.source))
        return [self._vote_response(request, granted, RaftError.NONE)]

    def _grants_pre_vote(self, request: VoteRequest, up_to_date: bool) -> bool:
        """KIP-996: grant if the asker's log is up to date and no live leader is known here."""
        if request.candidate_epoch <= self.epoch or not up_to_date:
            return False
        if self.state.kind is Kind.LEADER:
            return False
        if isinstance(self.state, Follower) and self._resigned_epoch != self.epoch:
            contact = self._last_leader_contact_ms
            return contact is None or self._now() - contact >= self.config.fetch_timeout_ms
        return True

    def handle_vote_response(self, response: VoteResponse) -> list[RaftMessage]:
        if response.epoch > self.epoch:
            self._step_down(response.epoch, response.leader_id)
            return []
        if (
            response.epoch == self.epoch
            and response.leader_id is not None
            and response.leader_id != self.state.election.leader_id  # the one we gave up on: no news
            and self._resigned_epoch != self.epoch
        ):
            if self.state.kind in (Kind.UNATTACHED, Kind.PROSPECTIVE, Kind.CANDIDATE):
                self._follow(self.epoch, response.leader_id)
                return self._poll_fetch(self._now())
            return []
        ballot = self._ballot
        if ballot is None or self._lost:
            return []
        counts = (isinstance(self.state, Prospective) and response.pre_vote) or (
            isinstance(self.state, Candidate) and not response.pre_vote and response.epoch == self.epoch
        )
        if not counts:
            return []
        (ballot.granted if response.granted else ballot.rejected).add(response.source)
        return self._count_ballot()

    def _count_ballot(self) -> list[RaftMessage]:
        assert self._ballot is not None
        majority = len(self.voters) // 2 + 1
        if len(self._ballot.granted) >= majority:
            if isinstance(self.state, Prospective):
                return self._become_candidate()
            return self._become_leader()
        if len(self._ballot.rejected) > len(self.voters) - majority:
            self._lost = True
            self._timer_ms = self._now() + self._election_backoff()
        return []

    def _become_prospective(self) -> list[RaftMessage]:
        if not isinstance(self.state, Prospective):
            election = self.state.election
            self._transition(
                Prospective(self.epoch, voted_id=election.voted_id, leader_id=election.leader_id)
            )
        self._ballot = _Ballot({self.node_id})
        self._lost = False
        self._timer_ms = self._now() + self._random_election_timeout()
        return self._ask_for_votes(pre_vote=True) + self._count_ballot()

    def _become_candidate(self) -> list[RaftMessage]:
        self._transition(Candidate(self.epoch + 1, local_id=self.node_id))
        self._ballot = _Ballot({self.node_id})
        return self._ask_for_votes(pre_vote=False) + self._count_ballot()

    def _ask_for_votes(self, pre_vote: bool) -> list[RaftMessage]:
        candidate_epoch = self.epoch + 1 if pre_vote else self.epoch
        return [
            VoteRequest(
                self.node_id,
                voter,
                candidate_epoch,
                self.log.last_fetched_epoch,
                self.log.end_offset,
                pre_vote,
            )
            for voter in sorted(self.voters - {self.node_id})
        ]

    def _become_leader(self) -> list[RaftMessage]:
        self._transition(Leader(self.epoch, local_id=self.node_id))
        self._lost_rounds = 0
        now = self._now()
        start = self.log.end_offset
        self.log.append_as_leader(
            self.epoch, [leader_change_payload(self.node_id, self.voters)], control=True
        )
        self._leader = LeaderTracker(
            self.node_id,
            self.voters,
            start,
            self.high_watermark,
            now,
            self.config.check_quorum_timeout_ms,
        )
        self._leader_progress(now)
        return self._send_begin_quorum_epoch(now)

    def _send_begin_quorum_epoch(self, now: int) -> list[RaftMessage]:
        assert self._leader is not None
        out: list[RaftMessage] = []
        for voter in sorted(self.voters - self._leader.begin_quorum_acked):
            sent = self._begin_sent_ms.get(voter)
            if sent is None or now - sent >= self.config.request_timeout_ms:
                self._begin_sent_ms[voter] = now
                out.append(BeginQuorumEpochRequest(self.node_id, voter, self.epoch, self.node_id))
        return out

    def handle_begin_quorum_epoch(self, request: BeginQuorumEpochRequest) -> list[RaftMessage]:
        if request.epoch >= self.epoch:
            self._follow(request.epoch, request.leader_id)
        return [BeginQuorumEpochResponse(self.node_id, request.source, self.epoch, self.leader_id)]

    def handle_begin_quorum_epoch_response(self, response: BeginQuorumEpochResponse) -> list[RaftMessage]:
        if response.epoch > self.epoch:
            self._step_down(response.epoch, response.leader_id)
        elif response.epoch == self.epoch and self._leader is not None:
            self._leader.begin_quorum_acked.add(response.source)
            self._begin_sent_ms.pop(response.source, None)  # no retry left to wake the poll for
        return []

    def resign(self) -> list[RaftMessage]:
        """Give up leadership (graceful shutdown): EndQuorumEpoch to the voters, best successors first."""
        if self._leader is None:
            raise NotLeaderError(f"node {self.node_id} is {self.state.kind.value} in epoch {self.epoch}")
        successors = self._leader.preferred_successors()
        self._transition(Resigned(self.epoch, local_id=self.node_id))
        return [
            EndQuorumEpochRequest(self.node_id, voter, self.epoch, self.node_id, successors)
            for voter in successors
        ]

    def handle_end_quorum_epoch(self, request: EndQuorumEpochRequest) -> list[RaftMessage]:
        if request.epoch >= self.epoch and request.leader_id != self.node_id:
            self._follow(request.epoch, request.leader_id)
            self._resigned_epoch = request.epoch
            now = self._now()
            if self.node_id in request.preferred_successors:
                position = request.preferred_successors.index(self.node_id)
                backoff = min(self.config.election_backoff_max_ms, self.config.retry_backoff_ms * position)
            else:
                backoff = self._random_election_timeout()
            self._timer_ms = min(self._timer_ms, now + backoff)
        return [EndQuorumEpochResponse(self.node_id, request.source, self.epoch, self.leader_id)]

    def handle_end_quorum_epoch_response(self, response: EndQuorumEpochResponse) -> list[RaftMessage]:
        if response.epoch > self.epoch:
            self._step_down(response.epoch, response.leader_id)
        return []

    # -- replication: the leader's side -----------------------------------------------------------

    def append(self, payloads: Sequence[bytes]) -> int:
        """Append entries in the leader's epoch; returns the offset after them (commit when HW >= it)."""
        if self._leader is None:
            raise NotLeaderError(f"node {self.node_id} is {self.state.kind.value} in epoch {self.epoch}")
        self.log.append_as_leader(self.epoch, payloads)
        self._leader_progress(self._now())
        return self.log.end_offset

    def _leader_progress(self, now: int) -> None:
        assert self._leader is not None
        if self._leader.update_local(self.log.end_offset, now):
            self.high_watermark = self._leader.high_watermark

    def handle_fetch(self, request: FetchRequest) -> list[RaftMessage]:
        """Serve a fetch: entries, or a diverging epoch when the fetcher's log left ours, plus the HW."""

        def answer(
            error: RaftError,
            entries: tuple[Entry, ...] = (),
            diverging: DivergingEpoch | None = None,
            snapshot_id: tuple[int, int] | None = None,
        ) -> list[RaftMessage]:
            response = FetchResponse(
                self.node_id,
                request.source,
                self.epoch,
                self.leader_id,
                request.fetch_offset,
                self._reported_high_watermark(),
                entries,
                diverging,
                error,
                snapshot_id,
                self.log.start_offset,
            )
            return [response]

        if request.epoch > self.epoch:
            self._step_down(request.epoch, None)
        if request.epoch < self.epoch:
            return answer(RaftError.FENCED_LEADER_EPOCH)
        if self._leader is None:
            return answer(RaftError.NOT_LEADER_OR_FOLLOWER)
        now = self._now()
        if request.fetch_offset < self.log.start_offset:  # cleaned away: fetch the snapshot (KIP-630)
            return answer(RaftError.NONE, snapshot_id=self.log.latest_snapshot_id)
        diverging = self._validate(request.fetch_offset, request.last_fetched_epoch)
        if diverging is not None:
            return answer(RaftError.NONE, diverging=diverging)
        if request.source >= 0 and self._leader.update_replica(
            request.source, request.fetch_offset, self.log.end_offset, now
        ):
            self.high_watermark = self._leader.high_watermark
        entries = self.log.read(request.fetch_offset, self.config.fetch_max_entries)
        if request.source not in self.voters:  # observers (brokers) see committed entries only
            entries = [entry for entry in entries if entry.last_offset < self.high_watermark]
        return answer(RaftError.NONE, entries=tuple(entries))

    def _reported_high_watermark(self) -> int:
        """The HW a Fetch answer carries: UNKNOWN_HIGH_WATERMARK (-1) while this node leads an epoch
        none of whose entries is committed yet, as Kafka's KafkaRaftClient does. Its own HW is then a
        stale lower bound (after a restart, 0): an observer that took it for the end of the committed
        log would think itself caught up and act on an image missing committed records."""
        if self._leader is not None and not self._leader.epoch_committed:
            return UNKNOWN_HIGH_WATERMARK
        return self.high_watermark

    def cleanable_below(self, snapshot_end: int) -> int:
        """How far this node may clean its log, given a snapshot ending at ``snapshot_end``: never
        past the high watermark, and never past any voter's log end, so that no voter ever needs a
        snapshot to follow whoever leads next. A leader knows the voters' ends; a follower takes the
        leader's log start as its bound."""
        bound = min(snapshot_end, self.high_watermark)
        if self._leader is not None:
            ends = [state.end_offset or 0 for state in self._leader.voter_states.values()]
            return min(bound, *ends)
        return min(bound, self.leader_log_start)

    def _validate(self, fetch_offset: int, last_fetched_epoch: int) -> DivergingEpoch | None:
        """None when (fetch_offset, last_fetched_epoch) is on our log, else where that epoch ends here."""
        if fetch_offset == 0:
            return None
        if (fetch_offset, last_fetched_epoch) == self.log.latest_snapshot_id:
            return None  # the fetcher's log starts at our snapshot's end
        epoch, end_offset = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch != last_fetched_epoch or end_offset < fetch_offset:
            return DivergingEpoch(epoch, end_offset)
        return None

    # -- replication: the follower's side ---------------------------------------------------------

    def _standing_delay(self, lost_leader: int) -> int:
        """When to stand after losing ``lost_leader``: the other voters all lose it at once, so each
        waits its turn (its rank among them times a quarter of the election timeout, plus a little
        jitter), as a resigning leader's preferred successors do: the first stands alone and wins
        before the next one's turn, instead of splitting the vote."""
        rank = sorted(self.voters - {lost_leader}).index(self.node_id)
        slot = max(1, self.config.election_timeout_ms // UNREACHABLE_SLOTS)
        return rank * slot + self._rng.randrange(max(1, slot // 2))

    def _fetch_target(self) -> int | None:
        """Whom to fetch from: the leader we follow, or, as Prospective (KIP-996), the leader we
        stopped hearing from, so that we follow it again at once if it was only out of reach."""
        state = self.state
        if isinstance(state, Follower):
            return state.leader_id
        if isinstance(state, Prospective) and state.election.leader_id != self.node_id:
            return state.election.leader_id
        return None

    def _poll_fetch(self, now: int) -> list[RaftMessage]:
        target = self._fetch_target()
        if target is None:
            return []
        in_flight = self._fetch_in_flight
        if in_flight is not None and now - self._fetch_sent_ms < self.config.request_timeout_ms:
            return []
        if in_flight is None and now < self._next_fetch_ms:
            return []
        request: FetchRequest | FetchSnapshotRequest
        if self._snapshot_fetch is not None:
            request = FetchSnapshotRequest(
                self.node_id, target, self.epoch, self._snapshot_fetch, self._snapshot_position
            )
        else:
            request = FetchRequest(
                self.node_id,
                target,
                self.epoch,
                self.log.end_offset,
                self.log.last_fetched_epoch,
            )
        self._fetch_in_flight = request
        self._fetch_sent_ms = now
        return [request]

    def leader_unreachable(self, node_id: int) -> list[RaftMessage]:
        """The transport found ``node_id``'s process gone (connection refused or reset), not merely
        slow. If it is the leader we fetch from, waiting out the fetch timeout would only delay the
        election: stand for it now. Pre-vote keeps this safe from disrupting a live leader: the
        other voters grant only if they too lost it (or have not heard from it for a fetch timeout),
        and a Prospective node keeps fetching the leader, following it again if it answers."""
        if not self.is_voter or self._fetch_target() != node_id:
            return []
        self._last_leader_contact_ms = None
        self._fetch_in_flight = None
        if isinstance(self.state, Follower):
            self._timer_ms = min(self._timer_ms, self._now() + self._standing_delay(node_id))
        return self.poll().messages

    def handle_fetch_response(self, response: FetchResponse) -> list[RaftMessage]:
        """Truncate on a diverging epoch, else append; then adopt the leader's HW (capped by our end)."""
        if response.epoch > self.epoch:
            self._step_down(response.epoch, response.leader_id)
            return self._poll_fetch(self._now())
        if response.epoch < self.epoch:
            return []
        if response.error is not RaftError.NONE:
            known = response.leader_id
            if known is not None and known != self.node_id and self.state.kind is not Kind.FOLLOWER:
                self._follow(self.epoch, known)
            self._fetch_in_flight = None
            self._next_fetch_ms = self._now() + self.config.retry_backoff_ms
            return []
        if response.leader_id is not None and self.state.kind is not Kind.FOLLOWER:
            self._follow(self.epoch, response.leader_id)
            return self._poll_fetch(self._now())
        state = self.state
        in_flight = self._fetch_in_flight
        if not isinstance(state, Follower) or response.source != state.leader_id:
            return []
        if not isinstance(in_flight, FetchRequest):
            return []
        if response.fetch_offset != in_flight.fetch_offset or response.fetch_offset != self.log.end_offset:
            return []  # a stale or duplicated answer
        now = self._now()
        self._fetch_in_flight = None
        self._last_leader_contact_ms = now
        self.leader_log_start = response.log_start_offset
        if response.snapshot_id is not None:
            # below the leader's log start (every voter's log is kept from the smallest voter's
            # end, so this is a voter whose log was lost): load the leader's snapshot first
            self._snapshot_fetch, self._snapshot_position = response.snapshot_id, 0
            self._next_fetch_ms = now
            return self._poll_fetch(now)
        if self._resigned_epoch != self.epoch:
            self._timer_ms = now + self.config.fetch_timeout_ms
        if response.diverging_epoch is not None:
            self._truncate(response.diverging_epoch)
            self._next_fetch_ms = now
        else:
            if response.entries:
                self.log.append_as_follower(response.entries)
            self._next_fetch_ms = now if response.entries else now + self.config.empty_fetch_backoff_ms
            new_hw = min(response.high_watermark, self.log.end_offset)
            if new_hw > self.high_watermark:
                self.high_watermark = new_hw
        return self._poll_fetch(now)

    def handle_fetch_snapshot_response(self, response: FetchSnapshotResponse) -> list[RaftMessage]:
        """Keep the chunk; once the whole snapshot is here, install it and fetch on from its end.
        Any error (a newer snapshot replaced it, a new leader) starts over with a plain fetch."""
        if response.epoch > self.epoch:
            self._step_down(response.epoch, response.leader_id)
            return self._poll_fetch(self._now())
        in_flight = self._fetch_in_flight
        state = self.state
        if (
            response.epoch < self.epoch
            or not isinstance(state, Follower)
            or response.source != state.leader_id
            or not isinstance(in_flight, FetchSnapshotRequest)
            or response.snapshot_id != in_flight.snapshot_id
            or response.position != in_flight.position
        ):
            return []  # stale, duplicated, or from a deposed leader
        now = self._now()
        self._fetch_in_flight = None
        if response.error is not RaftError.NONE or (not response.data and response.position < response.size):
            self._snapshot_fetch = None
            self._next_fetch_ms = now + self.config.retry_backoff_ms
            return []
        self._last_leader_contact_ms = now
        if self._resigned_epoch != self.epoch:
            self._timer_ms = now + self.config.fetch_timeout_ms
        try:
            self.log.write_snapshot_chunk(response.snapshot_id, response.position, response.data)
            self._snapshot_position = response.position + len(response.data)
            if self._snapshot_position >= response.size:
                self.log.install_snapshot(response.snapshot_id)
                self.high_watermark = max(self.high_watermark, response.snapshot_id[0])  # committed
                self._snapshot_fetch = None
        except Exception:
            # the chunk could not be kept (a full disk, a damaged file): start over from a plain
            # fetch, which names the snapshot again; the caller hears of the failure
            self._snapshot_fetch = None
            self._next_fetch_ms = now + self.config.retry_backoff_ms
            raise
        self._next_fetch_ms = now
        return self._poll_fetch(now)

    def _truncate(self, diverging: DivergingEpoch) -> None:
        _, local_end = self.log.end_offset_for_epoch(diverging.epoch)
        offset = max(0, min(local_end, diverging.end_offset))
        if offset < self.high_watermark:
            raise RuntimeError(
                f"node {self.node_id}: truncating to {offset} below the high watermark {self.high_watermark}"
            )
        self.log.truncate_to(offset)

    # -- timers -----------------------------------------------------------------------------------

    def poll(self) -> PollResult:
        """Fire whatever timer is due; returns its messages and the next time poll must run."""
        now = self._now()
        out: list[RaftMessage] = []
        state = self.state
        if isinstance(state, Leader):
            assert self._leader is not None
            if now >= self._leader.check_quorum_deadline_ms and len(self.voters) > 1:
                out += self.resign()  # no majority fetched lately: we may be partitioned away
            else:
                out += self._send_begin_quorum_epoch(now)
        elif now >= self._timer_ms:
            out += self._on_timer(now)
        out += self._poll_fetch(now)
        return PollResult(out, self._next_deadline(now))

    def _on_timer(self, now: int) -> list[RaftMessage]:
        if not self.is_voter:
            self._timer_ms = now + self.config.fetch_timeout_ms
            return []
        if self.state.kind is Kind.CANDIDATE:
            election = self.state.election
            self._transition(Prospective(self.epoch, voted_id=election.voted_id))
        return self._become_prospective()

    def _next_deadline(self, now: int) -> int:
        if self._leader is not None:
            # The only voter has no quorum to check (poll never resigns it): its check-quorum
            # deadline, renewed only by appends, would fall due on an idle log and make every poll
            # due at once, a busy loop. Kafka's LeaderState never expires a lone voter; here it is
            # polled once per check-quorum timeout, for nothing but liveness.
            lone = len(self.voters) == 1
            check = (
                now + self.config.check_quorum_timeout_ms if lone else self._leader.check_quorum_deadline_ms
            )
            deadlines = [check]
            deadlines += [sent + self.config.request_timeout_ms for sent in self._begin_sent_ms.values()]
            return max(now, min(deadlines))
        deadlines = [self._timer_ms]
        if self._fetch_target() is not None:
            if self._fetch_in_flight is not None:
                deadlines.append(self._fetch_sent_ms + self.config.request_timeout_ms)
            else:
                deadlines.append(self._next_fetch_ms)
        return max(now, min(deadlines))

    # -- dispatch ---------------------------------------------------------------------------------

    def handle(self, message: RaftMessage) -> list[RaftMessage]:
        """Handle any message addressed to this node, then run due timers (one step of the poll loop)."""
        if message.destination != self.node_id:
            raise ValueError(f"node {self.node_id} got a message for node {message.destination}")
        out: list[RaftMessage]
        match message:
            case VoteRequest():
                out = self.handle_vote_request(message)
            case VoteResponse():
                out = self.handle_vote_response(message)
            case BeginQuorumEpochRequest():
                out = self.handle_begin_quorum_epoch(message)
            case BeginQuorumEpochResponse():
                out = self.handle_begin_quorum_epoch_response(message)
            case EndQuorumEpochRequest():
                out = self.handle_end_quorum_epoch(message)
            case EndQuorumEpochResponse():
                out = self.handle_end_quorum_epoch_response(message)
            case FetchRequest():
                out = self.handle_fetch(message)
            case FetchResponse():
                out = self.handle_fetch_response(message)
            case FetchSnapshotResponse():
                out = self.handle_fetch_snapshot_response(message)
            case FetchSnapshotRequest():
                raise ValueError("FetchSnapshot is served from the snapshot files, not by the Raft node")
        return out + self.poll().messages

    def _now(self) -> int:
        return self._clock.time_ms()
