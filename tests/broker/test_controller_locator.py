"""ControllerLocator: which voter a broker sends controller requests to."""

from __future__ import annotations

from broker.cluster.controller_locator import ControllerLocator

PORTS = {1: 9001, 2: 9002, 3: 9003}


NOW = [0.0]


def locator() -> tuple[ControllerLocator, list[int]]:
    NOW[0] = 0.0
    moves: list[int] = []
    found = ControllerLocator(
        [1, 2, 3], lambda voter: ("127.0.0.1", PORTS[voter]), forget_after_s=4.0, clock=lambda: NOW[0]
    )
    found.on_move(lambda: moves.append(found.leader_id))
    return found, moves


def test_starts_at_the_first_voter_and_follows_leader_hints() -> None:
    found, moves = locator()
    assert found.address() == ("127.0.0.1", 9001)
    found.leader_is(2, 5)
    assert found.leader_id == 2 and moves == [2]
    found.leader_is(3, 4)  # an older epoch: a deposed leader's late news
    assert found.leader_id == 2
    found.leader_is(7, 6)  # not a voter
    assert found.leader_id == 2


def test_failures_rotate_and_skip_voters_that_did_not_answer_in_this_epoch() -> None:
    found, _ = locator()
    found.leader_is(1, 3)
    found.unreachable(("127.0.0.1", 9001))  # the leader died (no answer)
    assert found.leader_id == 2
    found.leader_is(1, 3)  # a voter that has not noticed yet names it again: ignored
    assert found.leader_id == 2
    found.unreachable(("127.0.0.1", 9002), answered=True)  # NOT_CONTROLLER: not elected yet
    assert found.leader_id == 3
    found.unreachable(("127.0.0.1", 9003), answered=True)
    assert found.leader_id == 2  # voter 1 is skipped: it did not answer in epoch 3
    found.leader_is(1, 4)  # a new epoch: voter 1 leads again (it was only paused)
    assert found.leader_id == 1


def test_a_failure_reported_for_an_old_address_moves_nothing() -> None:
    found, moves = locator()
    found.unreachable(("127.0.0.1", 9003))
    assert found.leader_id == 1 and moves == []


def test_when_no_voter_answers_all_are_tried_again() -> None:
    found, _ = locator()
    for port in (9001, 9002, 9003):
        found.unreachable(("127.0.0.1", port))
    assert found.leader_id == 1  # all three failed: the set is cleared and rotation goes on


def test_a_voter_that_failed_once_is_believed_again_after_a_while() -> None:
    """One slow answer from a live leader must not lock a broker out of it for the whole epoch: the
    followers keep naming it, and after forget_after_s their word is taken again."""
    found, _ = locator()
    found.leader_is(1, 7)
    found.unreachable(("127.0.0.1", 9001))  # a heartbeat timed out on the (live) leader
    found.leader_is(1, 7)
    assert found.leader_id == 2
    NOW[0] = 5.0
    found.leader_is(1, 7)
    assert found.leader_id == 1
