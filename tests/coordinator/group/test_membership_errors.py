"""The error each membership path answers, and when (Kafka's GroupCoordinator checks, in order)."""

from __future__ import annotations

import pytest

from coordinator.group import GroupState, JoinProtocol, MemberIdentity
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import SESSION_MS, Harness, config, consumer_protocols

E = ErrorCode


# -- coordinator checks ---------------------------------------------------------------------------


def test_membership_apis_need_a_group_id() -> None:
    h = Harness()
    assert h.join("").value.error is E.INVALID_GROUP_ID
    assert h.sync("", "m", 1).value.error is E.INVALID_GROUP_ID
    assert h.heartbeat("", "m", 1) is E.INVALID_GROUP_ID
    assert h.coordinator.leave_group("", [MemberIdentity("m")]).error is E.INVALID_GROUP_ID


def test_groups_of_partitions_not_led_here_get_not_coordinator() -> None:
    h = Harness(load=False)
    assert h.join().value.error is E.NOT_COORDINATOR
    assert h.heartbeat("group", "m", 1) is E.NOT_COORDINATOR
    assert h.sync("group", "m", 1).value.error is E.NOT_COORDINATOR
    assert h.commit().value == {("topic", 0): E.NOT_COORDINATOR}


def test_while_loading_joins_wait_heartbeats_pass_and_syncs_rejoin() -> None:
    h = Harness(load=False)
    h.coordinator.begin_loading(0)
    assert h.join().value.error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("group", "m", 1) is E.NONE
    assert h.sync("group", "m", 1).value.error is E.REBALANCE_IN_PROGRESS
    assert h.coordinator.fetch_offsets("group").error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coordinator.list_groups().error is E.COORDINATOR_LOAD_IN_PROGRESS


def test_after_shutdown_the_coordinator_is_not_available() -> None:
    h = Harness()
    h.coordinator.shutdown()
    assert h.join().value.error is E.COORDINATOR_NOT_AVAILABLE
    assert h.coordinator.list_groups().error is E.COORDINATOR_NOT_AVAILABLE


# -- JoinGroup ------------------------------------------------------------------------------------


@pytest.mark.parametrize("session_ms", [5999, 1_800_001])
def test_session_timeout_outside_the_broker_bounds_is_refused(session_ms: int) -> None:
    h = Harness(config(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=1_800_000))
    reply = h.join(session_ms=session_ms, member_id="anything")
    assert reply.value.error is E.INVALID_SESSION_TIMEOUT
    assert reply.value.member_id == "anything"
    assert h.coordinator.group("group") is None


def test_first_join_of_v4_clients_hands_out_a_member_id() -> None:
    h = Harness()
    first = h.join(client_id="consumer-1")
    assert first.value.error is E.MEMBER_ID_REQUIRED
    assert first.value.member_id == "consumer-1-id1"
    assert first.value.generation_id == -1
    group = h.coordinator.group("group")
    assert group.state is GroupState.EMPTY and group.is_pending_member("consumer-1-id1")
    second = h.join(member_id=first.value.member_id)
    h.settle()
    assert second.value.error is E.NONE and second.value.member_id == "consumer-1-id1"


def test_older_clients_join_in_one_step() -> None:
    h = Harness()
    reply = h.join(require_known_member_id=False)
    h.settle()
    assert reply.value.error is E.NONE and reply.value.member_id == "client-id1"


def test_a_pending_member_holds_the_join_phase_until_it_joins_or_expires() -> None:
    h = Harness()
    (member,) = h.stable_group(1, session_ms=60_000)
    pending = h.join()
    assert pending.value.error is E.MEMBER_ID_REQUIRED
    rejoin = h.join("group", member.member_id, session_ms=60_000)  # starts a rebalance
    assert not rejoin.done  # everyone known rejoined, but the pending member may still come
    h.advance(SESSION_MS)  # the pending member's session ends
    assert rejoin.value.generation_id == 2
    assert not h.coordinator.group("group").is_pending_member(pending.value.member_id)
    assert h.join(member_id=pending.value.member_id).value.error is E.UNKNOWN_MEMBER_ID


def test_a_pending_member_may_leave() -> None:
    h = Harness()
    pending = h.join()
    result = h.coordinator.leave_group("group", [MemberIdentity(pending.value.member_id)])
    assert [m.error for m in result.members] == [E.NONE]
    assert not h.coordinator.group("group").is_pending_member(pending.value.member_id)
    assert h.heartbeats.num_delayed == 0


def test_join_with_a_member_id_for_a_missing_group_is_unknown_member() -> None:
    h = Harness()
    assert h.join(member_id="ghost").value.error is E.UNKNOWN_MEMBER_ID
    assert h.coordinator.group("group") is None


def test_join_with_an_unknown_member_id_is_unknown_member() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.join(member_id="ghost").value.error is E.UNKNOWN_MEMBER_ID


def test_a_different_protocol_type_is_inconsistent() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.join(protocol_type="connect").value.error is E.INCONSISTENT_GROUP_PROTOCOL


def test_no_protocol_in_common_is_inconsistent() -> None:
    h = Harness()
    h.stable_group(1)
    reply = h.join(protocols=consumer_protocols(names=("sticky",)))
    assert reply.value.error is E.INCONSISTENT_GROUP_PROTOCOL


def test_an_empty_group_needs_a_protocol_type_and_protocols() -> None:
    h = Harness()
    assert h.join(protocol_type="").value.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=()).value.error is E.INCONSISTENT_GROUP_PROTOCOL


def test_an_existing_member_with_an_unusable_protocol_is_inconsistent() -> None:
    h = Harness()
    _, follower = h.stable_group(2)
    reply = h.join(member_id=follower.member_id, protocols=(JoinProtocol("other", b""),))
    assert reply.value.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert reply.value.member_id == follower.member_id


def test_group_max_size_refuses_new_members_of_a_full_group() -> None:
    h = Harness(config(group_max_size=2))
    h.stable_group(2)
    reply = h.join()
    assert reply.value.error is E.GROUP_MAX_SIZE_REACHED and reply.value.member_id == ""
    assert h.coordinator.group("group").state is GroupState.STABLE


def test_group_max_size_counts_rejoined_members_while_preparing_a_rebalance() -> None:
    h = Harness(config(group_max_size=2))
    leader, follower = h.stable_group(2, session_ms=60_000)
    h.join(member_id=leader.member_id, session_ms=60_000)  # rebalance; one member rejoined
    newcomer = h.join(session_ms=60_000)  # one awaiting < 2: accepted (as a pending member)
    assert newcomer.value.error is E.MEMBER_ID_REQUIRED
    joined = h.join(member_id=newcomer.value.member_id, session_ms=60_000)
    assert not joined.done
    late = h.join(member_id=follower.member_id, session_ms=60_000)  # two already rejoined: cut
    assert late.value.error is E.GROUP_MAX_SIZE_REACHED
    assert not h.coordinator.group("group").has(follower.member_id)


# -- SyncGroup ------------------------------------------------------------------------------------


def test_sync_checks_member_generation_and_protocol() -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    assert h.sync("missing", "m", 1).value.error is E.UNKNOWN_MEMBER_ID
    assert h.sync("group", "ghost", 1).value.error is E.UNKNOWN_MEMBER_ID
    assert h.sync("group", leader.member_id, 7).value.error is E.ILLEGAL_GENERATION
    bad_type = h.sync("group", leader.member_id, 1, protocol_type="connect")
    assert bad_type.value.error is E.INCONSISTENT_GROUP_PROTOCOL
    bad_name = h.sync("group", leader.member_id, 1, protocol_name="roundrobin")
    assert bad_name.value.error is E.INCONSISTENT_GROUP_PROTOCOL
    ok = h.sync("group", leader.member_id, 1, protocol_type="consumer", protocol_name="range")
    assert ok.value.error is E.NONE


def test_sync_during_preparing_rebalance_asks_to_rejoin() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.join(member_id=leader.member_id)
    assert h.sync("group", follower.member_id, 1).value.error is E.REBALANCE_IN_PROGRESS


def test_a_failed_assignment_write_answers_every_parked_sync_and_rebalances() -> None:
    h = Harness()
    replies = [h.join_new(), h.join_new()]
    h.settle()
    leader, follower = (r.value for r in replies)
    parked = h.sync("group", follower.member_id, 1)
    h.log.fail_with = E.NOT_LEADER_OR_FOLLOWER
    leader_sync = h.sync("group", leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
    assert leader_sync.value.error is E.NOT_COORDINATOR
    assert parked.value.error is E.NOT_COORDINATOR and parked.value.protocol_name is None
    assert h.coordinator.group("group").state is GroupState.PREPARING_REBALANCE


@pytest.mark.parametrize(
    ("log_error", "answered"),
    [
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
        (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
        (E.REQUEST_TIMED_OUT, E.REBALANCE_IN_PROGRESS),
        (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
        (E.CORRUPT_MESSAGE, E.CORRUPT_MESSAGE),
    ],
)
def test_assignment_write_errors_are_mapped_as_kafka_maps_them(
    log_error: ErrorCode, answered: ErrorCode
) -> None:
    h = Harness()
    (reply,) = [h.join_new()]
    h.settle()
    h.log.fail_with = log_error
    assert h.sync("group", reply.value.member_id, 1, {}).value.error is answered


def test_the_assignment_is_answered_only_once_durable() -> None:
    h = Harness(defer_log=True)
    replies = [h.join_new(), h.join_new()]
    h.settle()
    leader, follower = (r.value for r in replies)
    parked = h.sync("group", follower.member_id, 1)
    leader_sync = h.sync("group", leader.member_id, 1, {follower.member_id: b"F"})
    assert not leader_sync.done and not parked.done
    assert h.coordinator.group("group").state is GroupState.COMPLETING_REBALANCE
    h.log.complete_next()
    assert parked.value.assignment == b"F" and leader_sync.value.assignment == b""
    assert h.coordinator.group("group").state is GroupState.STABLE


def test_a_late_assignment_write_for_an_old_generation_changes_nothing() -> None:
    h = Harness(defer_log=True)
    replies = [h.join_new(), h.join_new()]
    h.settle()
    leader, follower = (r.value for r in replies)
    leader_sync = h.sync("group", leader.member_id, 1, {})
    h.join(member_id=follower.member_id, protocols=consumer_protocols("changed"))  # rebalance meanwhile
    assert leader_sync.value.error is E.REBALANCE_IN_PROGRESS
    h.log.complete_next()
    assert h.coordinator.group("group").state is GroupState.PREPARING_REBALANCE


def test_a_repeated_sync_replaces_the_parked_one() -> None:
    h = Harness()
    replies = [h.join_new(), h.join_new()]
    h.settle()
    follower = replies[1].value
    first, second = h.sync("group", follower.member_id, 1), h.sync("group", follower.member_id, 1)
    assert first.value.error is E.REBALANCE_IN_PROGRESS and not second.done


# -- Heartbeat ------------------------------------------------------------------------------------


def test_heartbeat_errors() -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    assert h.heartbeat("missing", leader.member_id, 1) is E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("group", "ghost", 1) is E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("group", leader.member_id, 0) is E.ILLEGAL_GENERATION
    assert h.heartbeat("group", leader.member_id, 1) is E.NONE


def test_heartbeat_keeps_a_member_alive_indefinitely() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    for _ in range(20):
        h.advance(SESSION_MS - 1)
        assert h.heartbeat("group", member.member_id, 1) is E.NONE
    assert h.coordinator.group("group").has(member.member_id)


# -- LeaveGroup -----------------------------------------------------------------------------------


def test_leave_reports_each_member() -> None:
    h = Harness()
    _leader, follower = h.stable_group(2)
    result = h.coordinator.leave_group(
        "group", [MemberIdentity(follower.member_id), MemberIdentity("ghost"), MemberIdentity("", "no-such")]
    )
    assert result.error is E.NONE
    assert [(m.member_id, m.error) for m in result.members] == [
        (follower.member_id, E.NONE),
        ("ghost", E.UNKNOWN_MEMBER_ID),
        ("", E.UNKNOWN_MEMBER_ID),
    ]


def test_leave_of_a_missing_group_reports_unknown_members() -> None:
    h = Harness()
    result = h.coordinator.leave_group("nope", [MemberIdentity("a")])
    assert result.error is E.NONE and [m.error for m in result.members] == [E.UNKNOWN_MEMBER_ID]


def test_a_member_waiting_in_join_that_leaves_is_answered() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    parked = h.join(member_id=leader.member_id)
    h.coordinator.leave_group("group", [MemberIdentity(leader.member_id)])
    assert parked.value.error is E.UNKNOWN_MEMBER_ID and parked.value.member_id == ""
    assert h.coordinator.group("group").has(follower.member_id)
