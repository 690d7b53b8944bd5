"""FindCoordinator, DescribeGroups, ListGroups and DeleteGroups handlers, every handler's
error_response, and the group requests real clients sent (../shared/reference/frames)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from broker.handlers.base import Handler
from broker.handlers.describe_groups import GROUP_AUTHORIZED_OPERATIONS
from broker.handlers.find_coordinator import FindCoordinatorHandler
from broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from coordinator.group import GroupState
from protocol.api import read_request_header
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import Field
from tests.broker.group_handlers_support import (
    COORDINATOR,
    LISTENER,
    NONE,
    E,
    Env,
    FakeLocator,
    commit_body,
    ctx,
    encode_response,
    fetch_body,
    join_body,
    leave_body,
    offset_delete_body,
    sync_body,
)
from tests.protocol.frames import captured_frames

NO_NODE = (-1, "", -1)
COORDINATOR_NOT_AVAILABLE_MESSAGE = "The coordinator is not available."

# -- FindCoordinator --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(4))
async def test_find_one_group_coordinator_up_to_v3(version: int) -> None:
    env = Env()
    found = await env.call(env.find_coordinator, version, {"key": "group", "key_type": 0})
    assert (found.error_code, found.node_id, found.host, found.port) == (NONE, 7, COORDINATOR.host, 19092)
    if version >= 1:
        assert found.error_message == "NONE"  # Kafka's Errors.NONE.message()
    lost = await env.call(env.find_coordinator, version, {"key": "lost-group", "key_type": 0})
    assert (lost.error_code, lost.node_id, lost.host, lost.port) == (
        int(E.COORDINATOR_NOT_AVAILABLE),
        *NO_NODE,
    )
    if version >= 1:
        assert lost.error_message == COORDINATOR_NOT_AVAILABLE_MESSAGE
    assert env.locator.calls == [("group", LISTENER), ("lost-group", LISTENER)]


@pytest.mark.parametrize("version", range(4, 7))
async def test_find_a_batch_of_group_coordinators_from_v4(version: int) -> None:
    env = Env()
    body = {"key_type": 0, "coordinator_keys": ["a", "lost-b", ""]}
    found = await env.call(env.find_coordinator, version, body)
    answers = [(c.key, c.error_code, c.node_id, c.host, c.port, c.error_message) for c in found.coordinators]
    assert answers == [
        ("a", NONE, 7, COORDINATOR.host, 19092, None),
        ("lost-b", int(E.COORDINATOR_NOT_AVAILABLE), *NO_NODE, COORDINATOR_NOT_AVAILABLE_MESSAGE),
        ("", NONE, 7, COORDINATOR.host, 19092, None),  # Kafka answers an empty group id too
    ]


@pytest.mark.parametrize("version", range(1, 7))
async def test_transactional_ids_are_located_by_the_transaction_locator(version: int) -> None:
    env = Env()
    if version < 4:
        found = await env.call(env.find_coordinator, version, {"key": "txn", "key_type": 1})
        results = [(found.error_code, found.node_id, found.port)]
        keys = ["txn"]
    else:
        found = await env.call(
            env.find_coordinator, version, {"key_type": 1, "coordinator_keys": ["t1", "lost-t2"]}
        )
        results = [(c.error_code, c.node_id, c.port) for c in found.coordinators]
        keys = ["t1", "lost-t2"]
    expected = [(NONE, 8, 29092), (int(E.COORDINATOR_NOT_AVAILABLE), -1, -1)]
    assert results == expected[: len(results)]
    assert [key for key, _listener in env.locator.transaction_calls] == keys
    assert env.locator.calls == []


@pytest.mark.parametrize(("version", "key_type"), [(1, 2), (3, 9), (4, -1), (6, 2)])
async def test_an_unknown_key_type_is_an_invalid_request(version: int, key_type: int) -> None:
    env = Env()
    if version < 4:
        found = await env.call(env.find_coordinator, version, {"key": "x", "key_type": key_type})
        codes = [found.error_code]
    else:
        found = await env.call(
            env.find_coordinator, version, {"key_type": key_type, "coordinator_keys": ["x"]}
        )
        codes = [c.error_code for c in found.coordinators]
    assert codes == [int(E.INVALID_REQUEST)]
    assert env.locator.calls == []


async def test_the_locator_hears_the_listener_of_the_connection() -> None:
    locator = FakeLocator()
    handler = FindCoordinatorHandler(locator, locator)
    codec = REQUESTS[10].codec(6)
    request = codec.decode(codec.encode({"key_type": 0, "coordinator_keys": ["g"]}))
    await handler.handle(ctx(handler, 6, listener="EXTERNAL"), request)
    assert locator.calls == [("g", "EXTERNAL")]


# -- DescribeGroups ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(6))
async def test_describe_groups_with_and_without_errors(version: int) -> None:
    env = Env(num_partitions=4, load=False)
    elsewhere = env.own_only("group")
    missing = env.same_partition("group")
    joined = await env.join_member(5)
    body = {"groups": ["group", missing, elsewhere], "include_authorized_operations": True}
    described = await env.call(env.describe_groups, version, body)
    group, unknown, other = described.groups
    assert (group.group_id, group.error_code, group.group_state) == ("group", NONE, "CompletingRebalance")
    assert [(m.member_id, m.member_metadata, m.member_assignment) for m in group.members] == [
        (joined.member_id, b"", b"")  # metadata and assignment only once Stable
    ]
    assert (unknown.error_code, unknown.group_state, unknown.members) == (NONE, "Dead", [])
    assert (other.group_id, other.error_code, other.group_state) == (elsewhere, int(E.NOT_COORDINATOR), "")
    ops = GROUP_AUTHORIZED_OPERATIONS if version >= 3 else AUTHORIZED_OPERATIONS_OMITTED
    assert [g.authorized_operations for g in described.groups] == [ops, ops, AUTHORIZED_OPERATIONS_OMITTED]


async def test_authorized_operations_only_when_asked() -> None:
    env = Env()
    described = await env.call(
        env.describe_groups, 5, {"groups": ["g"], "include_authorized_operations": False}
    )
    assert described.groups[0].authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert GROUP_AUTHORIZED_OPERATIONS == (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE


async def test_describe_shows_a_static_members_instance_id_from_v4() -> None:
    env = Env()
    await env.join(5, instance_id="inst")
    for version, expected in ((3, None), (4, "inst")):
        described = await env.call(env.describe_groups, version, {"groups": ["group"]})
        assert [m.group_instance_id for m in described.groups[0].members] == [expected]


# -- ListGroups -------------------------------------------------------------------------------------


async def _three_groups(env: Env) -> None:
    joined = await env.join_member(5, "stable")
    await env.call(env.sync_group, 5, sync_body("stable", joined.member_id, 1, {joined.member_id: b""}))
    await env.call(env.offset_commit, 9, commit_body("manual", {("t", 0): 1}))
    await env.join_member(5, "completing")


@pytest.mark.parametrize("version", range(6))
async def test_list_groups_filters_by_state_from_v4_and_type_from_v5(version: int) -> None:
    env = Env()
    await _three_groups(env)

    async def listed(states: list[str], types: list[str]) -> set[str]:
        body = {"states_filter": states, "types_filter": types}
        answer = await env.call(env.list_groups, version, body)
        assert answer.error_code == NONE
        return {g.group_id for g in answer.groups}

    everything = {"stable", "manual", "completing"}
    assert await listed([], []) == everything
    assert await listed(["stable", "EMPTY"], []) == ({"stable", "manual"} if version >= 4 else everything)
    assert await listed([], ["Classic"]) == everything
    assert await listed([], ["consumer"]) == (set() if version >= 5 else everything)
    assert await listed([], ["no-such-type"]) == (set() if version >= 5 else everything)


async def test_list_groups_shows_protocol_type_state_and_type() -> None:
    env = Env()
    await _three_groups(env)
    answer = await env.call(env.list_groups, 5, {})
    assert {(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in answer.groups} == {
        ("stable", "consumer", "Stable", "classic"),
        ("manual", "", "Empty", "classic"),
        ("completing", "consumer", "CompletingRebalance", "classic"),
    }


async def test_list_groups_while_a_partition_loads() -> None:
    env = Env(num_partitions=2, load=False)
    env.coordinator.load_partition(0, [])
    env.coordinator.begin_loading(1)
    answer = await env.call(env.list_groups, 0, {})
    assert answer.error_code == int(E.COORDINATOR_LOAD_IN_PROGRESS)


# -- DeleteGroups -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(3))
async def test_delete_groups_answers_each_group_once(version: int) -> None:
    env = Env()
    await _three_groups(env)
    body = {"groups_names": ["manual", "stable", "nope", "manual"]}
    answer = await env.call(env.delete_groups, version, body)
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("manual", NONE),
        ("stable", int(E.NON_EMPTY_GROUP)),
        ("nope", int(E.GROUP_ID_NOT_FOUND)),
    ]
    assert env.coordinator.group("manual") is None


async def test_delete_groups_waits_for_the_tombstones() -> None:
    env = Env(defer_log=True)
    env.harness.log.defer = False
    await env.call(env.offset_commit, 9, commit_body("g", {("t", 0): 1}))
    env.harness.log.defer = True
    task = env.start(env.delete_groups, 2, {"groups_names": ["g"]})
    (answer,) = await env.finish_log(task)
    assert [(r.group_id, r.error_code) for r in answer.results] == [("g", NONE)]


# -- error_response ---------------------------------------------------------------------------------


def _sample_request(handler: Handler, version: int) -> dict[str, Any]:
    """A request of every API that names several things (groups, keys, partitions)."""
    match int(handler.api_key):
        case 10:
            return {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]}
        case 11:
            return join_body("g", "member")
        case 14:
            return sync_body("g", "member", 1, {"member": b"a"})
        case 12:
            return {"group_id": "g", "generation_id": 1, "member_id": "member"}
        case 13:
            return leave_body("g", ("a", None), ("b", "inst"))
        case 8:
            return commit_body("g", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
        case 9:
            return fetch_body(version, {"g": [("t", 0), ("u", 1)], "h": None})
        case 16:
            return {"states_filter": ["Stable"], "types_filter": ["classic"]}
        case 15:
            return {"groups": ["g", "h"], "include_authorized_operations": True}
        case 42:
            return {"groups_names": ["g", "h"]}
        case 47:
            return offset_delete_body("g", [("t", 0), ("t", 1), ("u", 0)])
    raise AssertionError(handler)


def _error_codes(fields: Sequence[Field], value: Any, version: int) -> list[int]:
    """Every error code the response of ``version`` carries (fields of that version only), depth first."""
    codes = []
    for f in fields:
        if not f.exists_in(version):
            continue
        if f.name == "error_code":
            codes.append(value[f.name])
        elif f.is_struct:
            items = value[f.name] if f.is_array else [value[f.name]]
            codes += [code for item in items or () for code in _error_codes(f.fields, item, version)]
    return codes


@pytest.mark.parametrize("which", range(len(Env().handlers)))
async def test_error_response_of_every_handler_encodes_at_min_and_max_version(which: int) -> None:
    handler = Env().handlers[which]
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    for version in (handler.min_version, handler.max_version):
        codec = REQUESTS[int(handler.api_key)].codec(version)
        request = codec.decode(codec.encode(_sample_request(handler, version)))
        response = encode_response(
            handler.api_key, version, handler.error_response(ctx(handler, version), request, code)
        )
        codes = _error_codes(RESPONSES[int(handler.api_key)].fields, response, version)
        assert codes and set(codes) == {int(code)}, (version, response)
        bare = handler.error_response(ctx(handler, version), None, code)
        encode_response(handler.api_key, version, bare)  # without the decoded request too


@pytest.mark.parametrize("version", [0, 2, 3, 7])
async def test_error_response_shapes(version: int) -> None:
    """The whole-request error goes where Kafka's getErrorResponse puts it."""
    env = Env()
    code = ErrorCode.NOT_COORDINATOR

    def error(handler: Handler, v: int) -> Any:
        codec = REQUESTS[int(handler.api_key)].codec(v)
        request = codec.decode(codec.encode(_sample_request(handler, v)))
        return encode_response(handler.api_key, v, handler.error_response(ctx(handler, v), request, code))

    fetch_v = min(max(version, 1), 9)
    offsets = error(env.offset_fetch, fetch_v)
    if fetch_v == 1:
        assert [
            (p.partition_index, p.committed_offset, p.error_code)
            for t in offsets.topics
            for p in t.partitions
        ] == [
            (0, -1, int(code)),
            (1, -1, int(code)),
        ]
    else:
        assert (offsets.error_code, offsets.topics) == (int(code), [])
    fetch8 = error(env.offset_fetch, 8)
    assert [(g.group_id, g.error_code, g.topics) for g in fetch8.groups] == [
        ("g", int(code), []),
        ("h", int(code), []),
    ]
    leave = error(env.leave_group, min(version, 5))
    assert (leave.error_code, leave.members) == (int(code), [])
    join = error(env.join_group, version)
    assert (join.error_code, join.generation_id, join.member_id, join.leader) == (int(code), -1, "", "")
    commit = error(env.offset_commit, max(version, 2))
    assert {(t.name, p.partition_index): p.error_code for t in commit.topics for p in t.partitions} == {
        ("t", 0): int(code),
        ("t", 1): int(code),
        ("u", 0): int(code),
    }
    find_v = min(version, 6)
    find = error(env.find_coordinator, find_v)
    if find_v < 4:
        assert (find.error_code, find.node_id, find.host, find.port) == (int(code), *NO_NODE)
    else:
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in find.coordinators] == [
            (key, int(code), *NO_NODE) for key in ("g", "h")
        ]
    described = error(env.describe_groups, min(version, 5))
    assert [(g.group_id, g.error_code, g.group_state) for g in described.groups] == [
        ("g", int(code), ""),
        ("h", int(code), ""),
    ]
    deleted = error(env.offset_delete, 0)
    assert (deleted.error_code, deleted.topics) == (int(code), [])


# -- real clients' requests -------------------------------------------------------------------------

_GROUP_APIS = {8, 9, 10, 11, 12, 13, 14, 15, 16, 42}


@pytest.mark.parametrize(
    "frame",
    [f for f in captured_frames() if f.api_key in _GROUP_APIS and not f.is_response],
    ids=str,
)
async def test_requests_real_clients_sent_are_answered(frame: Any) -> None:
    """Every group request kafka-python and kcat sent decodes, is handled and encodes: the member ids
    and generations came from another broker, so the answers are errors, but well-formed ones."""
    env = Env()
    handler = next(h for h in env.handlers if int(h.api_key) == frame.api_key)
    _header, io = read_request_header(memoryview(frame.frame))
    request = REQUESTS[frame.api_key].codec(frame.api_version).read(io)
    response = await env.finish(env.start_decoded(handler, frame.api_version, request))
    assert response


def _rewrite(request: Any, api_key: int, member_id: str, generation: int) -> None:
    """Put this coordinator's member id and generation where the captured request had the other
    broker's (the frames were recorded against another Kafka-compatible broker)."""
    if api_key in (8, 11, 12, 13, 14) and request.get("member_id"):
        request.member_id = member_id
    if api_key in (12, 14):
        request.generation_id = generation
    if api_key == 8:
        request.generation_id_or_member_epoch = generation
    for entry in request.get("assignments") or ():
        entry.member_id = member_id
    for entry in request.get("members") or ():
        if entry.member_id:
            entry.member_id = member_id


@pytest.mark.parametrize("client", ["kafka-python", "kcat"])
async def test_a_real_clients_group_session_succeeds(client: str) -> None:
    """A client's captured session, in order, with member ids and generations this coordinator gave:
    every answer but the first join's MEMBER_ID_REQUIRED is NONE."""
    env = Env()
    member_id, generation = "", -1
    frames = [f for f in captured_frames() if f.path.parent.name == client and f.api_key in _GROUP_APIS]
    assert frames
    for frame in (f for f in frames if not f.is_response):
        handler = next(h for h in env.handlers if int(h.api_key) == frame.api_key)
        _header, io = read_request_header(memoryview(frame.frame))
        request = REQUESTS[frame.api_key].codec(frame.api_version).read(io)
        first_join = frame.api_key == 11 and not member_id
        _rewrite(request, frame.api_key, member_id, generation)
        (response,) = await env.finish(env.start_decoded(handler, frame.api_version, request))
        codes = set(_error_codes(RESPONSES[frame.api_key].fields, response, frame.api_version))
        assert codes == ({int(E.MEMBER_ID_REQUIRED)} if first_join else {NONE}), (str(frame), response)
        if frame.api_key == 11:
            member_id, generation = response.member_id, response.generation_id
    (group,) = env.coordinator.groups()  # the client left at the end; its offsets stay
    assert (group.state, group.offsets.has_offsets) == (GroupState.EMPTY, True)
