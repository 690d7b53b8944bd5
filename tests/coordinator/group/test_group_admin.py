"""ListGroups, DescribeGroups and DeleteGroups."""

from __future__ import annotations

from coordinator.group import GroupState, MemberIdentity
from coordinator.group.results import GroupOverview
from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey, decode_key
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import Harness, Reply, config

E = ErrorCode


def delete(h: Harness, *group_ids: str) -> dict[str, ErrorCode]:
    reply: Reply[dict[str, ErrorCode]] = Reply()
    h.coordinator.delete_groups(group_ids, reply)
    return reply.value


def test_list_groups_filters_by_state_case_insensitively_and_by_type() -> None:
    h = Harness()
    h.stable_group(1, group_id="stable")
    h.commit("manual")
    h.join_new("preparing")
    listed = h.coordinator.list_groups()
    assert listed.error is E.NONE
    assert set(listed.groups) == {
        GroupOverview("stable", "consumer", "Stable"),
        GroupOverview("manual", "", "Empty"),
        GroupOverview("preparing", "consumer", "PreparingRebalance"),
    }
    assert [g.group_id for g in h.coordinator.list_groups(["stable", "EMPTY"]).groups] == ["stable", "manual"]
    assert h.coordinator.list_groups(types=["Classic"]).groups == listed.groups
    assert h.coordinator.list_groups(types=["consumer"]).groups == ()


def test_describe_a_stable_group_shows_metadata_and_assignments() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    described = h.coordinator.describe_group("group")
    assert (described.error, described.state, described.protocol_type, described.protocol) == (
        E.NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.assignment) for m in described.members] == [
        (leader.member_id, f"assignment-{leader.member_id}".encode()),
        (follower.member_id, f"assignment-{follower.member_id}".encode()),
    ]
    assert all(m.metadata and m.client_host == "/127.0.0.1" for m in described.members)


def test_describe_a_rebalancing_group_hides_metadata_and_assignments() -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    h.join(member_id=leader.member_id)
    described = h.coordinator.describe_group("group")
    assert described.state == "PreparingRebalance" and described.protocol == ""
    assert {(m.metadata, m.assignment) for m in described.members} == {(b"", b"")}


def test_describe_an_unknown_group() -> None:
    h = Harness()
    old = h.coordinator.describe_group("nope")
    assert (old.error, old.state, old.members) == (E.NONE, "Dead", ())
    new = h.coordinator.describe_group("nope", api_version=6)
    assert new.error is E.GROUP_ID_NOT_FOUND and new.error_message == "Group nope not found."


def test_describe_reports_coordinator_errors_with_an_empty_state() -> None:
    h = Harness(load=False)
    described = h.coordinator.describe_groups(["g"])[0]
    assert (described.error, described.state) == (E.NOT_COORDINATOR, "")


def test_delete_an_empty_group_and_its_offsets() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    h.commit(member_id=member.member_id, generation=1, offsets={("t", 0): 1, ("t", 1): 2})
    h.coordinator.leave_group("group", [MemberIdentity(member.member_id)])
    assert delete(h, "group") == {"group": E.NONE}
    assert h.coordinator.group("group") is None
    tombstones = [decode_key(r.key) for r in h.log.records(0) if r.value is None]
    assert tombstones == [
        OffsetCommitKey("group", "t", 0),
        OffsetCommitKey("group", "t", 1),
        GroupMetadataKey("group"),
    ]
    assert h.coordinator.fetch_offsets("group", [("t", 0)]).partitions[("t", 0)].offset == -1


def test_delete_refuses_groups_with_members_and_reports_each_group() -> None:
    h = Harness()
    h.stable_group(1, group_id="busy")
    h.commit("manual")
    assert delete(h, "busy", "manual", "missing", "manual") == {
        "busy": E.NON_EMPTY_GROUP,
        "manual": E.NONE,
        "missing": E.GROUP_ID_NOT_FOUND,
    }
    assert h.coordinator.group("busy").state is GroupState.STABLE


def test_delete_of_a_group_elsewhere_is_not_coordinator() -> None:
    h = Harness(config(offsets_topic_num_partitions=2), load=False)
    h.coordinator.load_partition(0, [])
    elsewhere = next(g for g in (f"g{i}" for i in range(20)) if h.coordinator.partition_for(g) == 1)
    assert delete(h, elsewhere) == {elsewhere: E.NOT_COORDINATOR}


def test_delete_is_answered_once_the_tombstones_are_written() -> None:
    h = Harness(defer_log=True)
    h.commit("manual")
    h.log.complete_all()
    reply: Reply[dict[str, ErrorCode]] = Reply()
    h.coordinator.delete_groups(["manual"], reply)
    assert not reply.done
    h.log.complete_next(E.NOT_LEADER_OR_FOLLOWER)  # like Kafka: a lost tombstone is not reported
    assert reply.value == {"manual": E.NONE}


def test_delete_nothing_answers_at_once() -> None:
    h = Harness()
    assert delete(h) == {}
