"""The group handlers end to end, and the membership APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

The whole flow (find the coordinator, join, sync, heartbeat, commit, fetch, describe, list, leave,
delete) runs once per step 0-9, each API at version ``min(min_version + step, max_version)``, so that
every version of every handler serves a real group through the codecs.
"""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from broker.handlers.describe_groups import GROUP_AUTHORIZED_OPERATIONS
from broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from broker.handlers.registry import HandlerRegistry
from coordinator.group import GroupState
from protocol.data import MessageData
from tests.broker.group_handlers_support import (
    CLIENT_ID,
    COORDINATOR,
    LISTENER,
    NONE,
    REBALANCE_MS,
    SESSION_MS,
    E,
    Env,
    commit_body,
    fetch_body,
    fetched,
    heartbeat_body,
    join_body,
    leave_body,
    sync_body,
)


def test_every_handler_declares_its_schemas_full_range() -> None:
    env = Env()
    registry = HandlerRegistry(env.handlers)  # raises if a range is outside the schema's
    ranges = {(r.api_key, r.min_version, r.max_version) for r in registry.api_ranges()}
    assert ranges == {(10, 0, 6), (11, 0, 9), (14, 0, 5), (12, 0, 4), (13, 0, 5), (8, 2, 9), (9, 1, 9)} | {
        (16, 0, 5),
        (15, 0, 5),
        (42, 0, 2),
        (47, 0, 0),
    }


@pytest.mark.parametrize("step", range(10))
async def test_a_whole_group_lifecycle_at_every_version(step: int) -> None:
    env = Env()
    v = {h.api_key: min(h.min_version + step, h.max_version) for h in env.handlers}
    vf, vj, vs, vh, vl, vc, vo, vls, vd, vdel = (
        v[h.api_key]
        for h in (
            env.find_coordinator,
            env.join_group,
            env.sync_group,
            env.heartbeat,
            env.leave_group,
            env.offset_commit,
            env.offset_fetch,
            env.list_groups,
            env.describe_groups,
            env.delete_groups,
        )
    )

    # FindCoordinator: one key up to v3, a batch from v4
    if vf < 4:
        found = await env.call(env.find_coordinator, vf, {"key": "group", "key_type": 0})
        assert (found.error_code, found.node_id, found.host, found.port) == (NONE, 7, COORDINATOR.host, 19092)
    else:
        found = await env.call(env.find_coordinator, vf, {"key_type": 0, "coordinator_keys": ["group"]})
        (coordinator,) = found.coordinators
        assert (coordinator.key, coordinator.error_code, coordinator.node_id) == ("group", NONE, 7)
    assert env.locator.calls == [("group", LISTENER)]

    # JoinGroup: two members; from v4 each first gets its member id (MEMBER_ID_REQUIRED)
    if vj >= 4:
        ids = [(await env.join(vj)).member_id for _ in range(2)]
        tasks = [env.start(env.join_group, vj, join_body("group", member_id)) for member_id in ids]
    else:
        tasks = [env.start(env.join_group, vj, join_body("group")) for _ in range(2)]
    joined = await env.finish(*tasks)
    assert all(j.error_code == NONE and j.generation_id == 1 and j.protocol_name == "range" for j in joined)
    leader = next(j for j in joined if j.member_id == j.leader)
    follower = next(j for j in joined if j.member_id != j.leader)
    assert {m.member_id for m in leader.members} == {leader.member_id, follower.member_id}
    assert follower.members == [] and not leader.skip_assignment
    assert leader.protocol_type == ("consumer" if vj >= 7 else None)  # absent before v7

    # SyncGroup: the leader's assignment, then the follower's
    assignments = {j.member_id: f"assigned-{j.member_id}".encode() for j in joined}
    synced = await env.call(env.sync_group, vs, sync_body("group", leader.member_id, 1, assignments))
    other = await env.call(env.sync_group, vs, sync_body("group", follower.member_id, 1))
    assert (synced.error_code, synced.assignment) == (NONE, assignments[leader.member_id])
    assert (other.error_code, other.assignment) == (NONE, assignments[follower.member_id])
    assert (other.protocol_type, other.protocol_name) == (("consumer", "range") if vs >= 5 else (None, None))

    # Heartbeat
    for member in (leader, follower):
        beat = await env.call(env.heartbeat, vh, heartbeat_body("group", member.member_id, 1))
        assert beat.error_code == NONE

    # OffsetCommit by a member of the generation, then OffsetFetch
    offsets = {("orders", 0): 10, ("orders", 1): 20}
    body = commit_body("group", offsets, member_id=leader.member_id, generation=1)
    commit = await env.call(env.offset_commit, vc, body)
    assert {tp: error for tp, error in _commit_errors(commit).items()} == dict.fromkeys(offsets, NONE)
    fetch = await env.call(env.offset_fetch, vo, fetch_body(vo, {"group": list(offsets)}))
    epoch = 5 if vc >= 6 and vo >= 5 else -1
    assert fetched(fetch, vo) == (NONE, {tp: (o, epoch, "meta", NONE) for tp, o in offsets.items()})

    # DescribeGroups and ListGroups while Stable
    described = await env.call(
        env.describe_groups, vd, {"groups": ["group"], "include_authorized_operations": True}
    )
    (group,) = described.groups
    assert (group.error_code, group.group_state, group.protocol_type, group.protocol_data) == (
        NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert {(m.member_id, m.client_id, m.client_host, m.member_assignment) for m in group.members} == {
        (j.member_id, CLIENT_ID, "/10.1.2.3", assignments[j.member_id]) for j in joined
    }
    ops = GROUP_AUTHORIZED_OPERATIONS if vd >= 3 else AUTHORIZED_OPERATIONS_OMITTED
    assert group.authorized_operations == ops
    listed = await env.call(env.list_groups, vls, {"states_filter": [], "types_filter": []})
    assert listed.error_code == NONE
    assert [(g.group_id, g.protocol_type) for g in listed.groups] == [("group", "consumer")]
    if vls >= 4:
        assert listed.groups[0].group_state == "Stable"
    if vls >= 5:
        assert listed.groups[0].group_type == "classic"

    # LeaveGroup: one member per request up to v2, both at once from v3
    if vl < 3:
        for member in (leader, follower):
            left = await env.call(env.leave_group, vl, leave_body("group", (member.member_id, None)))
            assert left.error_code == NONE
    else:
        members = ((leader.member_id, None), (follower.member_id, None))
        left = await env.call(env.leave_group, vl, leave_body("group", *members))
        assert left.error_code == NONE
        assert [(m.member_id, m.error_code) for m in left.members] == [(m, NONE) for m, _ in members]
    assert env.coordinator.group("group").state is GroupState.EMPTY

    # DeleteGroups: the group and its offsets go
    deleted = await env.call(env.delete_groups, vdel, {"groups_names": ["group"]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("group", NONE)]
    gone = await env.call(env.describe_groups, vd, {"groups": ["group"]})
    assert (gone.groups[0].error_code, gone.groups[0].group_state) == (NONE, "Dead")
    assert (await env.call(env.list_groups, vls, {})).groups == []
    refetched = await env.call(env.offset_fetch, vo, fetch_body(vo, {"group": list(offsets)}))
    assert fetched(refetched, vo) == (NONE, {tp: (-1, -1, "", NONE) for tp in offsets})


def _commit_errors(response: MessageData) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


# -- JoinGroup ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(4, 10))
async def test_a_new_member_needs_two_steps_from_v4(version: int) -> None:
    env = Env()
    first = await env.join(version)
    assert first.error_code == int(E.MEMBER_ID_REQUIRED)
    assert first.member_id.startswith(f"{CLIENT_ID}-") and first.generation_id == -1
    assert env.coordinator.group("group").state is GroupState.EMPTY  # pending, not a member yet
    second = await env.join(version, member_id=first.member_id)
    assert (second.error_code, second.member_id, second.generation_id) == (NONE, first.member_id, 1)


@pytest.mark.parametrize("version", range(4))
async def test_a_new_member_joins_in_one_step_before_v4(version: int) -> None:
    env = Env()
    joined = await env.join(version)
    assert (joined.error_code, joined.generation_id, joined.leader) == (NONE, 1, joined.member_id)
    assert joined.member_id.startswith(f"{CLIENT_ID}-")
    assert [m.member_id for m in joined.members] == [joined.member_id]


@pytest.mark.parametrize("version", range(5, 10))
async def test_a_static_member_joins_in_one_step(version: int) -> None:
    env = Env()
    joined = await env.join(version, instance_id="instance-a")
    assert (joined.error_code, joined.generation_id) == (NONE, 1)
    assert joined.member_id.startswith("instance-a-")
    assert [(m.member_id, m.group_instance_id) for m in joined.members] == [(joined.member_id, "instance-a")]


async def test_v0_uses_the_session_timeout_as_rebalance_timeout() -> None:
    env = Env()
    joined = await env.join(0)
    member = env.coordinator.group("group").get(joined.member_id)
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (SESSION_MS, SESSION_MS)
    later = await env.join_member(1, "other")
    member = env.coordinator.group("other").get(later.member_id)
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (SESSION_MS, REBALANCE_MS)


@pytest.mark.parametrize("version", [0, 6, 7, 9])
async def test_a_failed_join_has_no_protocol_name_in_the_form_of_its_version(version: int) -> None:
    env = Env()
    body = join_body("group", session_ms=1)  # below group.min.session.timeout.ms
    failed = await env.call(env.join_group, version, body)
    assert (failed.error_code, failed.generation_id, failed.leader) == (
        int(E.INVALID_SESSION_TIMEOUT),
        -1,
        "",
    )
    assert failed.protocol_name == ("" if version < 7 else None)


async def test_v9_lets_the_coordinator_skip_the_assignment_of_a_static_leader() -> None:
    """KIP-814: a static leader that rejoins a Stable group unchanged is told it is the leader but
    that the assignment need not be computed again."""
    env = Env()
    first = await env.join(9, instance_id="a")
    await env.call(env.sync_group, 5, sync_body("group", first.member_id, 1, {first.member_id: b"x"}))
    rejoined = await env.join(9, instance_id="a")
    assert rejoined.error_code == NONE and rejoined.skip_assignment
    assert rejoined.leader == rejoined.member_id != first.member_id


async def test_a_join_cancelled_while_waiting_leaves_the_coordinator_undisturbed() -> None:
    env = Env()
    member_id = (await env.join(9)).member_id
    task = env.start(env.join_group, 9, join_body("group", member_id))
    await asyncio.sleep(0)
    task.cancel()
    with capture_logs() as logs:
        env.harness.settle()  # the join phase completes: the answer finds the request gone
    assert not [entry for entry in logs if entry["log_level"] in ("error", "exception")]
    with pytest.raises(asyncio.CancelledError):
        await task
    assert env.coordinator.group("group").state is GroupState.COMPLETING_REBALANCE


async def test_join_errors_come_from_the_coordinator() -> None:
    env = Env(num_partitions=4, load=False)
    elsewhere = env.own_only("group")
    assert (await env.join(9, elsewhere)).error_code == int(E.NOT_COORDINATOR)
    assert (await env.join(9, "")).error_code == int(E.INVALID_GROUP_ID)


# -- SyncGroup ----------------------------------------------------------------------------------------


async def test_sync_v5_requires_protocol_type_and_name() -> None:
    env = Env()
    joined = await env.join_member(9)
    for missing in ({"protocol_type": None}, {"protocol_name": None}):
        body = {**sync_body("group", joined.member_id, 1, {joined.member_id: b"a"}), **missing}
        answer = await env.call(env.sync_group, 5, body)
        assert (answer.error_code, answer.assignment) == (int(E.INCONSISTENT_GROUP_PROTOCOL), b"")
    assert env.coordinator.group("group").state is GroupState.COMPLETING_REBALANCE  # never reached
    wrong = await env.call(env.sync_group, 5, sync_body("group", joined.member_id, 1, protocol_name="rr"))
    assert wrong.error_code == int(E.INCONSISTENT_GROUP_PROTOCOL)
    older = await env.call(
        env.sync_group,
        4,
        sync_body("group", joined.member_id, 1, {joined.member_id: b"a"}, protocol_type=None),
    )
    assert (older.error_code, older.assignment) == (NONE, b"a")


async def test_a_follower_waits_for_the_leaders_assignment() -> None:
    env = Env()
    ids = [(await env.join(5)).member_id for _ in range(2)]
    joined = await env.finish(*(env.start(env.join_group, 5, join_body("group", m)) for m in ids))
    leader = next(j for j in joined if j.member_id == j.leader)
    follower = next(j for j in joined if j.member_id != j.leader)
    waiting = env.start(env.sync_group, 3, sync_body("group", follower.member_id, 1))
    await asyncio.sleep(0)
    assert not waiting.done()
    assignments = {leader.member_id: b"L", follower.member_id: b"F"}
    answer = await env.call(env.sync_group, 3, sync_body("group", leader.member_id, 1, assignments))
    assert answer.assignment == b"L"
    assert (await waiting).assignment == b"F"


async def test_sync_with_a_stale_generation() -> None:
    env = Env()
    joined = await env.join_member(5)
    answer = await env.call(env.sync_group, 0, sync_body("group", joined.member_id, 7))
    assert answer.error_code == int(E.ILLEGAL_GENERATION)


# -- Heartbeat ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(5))
async def test_heartbeat_errors(version: int) -> None:
    env = Env()
    joined = await env.join_member(5)
    await env.call(env.sync_group, 3, sync_body("group", joined.member_id, 1, {joined.member_id: b""}))
    beat = await env.call(env.heartbeat, version, heartbeat_body("group", joined.member_id, 1))
    stale = await env.call(env.heartbeat, version, heartbeat_body("group", joined.member_id, 0))
    unknown = await env.call(env.heartbeat, version, heartbeat_body("group", "nobody", 1))
    assert [beat.error_code, stale.error_code, unknown.error_code] == [
        NONE,
        int(E.ILLEGAL_GENERATION),
        int(E.UNKNOWN_MEMBER_ID),
    ]


async def test_heartbeat_tells_a_member_to_rejoin_during_a_rebalance() -> None:
    env = Env()
    joined = await env.join_member(3)
    await env.call(env.sync_group, 3, sync_body("group", joined.member_id, 1, {joined.member_id: b""}))
    newcomer = env.start(env.join_group, 3, join_body("group"))  # parks until the old member rejoins
    await asyncio.sleep(0)
    beat = await env.call(env.heartbeat, 4, heartbeat_body("group", joined.member_id, 1))
    assert beat.error_code == int(E.REBALANCE_IN_PROGRESS)
    newcomer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await newcomer


# -- LeaveGroup --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(3))
async def test_leave_v0_to_v2_reports_the_members_error_at_the_top(version: int) -> None:
    env = Env()
    unknown = await env.call(env.leave_group, version, leave_body("group", ("nobody", None)))
    assert unknown.error_code == int(E.UNKNOWN_MEMBER_ID)
    joined = await env.join_member(3)
    left = await env.call(env.leave_group, version, leave_body("group", (joined.member_id, None)))
    assert left.error_code == NONE
    assert env.coordinator.group("group").state is GroupState.EMPTY


@pytest.mark.parametrize("version", range(3, 6))
async def test_leave_v3_and_later_report_each_member(version: int) -> None:
    env = Env()
    static = await env.join(5, instance_id="static-a")
    dynamic = await env.join(5)  # pending (MEMBER_ID_REQUIRED): it leaves quietly
    body = leave_body(
        "group", ("", "static-a"), (dynamic.member_id, None), ("nobody", None), ("", "no-such-instance")
    )
    left = await env.call(env.leave_group, version, body)
    assert left.error_code == NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in left.members] == [
        ("", "static-a", NONE),
        (dynamic.member_id, None, NONE),
        ("nobody", None, int(E.UNKNOWN_MEMBER_ID)),
        ("", "no-such-instance", int(E.UNKNOWN_MEMBER_ID)),
    ]
    assert not env.coordinator.group("group").has(static.member_id)


@pytest.mark.parametrize("version", [0, 2, 3, 5])
async def test_leave_with_a_coordinator_error_has_it_at_the_top_only(version: int) -> None:
    env = Env(num_partitions=4, load=False)
    elsewhere = env.own_only("group")
    left = await env.call(env.leave_group, version, leave_body(elsewhere, ("m", None)))
    assert left.error_code == int(E.NOT_COORDINATOR)
    assert left.members == []
