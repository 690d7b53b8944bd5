"""The group API handlers over a real GroupCoordinator on simulated time, called through the codecs.

Every request is written with the request codec of its version and read back (so a handler sees only
what that version carries), and every response is written with the response codec of that version
(which must not raise) and read back, so the assertions see what a client would. The coordinator is
:class:`tests.coordinator.group.helpers.Harness`'s: an InMemoryGroupLog, purgatories on a FakeScheduler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.handlers.base import Handler, RequestContext
from broker.handlers.delete_groups import DeleteGroupsHandler
from broker.handlers.describe_groups import DescribeGroupsHandler
from broker.handlers.find_coordinator import FindCoordinatorHandler
from broker.handlers.heartbeat import HeartbeatHandler
from broker.handlers.join_group import JoinGroupHandler
from broker.handlers.leave_group import LeaveGroupHandler
from broker.handlers.list_groups import ListGroupsHandler
from broker.handlers.metadata import BrokerEndpoint
from broker.handlers.offset_commit import OffsetCommitHandler, PartitionExists
from broker.handlers.offset_delete import OffsetDeleteHandler
from broker.handlers.offset_fetch import OffsetFetchHandler
from broker.handlers.sync_group import SyncGroupHandler
from coordinator.group import GroupCoordinator, partition_for
from coordinator.group.subscriptions import encode_subscription
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS, RESPONSES
from tests.coordinator.group.helpers import Harness, config

E = ErrorCode
NONE = int(ErrorCode.NONE)
LISTENER = "PLAINTEXT"
PEER = "10.1.2.3:51234"
CLIENT_ID = "consumer-1"
COORDINATOR = BrokerEndpoint(7, "broker7.example", 19092)
TRANSACTION_COORDINATOR = BrokerEndpoint(8, "txn-coordinator.example", 29092)
SESSION_MS = 10_000
REBALANCE_MS = 30_000
SUBSCRIPTION = encode_subscription(("orders",))
ANSWER_STEPS = 5
"""Event loop turns a request may take to finish once the coordinator has answered it."""


@dataclass
class FakeLocator:
    """Both coordinator locators: ids starting with "lost" have no coordinator right now;
    transactional ids are located on TRANSACTION_COORDINATOR."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    transaction_calls: list[tuple[str, str]] = field(default_factory=list)

    async def find_transaction_coordinator(
        self, transactional_id: str, listener: str
    ) -> tuple[ErrorCode, BrokerEndpoint | None]:
        self.transaction_calls.append((transactional_id, listener))
        if transactional_id.startswith("lost"):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, TRANSACTION_COORDINATOR

    async def find_group_coordinator(
        self, group_id: str, listener: str
    ) -> tuple[ErrorCode, BrokerEndpoint | None]:
        self.calls.append((group_id, listener))
        if group_id.startswith("lost"):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, COORDINATOR


class Env:
    """One coordinator and the eleven handlers in front of it."""

    def __init__(
        self,
        *,
        num_partitions: int = 1,
        load: bool = True,
        defer_log: bool = False,
        partition_exists: PartitionExists | None = None,
    ) -> None:
        self.harness = Harness(
            config(offsets_topic_num_partitions=num_partitions), load=load, defer_log=defer_log
        )
        self.locator = FakeLocator()
        self.find_coordinator = FindCoordinatorHandler(self.locator, self.locator)
        self.join_group = JoinGroupHandler(self.coordinator)
        self.sync_group = SyncGroupHandler(self.coordinator)
        self.heartbeat = HeartbeatHandler(self.coordinator)
        self.leave_group = LeaveGroupHandler(self.coordinator)
        self.offset_commit = OffsetCommitHandler(self.coordinator, partition_exists=partition_exists)
        self.offset_fetch = OffsetFetchHandler(self.coordinator)
        self.list_groups = ListGroupsHandler(self.coordinator)
        self.describe_groups = DescribeGroupsHandler(self.coordinator)
        self.delete_groups = DeleteGroupsHandler(self.coordinator)
        self.offset_delete = OffsetDeleteHandler(self.coordinator, partition_exists=partition_exists)

    @property
    def coordinator(self) -> GroupCoordinator:
        return self.harness.coordinator

    @property
    def handlers(self) -> list[Handler]:
        return [
            self.find_coordinator,
            self.join_group,
            self.sync_group,
            self.heartbeat,
            self.leave_group,
            self.offset_commit,
            self.offset_fetch,
            self.list_groups,
            self.describe_groups,
            self.delete_groups,
            self.offset_delete,
        ]

    def own_only(self, group_id: str) -> str:
        """Load just the partition of ``group_id`` (the coordinator must start with none loaded);
        returns a group id of another partition, which this coordinator does not own."""
        num = self.harness.config.offsets_topic_num_partitions
        mine = partition_for(group_id, num)
        self.coordinator.load_partition(mine, [])
        return next(f"other-{i}" for i in range(1000) if partition_for(f"other-{i}", num) != mine)

    def same_partition(self, group_id: str) -> str:
        """Another group id that maps to the partition of ``group_id``."""
        num = self.harness.config.offsets_topic_num_partitions
        mine = partition_for(group_id, num)
        return next(f"mine-{i}" for i in range(1000) if partition_for(f"mine-{i}", num) == mine)

    # -- calling ------------------------------------------------------------------------------------

    def start(self, handler: Handler, version: int, body: dict[str, Any]) -> asyncio.Task[MessageData]:
        """Run a request as a task (JoinGroup and SyncGroup may wait for the rebalance)."""
        return asyncio.ensure_future(call(handler, version, body))

    def start_decoded(
        self, handler: Handler, version: int, request: MessageData
    ) -> asyncio.Task[MessageData]:
        """Run an already decoded request as a task."""
        return asyncio.ensure_future(answer(handler, version, request))

    async def call(self, handler: Handler, version: int, body: dict[str, Any]) -> MessageData:
        """Run a request to its answer, letting due coordinator timers fire while it waits."""
        return (await self.finish(self.start(handler, version, body)))[0]

    async def finish(self, *tasks: asyncio.Task[MessageData]) -> list[MessageData]:
        """Let the tasks reach the coordinator, fire the timers due now, collect the answers; a task
        still waiting then (for a rebalance that needs other members) fails the test, not hangs it."""
        await asyncio.sleep(0)
        self.harness.settle()
        for _ in range(ANSWER_STEPS):
            if all(task.done() for task in tasks):
                break
            await asyncio.sleep(0)
        waiting = [task for task in tasks if not task.done()]
        for task in waiting:
            task.cancel()
        assert not waiting, f"{len(waiting)} request(s) got no answer"
        return [task.result() for task in tasks]

    async def finish_log(self, *tasks: asyncio.Task[MessageData]) -> list[MessageData]:
        """Write every deferred append to ``__consumer_offsets``, then collect the answers."""
        await asyncio.sleep(0)
        self.harness.log.complete_all()
        return await self.finish(*tasks)

    # -- requests, by version -----------------------------------------------------------------------

    async def join(
        self,
        version: int,
        group_id: str = "group",
        member_id: str = "",
        *,
        instance_id: str | None = None,
        reason: str | None = None,
    ) -> MessageData:
        return await self.call(self.join_group, version, join_body(group_id, member_id, instance_id, reason))

    async def join_member(self, version: int, group_id: str = "group") -> MessageData:
        """A new dynamic member's whole join: two steps from v4 (KIP-394), one before."""
        first = await self.join(version, group_id)
        if version < 4:
            return first
        assert first.error_code == int(E.MEMBER_ID_REQUIRED), first
        return await self.join(version, group_id, first.member_id)


def ctx(handler: Handler, version: int, *, peer: str = PEER, listener: str = LISTENER) -> RequestContext:
    return RequestContext(int(handler.api_key), version, 1, CLIENT_ID, peer, 1, 0, listener)


async def call(handler: Handler, version: int, body: dict[str, Any]) -> MessageData:
    """Encode ``body`` as a request of ``version``, decode it, handle it, encode and decode the answer."""
    codec = REQUESTS[int(handler.api_key)].codec(version)
    return await answer(handler, version, codec.decode(codec.encode(body)))


async def answer(handler: Handler, version: int, request: MessageData) -> MessageData:
    """Handle a decoded request; the response goes through the response codec of ``version``."""
    response = await handler.handle(ctx(handler, version), request)
    return encode_response(handler.api_key, version, response)


def encode_response(api_key: ApiKey, version: int, response: Any) -> MessageData:
    out = RESPONSES[int(api_key)].codec(version)
    return out.decode(out.encode(response))


def versions(handler: Handler) -> range:
    return range(handler.min_version, handler.max_version + 1)


# -- request bodies ---------------------------------------------------------------------------------


def join_body(
    group_id: str = "group",
    member_id: str = "",
    instance_id: str | None = None,
    reason: str | None = None,
    *,
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    protocols: Sequence[str] = ("range",),
) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "protocol_type": "consumer",
        "protocols": [{"name": name, "metadata": SUBSCRIPTION} for name in protocols],
        "reason": reason,
    }


def sync_body(
    group_id: str,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    *,
    protocol_type: str | None = "consumer",
    protocol_name: str | None = "range",
    instance_id: str | None = None,
) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }


def heartbeat_body(group_id: str, member_id: str, generation: int) -> dict[str, Any]:
    return {"group_id": group_id, "generation_id": generation, "member_id": member_id}


def leave_body(group_id: str, *members: tuple[str, str | None]) -> dict[str, Any]:
    """``members`` as (member id, instance id); v0-2 carry only the first member id."""
    return {
        "group_id": group_id,
        "member_id": members[0][0] if members else "",
        "members": [{"member_id": m, "group_instance_id": i, "reason": "bye"} for m, i in members],
    }


def commit_body(
    group_id: str,
    offsets: dict[tuple[str, int], int],
    *,
    member_id: str = "",
    generation: int = -1,
    metadata: str | None = "meta",
    leader_epoch: int = 5,
    retention_ms: int = -1,
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": leader_epoch,
                "committed_metadata": metadata,
            }
        )
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "retention_time_ms": retention_ms,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()],
    }


def offset_delete_body(group_id: str, partitions: Iterable[tuple[str, int]]) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append({"partition_index": partition})
    return {"group_id": group_id, "topics": [{"name": n, "partitions": p} for n, p in by_topic.items()]}


def offset_delete_answer(response: MessageData) -> tuple[int, dict[tuple[str, int], int]]:
    """(top-level error, {(topic, partition): error})."""
    return response.error_code, committed(response)


def fetch_topics(partitions: Iterable[tuple[str, int]] | None) -> list[dict[str, Any]] | None:
    if partitions is None:
        return None
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [{"name": name, "partition_indexes": indexes} for name, indexes in by_topic.items()]


def fetch_body(
    version: int,
    groups: dict[str, Iterable[tuple[str, int]] | None],
    *,
    require_stable: bool = False,
) -> dict[str, Any]:
    """One group (v1-7: the first of ``groups``) or all of them (v8+); None: all partitions."""
    if version >= 8:
        return {
            "groups": [{"group_id": g, "topics": fetch_topics(p)} for g, p in groups.items()],
            "require_stable": require_stable,
        }
    group_id, partitions = next(iter(groups.items()))
    return {"group_id": group_id, "topics": fetch_topics(partitions), "require_stable": require_stable}


def fetched(response: MessageData, version: int, group_id: str = "group") -> tuple[int, dict[Any, Any]]:
    """(group error, {(topic, partition): (offset, leader epoch, metadata, error)}) in any version;
    v1's group error is read from its partitions, as Kafka's client does."""
    if version >= 8:
        group = next(g for g in response.groups if g.group_id == group_id)
        error, topics = group.error_code, group.topics
    else:
        error, topics = response.error_code, response.topics
    partitions = {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in topics
        for p in t.partitions
    }
    return error, partitions


def committed(response: MessageData) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
