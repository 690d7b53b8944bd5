"""Elections on a fake network: one leader, split votes, pre-vote, partitions, restarts, divergence."""

from __future__ import annotations

import pathlib
import random

import pytest

from metadata.raft.log import InMemoryRaftLog
from metadata.raft.messages import VoteRequest, VoteResponse
from metadata.raft.quorum import RaftNode
from metadata.raft.state import Kind
from metadata.raft.store import FileQuorumStateStore, InMemoryQuorumStateStore, QuorumStateStore
from storage.clock import FakeClock
from tests.metadata.raft.harness import Cluster


def assert_one_leader_followed(cluster: Cluster) -> RaftNode:
    leader = cluster.the_leader()
    for node in cluster.nodes.values():
        if node is not leader:
            assert node.state.kind is Kind.FOLLOWER
            assert (node.epoch, node.leader_id) == (leader.epoch, leader.node_id)
    return leader


@pytest.mark.parametrize("voters", [1, 3, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_leader_is_elected_and_commits_its_leader_change(voters: int, seed: int) -> None:
    cluster = Cluster(voters, seed)
    cluster.run(5_000)
    leader = assert_one_leader_followed(cluster)
    assert leader.epoch >= 1
    for node in cluster.nodes.values():
        assert node.high_watermark == leader.log.end_offset >= 1
    assert all(len(leaders) == 1 for leaders in cluster.leaders_by_epoch.values())


def test_split_votes_resolve_through_randomized_timeouts() -> None:
    cluster = Cluster(5, seed=3)
    cluster.clock.advance(2 * cluster.config.election_timeout_ms)  # every election timer is due
    cluster.poll_all()
    # Everyone is Prospective; all pre-votes are granted, so everyone becomes a Candidate of epoch 1
    # and, having voted for itself, refuses everyone else: a split vote.
    cluster.deliver_all(lambda m: isinstance(m, VoteRequest) and m.pre_vote)
    cluster.deliver_all(lambda m: isinstance(m, VoteResponse) and m.pre_vote)
    assert set(cluster.kinds().values()) == {Kind.CANDIDATE}
    cluster.deliver_all()
    assert not cluster.leaders()
    cluster.run(5_000)
    leader = assert_one_leader_followed(cluster)
    assert leader.epoch >= 2
    assert 1 not in cluster.leaders_by_epoch


def test_pre_vote_keeps_a_rejoining_node_from_disrupting_a_healthy_leader() -> None:
    cluster = Cluster(3, seed=4)
    cluster.run(5_000)
    leader = assert_one_leader_followed(cluster)
    epoch = leader.epoch
    straggler = next(i for i in cluster.nodes if i != leader.node_id)
    cluster.isolated.add(straggler)
    cluster.run(10_000)
    assert cluster.nodes[straggler].state.kind is Kind.PROSPECTIVE
    assert cluster.nodes[straggler].epoch == epoch  # pre-votes never bump the epoch
    cluster.isolated.clear()
    cluster.run(5_000)
    assert assert_one_leader_followed(cluster) is leader
    assert leader.epoch == epoch


def test_a_partitioned_leader_steps_down_and_the_majority_elects_a_new_one() -> None:
    cluster = Cluster(3, seed=5)
    cluster.run(5_000)
    old = assert_one_leader_followed(cluster)
    cluster.isolated.add(old.node_id)
    cluster.run(10_000)
    assert not old.is_leader  # check quorum: nobody fetched from it for 1.5 fetch timeouts
    leaders = cluster.leaders()
    assert len(leaders) == 1 and leaders[0].epoch > old.epoch
    cluster.isolated.clear()
    cluster.run(5_000)
    new = assert_one_leader_followed(cluster)
    assert new is leaders[0]
    assert old.log.end_offset == new.log.end_offset == old.high_watermark


def _vote(source: int, destination: int, epoch: int) -> VoteRequest:
    return VoteRequest(source, destination, epoch, last_epoch=0, end_offset=0, pre_vote=False)


@pytest.mark.parametrize("durable", ["memory", "file"])
def test_a_node_does_not_vote_twice_in_an_epoch_across_a_restart(
    durable: str, tmp_path: pathlib.Path
) -> None:
    voters = frozenset({1, 2, 3})
    log = InMemoryRaftLog()
    store: QuorumStateStore = (
        InMemoryQuorumStateStore() if durable == "memory" else FileQuorumStateStore(tmp_path, voters)
    )
    clock = FakeClock(0)

    def start() -> RaftNode:
        return RaftNode(2, voters, log, store, clock, random.Random(0))

    node = start()
    [granted] = node.handle_vote_request(_vote(1, 2, 1))
    assert isinstance(granted, VoteResponse) and granted.granted
    node = start()  # crash and restart: only the log and the store survive
    [refused] = node.handle_vote_request(_vote(3, 2, 1))
    assert isinstance(refused, VoteResponse) and not refused.granted
    [again] = node.handle_vote_request(_vote(1, 2, 1))  # a retry from the same candidate is fine
    assert isinstance(again, VoteResponse) and again.granted
    [next_epoch] = node.handle_vote_request(_vote(3, 2, 2))
    assert isinstance(next_epoch, VoteResponse) and next_epoch.granted


def test_a_deposed_leader_truncates_its_uncommitted_entries() -> None:
    cluster = Cluster(3, seed=6)
    cluster.run(5_000)
    old = assert_one_leader_followed(cluster)
    committed = old.high_watermark
    old.append([b"lost-1", b"lost-2"])
    cluster.isolated.add(old.node_id)  # before anyone fetched them
    cluster.run(10_000)
    new = cluster.leaders()[0]
    new.append([b"kept"])
    cluster.isolated.clear()
    cluster.run(5_000)
    assert assert_one_leader_followed(cluster) is new
    assert isinstance(old.log, InMemoryRaftLog) and isinstance(new.log, InMemoryRaftLog)
    payloads = [entry.payload for entry in old.log.entries()]
    assert b"lost-1" not in payloads and b"kept" in payloads
    assert old.log.entries() == new.log.entries()
    assert old.high_watermark == new.high_watermark > committed


def test_followers_that_lose_the_leaders_process_elect_without_waiting_out_the_fetch_timeout() -> None:
    """Connection refused from the leader (its process died): each follower stands at once, and the
    others, having lost it too, grant the pre-vote; a new leader well before the 2 s fetch timeout."""
    cluster = Cluster(3, seed=7)
    cluster.run(5_000)
    old = assert_one_leader_followed(cluster)
    cluster.isolated.add(old.node_id)
    died_at = cluster.clock.time_ms()
    for node in cluster.nodes.values():
        if node is not old:
            cluster.send(node.leader_unreachable(old.node_id))
    cluster.deliver_all()
    while not [n for n in cluster.leaders() if n is not old]:
        assert cluster.clock.time_ms() - died_at < cluster.config.fetch_timeout_ms, "no faster than a timeout"
        cluster.run(10)
    [new] = [n for n in cluster.leaders() if n is not old]
    assert new.epoch > old.epoch


def test_a_follower_alone_in_losing_the_leader_does_not_disrupt_it() -> None:
    """One follower's connection to a live leader breaks: its pre-vote is refused by the other, who
    still fetches, and it follows the same leader again in the same epoch."""
    cluster = Cluster(3, seed=8)
    cluster.run(5_000)
    leader = assert_one_leader_followed(cluster)
    epoch = leader.epoch
    lonely = next(n for n in cluster.nodes.values() if n is not leader)
    cluster.send(lonely.leader_unreachable(leader.node_id))
    cluster.run(3_000)
    assert assert_one_leader_followed(cluster) is leader
    assert leader.epoch == epoch


def test_an_idle_lone_voter_is_not_due_at_every_poll() -> None:
    """A single-node quorum whose log stops growing: its check-quorum deadline (renewed only by
    appends) passes, yet the next poll is not due at once; otherwise the broker's poll loop spins a
    core at 100 % on an idle node (it did: every idle single-node broker)."""
    cluster = Cluster(1)
    cluster.run(1_000)
    leader = cluster.the_leader()
    cluster.clock.advance(cluster.config.check_quorum_timeout_ms * 5)
    now = cluster.clock.time_ms()
    result = leader.poll()
    assert result.next_deadline_ms > now
    assert leader.is_leader


def test_a_leader_whose_voters_all_acked_its_epoch_is_not_due_at_every_poll() -> None:
    """The BeginQuorumEpoch sent to each voter at election is acknowledged; its retry deadline must
    no longer count once it has passed, or every poll is due at once and the leader of an idle
    three-voter quorum spins a core at 100 % (it did, in every cluster's controller leader)."""
    cluster = Cluster(3, seed=3)
    cluster.run(5_000)
    leader = assert_one_leader_followed(cluster)
    cluster.run(cluster.config.request_timeout_ms * 3)  # the voters fetch; the begin deadlines pass
    now = cluster.clock.time_ms()
    result = leader.poll()
    assert result.next_deadline_ms > now
    assert leader.is_leader
