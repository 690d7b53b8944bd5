"""Consumer-group writes in flight: a failed write takes back itself and every later write of its
group that was built on it, and nothing built on a write is answered before that write is.

A heartbeat's records are applied to the group at once, so the next heartbeat reads them before
they are durable. A write that then fails must not take back a later write that was answered as
written (review of KIP-848: the member was told it succeeded, the log held its records without
those they were computed from, and memory matched neither). Kafka's CoordinatorRuntime reverts to
the last committed state and fails the writes that depend on the uncommitted one.

Simulated time, an in-memory log whose appends wait until the test completes them.
"""

from __future__ import annotations

import uuid

import pytest

from coordinator.group.consumer.api import ConsumerGroupHeartbeatResult
from coordinator.group.consumer.group import ConsumerGroup
from protocol.error_codes import ErrorCode
from tests.coordinator.group.consumer_helpers import Consumer, ConsumerHarness
from tests.coordinator.group.helpers import Reply

pytestmark = pytest.mark.timeout(30)

SESSION_MS = 45_000


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness(defer_log=True)
    harness.topics.create("t", 6)
    return harness


def state(group: ConsumerGroup) -> tuple[object, ...]:
    """Everything the records build, to compare a group with an earlier moment or with the log."""
    return (
        group.group_epoch,
        group.assignment_epoch,
        dict(group.members),
        dict(group.static_members),
        dict(group.target_assignment),
        dict(group.subscription_metadata),
        group.state,
    )


def the_group(h: ConsumerHarness) -> ConsumerGroup:
    group = h.coordinator.consumer_group("group")
    assert group is not None
    return group


def joined(h: ConsumerHarness, name: str) -> Consumer:
    """A member at epoch 1 with every partition, its write completed."""
    consumer = Consumer(h, name, ("t",))
    reply = h.cg_heartbeat(consumer.request())
    h.log.complete_all()
    take(consumer, reply)
    assert consumer.epoch == 1 and len(consumer.partitions) == 6
    return consumer


def take(consumer: Consumer, reply: Reply[ConsumerGroupHeartbeatResult]) -> ConsumerGroupHeartbeatResult:
    result = reply.value
    assert result.error is ErrorCode.NONE, result
    consumer.epoch = result.member_epoch
    if result.assignment is not None:
        consumer.owned = dict(result.assignment)
    return result


def written(
    h: ConsumerHarness, reply: Reply[ConsumerGroupHeartbeatResult]
) -> Reply[ConsumerGroupHeartbeatResult]:
    h.log.complete_all()
    return reply


def partitions(result: ConsumerGroupHeartbeatResult) -> set[tuple[uuid.UUID, int]]:
    assert result.assignment is not None
    return {(t, p) for t, parts in result.assignment.items() for p in parts}


def reloaded_state(h: ConsumerHarness) -> tuple[object, ...]:
    """The group as a new coordinator would load it from what the log holds now."""
    h.reload()
    return state(the_group(h))


# -- failures reported after the write was applied ---------------------------------------------------


def test_a_failed_write_fails_the_later_writes_built_on_it(h: ConsumerHarness) -> None:
    """The review's scenario with the failure reported late (the leader moved): b's join (A) is
    applied, a's heartbeat (B) is computed from it (a must revoke half); A fails. B must fail too,
    and the group is as before A, even though B's own batch is later reported written."""
    a = joined(h, "a")
    before = state(the_group(h))
    join_b = h.cg_heartbeat(Consumer(h, "b", ("t",)).request())
    revoke_a = h.cg_heartbeat(a.request())
    assert not join_b.done and not revoke_a.done and len(h.log.deferred) == 2
    h.log.complete_next(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert join_b.value.error is ErrorCode.NOT_COORDINATOR
    assert revoke_a.value.error is ErrorCode.NOT_COORDINATOR
    assert state(the_group(h)) == before
    h.log.complete_next()  # B's batch was written: too late, it is answered and taken back
    assert len(revoke_a.answers) == 1
    assert state(the_group(h)) == before


def test_a_failure_takes_back_only_the_failed_write_and_those_after_it(h: ConsumerHarness) -> None:
    """Four writes in flight: b joins (A), a is told to revoke (B), b heartbeats (C, which writes
    its previous epoch), b heartbeats again (D, nothing to write: a read of what A to C applied).
    B fails: B, C and D fail, A stays applied and is answered once it is written."""
    a = joined(h, "a")
    b = Consumer(h, "b", ("t",))
    join_b = h.cg_heartbeat(b.request())
    after_join = state(the_group(h))
    revoke_a = h.cg_heartbeat(a.request())
    b.epoch = the_group(h).group_epoch
    replies = [h.cg_heartbeat(b.request()), h.cg_heartbeat(b.request())]
    assert len(h.log.deferred) == 3  # D wrote nothing: it waits for the writes it read
    assert not any(reply.done for reply in (join_b, revoke_a, *replies))
    h.log.complete_next(ErrorCode.KAFKA_STORAGE_ERROR, index=1)
    assert [reply.value.error for reply in (revoke_a, *replies)] == [ErrorCode.NOT_COORDINATOR] * 3
    assert not join_b.done
    assert state(the_group(h)) == after_join
    h.log.complete_next(ErrorCode.KAFKA_STORAGE_ERROR, index=1)  # C's own answer: dropped
    assert [len(reply.answers) for reply in replies] == [1, 1]
    h.log.complete_next()
    assert join_b.value.error is ErrorCode.NONE and join_b.value.member_epoch == 2
    assert state(the_group(h)) == after_join == reloaded_state(h)


def test_a_write_is_answered_only_after_the_writes_before_it(h: ConsumerHarness) -> None:
    """A later write reported written first waits for the earlier one: if that one fails, the
    later one, built on it, fails as well instead of having been answered."""
    a = joined(h, "a")
    before = state(the_group(h))
    join_b = h.cg_heartbeat(Consumer(h, "b", ("t",)).request())
    revoke_a = h.cg_heartbeat(a.request())
    h.log.complete_next(index=1)
    assert not revoke_a.done
    h.log.complete_next(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert join_b.value.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert revoke_a.value.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert state(the_group(h)) == before


def test_writes_completed_in_order_are_answered_in_order(h: ConsumerHarness) -> None:
    a = joined(h, "a")
    join_b = h.cg_heartbeat(Consumer(h, "b", ("t",)).request())
    revoke_a = h.cg_heartbeat(a.request())
    h.log.complete_next(index=1)
    assert not join_b.done and not revoke_a.done
    h.log.complete_next()
    assert join_b.value.error is ErrorCode.NONE
    assert revoke_a.value.error is ErrorCode.NONE and len(partitions(revoke_a.value)) == 3
    assert state(the_group(h)) == reloaded_state(h)


def test_a_write_that_may_be_in_the_log_keeps_the_writes_after_it(h: ConsumerHarness) -> None:
    """A timeout waiting for the replicas leaves the records in the log: nothing is taken back
    (as in Kafka), the member is told to retry and the later write stands."""
    a = joined(h, "a")
    join_b = h.cg_heartbeat(Consumer(h, "b", ("t",)).request())
    revoke_a = h.cg_heartbeat(a.request())
    applied = state(the_group(h))
    h.log.complete_next(ErrorCode.REQUEST_TIMED_OUT)
    assert join_b.value.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert not revoke_a.done
    h.log.complete_next()
    assert revoke_a.value.error is ErrorCode.NONE
    assert state(the_group(h)) == applied


def test_a_heartbeat_with_nothing_to_write_waits_for_the_write_it_read(h: ConsumerHarness) -> None:
    """Kafka answers such a heartbeat after the last pending write, and fails it with that write."""
    joined(h, "a")
    b = Consumer(h, "b", ("t",))
    join_b = h.cg_heartbeat(b.request())
    b.epoch = 2
    replies = [h.cg_heartbeat(b.request()), h.cg_heartbeat(b.request())]
    assert len(h.log.deferred) == 2  # the join, b's previous epoch; the last one wrote nothing
    assert not replies[1].done
    h.log.complete_next()
    assert join_b.value.error is ErrorCode.NONE and not replies[1].done
    h.log.complete_next(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert replies[0].value.error is replies[1].value.error is ErrorCode.NOT_COORDINATOR
    assert the_group(h).member("b").previous_member_epoch == 0  # type: ignore[union-attr]


def test_a_failed_fencing_fails_the_heartbeats_built_on_it(h: ConsumerHarness) -> None:
    """The session timer's writes are in the same order as the heartbeats' writes."""
    a = joined(h, "a")
    b = Consumer(h, "b", ("t",))
    take(b, written(h, h.cg_heartbeat(b.request())))
    h.advance(SESSION_MS // 2)
    take(a, written(h, h.cg_heartbeat(a.request())))
    before = state(the_group(h))
    h.advance(SESSION_MS // 2 + 1)  # b's session expires: it is fenced, the write waits
    assert not the_group(h).has_member("b") and len(h.log.deferred) == 1
    rebalance_a = h.cg_heartbeat(a.request())
    h.log.complete_next(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert rebalance_a.value.error is ErrorCode.NOT_COORDINATOR
    assert state(the_group(h)) == before


# -- failures reported at once ----------------------------------------------------------------------


def test_a_write_the_log_refuses_is_taken_back_before_the_next_heartbeat(h: ConsumerHarness) -> None:
    """The log refuses a batch (here too large) before ``append`` returns: the join is taken back
    at once, and a's heartbeat right after it is computed from the group without it."""
    a = joined(h, "a")
    before = state(the_group(h))
    h.log.fail_with = ErrorCode.MESSAGE_TOO_LARGE
    refused = h.cg_heartbeat(Consumer(h, "b", ("t",)).request())
    assert refused.value.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert state(the_group(h)) == before
    h.log.fail_with = None
    result = take(a, h.cg_heartbeat(a.request()))
    assert (result.member_epoch, len(partitions(result))) == (1, 6)
    assert not h.log.deferred
    assert state(the_group(h)) == before == reloaded_state(h)


def test_a_refused_write_leaves_the_earlier_writes_in_flight(h: ConsumerHarness) -> None:
    a = joined(h, "a")
    join_b = h.cg_heartbeat(Consumer(h, "b", ("t",)).request())
    after_join = state(the_group(h))
    h.log.fail_with = ErrorCode.RECORD_LIST_TOO_LARGE
    refused = h.cg_heartbeat(a.request())
    assert refused.value.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert state(the_group(h)) == after_join
    h.log.fail_with = None
    h.log.complete_all()
    assert join_b.value.error is ErrorCode.NONE
    assert state(the_group(h)) == after_join == reloaded_state(h)
