"""Full rebalance flows on simulated time: join, leader election, sync, rejoin, leave, timeouts."""

from __future__ import annotations

import asyncio

from coordinator.group import GroupState, JoinGroupRequest, JoinGroupResult, MemberIdentity
from coordinator.group.rebalance import NEW_MEMBER_JOIN_TIMEOUT_MS
from protocol.consumer_offsets import GroupMetadataKey, decode_group_metadata_value, decode_key
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import REBALANCE_MS, SESSION_MS, Harness, config, consumer_protocols

NONE = ErrorCode.NONE


def group_records(h: Harness) -> list:
    return [
        decode_group_metadata_value(r.value).data
        for r in h.log.records(0)
        if isinstance(decode_key(r.key), GroupMetadataKey) and r.value is not None
    ]


def test_two_members_elect_a_leader_and_receive_their_assignments() -> None:
    h = Harness()
    first, second = h.join_new(), h.join_new()
    assert not first.done and not second.done  # parked until the join phase completes
    h.settle()
    leader, follower = first.value, second.value
    assert (leader.error, follower.error) == (NONE, NONE)
    assert leader.generation_id == follower.generation_id == 1
    assert leader.leader_id == follower.leader_id == leader.member_id
    assert leader.protocol_type == "consumer" and leader.protocol_name == "range"
    assert [m.member_id for m in leader.members] == [leader.member_id, follower.member_id]
    assert follower.members == ()
    assert h.coordinator.group("group").state is GroupState.COMPLETING_REBALANCE

    follower_sync = h.sync("group", follower.member_id, 1)
    assert not follower_sync.done  # waits for the leader's assignment
    leader_sync = h.sync("group", leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
    assert leader_sync.value.assignment == b"L" and follower_sync.value.assignment == b"F"
    assert leader_sync.value.protocol_name == "range" and leader_sync.value.protocol_type == "consumer"
    assert h.coordinator.group("group").state is GroupState.STABLE
    stored = group_records(h)[-1]
    assert stored.generation == 1 and stored.leader == leader.member_id
    assert [(m.member_id, m.assignment) for m in stored.members] == [
        (leader.member_id, b"L"),
        (follower.member_id, b"F"),
    ]


def test_members_the_leader_leaves_out_get_an_empty_assignment() -> None:
    h = Harness()
    replies = [h.join_new(), h.join_new()]
    h.settle()
    leader, follower = (r.value for r in replies)
    h.sync("group", leader.member_id, 1, {leader.member_id: b"L"})
    assert h.sync("group", follower.member_id, 1).value.assignment == b""


def test_a_new_member_triggers_a_rebalance_that_all_members_rejoin() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    newcomer = h.join_new()
    group = h.coordinator.group("group")
    assert group.state is GroupState.PREPARING_REBALANCE and not newcomer.done
    assert h.heartbeat("group", leader.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat("group", follower.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.sync("group", follower.member_id, 1).value.error is ErrorCode.REBALANCE_IN_PROGRESS

    rejoin_leader = h.join("group", leader.member_id)
    assert not rejoin_leader.done
    rejoin_follower = h.join("group", follower.member_id)  # the last one: the join phase completes
    results = [rejoin_leader.value, rejoin_follower.value, newcomer.value]
    assert {r.generation_id for r in results} == {2}
    assert {r.error for r in results} == {NONE}
    assert len(rejoin_leader.value.members) == 3
    h.sync_all("group", results)
    assert group.state is GroupState.STABLE and group.generation_id == 2
    assert h.heartbeat("group", newcomer.value.member_id, 2) is NONE


def test_a_member_leaving_triggers_a_rebalance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    result = h.coordinator.leave_group("group", [MemberIdentity(follower.member_id)])
    assert result.error is NONE and [m.error for m in result.members] == [NONE]
    group = h.coordinator.group("group")
    assert group.state is GroupState.PREPARING_REBALANCE
    assert not group.has(follower.member_id)
    rejoin = h.join("group", leader.member_id)
    assert rejoin.value.generation_id == 2 and [m.member_id for m in rejoin.value.members] == [
        leader.member_id
    ]


def test_the_leader_leaving_hands_leadership_to_a_rejoining_member() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.coordinator.leave_group("group", [MemberIdentity(leader.member_id)])
    rejoin = h.join("group", follower.member_id)
    assert rejoin.value.leader_id == follower.member_id


def test_last_member_leaving_makes_the_group_empty_and_writes_it() -> None:
    h = Harness()
    (only,) = h.stable_group(1)
    h.coordinator.leave_group("group", [MemberIdentity(only.member_id)])
    group = h.coordinator.group("group")
    assert group.state is GroupState.EMPTY and group.generation_id == 2
    stored = group_records(h)[-1]
    assert stored.generation == 2 and stored.members == [] and stored.protocol is None
    assert stored.current_state_timestamp == h.now


def test_session_expiry_removes_the_silent_member_and_rebalances() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.advance(SESSION_MS // 2)
    assert h.heartbeat("group", leader.member_id, 1) is NONE
    h.advance(SESSION_MS // 2)  # the follower's session ends
    group = h.coordinator.group("group")
    assert not group.has(follower.member_id)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("group", follower.member_id, 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("group", leader.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS


def test_session_expires_exactly_at_the_session_timeout() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    h.advance(SESSION_MS - 1)
    assert h.coordinator.group("group").has(member.member_id)
    h.advance(1)
    assert not h.coordinator.group("group").has(member.member_id)
    assert h.coordinator.group("group").state is GroupState.EMPTY


def test_rebalance_timeout_removes_dynamic_members_that_did_not_rejoin() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    newcomer = h.join_new()
    rejoin = h.join("group", leader.member_id)
    # The follower keeps heartbeating (so its session lives) but never rejoins.
    for _ in range(REBALANCE_MS // 5000):
        h.advance(5000)
        if h.coordinator.group("group").state is GroupState.PREPARING_REBALANCE:
            assert h.heartbeat("group", follower.member_id, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert rejoin.value.generation_id == 2 and newcomer.value.generation_id == 2
    assert {m.member_id for m in rejoin.value.members} == {leader.member_id, newcomer.value.member_id}
    assert h.heartbeat("group", follower.member_id, 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_join_phase_completes_exactly_at_the_rebalance_timeout() -> None:
    h = Harness()
    leader, _follower = h.stable_group(2, session_ms=2 * REBALANCE_MS)  # the follower's session outlives it
    rejoin = h.join("group", leader.member_id, session_ms=2 * REBALANCE_MS)
    h.advance(REBALANCE_MS - 1)
    assert not rejoin.done
    h.advance(1)
    assert rejoin.value.generation_id == 2


def test_a_leader_that_does_not_rejoin_is_replaced_by_one_that_did() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    rejoin = h.join("group", follower.member_id, protocols=consumer_protocols("other"))  # metadata change
    h.advance(REBALANCE_MS)
    assert rejoin.value.leader_id == follower.member_id
    assert [m.member_id for m in rejoin.value.members] == [follower.member_id]
    assert not h.coordinator.group("group").has(leader.member_id)


def test_initial_rebalance_delay_coalesces_joins() -> None:
    h = Harness(config(group_initial_rebalance_delay_ms=3000))
    first = h.join_new()
    h.advance(2000)
    second = h.join_new()
    h.advance(1000)  # the first wait ends at 3000, but a member joined meanwhile: wait once more
    assert not first.done and not second.done
    h.advance(2999)
    assert not first.done
    h.advance(1)
    assert first.value.generation_id == second.value.generation_id == 1
    assert len(first.value.members) == 2


def test_initial_rebalance_delay_is_not_cut_short_when_everyone_joined() -> None:
    h = Harness(config(group_initial_rebalance_delay_ms=3000))
    only = h.join_new()
    h.advance(2999)
    assert not only.done
    h.advance(1)
    assert only.value.generation_id == 1


def test_initial_rebalance_delay_never_exceeds_the_rebalance_timeout() -> None:
    h = Harness(config(group_initial_rebalance_delay_ms=3000))
    first = h.join_new(rebalance_ms=5000)  # at most 3000 + 2000
    for _ in range(10):
        h.advance(1000)
        if first.done:
            break
        h.join_new(rebalance_ms=5000)
    assert first.done and h.now - 1_000_000 <= 6000


def test_a_member_that_does_not_sync_in_time_is_removed() -> None:
    h = Harness()
    replies = [h.join_new(), h.join_new()]
    h.settle()
    leader, follower = (r.value for r in replies)
    h.sync("group", leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
    assert h.coordinator.group("group").state is GroupState.STABLE
    for _ in range(REBALANCE_MS // 5000 - 1):
        h.advance(5000)
        assert h.heartbeat("group", leader.member_id, 1) is NONE
        assert h.heartbeat("group", follower.member_id, 1) is NONE  # alive, but never syncs
    h.advance(5000)
    group = h.coordinator.group("group")
    assert not group.has(follower.member_id)
    assert group.state is GroupState.PREPARING_REBALANCE


def test_syncing_in_time_cancels_the_sync_deadline() -> None:
    h = Harness()
    h.stable_group(2)
    before = h.rebalances.num_delayed
    assert before == 0  # every member synced: no sync deadline left


def test_follower_rejoining_a_stable_group_with_same_metadata_gets_the_current_generation() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    again = h.join("group", follower.member_id)
    assert again.value.error is NONE and again.value.generation_id == 1
    assert again.value.leader_id == leader.member_id and again.value.members == ()
    assert h.coordinator.group("group").state is GroupState.STABLE


def test_leader_rejoining_a_stable_group_forces_a_rebalance() -> None:
    h = Harness()
    leader, _follower = h.stable_group(2)
    h.join("group", leader.member_id)
    assert h.coordinator.group("group").state is GroupState.PREPARING_REBALANCE


def test_follower_changing_its_metadata_forces_a_rebalance() -> None:
    h = Harness()
    _leader, follower = h.stable_group(2)
    h.join("group", follower.member_id, protocols=consumer_protocols("new-topic"))
    assert h.coordinator.group("group").state is GroupState.PREPARING_REBALANCE


def test_rejoin_while_completing_rebalance_repeats_the_answer() -> None:
    h = Harness()
    replies = [h.join_new(), h.join_new()]
    h.settle()
    leader, follower = (r.value for r in replies)
    again_leader = h.join("group", leader.member_id)
    again_follower = h.join("group", follower.member_id)
    assert again_leader.value.generation_id == 1 and len(again_leader.value.members) == 2
    assert again_follower.value.members == ()
    assert h.coordinator.group("group").state is GroupState.COMPLETING_REBALANCE


def test_changed_metadata_while_completing_rebalance_restarts_it_and_cancels_parked_syncs() -> None:
    h = Harness()
    replies = [h.join_new(), h.join_new()]
    h.settle()
    leader, follower = (r.value for r in replies)
    parked = h.sync("group", follower.member_id, 1)
    h.join("group", leader.member_id, protocols=consumer_protocols("changed"))
    assert parked.value.error is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.coordinator.group("group").state is GroupState.PREPARING_REBALANCE


def test_a_new_member_waiting_too_long_to_join_is_dropped() -> None:
    h = Harness(config(group_max_session_timeout_ms=3_600_000))
    leader, _ = h.stable_group(2, rebalance_ms=600_000, session_ms=600_000)
    newcomer = h.join_new(rebalance_ms=600_000, session_ms=600_000)
    h.join("group", leader.member_id, rebalance_ms=600_000, session_ms=600_000)
    h.advance(NEW_MEMBER_JOIN_TIMEOUT_MS)
    assert newcomer.value.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_heartbeats_while_completing_rebalance_are_accepted() -> None:
    h = Harness()
    replies = [h.join_new(), h.join_new()]
    h.settle()
    assert h.heartbeat("group", replies[1].value.member_id, 1) is NONE


def test_protocol_is_chosen_by_vote_among_protocols_everyone_supports() -> None:
    h = Harness()
    a = h.join_new(protocols=consumer_protocols(names=("roundrobin", "range", "sticky")))
    b = h.join_new(protocols=consumer_protocols(names=("range", "roundrobin")))
    c = h.join_new(protocols=consumer_protocols(names=("range", "roundrobin")))
    h.settle()
    assert {r.value.protocol_name for r in (a, b, c)} == {"range"}


async def test_a_handler_awaits_the_answers_through_futures() -> None:
    """The intended wiring: the callback completes an asyncio future the handler awaits."""
    h = Harness()
    loop = asyncio.get_running_loop()
    first: asyncio.Future[JoinGroupResult] = loop.create_future()
    h.coordinator.join_group(join_request(""), first.set_result)
    member_id = (await first).member_id
    second: asyncio.Future[JoinGroupResult] = loop.create_future()
    h.coordinator.join_group(join_request(member_id), second.set_result)
    loop.call_soon(h.settle)  # the join phase ends on the coordinator's timer
    joined = await second
    assert joined.error is NONE and joined.generation_id == 1


def join_request(member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest("group", member_id, "consumer", consumer_protocols(), SESSION_MS, REBALANCE_MS)
