"""Static membership (KIP-345): restarts without rebalances, fencing of the old member id."""

from __future__ import annotations

from coordinator.group import GroupState, JoinProtocol, MemberIdentity
from protocol.consumer_offsets import GroupMetadataKey, decode_group_metadata_value, decode_key
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import REBALANCE_MS, SESSION_MS, Harness, consumer_protocols

E = ErrorCode


def static_group(h: Harness, session_ms: int = SESSION_MS) -> tuple:
    """Two static members, "a" (the leader) and "b", Stable at generation 1."""
    a, b = h.join(instance_id="a", session_ms=session_ms), h.join(instance_id="b", session_ms=session_ms)
    h.settle()
    h.sync_all("group", [a.value, b.value])
    assert h.coordinator.group("group").state is GroupState.STABLE
    return a.value, b.value


def last_group_record(h: Harness):
    records = [r for r in h.log.records(0) if isinstance(decode_key(r.key), GroupMetadataKey)]
    return decode_group_metadata_value(records[-1].value).data


def test_static_members_join_without_the_member_id_round_trip() -> None:
    h = Harness()
    a, b = static_group(h)
    assert a.member_id == "a-id1" and b.member_id == "b-id2"
    assert h.coordinator.group("group").static_members == {"a": "a-id1", "b": "b-id2"}


def test_a_restarted_static_follower_takes_a_new_id_without_a_rebalance() -> None:
    h = Harness()
    a, b = static_group(h)
    restarted = h.join(instance_id="b")
    result = restarted.value
    assert result.error is E.NONE
    assert result.member_id != b.member_id and result.generation_id == 1
    assert result.leader_id == a.member_id and result.members == ()
    group = h.coordinator.group("group")
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert group.get(result.member_id).assignment == f"assignment-{b.member_id}".encode()
    # The old incarnation is fenced everywhere.
    assert h.heartbeat("group", b.member_id, 1, instance_id="b") is E.FENCED_INSTANCE_ID
    assert h.sync("group", b.member_id, 1, instance_id="b").value.error is E.FENCED_INSTANCE_ID
    assert h.commit(member_id=b.member_id, generation=1, instance_id="b").value == {
        ("topic", 0): E.FENCED_INSTANCE_ID
    }
    assert h.join(member_id=b.member_id, instance_id="b").value.error is E.FENCED_INSTANCE_ID
    assert h.heartbeat("group", result.member_id, 1, instance_id="b") is E.NONE
    assert [m.member_id for m in last_group_record(h).members] == [a.member_id, result.member_id]


def test_a_restarted_static_leader_is_told_the_old_leader_id_before_v9() -> None:
    h = Harness()
    a, _ = static_group(h)
    result = h.join(instance_id="a").value
    assert result.leader_id == a.member_id != result.member_id
    assert result.members == () and not result.skip_assignment
    assert h.coordinator.group("group").leader_id == result.member_id


def test_a_restarted_static_leader_is_told_to_skip_the_assignment_from_v9() -> None:
    h = Harness()
    static_group(h)
    result = h.join(instance_id="a", skip_assignment=True).value
    assert result.leader_id == result.member_id and result.skip_assignment
    assert {m.group_instance_id for m in result.members} == {"a", "b"}


def test_the_replacement_is_answered_only_once_written() -> None:
    h = Harness(defer_log=True)
    a = h.join(instance_id="a")
    h.join(instance_id="b")
    h.settle()
    h.sync("group", a.value.member_id, 1, {})
    h.log.complete_all()
    restarted = h.join(instance_id="b")
    assert not restarted.done
    h.log.complete_next()
    assert restarted.value.error is E.NONE


def test_a_failed_replacement_write_restores_the_old_member_id() -> None:
    h = Harness()
    _, b = static_group(h)
    h.log.fail_with = E.NOT_ENOUGH_REPLICAS
    restarted = h.join(instance_id="b", protocols=consumer_protocols("topic", names=("range", "sticky")))
    assert restarted.value.error is E.COORDINATOR_NOT_AVAILABLE
    assert restarted.value.member_id == ""
    group = h.coordinator.group("group")
    assert group.static_members["b"] == b.member_id
    assert group.get(b.member_id).protocol_names == ("range",)
    assert h.heartbeat("group", b.member_id, 1, instance_id="b") is E.NONE


def test_a_static_member_changing_the_selected_protocol_triggers_a_rebalance() -> None:
    h = Harness()
    a = h.join(instance_id="a", protocols=consumer_protocols(names=("range", "sticky")))
    h.settle()
    h.sync_all("group", [a.value])
    rejoined = h.join(instance_id="a", protocols=consumer_protocols(names=("sticky",)))
    assert rejoined.value.generation_id == 2 and rejoined.value.protocol_name == "sticky"


def test_replacing_a_static_member_while_completing_rebalance_rebalances() -> None:
    h = Harness()
    h.join(instance_id="a")
    b = h.join(instance_id="b")
    h.settle()
    parked = h.sync("group", b.value.member_id, 1, instance_id="b")
    h.join(instance_id="b")
    assert parked.value.error is E.FENCED_INSTANCE_ID  # the old incarnation is fenced first
    assert h.coordinator.group("group").state is GroupState.PREPARING_REBALANCE


def test_the_old_incarnation_waiting_in_join_is_fenced() -> None:
    h = Harness()
    a, b = static_group(h)
    parked = h.join(member_id=a.member_id, instance_id="a")  # the leader rejoins: rebalance
    assert not parked.done
    newer = h.join(instance_id="a")
    assert parked.value.error is E.FENCED_INSTANCE_ID and parked.value.member_id == a.member_id
    h.join(member_id=b.member_id, instance_id="b")
    assert newer.value.error is E.NONE and newer.value.generation_id == 2


def test_static_members_that_do_not_rejoin_survive_the_join_phase() -> None:
    """They keep their place (and assignment) through the rebalance; one that neither rejoins nor
    syncs is removed at the sync deadline, a rebalance timeout later."""
    h = Harness()
    session_ms = 2 * REBALANCE_MS
    a, b = static_group(h, session_ms)
    rejoin = h.join(member_id=a.member_id, instance_id="a", session_ms=session_ms)
    h.advance(REBALANCE_MS)
    assert rejoin.value.generation_id == 2  # the join phase ended at the rebalance timeout ...
    group = h.coordinator.group("group")
    assert group.has(b.member_id)  # ... without removing the silent static member
    h.sync("group", rejoin.value.member_id, 2, {})
    h.advance(REBALANCE_MS - 1)
    assert group.has(b.member_id)
    h.advance(1)
    assert not group.has(b.member_id) and group.state is GroupState.PREPARING_REBALANCE


def test_an_unknown_instance_id_is_unknown_member() -> None:
    h = Harness()
    a, _ = static_group(h)
    assert h.heartbeat("group", a.member_id, 1, instance_id="zzz") is E.UNKNOWN_MEMBER_ID


def test_an_administrator_removes_a_static_member_by_instance_id() -> None:
    h = Harness()
    _, b = static_group(h)
    result = h.coordinator.leave_group("group", [MemberIdentity("", "b")])
    assert [(m.group_instance_id, m.error) for m in result.members] == [("b", E.NONE)]
    group = h.coordinator.group("group")
    assert not group.has(b.member_id) and "b" not in group.static_members
    assert group.state is GroupState.PREPARING_REBALANCE


def test_a_fenced_member_cannot_leave_for_its_successor() -> None:
    h = Harness()
    _, b = static_group(h)
    h.join(instance_id="b")
    result = h.coordinator.leave_group("group", [MemberIdentity(b.member_id, "b")])
    assert [m.error for m in result.members] == [E.FENCED_INSTANCE_ID]


def test_static_restart_with_new_metadata_for_the_same_protocol_keeps_the_group_stable() -> None:
    h = Harness()
    static_group(h)
    result = h.join(instance_id="b", protocols=(JoinProtocol("range", b"new"),)).value
    assert result.error is E.NONE
    assert h.coordinator.group("group").get(result.member_id).metadata("range") == b"new"
    assert last_group_record(h).members[1].subscription == b"new"
