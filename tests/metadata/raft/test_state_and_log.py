"""The epoch-state table, the in-memory log's epoch answers, and the quorum-state stores."""

from __future__ import annotations

import json
import pathlib

import pytest

from metadata.raft.log import Entry, InMemoryRaftLog
from metadata.raft.state import (
    Candidate,
    ElectionState,
    EpochState,
    Follower,
    IllegalStateTransition,
    Leader,
    Prospective,
    Resigned,
    Unattached,
    check_transition,
)
from metadata.raft.store import FileQuorumStateStore, InMemoryQuorumStateStore


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (Unattached(1), Prospective(1)),
        (Unattached(1), Unattached(1, voted_id=2)),
        (Unattached(1), Unattached(3)),
        (Unattached(1, voted_id=2), Follower(1, leader_id=2, voted_id=2)),
        (Prospective(1), Candidate(2, local_id=1)),
        (Prospective(1), Unattached(1, voted_id=3)),
        (Candidate(2, local_id=1), Leader(2, local_id=1)),
        (Candidate(2, local_id=1), Prospective(2, voted_id=1)),
        (Candidate(2, local_id=1), Follower(2, leader_id=3, voted_id=1)),
        (Leader(2, local_id=1), Resigned(2, local_id=1)),
        (Leader(2, local_id=1), Follower(3, leader_id=2)),
        (Follower(2, leader_id=3), Prospective(2, leader_id=3)),
        (Resigned(2, local_id=1), Prospective(2, voted_id=1, leader_id=1)),
    ],
)
def test_legal_transitions(old: EpochState, new: EpochState) -> None:
    check_transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (Unattached(1), Candidate(2, local_id=1)),  # pre-vote first
        (Unattached(1), Leader(1, local_id=1)),
        (Prospective(1), Candidate(3, local_id=1)),  # the next epoch only
        (Unattached(2), Unattached(1)),  # epochs never go back
        (Unattached(1, voted_id=2), Unattached(1, voted_id=3)),  # one vote per epoch
        (Follower(2, leader_id=3), Follower(2, leader_id=4)),  # one leader per epoch
        (Leader(2, local_id=1), Follower(2, leader_id=3)),
        (Leader(2, local_id=1), Candidate(3, local_id=1)),
        (Follower(2, leader_id=3), Candidate(3, local_id=1)),
        (Prospective(1, voted_id=2), Unattached(1, voted_id=3)),
    ],
)
def test_illegal_transitions_raise(old: EpochState, new: EpochState) -> None:
    with pytest.raises(IllegalStateTransition):
        check_transition(old, new)


def test_election_state_follows_the_state() -> None:
    assert Candidate(4, local_id=1).election == ElectionState(4, 1, None)
    assert Leader(4, local_id=1).election == ElectionState(4, 1, 1)
    assert Follower(4, leader_id=2, voted_id=3).election == ElectionState(4, 3, 2)


def test_log_epoch_answers_and_truncation() -> None:
    log = InMemoryRaftLog()
    assert (log.end_offset, log.last_fetched_epoch) == (0, 0)
    assert log.end_offset_for_epoch(0) == (0, 0)
    log.append_as_leader(1, [b"a", b"b"])
    log.append_as_leader(3, [b"c"])
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 3)
    assert log.end_offset_for_epoch(4) == (-1, -1)
    assert log.read(1, 5) == [Entry(1, 1, b"b"), Entry(2, 3, b"c")]
    log.truncate_to(2)
    assert (log.end_offset, log.last_fetched_epoch) == (2, 1)
    assert log.end_offset_for_epoch(3) == (-1, -1)
    log.append_as_follower([Entry(2, 4, b"d")])
    assert log.end_offset_for_epoch(3) == (1, 2)
    with pytest.raises(ValueError, match="start at"):
        log.append_as_follower([Entry(5, 4, b"e")])


def test_stores_round_trip(tmp_path: pathlib.Path) -> None:
    state = ElectionState(epoch=7, voted_id=2, leader_id=None)
    memory = InMemoryQuorumStateStore()
    assert memory.read() is None
    memory.write(state)
    assert memory.read() == state

    store = FileQuorumStateStore(tmp_path, frozenset({1, 2, 3}))
    assert store.read() is None
    store.write(state)
    assert FileQuorumStateStore(tmp_path, frozenset({1, 2, 3})).read() == state
    data = json.loads((tmp_path / "quorum-state").read_text())
    assert data["leaderId"] == -1 and data["votedId"] == 2 and data["leaderEpoch"] == 7
    assert not list(tmp_path.glob("*.tmp"))
