"""The leader's side of replication: the commit rule, diverging epochs, observers, DescribeQuorum, resign."""

from __future__ import annotations

import random

from metadata.raft.config import RaftConfig
from metadata.raft.log import InMemoryRaftLog
from metadata.raft.messages import (
    DivergingEpoch,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftError,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from metadata.raft.quorum import UNKNOWN_HIGH_WATERMARK, NotLeaderError, RaftNode
from metadata.raft.state import ElectionState, Kind
from metadata.raft.store import InMemoryQuorumStateStore
from storage.clock import FakeClock
from tests.metadata.raft.harness import Cluster

VOTERS = frozenset({1, 2, 3})


def leader_of_epoch_2(log: InMemoryRaftLog, clock: FakeClock) -> RaftNode:
    """Node 1 of {1, 2, 3}, elected in epoch 2 by node 2's vote, over ``log``."""
    store = InMemoryQuorumStateStore()
    store.write(ElectionState(1, None, None))
    node = RaftNode(1, VOTERS, log, store, clock, random.Random(0))
    clock.advance(2 * RaftConfig().election_timeout_ms)
    node.poll()
    assert node.state.kind is Kind.PROSPECTIVE
    node.handle_vote_response(VoteResponse(2, 1, 1, None, granted=True, pre_vote=True))
    assert node.state.kind is Kind.CANDIDATE and node.epoch == 2
    node.handle_vote_response(VoteResponse(2, 1, 2, None, granted=True, pre_vote=False))
    assert node.is_leader
    return node


def fetch(node: RaftNode, replica: int, offset: int, last_epoch: int) -> FetchResponse:
    [response] = node.handle_fetch(FetchRequest(replica, node.node_id, node.epoch, offset, last_epoch))
    assert isinstance(response, FetchResponse)
    return response


def test_earlier_epochs_commit_only_with_the_leader_change_entry() -> None:
    log = InMemoryRaftLog()
    log.append_as_leader(1, [b"a", b"b"])  # written in epoch 1, never committed then
    clock = FakeClock()
    leader = leader_of_epoch_2(log, clock)
    assert log.entries()[2].epoch == 2 and b"LeaderChange" in log.entries()[2].payload
    # Node 2 holds the epoch-1 entries: a majority has them, but they are not the leader's epoch.
    # Nothing of epoch 2 is committed: the answer's HW is unknown (-1), not the stale 0.
    assert fetch(leader, 2, 2, 1).high_watermark == UNKNOWN_HIGH_WATERMARK
    assert leader.high_watermark == 0
    response = fetch(leader, 2, 3, 2)  # now the leader-change entry is on a majority
    assert response.high_watermark == leader.high_watermark == 3
    assert fetch(leader, 3, 0, 0).high_watermark == 3  # the HW never moves back


def test_a_fetch_off_the_leaders_log_gets_the_diverging_epoch() -> None:
    log = InMemoryRaftLog()
    log.append_as_leader(1, [b"a", b"b"])
    leader = leader_of_epoch_2(log, FakeClock())
    # The fetcher wrote offsets 2..4 in epoch 1 that the leader never had: epoch 1 ends at 2 here.
    assert fetch(leader, 2, 5, 1).diverging_epoch == DivergingEpoch(1, 2)
    assert fetch(leader, 2, 2, 1).diverging_epoch is None
    stale = leader.handle_fetch(FetchRequest(2, 1, 1, 2, 1))
    assert isinstance(stale[0], FetchResponse) and stale[0].error is RaftError.FENCED_LEADER_EPOCH


def test_observers_fetch_but_never_count_for_the_majority() -> None:
    clock = FakeClock()
    leader = leader_of_epoch_2(InMemoryRaftLog(), clock)
    clock.advance(5)
    response = fetch(leader, 9, 1, 2)
    assert response.error is RaftError.NONE and leader.high_watermark == 0
    fetch(leader, 3, 1, 2)
    assert leader.high_watermark == 1
    info = leader.describe_quorum()
    assert (info.leader_id, info.leader_epoch, info.high_watermark) == (1, 2, 1)
    assert [(r.replica_id, r.log_end_offset) for r in info.voters] == [(1, 1), (2, -1), (3, 1)]
    assert [(r.replica_id, r.log_end_offset, r.last_caught_up_ms) for r in info.observers] == [
        (9, 1, clock.time_ms())
    ]


def test_a_leader_never_grants_a_pre_vote_and_steps_down_on_a_higher_vote() -> None:
    leader = leader_of_epoch_2(InMemoryRaftLog(), FakeClock())
    [pre] = leader.handle_vote_request(VoteRequest(3, 1, 3, 2, 5, pre_vote=True))
    assert isinstance(pre, VoteResponse) and not pre.granted and pre.leader_id == 1
    assert leader.is_leader
    [vote] = leader.handle_vote_request(VoteRequest(3, 1, 3, 2, 5, pre_vote=False))
    assert isinstance(vote, VoteResponse) and vote.granted and leader.epoch == 3
    assert leader.state.kind is Kind.UNATTACHED


def test_resign_hands_over_to_the_preferred_successor() -> None:
    cluster = Cluster(3, seed=7)
    cluster.run(5_000)
    old = cluster.the_leader()
    epoch = old.epoch
    out: list[RaftMessage] = old.resign()
    assert all(isinstance(m, EndQuorumEpochRequest) for m in out)
    successor = out[0].preferred_successors[0]  # type: ignore[union-attr]
    cluster.send(out)
    cluster.deliver_all()
    cluster.run(500)
    new = cluster.the_leader()
    assert new.node_id == successor and new.epoch == epoch + 1
    assert old.state.kind is Kind.FOLLOWER and old.leader_id == successor


def test_only_the_leader_appends_or_describes() -> None:
    node = RaftNode(1, VOTERS, InMemoryRaftLog(), InMemoryQuorumStateStore(), FakeClock(), random.Random(0))
    for call in (lambda: node.append([b"x"]), node.describe_quorum, node.resign):
        try:
            call()
        except NotLeaderError:
            continue
        raise AssertionError("expected NotLeaderError")


class CleanedLog(InMemoryRaftLog):
    """A log whose prefix a snapshot replaced (KIP-630): reads below ``start`` are gone."""

    def __init__(self) -> None:
        super().__init__()
        self.start = 0
        self.snapshot: tuple[int, int] | None = None

    @property
    def start_offset(self) -> int:
        return self.start

    @property
    def latest_snapshot_id(self) -> tuple[int, int] | None:
        return self.snapshot


def test_a_fetch_below_the_log_start_is_pointed_to_the_snapshot_and_cleaning_waits_for_every_voter() -> None:
    clock = FakeClock(0)
    log = CleanedLog()
    log.append_as_leader(1, [b"a", b"b", b"c"])
    leader = leader_of_epoch_2(log, clock)
    end = log.end_offset
    leader.handle_fetch(FetchRequest(2, 1, 2, end, 2))  # voter 2 is caught up
    assert leader.high_watermark == end
    log.snapshot = (3, 1)
    assert leader.cleanable_below(3) == 0  # voter 3 has fetched nothing yet: keep everything
    leader.handle_fetch(FetchRequest(3, 1, 2, 2, 1))  # voter 3 holds offsets below 2
    assert leader.cleanable_below(3) == 2  # ... so the log is kept from 2 on
    log.start = 3
    [pointed] = leader.handle_fetch(FetchRequest(-1, 1, 2, 0, 0))  # a new observer (a broker)
    assert isinstance(pointed, FetchResponse)
    assert pointed.snapshot_id == (3, 1) and pointed.entries == () and pointed.log_start_offset == 3
    [after] = leader.handle_fetch(FetchRequest(-1, 1, 2, 3, 1))  # it loaded the snapshot: fetch on
    assert isinstance(after, FetchResponse) and after.diverging_epoch is None and after.snapshot_id is None


class SnapshotTakingLog(CleanedLog):
    """Records the snapshot chunks a follower writes and the install."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[tuple[int, bytes]] = []
        self.installed: tuple[int, int] | None = None

    def write_snapshot_chunk(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None:
        self.chunks.append((position, data))

    def install_snapshot(self, snapshot_id: tuple[int, int]) -> None:
        self.installed = snapshot_id
        self.start = snapshot_id[0]
        self.snapshot = snapshot_id


def test_a_follower_below_the_leaders_log_start_fetches_the_snapshot_then_the_log() -> None:
    clock = FakeClock(0)
    log = SnapshotTakingLog()
    store = InMemoryQuorumStateStore()
    store.write(ElectionState(5, None, 1))  # follows leader 1 in epoch 5
    node = RaftNode(2, VOTERS, log, store, clock, random.Random(0))
    [fetch] = node.poll().messages
    assert isinstance(fetch, FetchRequest) and fetch.fetch_offset == 0
    pointed = FetchResponse(1, 2, 5, 1, 0, 40, snapshot_id=(30, 4), log_start_offset=30)
    [first] = node.handle_fetch_response(pointed)
    assert isinstance(first, FetchSnapshotRequest) and (first.snapshot_id, first.position) == ((30, 4), 0)
    [second] = node.handle_fetch_snapshot_response(FetchSnapshotResponse(1, 2, 5, 1, (30, 4), 7, 0, b"abcd"))
    assert isinstance(second, FetchSnapshotRequest) and second.position == 4
    [after] = node.handle_fetch_snapshot_response(FetchSnapshotResponse(1, 2, 5, 1, (30, 4), 7, 4, b"efg"))
    assert log.chunks == [(0, b"abcd"), (4, b"efg")] and log.installed == (30, 4)
    assert node.high_watermark == 30  # the snapshot is committed
    assert isinstance(after, FetchRequest) and after.fetch_offset == log.end_offset


def test_an_observer_silent_for_an_observer_session_is_forgotten() -> None:
    clock = FakeClock(0)
    log = InMemoryRaftLog()
    leader = leader_of_epoch_2(log, clock)
    leader.handle_fetch(FetchRequest(7, 1, 2, 0, 0))
    assert [o.replica_id for o in leader.describe_quorum().observers] == [7]
    clock.advance(300_001)
    leader.handle_fetch(FetchRequest(8, 1, 2, 0, 0))
    assert [o.replica_id for o in leader.describe_quorum().observers] == [8]
