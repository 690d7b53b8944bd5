"""client.group_member.GroupMember against a scripted, in-memory coordinator: no broker, no sockets.

What is covered: every request the member sends (which API, which version, which body) and how it
reacts to each answer, one scenario per test:

* the join handshake: MEMBER_ID_REQUIRED answered by an immediate retry with the id given; the leader
  decoding subscriptions, asking for partition counts and sending one range assignment per member;
  a follower's empty SyncGroup and an empty (``b""``) assignment;
* FindCoordinator v3 (``key``) and v4+ (``coordinator_keys`` / ``coordinators[0]``), retriable and
  fatal lookup errors, a bootstrap connection that drops;
* heartbeats: a coordinator that moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a dropped
  connection) is looked up again without a rejoin; REBALANCE_IN_PROGRESS asks for one rejoin and keeps
  heartbeating until join(); ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID stop heartbeats and reset the
  generation / member id; a session timeout of failures ends the generation; a heartbeat task that
  crashes makes the next join fail;
* commits (generation and member id in the body, fencing, no request outside a generation, retry
  after NOT_COORDINATOR), OffsetFetch v7- and v8+ bodies, close() with LeaveGroup v0-5, static members,
  a LeaveGroup that never answers, and the leader's partition-count check.

Why unit tests next to tests/client/test_group_member.py: a real kipling broker only ever answers
the way kipling's coordinator does, at the versions it serves, and cannot be made to say
NOT_COORDINATOR to one heartbeat, to hang on a LeaveGroup, or to move its coordinator on demand.
A scripted fake reaches those branches deterministically, at old protocol versions too, in
milliseconds; the broker tests keep proving the conversation works end to end with real clients.

Every wait is bounded (``within`` / ``eventually``) so that a bug fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest

from client.errors import ConnectionClosedError, KafkaResponseError
from client.fetch_session import TopicPartition
from client.group_member import CommitFailedError, GroupError, GroupMember, GroupMemberConfig
from protocol.api_keys import ApiKey
from protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from protocol.error_codes import ErrorCode
from tests.client import waiting

T = TypeVar("T")

GROUP = "g"
C1 = ("c1", 9092)
C2 = ("c2", 9093)
WAIT_S = 5.0
TIMINGS: dict[str, Any] = {
    "heartbeat_interval_ms": 20,
    "session_timeout_ms": 1000,
    "retry_backoff_ms": 5,
    "request_timeout_ms": 500,
}
HEARTBEAT_S = TIMINGS["heartbeat_interval_ms"] / 1000

SCHEMA_MAX_VERSIONS: dict[int, int] = {
    ApiKey.FIND_COORDINATOR: 6,
    ApiKey.JOIN_GROUP: 9,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 5,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
}
"""The highest version of each group API in kipling's schema (protocol/messages/*.py)."""

Reply = SimpleNamespace | BaseException | Callable[[dict[str, Any]], Any]
"""A scripted answer: a response, an exception to raise, or a function of the request body returning
either (possibly as an awaitable)."""


# ------------------------------------------------------------------------------------------ the fake


@dataclass(slots=True)
class Sent:
    api_key: int
    version: int
    body: dict[str, Any]
    connection: FakeConnection


class ScriptedNode:
    """One broker address: scripted answers per API key (a queue, then a default), every request seen."""

    def __init__(self, name: str, max_versions: Mapping[int, int] | None = None) -> None:
        self.name = name
        self.max_versions = {**SCHEMA_MAX_VERSIONS, **(max_versions or {})}
        self.queued: dict[int, list[Reply]] = {}
        self.defaults: dict[int, Reply] = {
            ApiKey.HEARTBEAT: reply(),
            ApiKey.LEAVE_GROUP: reply(members=[]),
        }
        self.requests: list[Sent] = []
        self.unscripted: list[Sent] = []

    def script(self, api_key: int, *replies: Reply, then: Reply | None = None) -> None:
        """Answer the next requests of ``api_key`` with ``replies``, and any after them with ``then``."""
        self.queued.setdefault(api_key, []).extend(replies)
        if then is not None:
            self.defaults[api_key] = then

    def sent(self, api_key: int) -> list[Sent]:
        return [s for s in self.requests if s.api_key == api_key]

    def bodies(self, api_key: int) -> list[dict[str, Any]]:
        return [s.body for s in self.sent(api_key)]

    def count(self, api_key: int) -> int:
        return len(self.sent(api_key))

    async def answer(self, sent: Sent) -> Any:
        self.requests.append(sent)
        queue = self.queued.get(sent.api_key)
        answer = queue.pop(0) if queue else self.defaults.get(sent.api_key)
        if answer is None:
            self.unscripted.append(sent)
            raise AssertionError(f"{self.name}: unscripted {ApiKey(sent.api_key).name} {sent.body}")
        if callable(answer) and not isinstance(answer, BaseException):
            answer = answer(sent.body)
            if inspect.isawaitable(answer):
                answer = await answer
        if isinstance(answer, BaseException):
            raise answer
        return answer


class FakeConnection:
    """What GroupMember uses of a KafkaConnection; requests go to its node, closing is recorded."""

    def __init__(self, node: ScriptedNode) -> None:
        self.node = node
        self.closed = False
        self.close_reasons: list[str] = []

    def version_for(self, api_key: int, wanted_max: int | None = None, wanted_min: int | None = None) -> int:
        version = self.node.max_versions[api_key]
        return version if wanted_max is None else min(version, wanted_max)

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout_s: float) -> Any:
        if self.closed:
            raise ConnectionClosedError(f"{self.node.name}: request on a closed connection")
        return await self.node.answer(Sent(api_key, version, body, self))

    def close(self, reason: str = "closed by the client") -> None:
        self.closed = True
        self.close_reasons.append(reason)


class FakeCluster:
    """ClusterAccess over scripted nodes: a bootstrap node for FindCoordinator, one node per address."""

    def __init__(self, bootstrap_versions: Mapping[int, int] | None = None) -> None:
        self.bootstrap = ScriptedNode("bootstrap", bootstrap_versions)
        self.bootstrap.script(ApiKey.FIND_COORDINATOR, then=found(*C1))
        self.bootstrap_connections = [FakeConnection(self.bootstrap)]
        self.nodes: dict[tuple[str, int], ScriptedNode] = {}
        self.opened: list[tuple[tuple[str, int], FakeConnection]] = []
        self.forgotten: list[FakeConnection] = []
        self.counts: dict[str, int] = {}
        self.count_requests: list[list[str]] = []

    def node(self, address: tuple[str, int], **max_versions: int) -> ScriptedNode:
        """The node at ``address`` (created on first use; ``max_versions`` by ApiKey name)."""
        if address not in self.nodes:
            self.nodes[address] = ScriptedNode(f"{address[0]}:{address[1]}")
        self.nodes[address].max_versions.update({ApiKey[k.upper()]: v for k, v in max_versions.items()})
        return self.nodes[address]

    def connections_to(self, address: tuple[str, int]) -> list[FakeConnection]:
        return [c for a, c in self.opened if a == address]

    @property
    def addresses_opened(self) -> list[tuple[str, int]]:
        return [a for a, _ in self.opened]

    def all_requests(self) -> list[Sent]:
        return [*self.bootstrap.requests, *(s for n in self.nodes.values() for s in n.requests)]

    async def any_connection(self) -> Any:
        if self.bootstrap_connections[-1].closed:
            self.bootstrap_connections.append(FakeConnection(self.bootstrap))
        return self.bootstrap_connections[-1]

    async def open_connection(self, host: str, port: int) -> Any:
        connection = FakeConnection(self.node((host, port)))
        self.opened.append(((host, port), connection))
        return connection

    async def partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        self.count_requests.append(list(topics))
        return {t: self.counts[t] for t in topics if t in self.counts}

    def forget(self, connection: Any) -> None:
        self.forgotten.append(connection)
        connection.close("forgotten")


# ----------------------------------------------------------------------------------------- responses


def reply(code: ErrorCode = ErrorCode.NONE, **fields: Any) -> SimpleNamespace:
    return SimpleNamespace(throttle_time_ms=0, error_code=int(code), **fields)


def found(
    host: str, port: int, node_id: int = 1, *, version: int = 6, code: ErrorCode = ErrorCode.NONE
) -> SimpleNamespace:
    """A FindCoordinator answer shaped as ``version`` has it (v4+: only ``coordinators``)."""
    entry = {"error_code": int(code), "error_message": None, "node_id": node_id, "host": host, "port": port}
    if version >= 4:
        return SimpleNamespace(throttle_time_ms=0, coordinators=[SimpleNamespace(key=GROUP, **entry)])
    return SimpleNamespace(throttle_time_ms=0, **entry)


def subscriber(member_id: str, topics: Sequence[str], instance: str | None = None) -> SimpleNamespace:
    """A JoinGroup response member whose metadata is a real consumer Subscription."""
    metadata = encode_subscription(Subscription(topics=tuple(topics)))
    return SimpleNamespace(member_id=member_id, group_instance_id=instance, metadata=metadata)


def joined(
    member_id: str,
    *,
    leader: str = "m-0",
    generation: int = 1,
    protocol: str = "range",
    members: Sequence[SimpleNamespace] = (),
) -> SimpleNamespace:
    return reply(
        generation_id=generation,
        protocol_type="consumer",
        protocol_name=protocol,
        leader=leader,
        skip_assignment=False,
        member_id=member_id,
        members=list(members),
    )


def synced(assignment: Mapping[str, list[int]] | None) -> SimpleNamespace:
    """A SyncGroup answer; None gives the empty bytes a member the leader left out receives."""
    data = encode_assignment(Assignment.from_mapping(assignment)) if assignment is not None else b""
    return reply(protocol_type="consumer", protocol_name="range", assignment=data)


def commit_answer(errors: Mapping[tuple[str, int], ErrorCode] | None = None) -> Callable[..., Any]:
    """An OffsetCommit answer echoing the request's partitions, with ``errors`` where given."""
    errors = errors or {}

    def answer(body: dict[str, Any]) -> SimpleNamespace:
        topics = [
            SimpleNamespace(
                name=t["name"],
                partitions=[
                    SimpleNamespace(
                        partition_index=p["partition_index"],
                        error_code=int(errors.get((t["name"], p["partition_index"]), ErrorCode.NONE)),
                    )
                    for p in t["partitions"]
                ],
            )
            for t in body["topics"]
        ]
        return SimpleNamespace(throttle_time_ms=0, topics=topics)

    return answer


async def hang(body: dict[str, Any]) -> SimpleNamespace:
    """A request the coordinator never answers."""
    await asyncio.get_running_loop().create_future()
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------------------- helpers


async def within(awaitable: Awaitable[T], what: str = "the member", timeout_s: float = WAIT_S) -> T:
    return await waiting.within(awaitable, what, timeout_s)


async def eventually(predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    await waiting.eventually(predicate, what, timeout_s, 0.002)


@dataclass(slots=True)
class Rejoins:
    """The member's ``on_rejoin_needed`` callback: how often it was called."""

    count: int = 0
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def __call__(self) -> None:
        self.count += 1
        self.event.set()

    async def wait(self) -> None:
        await within(self.event.wait(), "on_rejoin_needed")


class Harness:
    """A fake cluster and the members made on it (closed at teardown)."""

    def __init__(self) -> None:
        self.cluster = FakeCluster()
        self.members: list[GroupMember] = []

    @property
    def c1(self) -> ScriptedNode:
        return self.cluster.node(C1)

    def member(self, **config: Any) -> tuple[GroupMember, Rejoins]:
        rejoins = Rejoins()
        member = GroupMember(
            self.cluster,  # type: ignore[arg-type]  # hands out FakeConnections
            GroupMemberConfig(GROUP, **{**TIMINGS, **config}),
            on_rejoin_needed=rejoins,
        )
        self.members.append(member)
        return member, rejoins

    async def joined_member(
        self,
        *,
        member_id: str = "m-1",
        generation: int = 1,
        assignment: Mapping[str, list[int]] | None = None,
        **config: Any,
    ) -> tuple[GroupMember, Rejoins]:
        """A follower that joined generation ``generation`` through the coordinator at C1."""
        member, rejoins = self.member(**config)
        self.c1.script(ApiKey.JOIN_GROUP, joined(member_id, generation=generation))
        self.c1.script(ApiKey.SYNC_GROUP, synced(assignment if assignment is not None else {"t": [0]}))
        await within(member.join(["t"]), "join")
        return member, rejoins


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    for member in harness.members:
        await within(member.close(), "close at teardown")
    nodes = [harness.cluster.bootstrap, *harness.cluster.nodes.values()]
    assert [s.body for n in nodes for s in n.unscripted] == []


def heartbeats(node: ScriptedNode) -> int:
    return node.count(ApiKey.HEARTBEAT)


async def more_heartbeats(node: ScriptedNode, n: int = 3) -> None:
    start = heartbeats(node)
    await eventually(lambda: heartbeats(node) >= start + n, f"{n} more heartbeats at {node.name}")


async def no_more_heartbeats(node: ScriptedNode) -> None:
    start = heartbeats(node)
    await asyncio.sleep(6 * HEARTBEAT_S)
    assert heartbeats(node) == start


# ------------------------------------------------------------------------------------------ joining


async def test_leader_join_retries_member_id_required_then_assigns_range(h: Harness) -> None:
    # a huge backoff: the MEMBER_ID_REQUIRED retry must not wait for it
    member, rejoins = h.member(retry_backoff_ms=60_000)
    h.cluster.counts = {"t": 3, "u": 2, "unrelated": 9}
    h.c1.script(
        ApiKey.JOIN_GROUP,
        reply(ErrorCode.MEMBER_ID_REQUIRED, member_id="m-1", generation_id=-1, leader="", members=[]),
        joined(
            "m-1",
            leader="m-1",
            generation=3,
            members=[subscriber("m-2", ["t", "u"]), subscriber("m-1", ["t"])],
        ),
    )
    h.c1.script(ApiKey.SYNC_GROUP, synced({"t": [0, 1]}))

    assignment = await within(member.join(["t", "t"]), "join")

    joins = h.c1.sent(ApiKey.JOIN_GROUP)
    assert [s.version for s in joins] == [9, 9]
    assert [s.body["member_id"] for s in joins] == ["", "m-1"]
    first = joins[0].body
    assert first["group_id"] == GROUP
    assert first["protocol_type"] == "consumer"
    assert first["session_timeout_ms"] == 1000
    assert first["group_instance_id"] is None
    assert [p["name"] for p in first["protocols"]] == ["range", "roundrobin"]
    assert {decode_subscription(p["metadata"]).topics for p in first["protocols"]} == {("t",)}

    assert h.cluster.count_requests == [["t", "u"]]
    [sync] = h.c1.sent(ApiKey.SYNC_GROUP)
    assert sync.version == 5
    assert sync.body["generation_id"] == 3
    assert sync.body["member_id"] == "m-1"
    assert sync.body["protocol_name"] == "range"
    sent = {a["member_id"]: decode_assignment(a["assignment"]).as_dict() for a in sync.body["assignments"]}
    assert len(sync.body["assignments"]) == 2
    assert sent == {"m-1": {"t": [0, 1]}, "m-2": {"t": [2], "u": [0, 1]}}

    assert assignment == {"t": [0, 1]}
    assert member.generation.is_leader
    assert member.generation.generation_id == 3
    assert member.generation.assigned_counts == {"t": 3, "u": 2}
    assert member.rejoin_reason is None
    assert rejoins.count == 0


async def test_member_keeps_what_sync_group_returned(h: Harness) -> None:
    member, _ = h.member()
    h.cluster.counts = {"t": 2}
    h.c1.script(ApiKey.JOIN_GROUP, joined("m-1", leader="m-1", members=[subscriber("m-1", ["t"])]))
    h.c1.script(ApiKey.SYNC_GROUP, synced({"t": [1], "x": [7]}))  # not what the leader computed
    assert await within(member.join(["t"])) == {"t": [1], "x": [7]}
    assert member.generation.assignment == {"t": [1], "x": [7]}


async def test_follower_sends_empty_sync_and_accepts_empty_assignment(h: Harness) -> None:
    member, _ = h.member()
    h.c1.script(ApiKey.JOIN_GROUP, joined("m-1", leader="m-0", generation=4))
    h.c1.script(ApiKey.SYNC_GROUP, synced(None))

    assert await within(member.join(["t"])) == {}

    [sync] = h.c1.bodies(ApiKey.SYNC_GROUP)
    assert sync["assignments"] == []
    assert sync["generation_id"] == 4
    assert h.cluster.count_requests == []  # only the leader looks at partition counts
    assert not member.generation.is_leader
    assert member.generation.valid


async def test_join_unknown_member_id_retries_with_empty_id_without_rejoin_callback(h: Harness) -> None:
    member, rejoins = h.member()
    member.generation.member_id = "stale"  # an id the coordinator has forgotten
    h.c1.script(
        ApiKey.JOIN_GROUP, reply(ErrorCode.UNKNOWN_MEMBER_ID, member_id="", members=[]), joined("m-9")
    )
    h.c1.script(ApiKey.SYNC_GROUP, synced({"t": [0]}))
    await within(member.join(["t"]))
    assert [b["member_id"] for b in h.c1.bodies(ApiKey.JOIN_GROUP)] == ["stale", ""]
    assert member.generation.member_id == "m-9"
    assert rejoins.count == 0
    assert member.rejoin_reason is None


async def test_sync_rebalance_in_progress_joins_again(h: Harness) -> None:
    member, rejoins = h.member()
    h.c1.script(ApiKey.JOIN_GROUP, joined("m-1", generation=1), joined("m-1", generation=2))
    h.c1.script(ApiKey.SYNC_GROUP, reply(ErrorCode.REBALANCE_IN_PROGRESS, assignment=b""), synced({"t": [3]}))
    assert await within(member.join(["t"])) == {"t": [3]}
    assert [b["member_id"] for b in h.c1.bodies(ApiKey.JOIN_GROUP)] == ["", "m-1"]
    assert [b["generation_id"] for b in h.c1.bodies(ApiKey.SYNC_GROUP)] == [1, 2]
    assert member.generation.generation_id == 2
    assert rejoins.count == 0


async def test_leader_refuses_a_protocol_it_did_not_offer(h: Harness) -> None:
    member, _ = h.member(assignors=("range",))
    h.c1.script(ApiKey.JOIN_GROUP, joined("m-1", leader="m-1", protocol="roundrobin"))
    with pytest.raises(GroupError) as caught:
        await within(member.join(["t"]))
    assert caught.value.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.c1.count(ApiKey.SYNC_GROUP) == 0


@pytest.mark.parametrize("join_version", [0, 4])
async def test_static_member_needs_join_group_v5(h: Harness, join_version: int) -> None:
    member, _ = h.member(group_instance_id="instance-1")
    h.cluster.node(C1, join_group=join_version)
    with pytest.raises(GroupError) as caught:
        await within(member.join(["t"]))
    assert caught.value.code is ErrorCode.UNSUPPORTED_VERSION
    assert h.c1.count(ApiKey.JOIN_GROUP) == 0


# ---------------------------------------------------------------------------------- FindCoordinator


async def test_find_coordinator_v3_sends_key(h: Harness) -> None:
    h.cluster.bootstrap.max_versions[ApiKey.FIND_COORDINATOR] = 3
    h.cluster.bootstrap.script(ApiKey.FIND_COORDINATOR, then=found(*C1, version=3))
    await h.joined_member()
    [lookup] = h.cluster.bootstrap.sent(ApiKey.FIND_COORDINATOR)
    assert lookup.version == 3
    assert lookup.body == {"key": GROUP, "key_type": 0}
    assert h.cluster.addresses_opened == [C1]


@pytest.mark.parametrize("version", [4, 6])
async def test_find_coordinator_v4_sends_coordinator_keys(h: Harness, version: int) -> None:
    h.cluster.bootstrap.max_versions[ApiKey.FIND_COORDINATOR] = version
    h.cluster.bootstrap.script(ApiKey.FIND_COORDINATOR, then=found(*C2, version=version))
    member, _ = h.member()
    h.cluster.node(C2).script(ApiKey.JOIN_GROUP, joined("m-1"))
    h.cluster.node(C2).script(ApiKey.SYNC_GROUP, synced({"t": [0]}))
    await within(member.join(["t"]))
    [lookup] = h.cluster.bootstrap.sent(ApiKey.FIND_COORDINATOR)
    assert lookup.version == version
    assert lookup.body == {"key_type": 0, "coordinator_keys": [GROUP]}
    assert h.cluster.addresses_opened == [C2]


async def test_find_coordinator_retries_coordinator_not_available(h: Harness) -> None:
    h.cluster.bootstrap.script(
        ApiKey.FIND_COORDINATOR,
        found("", -1, -1, code=ErrorCode.COORDINATOR_NOT_AVAILABLE),
        found("", -1, -1, code=ErrorCode.COORDINATOR_NOT_AVAILABLE),
    )
    await h.joined_member()
    assert h.cluster.bootstrap.count(ApiKey.FIND_COORDINATOR) == 3
    assert h.cluster.addresses_opened == [C1]


async def test_find_coordinator_fatal_error_raises_group_error(h: Harness) -> None:
    h.cluster.bootstrap.script(
        ApiKey.FIND_COORDINATOR, then=found("", -1, -1, code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    )
    member, _ = h.member()
    with pytest.raises(GroupError) as caught:
        await within(member.join(["t"]))
    assert caught.value.code is ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert h.cluster.bootstrap.count(ApiKey.FIND_COORDINATOR) == 1
    assert h.cluster.opened == []


async def test_dropped_bootstrap_connection_is_forgotten_and_lookup_retried(h: Harness) -> None:
    h.cluster.bootstrap.script(ApiKey.FIND_COORDINATOR, ConnectionClosedError("bootstrap dropped"))
    await h.joined_member()
    assert h.cluster.forgotten == h.cluster.bootstrap_connections[:1]
    assert len(h.cluster.bootstrap_connections) == 2
    assert h.cluster.bootstrap.count(ApiKey.FIND_COORDINATOR) == 2


# --------------------------------------------------------------------------------------- heartbeats


@pytest.mark.parametrize(
    "failure",
    [
        reply(ErrorCode.NOT_COORDINATOR),
        reply(ErrorCode.COORDINATOR_NOT_AVAILABLE),
        ConnectionClosedError("coordinator dropped the connection"),
    ],
    ids=["NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "connection-closed"],
)
async def test_heartbeat_follows_a_moved_coordinator_without_rejoining(h: Harness, failure: Reply) -> None:
    h.cluster.bootstrap.script(ApiKey.FIND_COORDINATOR, found(*C1), then=found(*C2))
    h.c1.script(ApiKey.HEARTBEAT, reply(), failure)
    c2 = h.cluster.node(C2)
    member, rejoins = await h.joined_member(generation=5)

    await more_heartbeats(c2, 3)

    assert heartbeats(h.c1) == 2
    assert h.cluster.bootstrap.count(ApiKey.FIND_COORDINATOR) == 2
    assert h.cluster.addresses_opened == [C1, C2]
    assert h.cluster.connections_to(C1)[0].closed
    assert not h.cluster.connections_to(C2)[0].closed
    assert {(b["generation_id"], b["member_id"]) for b in c2.bodies(ApiKey.HEARTBEAT)} == {(5, "m-1")}
    assert [s.version for s in c2.sent(ApiKey.HEARTBEAT)][:1] == [4]
    assert rejoins.count == 0
    assert member.rejoin_reason is None
    assert member.generation.generation_id == 5


async def test_rebalance_in_progress_asks_once_and_heartbeats_until_join(h: Harness) -> None:
    def heartbeat(body: dict[str, Any]) -> SimpleNamespace:
        return reply(ErrorCode.REBALANCE_IN_PROGRESS if body["generation_id"] == 1 else ErrorCode.NONE)

    h.c1.script(ApiKey.HEARTBEAT, then=heartbeat)
    member, rejoins = await h.joined_member(generation=1)
    await rejoins.wait()
    assert member.rejoin_reason is not None
    assert "REBALANCE_IN_PROGRESS" in member.rejoin_reason

    await more_heartbeats(h.c1, 4)  # the session is kept alive while the caller gets ready
    assert rejoins.count == 1
    assert member.generation.generation_id == 1
    assert member.generation.member_id == "m-1"

    h.c1.script(ApiKey.JOIN_GROUP, joined("m-1", generation=2))
    h.c1.script(ApiKey.SYNC_GROUP, synced({"t": [1]}))
    assert await within(member.join(["t"])) == {"t": [1]}
    await more_heartbeats(h.c1, 3)

    rejoin = h.c1.sent(ApiKey.JOIN_GROUP)[-1]
    assert rejoin.body["member_id"] == "m-1"
    assert "REBALANCE_IN_PROGRESS" in (rejoin.body["reason"] or "")
    after = h.c1.requests[h.c1.requests.index(rejoin) :]
    assert {s.body["generation_id"] for s in after if s.api_key == ApiKey.HEARTBEAT} == {2}
    assert rejoins.count == 1
    assert member.rejoin_reason is None


@pytest.mark.parametrize(
    ("code", "member_id_after"),
    [(ErrorCode.ILLEGAL_GENERATION, "m-1"), (ErrorCode.UNKNOWN_MEMBER_ID, "")],
    ids=["ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"],
)
async def test_fenced_heartbeat_stops_and_resets(h: Harness, code: ErrorCode, member_id_after: str) -> None:
    h.c1.script(ApiKey.HEARTBEAT, reply(code))
    member, rejoins = await h.joined_member(generation=6)
    await rejoins.wait()

    await no_more_heartbeats(h.c1)
    assert rejoins.count == 1
    assert member.rejoin_reason is not None and code.name in member.rejoin_reason
    assert member.generation.generation_id == -1
    assert member.generation.member_id == member_id_after

    h.c1.script(ApiKey.JOIN_GROUP, joined("m-2", generation=7))
    h.c1.script(ApiKey.SYNC_GROUP, synced({"t": [0]}))
    await within(member.join(["t"]))
    assert h.c1.bodies(ApiKey.JOIN_GROUP)[-1]["member_id"] == member_id_after


@pytest.mark.parametrize(
    "code",
    [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE],
    ids=lambda code: code.name,
)
async def test_failing_heartbeats_for_a_session_timeout_end_the_generation(
    h: Harness, code: ErrorCode
) -> None:
    h.c1.script(ApiKey.HEARTBEAT, then=reply(code))
    member, rejoins = await h.joined_member(session_timeout_ms=200)
    started = time.monotonic()
    await rejoins.wait()
    elapsed = time.monotonic() - started

    assert elapsed >= 0.19
    assert heartbeats(h.c1) >= 5
    assert rejoins.count == 1
    assert member.rejoin_reason is not None and "session timeout" in member.rejoin_reason
    await no_more_heartbeats(h.c1)


async def test_fatal_heartbeat_error_fails_the_next_join(h: Harness) -> None:
    h.c1.script(ApiKey.HEARTBEAT, reply(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    member, rejoins = await h.joined_member()
    await rejoins.wait()
    await no_more_heartbeats(h.c1)
    with pytest.raises(GroupError) as caught:
        await within(member.join(["t"]))
    assert caught.value.code is ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert h.c1.count(ApiKey.JOIN_GROUP) == 1


async def test_crashed_heartbeat_task_asks_rejoin_and_fails_next_join(h: Harness) -> None:
    h.c1.script(ApiKey.HEARTBEAT, RuntimeError("boom"))
    member, rejoins = await h.joined_member()
    await rejoins.wait()

    assert rejoins.count == 1
    assert member.rejoin_reason is not None and "heartbeats failed" in member.rejoin_reason
    await no_more_heartbeats(h.c1)
    with pytest.raises(GroupError) as caught:
        await within(member.join(["t"]))
    assert caught.value.code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert "boom" in str(caught.value)
    assert h.c1.count(ApiKey.JOIN_GROUP) == 1  # the failed join sent nothing


# ------------------------------------------------------------------------------------------ commits

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)


async def test_commit_carries_generation_and_member_id(h: Harness) -> None:
    h.c1.script(ApiKey.OFFSET_COMMIT, then=commit_answer())
    member, _ = await h.joined_member(member_id="m-7", generation=12)
    await within(member.commit({T0: 10, U0: 5, T1: 11}, metadata="md"), "commit")

    [sent] = h.c1.sent(ApiKey.OFFSET_COMMIT)
    assert sent.version == 9
    assert sent.body == {
        "group_id": GROUP,
        "generation_id_or_member_epoch": 12,
        "member_id": "m-7",
        "group_instance_id": None,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 10, "committed_metadata": "md"},
                    {"partition_index": 1, "committed_offset": 11, "committed_metadata": "md"},
                ],
            },
            {
                "name": "u",
                "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": "md"}],
            },
        ],
    }


@pytest.mark.parametrize(
    ("code", "member_id_after"),
    [(ErrorCode.ILLEGAL_GENERATION, "m-1"), (ErrorCode.UNKNOWN_MEMBER_ID, "")],
    ids=["ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"],
)
async def test_fenced_commit_raises_commit_failed(h: Harness, code: ErrorCode, member_id_after: str) -> None:
    h.c1.script(ApiKey.OFFSET_COMMIT, commit_answer({("t", 1): code}))
    member, rejoins = await h.joined_member()
    with pytest.raises(CommitFailedError) as caught:
        await within(member.commit({T0: 1, T1: 2}), "commit")
    assert caught.value.code is code
    assert h.c1.count(ApiKey.OFFSET_COMMIT) == 1  # not retried
    assert member.rejoin_reason is not None
    assert rejoins.count == 1
    assert member.generation.generation_id == -1
    assert member.generation.member_id == member_id_after


async def test_commit_outside_a_generation_sends_nothing(h: Harness) -> None:
    member, _ = h.member()
    with pytest.raises(CommitFailedError):
        await within(member.commit({T0: 1}), "commit")
    assert h.cluster.all_requests() == []
    assert h.cluster.opened == []


async def test_commit_after_close_sends_nothing(h: Harness) -> None:
    member, _ = await h.joined_member()
    await within(member.close(), "close")
    before = len(h.cluster.all_requests())
    with pytest.raises(CommitFailedError):
        await within(member.commit({T0: 1}), "commit")
    assert len(h.cluster.all_requests()) == before


async def test_commit_not_coordinator_is_retried_at_the_new_coordinator(h: Harness) -> None:
    h.cluster.bootstrap.script(ApiKey.FIND_COORDINATOR, found(*C1), then=found(*C2))
    h.c1.script(ApiKey.OFFSET_COMMIT, commit_answer({("t", 0): ErrorCode.NOT_COORDINATOR}))
    c2 = h.cluster.node(C2)
    c2.script(ApiKey.OFFSET_COMMIT, then=commit_answer())
    member, rejoins = await h.joined_member(generation=3)

    await within(member.commit({T0: 8}), "commit")

    [first] = h.c1.bodies(ApiKey.OFFSET_COMMIT)
    [retried] = c2.bodies(ApiKey.OFFSET_COMMIT)
    assert retried == first
    assert retried["generation_id_or_member_epoch"] == 3
    assert h.cluster.bootstrap.count(ApiKey.FIND_COORDINATOR) == 2
    assert h.cluster.connections_to(C1)[0].closed
    assert rejoins.count == 0


async def test_commit_retriable_error_gives_up_after_request_timeout(h: Harness) -> None:
    h.c1.script(ApiKey.OFFSET_COMMIT, then=commit_answer({("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}))
    member, _ = await h.joined_member()
    started = time.monotonic()
    with pytest.raises(KafkaResponseError) as caught:
        await within(member.commit({T0: 8}), "commit")
    assert caught.value.code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert 0.45 <= time.monotonic() - started < 2.0
    assert h.c1.count(ApiKey.OFFSET_COMMIT) > 2


# ------------------------------------------------------------------------------------- OffsetFetch


def fetched(version: int, partitions: Mapping[tuple[str, int], int]) -> SimpleNamespace:
    """An OffsetFetch answer shaped as ``version`` has it (v8+: one entry in ``groups``)."""
    by_topic: dict[str, list[SimpleNamespace]] = {}
    for (topic, index), offset in partitions.items():
        by_topic.setdefault(topic, []).append(
            SimpleNamespace(partition_index=index, committed_offset=offset, metadata="", error_code=0)
        )
    topics = [SimpleNamespace(name=name, partitions=ps) for name, ps in by_topic.items()]
    if version >= 8:
        group = SimpleNamespace(group_id=GROUP, topics=topics, error_code=0)
        return SimpleNamespace(throttle_time_ms=0, groups=[group])
    return SimpleNamespace(throttle_time_ms=0, topics=topics, error_code=0)


@pytest.mark.parametrize("version", [1, 7, 8, 9])
async def test_offset_fetch_body_by_version(h: Harness, version: int) -> None:
    h.cluster.node(C1, offset_fetch=version).script(
        ApiKey.OFFSET_FETCH, fetched(version, {("t", 0): 42, ("t", 1): -1})
    )
    member, _ = h.member()

    offsets = await within(member.committed([T0, T1, U0]), "committed")

    assert offsets == {T0: 42, T1: None, U0: None}
    [sent] = h.c1.sent(ApiKey.OFFSET_FETCH)
    assert sent.version == version
    topics = [{"name": "t", "partition_indexes": [0, 1]}, {"name": "u", "partition_indexes": [0]}]
    if version >= 8:
        assert sent.body == {"groups": [{"group_id": GROUP, "topics": topics}], "require_stable": True}
    else:
        assert sent.body == {"group_id": GROUP, "topics": topics, "require_stable": True}


# -------------------------------------------------------------------------------------------- close


@pytest.mark.parametrize("version", [0, 2, 3, 5])
async def test_close_sends_leave_group(h: Harness, version: int) -> None:
    h.cluster.node(C1, leave_group=version)
    member, rejoins = await h.joined_member(member_id="m-4")

    await within(member.close("bye"), "close")

    [leave] = h.c1.sent(ApiKey.LEAVE_GROUP)
    assert leave.version == version
    assert leave.body["group_id"] == GROUP
    if version >= 3:
        assert leave.body["members"] == [{"member_id": "m-4", "group_instance_id": None, "reason": "bye"}]
    else:
        assert leave.body["member_id"] == "m-4"
        assert "members" not in leave.body
    assert all(c.closed for c in h.cluster.connections_to(C1))
    await no_more_heartbeats(h.c1)
    assert member.generation.member_id == ""
    assert rejoins.count == 0


async def test_static_member_joins_with_instance_id_and_does_not_leave(h: Harness) -> None:
    h.cluster.node(C1, join_group=5)
    member, _ = await h.joined_member(group_instance_id="instance-1")
    [join] = h.c1.sent(ApiKey.JOIN_GROUP)
    assert join.version == 5
    assert join.body["group_instance_id"] == "instance-1"
    await more_heartbeats(h.c1, 1)
    assert h.c1.bodies(ApiKey.HEARTBEAT)[0]["group_instance_id"] == "instance-1"

    await within(member.close(), "close")

    assert h.c1.count(ApiKey.LEAVE_GROUP) == 0
    assert all(c.closed for c in h.cluster.connections_to(C1))


async def test_close_does_not_wait_for_an_unanswered_leave_group(h: Harness) -> None:
    h.c1.script(ApiKey.LEAVE_GROUP, hang)
    member, _ = await h.joined_member()
    started = time.monotonic()
    await within(member.close(), "close")
    elapsed = time.monotonic() - started
    assert h.c1.count(ApiKey.LEAVE_GROUP) == 1
    assert 0.4 <= elapsed < 1.0  # request_timeout_ms is 500
    assert all(c.closed for c in h.cluster.connections_to(C1))


# ---------------------------------------------------------------------------- partition count check


async def test_partition_counts_changed_is_false_for_a_follower(h: Harness) -> None:
    member, _ = await h.joined_member()
    assert not await within(member.partition_counts_changed(), "check")
    assert h.cluster.count_requests == []


async def test_leader_notices_partition_count_change(h: Harness) -> None:
    member, rejoins = h.member()
    h.cluster.counts = {"t": 3}
    h.c1.script(ApiKey.JOIN_GROUP, joined("m-1", leader="m-1", members=[subscriber("m-1", ["t"])]))
    h.c1.script(ApiKey.SYNC_GROUP, synced({"t": [0, 1, 2]}))
    await within(member.join(["t"]))

    assert not await within(member.partition_counts_changed(), "check")
    assert rejoins.count == 0
    h.cluster.counts["t"] = 4
    assert await within(member.partition_counts_changed(), "check")
    assert rejoins.count == 1
    assert member.rejoin_reason is not None and "partition counts" in member.rejoin_reason
    assert not await within(member.partition_counts_changed(), "check")  # already rejoining
    assert rejoins.count == 1


async def test_leader_notices_a_subscribed_topic_created_after_the_assignment(h: Harness) -> None:
    member, rejoins = h.member()
    h.cluster.counts = {"t": 3}  # "later" does not exist yet
    h.c1.script(ApiKey.JOIN_GROUP, joined("m-1", leader="m-1", members=[subscriber("m-1", ["later", "t"])]))
    h.c1.script(ApiKey.SYNC_GROUP, synced({"t": [0, 1, 2]}))
    await within(member.join(["later", "t"]))
    assert not await within(member.partition_counts_changed(), "check")

    h.cluster.counts["later"] = 2
    assert await within(member.partition_counts_changed(), "check")
    assert rejoins.count == 1
