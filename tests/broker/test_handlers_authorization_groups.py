"""The authorization matrix of the group APIs (KafkaApis): FindCoordinator DESCRIBE on the group or
transactional id, JoinGroup/SyncGroup/Heartbeat/LeaveGroup READ on the group, OffsetCommit READ on
the group and each topic, OffsetFetch DESCRIBE on the group and each topic, DescribeGroups DESCRIBE,
ListGroups DESCRIBE on the cluster or on each group, DeleteGroups DELETE, OffsetDelete DELETE on the
group and READ on each topic."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.handlers.base import Handler
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from tests.broker.authorization_support import (
    ADMIN,
    ALICE,
    BOB,
    acl,
    authorizer,
    call_as,
    cluster_acl,
    with_authorizer,
)
from tests.broker.group_handlers_support import (
    Env,
    commit_body,
    committed,
    fetch_body,
    fetched,
    heartbeat_body,
    join_body,
    leave_body,
    offset_delete_answer,
    offset_delete_body,
    sync_body,
)

pytestmark = pytest.mark.timeout(60)

GROUP, TOPIC, TXN_ID = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
NONE = int(ErrorCode.NONE)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
ALICE_ACLS = (
    acl(GROUP, "app-", AclOperation.READ, pattern=PatternType.PREFIXED),
    acl(TOPIC, "orders", AclOperation.READ),
    acl(TXN_ID, "txn", AclOperation.DESCRIBE),
)


def guarded(handler: Handler, *bindings: Any) -> Handler:
    return with_authorizer(handler, authorizer(*(bindings or ALICE_ACLS)))


async def answered(env: Env, handler: Handler, version: int, body: dict[str, Any], user: str) -> MessageData:
    """``call_as`` with the coordinator's timers fired while it waits (JoinGroup, SyncGroup)."""
    return (await env.finish(asyncio.ensure_future(call_as(handler, version, body, user))))[0]


@pytest.mark.parametrize("version", [0, 3, 4, 5])
async def test_find_coordinator(version: int) -> None:
    env = Env()
    handler = guarded(env.find_coordinator)
    for key_type, key, user, expected in (
        (0, "app-1", ALICE, NONE),
        (0, "app-1", BOB, GROUP_DENIED),
        (0, "other", ALICE, GROUP_DENIED),
        (1, "txn", ALICE, NONE),
        (1, "txn", BOB, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)),
        (0, "anything", ADMIN, NONE),
    ):
        if version == 0 and key_type != 0:
            continue  # v0 finds group coordinators only
        if version < 4:
            body = {"key": key, "key_type": key_type}
        else:
            body = {"key_type": key_type, "coordinator_keys": [key]}
        answer = await call_as(handler, version, body, user)
        code = answer.error_code if version < 4 else answer.coordinators[0].error_code
        assert code == expected, (key_type, key, user)


async def test_membership_apis_need_read_on_the_group() -> None:
    env = Env()
    join, sync = guarded(env.join_group), guarded(env.sync_group)
    heartbeat, leave = guarded(env.heartbeat), guarded(env.leave_group)
    assert (await call_as(join, 5, join_body("app-1"), BOB)).error_code == GROUP_DENIED
    first = await answered(env, join, 5, join_body("app-1"), ALICE)
    assert first.error_code == int(ErrorCode.MEMBER_ID_REQUIRED)
    joined = await answered(env, join, 5, join_body("app-1", first.member_id), ALICE)
    assert joined.error_code == NONE
    member, generation = joined.member_id, joined.generation_id
    sync_request = sync_body("app-1", member, generation, {member: b"x"})
    assert (await call_as(sync, 5, sync_request, BOB)).error_code == GROUP_DENIED
    assert (await answered(env, sync, 5, sync_request, ALICE)).error_code == NONE
    beat = heartbeat_body("app-1", member, generation)
    assert (await call_as(heartbeat, 4, beat, BOB)).error_code == GROUP_DENIED
    assert (await call_as(heartbeat, 4, beat, ALICE)).error_code == NONE
    bye = leave_body("app-1", (member, None))
    assert (await call_as(leave, 3, bye, BOB)).error_code == GROUP_DENIED
    assert (await call_as(leave, 3, bye, ALICE)).error_code == NONE


@pytest.mark.parametrize("version", [2, 9])
async def test_offset_commit_needs_read_on_the_group_and_each_topic(version: int) -> None:
    env = Env()
    handler = guarded(env.offset_commit)
    offsets = {("orders", 0): 10, ("audit", 0): 5}
    assert committed(await call_as(handler, version, commit_body("app-1", offsets), BOB)) == dict.fromkeys(
        offsets, GROUP_DENIED
    )
    answer = await call_as(handler, version, commit_body("app-1", offsets), ALICE)
    assert committed(answer) == {("orders", 0): NONE, ("audit", 0): TOPIC_DENIED}
    group = env.coordinator.group("app-1")
    assert group is not None and group.offsets.get(("audit", 0)) is None


@pytest.mark.parametrize("version", [1, 3, 7, 8])
async def test_offset_fetch_needs_describe_on_the_group_and_each_topic(version: int) -> None:
    env = Env()
    await env.call(env.offset_commit, 8, commit_body("app-1", {("orders", 0): 10, ("audit", 0): 5}))
    handler = guarded(env.offset_fetch)
    named = fetch_body(version, {"app-1": [("orders", 0), ("audit", 0)]})
    error, partitions = fetched(await call_as(handler, version, named, ALICE), version, "app-1")
    assert error == NONE
    assert partitions[("orders", 0)][0] == 10 and partitions[("orders", 0)][3] == NONE
    assert partitions[("audit", 0)][0] == -1 and partitions[("audit", 0)][3] == TOPIC_DENIED
    if version >= 2:
        everything = fetch_body(version, {"app-1": None})
        error, partitions = fetched(await call_as(handler, version, everything, ALICE), version, "app-1")
        assert (error, list(partitions)) == (NONE, [("orders", 0)])  # "audit" is left out
    error, partitions = fetched(await call_as(handler, version, named, BOB), version, "app-1")
    if version == 1:  # no top-level error: on every partition
        assert {p[3] for p in partitions.values()} == {GROUP_DENIED}
    else:
        assert error == GROUP_DENIED


async def test_describe_groups_needs_describe() -> None:
    env = Env()
    await env.call(env.offset_commit, 8, commit_body("app-1", {("orders", 0): 1}))
    await env.call(env.offset_commit, 8, commit_body("other", {("orders", 0): 1}))
    handler = guarded(env.describe_groups)
    answer = await call_as(
        handler, 5, {"groups": ["app-1", "other"], "include_authorized_operations": True}, ALICE
    )
    by_id = {g.group_id: g for g in answer.groups}
    assert by_id["app-1"].error_code == NONE and by_id["other"].error_code == GROUP_DENIED
    # READ implies DESCRIBE
    assert by_id["app-1"].authorized_operations == (1 << int(AclOperation.READ)) | (
        1 << int(AclOperation.DESCRIBE)
    )


async def test_list_groups_filters_by_describe_unless_the_cluster_is_described() -> None:
    env = Env()
    for group in ("app-1", "other"):
        await env.call(env.offset_commit, 8, commit_body(group, {("orders", 0): 1}))
    handler = guarded(env.list_groups, *ALICE_ACLS, cluster_acl(AclOperation.DESCRIBE, user="ops"))
    listed = {
        user: {g.group_id for g in (await call_as(handler, 4, {}, user)).groups}
        for user in (ALICE, BOB, "ops")
    }
    assert listed == {ALICE: {"app-1"}, BOB: set(), "ops": {"app-1", "other"}}


async def test_delete_groups_needs_delete() -> None:
    env = Env()
    for group in ("app-1", "other"):
        await env.call(env.offset_commit, 8, commit_body(group, {("orders", 0): 1}))
    handler = guarded(
        env.delete_groups,
        acl(GROUP, "*", AclOperation.DELETE),
        acl(GROUP, "other", AclOperation.DELETE, permission=AclPermissionType.DENY),
    )
    answer = await call_as(handler, 2, {"groups_names": ["app-1", "other"]}, ALICE)
    assert {r.group_id: r.error_code for r in answer.results} == {"app-1": NONE, "other": GROUP_DENIED}


async def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic() -> None:
    env = Env()
    offsets = {("orders", 0): 10, ("audit", 0): 5}
    await env.call(env.offset_commit, 8, commit_body("app-1", offsets))
    handler = guarded(
        env.offset_delete,
        acl(GROUP, "app-1", AclOperation.DELETE),
        acl(TOPIC, "orders", AclOperation.READ),
        acl(GROUP, "app-1", AclOperation.READ, user=BOB),
        acl(TOPIC, "*", AclOperation.READ, user=BOB),
    )
    body = offset_delete_body("app-1", offsets)
    refused = await call_as(handler, 0, body, BOB)  # READ on the group is not DELETE
    assert (refused.error_code, refused.topics) == (GROUP_DENIED, [])
    answer = await call_as(handler, 0, body, ALICE)
    assert offset_delete_answer(answer) == (NONE, {("orders", 0): NONE, ("audit", 0): TOPIC_DENIED})
    group = env.coordinator.group("app-1")
    assert group is not None
    assert (group.offsets.get(("orders", 0)), group.offsets.get(("audit", 0)) is not None) == (None, True)
