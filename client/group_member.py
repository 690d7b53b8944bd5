"""A member of a classic (pre-KIP-848) consumer group: join, sync, heartbeat, commit, leave.

The console consumer (``kipling consume --group``) and tests use it to share a topic's partitions
with other members, including Java, librdkafka and kafka-python consumers, so it speaks the
consumer protocol exactly as they do:

* **Join.** FindCoordinator, then JoinGroup with protocol type ``consumer`` and one protocol per
  assignor (``range``, ``roundrobin``), whose metadata is the consumer protocol's Subscription. A
  v4+ coordinator first answers MEMBER_ID_REQUIRED with the id to use; the member retries with it.
  The leader the coordinator elects decodes every member's Subscription, assigns the partitions with
  the protocol the group chose, and sends the assignments with its SyncGroup; the others send an
  empty SyncGroup and receive theirs. Rebalances are eager: the caller gives up (and commits) every
  partition before joining again.
* **Heartbeats** go every ``heartbeat.interval.ms`` from a task of their own, on a connection to the
  coordinator that nothing else long-polls (a JoinGroup parks there for up to the rebalance timeout,
  so it must not share a connection with fetches or metadata). REBALANCE_IN_PROGRESS,
  ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID mean the member must join again; the caller is told
  through ``on_rejoin_needed`` and finds out why in :attr:`GroupMember.rejoin_reason`. A coordinator
  that moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a dropped connection) is looked up again
  and heartbeats continue; a member that cannot heartbeat for a whole session timeout rejoins, since
  the coordinator has dropped it by then.
* **Commits** carry the generation and member id, so a member fenced by a rebalance cannot
  overwrite what the partition's new owner committed (:class:`CommitFailedError`).
* **Leave.** A dynamic member sends LeaveGroup when it closes, so the group rebalances at once
  instead of after the session timeout; a static member (``group.instance.id``) does not, as in
  Kafka, so that a quick restart gets its partitions back without a rebalance.

Fatal errors (an invalid group id, INCONSISTENT_GROUP_PROTOCOL, FENCED_INSTANCE_ID, an invalid
session timeout, a full group...) raise :class:`GroupError`; everything retriable is retried with
backoff, as Kafka's consumer retries inside ``poll``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import structlog

from client.assignors import ASSIGNORS, leader_assignments
from client.connection import KafkaConnection
from client.errors import ClientError, KafkaResponseError, error_code
from client.fetch_session import TopicPartition
from client.tasks import cancel_and_wait
from protocol.api_keys import ApiKey
from protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_subscription,
)
from protocol.error_codes import ErrorCode

DEFAULT_SESSION_TIMEOUT_MS = 45_000
"""Kafka's ``session.timeout.ms`` default (since 3.0)."""
DEFAULT_HEARTBEAT_INTERVAL_MS = 3_000
"""Kafka's ``heartbeat.interval.ms`` default."""
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000
"""Kafka's ``max.poll.interval.ms`` default, which its consumer sends as the rebalance timeout."""
DEFAULT_ASSIGNORS = ("range", "roundrobin")
"""librdkafka's default ``partition.assignment.strategy``; both are eager."""
DEFAULT_RETRY_BACKOFF_MS = 100
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
JOIN_TIMEOUT_MARGIN_S = 5.0
"""A JoinGroup waits at the coordinator up to the rebalance timeout; the request may take that long
plus this margin (Kafka's consumer uses the same 5 s)."""
GROUP_KEY_TYPE = 0
NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
SUBSCRIPTION_VERSION = 1
"""v1 adds the partitions the member owns: none for an eager member that joins, as Kafka sends it."""

COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
"""Errors after which the coordinator is looked up again."""
REJOIN_ERRORS = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)
"""Errors that mean this member's generation is over."""

_log = structlog.get_logger("kipling.client.group")
_T = TypeVar("_T")


class GroupError(KafkaResponseError):
    """The group refused this member for a reason retrying will not fix."""


class CommitFailedError(KafkaResponseError):
    """A commit was refused because the group rebalanced: the partitions may belong to someone else."""


class ClusterAccess(Protocol):
    """What a member needs from the cluster: somewhere to ask, a connection of its own, partition counts."""

    async def any_connection(self) -> KafkaConnection:
        """An open connection to any broker (FindCoordinator goes there)."""
        ...

    async def open_connection(self, host: str, port: int) -> KafkaConnection:
        """A new connection to ``host:port`` owned by the caller, who closes it."""
        ...

    async def partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        """Each existing topic's partition count (missing topics are left out)."""
        ...

    def forget(self, connection: KafkaConnection) -> None:
        """``connection`` (from :meth:`any_connection`) failed: drop it."""
        ...


@dataclass(frozen=True, slots=True)
class GroupMemberConfig:
    """The consumer settings a group member uses, under Kafka's names in the docstrings."""

    group_id: str
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS
    """``max.poll.interval.ms``."""
    group_instance_id: str | None = None
    """``group.instance.id``: static membership when set."""
    assignors: tuple[str, ...] = DEFAULT_ASSIGNORS
    """``partition.assignment.strategy``, in preference order."""
    retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ValueError("a consumer group needs a non-empty group.id")
        unknown = [name for name in self.assignors if name not in ASSIGNORS]
        if unknown or not self.assignors:
            raise ValueError(
                f"unknown partition.assignment.strategy {', '.join(unknown) or '(none)'} "
                f"(known: {', '.join(sorted(ASSIGNORS))})"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")


@dataclass(slots=True)
class Generation:
    """What one successful join gave this member."""

    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    protocol_name: str | None = None
    leader_id: str = ""
    assignment: dict[str, list[int]] = field(default_factory=dict)
    assigned_topics: tuple[str, ...] = ()
    """As leader: every topic the members subscribed to, existing or not."""
    assigned_counts: dict[str, int] = field(default_factory=dict)
    """As leader: the partition counts the assignment was computed from, for the topics that existed
    (a change, or a subscribed topic appearing, means rejoin)."""

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    @property
    def valid(self) -> bool:
        """Whether commits may be sent for it: an id and a generation the coordinator gave."""
        return bool(self.member_id) and self.generation_id >= 0


class GroupMember:
    """One member of a consumer group, speaking to the group's coordinator."""

    def __init__(
        self,
        cluster: ClusterAccess,
        config: GroupMemberConfig,
        *,
        on_rejoin_needed: Callable[[], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.generation = Generation()
        self.rejoin_reason: str | None = None
        """Why the current generation ended (None while it holds)."""
        self._on_rejoin_needed = on_rejoin_needed
        self._coordinator: KafkaConnection | None = None
        self._lookup = asyncio.Lock()
        """Heartbeats and the caller may both find the coordinator unknown: one lookup, one connection."""
        self._heartbeats: asyncio.Task[None] | None = None
        self._fatal: GroupError | None = None
        self._joining = False
        self._logger = _log.bind(group=config.group_id)

    # -- joining -----------------------------------------------------------------------------------

    async def join(self, topics: Sequence[str]) -> dict[str, list[int]]:
        """Join (or rejoin) the group subscribed to ``topics``; this member's assignment.

        Retries until the group is stable with this member in it; raises :class:`GroupError` when the
        coordinator refuses the member for good.
        """
        await self._stop_heartbeats()
        reason, self.rejoin_reason = self.rejoin_reason, None
        self._joining = True
        # eager rebalancing: the caller gave up every partition before joining, so it owns none
        subscription = Subscription(topics=tuple(sorted(set(topics))))
        self.generation.assignment = {}
        try:
            while True:
                self._raise_if_fatal()
                try:
                    if await self._join_round(subscription, reason):
                        break
                except ClientError as exc:
                    if isinstance(exc, GroupError):
                        raise
                    self._logger.warning("join failed, retrying", error=str(exc))
                    self._coordinator_lost()
                    await self._backoff()
        except asyncio.CancelledError:
            # a JoinGroup or SyncGroup may still be parked at the coordinator, which answers one
            # connection's requests in order: a LeaveGroup sent behind it would wait it out
            self._coordinator_lost()
            raise
        finally:
            self._joining = False
        self.rejoin_reason = None
        self._heartbeats = asyncio.create_task(
            self._heartbeat_loop(self.generation.generation_id),
            name=f"kipling-heartbeat-{self.config.group_id}",
        )
        self._heartbeats.add_done_callback(self._heartbeats_ended)
        self._logger.info(
            "joined group",
            generation=self.generation.generation_id,
            member_id=self.generation.member_id,
            leader=self.generation.is_leader,
            protocol=self.generation.protocol_name,
            partitions=sum(len(ps) for ps in self.generation.assignment.values()),
        )
        return dict(self.generation.assignment)

    async def _join_round(self, subscription: Subscription, reason: str | None) -> bool:
        """One JoinGroup + SyncGroup attempt; True when this member holds an assignment."""
        coordinator = await self._coordinator_connection()
        joined = await self._send_join(coordinator, subscription, reason)
        if joined is None:
            return False
        assignments: dict[str, bytes] = {}
        if self.generation.is_leader and not joined.skip_assignment:
            assignments = await self._assign(joined.protocol_name, joined.members)
        return await self._send_sync(coordinator, assignments)

    async def _send_join(
        self, coordinator: KafkaConnection, subscription: Subscription, reason: str | None
    ) -> Any | None:
        """JoinGroup; the response on success, None when the round must be retried."""
        version = coordinator.version_for(ApiKey.JOIN_GROUP)
        if self.config.group_instance_id is not None and version < 5:
            raise GroupError(ErrorCode.UNSUPPORTED_VERSION, "static membership needs JoinGroup v5+")
        metadata = encode_subscription(subscription, SUBSCRIPTION_VERSION)
        body = {
            "group_id": self.config.group_id,
            "session_timeout_ms": self.config.session_timeout_ms,
            "rebalance_timeout_ms": self.config.rebalance_timeout_ms,
            "member_id": self.generation.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocols": [{"name": name, "metadata": metadata} for name in self.config.assignors],
            "reason": reason,
        }
        timeout_s = self.config.rebalance_timeout_ms / 1000 + JOIN_TIMEOUT_MARGIN_S
        response = await coordinator.request(ApiKey.JOIN_GROUP, version, body, timeout_s)
        code = error_code(response.error_code)
        if code is ErrorCode.NONE:
            self.generation = Generation(
                response.generation_id, response.member_id, response.protocol_name, response.leader
            )
            return response
        if code is ErrorCode.MEMBER_ID_REQUIRED:
            self.generation.member_id = response.member_id  # retry at once with the id given
            return None
        self._handle_group_error(code, "join")
        await self._backoff()
        return None

    async def _assign(self, protocol_name: str | None, members: Sequence[Any]) -> dict[str, bytes]:
        """The leader's job: every member's assignment, encoded, by member id."""
        if protocol_name is None or protocol_name not in self.config.assignors:
            raise GroupError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"the group chose assignor {protocol_name!r}, which this member did not offer",
            )
        subscribed = [(m.member_id, m.group_instance_id, m.metadata) for m in members]
        try:
            topics = sorted({t for _, _, meta in subscribed for t in decode_subscription(meta).topics})
            counts = await self.cluster.partition_counts(topics)
            assignments = leader_assignments(protocol_name, subscribed, counts)
        except ConsumerProtocolError as exc:
            raise GroupError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"a member sent an undecodable subscription: {exc}"
            ) from None
        self.generation.assigned_topics = tuple(topics)
        self.generation.assigned_counts = counts
        self._logger.info(
            "assigned partitions as leader",
            assignor=protocol_name,
            members=len(subscribed),
            partitions=sum(counts.values()),
        )
        return assignments

    async def partition_counts_changed(self) -> bool:
        """As leader, whether a subscribed topic's partition count moved since the assignment.

        Kafka's leader watches the metadata for this, so that partitions added to a topic get
        consumed without waiting for a member to come or go; the caller rejoins when it is true.
        """
        topics = self.generation.assigned_topics
        if not self.generation.is_leader or not topics or self.rejoin_reason is not None:
            return False
        assigned = self.generation.assigned_counts
        counts = await self.cluster.partition_counts(topics)
        if counts == assigned:
            return False
        self._end_generation(f"partition counts changed: {assigned} -> {counts}")
        return True

    async def _send_sync(self, coordinator: KafkaConnection, assignments: Mapping[str, bytes]) -> bool:
        version = coordinator.version_for(ApiKey.SYNC_GROUP)
        body = {
            "group_id": self.config.group_id,
            "generation_id": self.generation.generation_id,
            "member_id": self.generation.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocol_name": self.generation.protocol_name,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        }
        timeout_s = self.config.rebalance_timeout_ms / 1000 + JOIN_TIMEOUT_MARGIN_S
        response = await coordinator.request(ApiKey.SYNC_GROUP, version, body, timeout_s)
        code = error_code(response.error_code)
        if code is not ErrorCode.NONE:
            self._handle_group_error(code, "sync")
            if code is not ErrorCode.REBALANCE_IN_PROGRESS:
                await self._backoff()
            return False
        try:  # the coordinator sends no bytes to a member the leader's SyncGroup left out
            assignment = decode_assignment(response.assignment) if response.assignment else Assignment()
            self.generation.assignment = assignment.as_dict()
        except ConsumerProtocolError as exc:
            raise GroupError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"undecodable assignment from the leader: {exc}"
            ) from None
        return True

    # -- heartbeats --------------------------------------------------------------------------------

    async def _heartbeat_loop(self, generation_id: int) -> None:
        """Heartbeat until the member is out of the group or :meth:`join` takes over.

        REBALANCE_IN_PROGRESS tells the caller to rejoin, but the heartbeats go on until it does:
        they keep the member's session alive while it gives up its partitions and commits, which may
        take up to the rebalance timeout (``max.poll.interval.ms``), longer than a session.
        """
        interval_s = self.config.heartbeat_interval_ms / 1000
        last_ok = time.monotonic()
        while True:
            await asyncio.sleep(interval_s)
            coordinator = None
            try:
                coordinator = await self._coordinator_connection(time.monotonic() + interval_s)
                code = await self._heartbeat(coordinator, generation_id)
            except ClientError as exc:
                self._logger.info("heartbeat failed", error=str(exc))
                self._coordinator_lost(coordinator)
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if code is ErrorCode.NONE:
                last_ok = time.monotonic()
                continue
            if code is ErrorCode.REBALANCE_IN_PROGRESS:
                last_ok = time.monotonic()
                self._end_generation("heartbeat: REBALANCE_IN_PROGRESS")
                continue
            if code not in REJOIN_ERRORS and (code in COORDINATOR_MOVED or code.retriable):
                if code in COORDINATOR_MOVED:
                    self._coordinator_lost(coordinator)  # the next heartbeat looks it up again
                if (time.monotonic() - last_ok) * 1000 < self.config.session_timeout_ms:
                    continue
                self._end_generation(f"no heartbeat for a session timeout ({code.name})")
                return
            try:
                self._handle_group_error(code, "heartbeat")
            except GroupError as exc:
                self._fatal = exc
                self._end_generation(str(exc))
                return
            if code in REJOIN_ERRORS:
                return

    async def _heartbeat(self, coordinator: KafkaConnection, generation_id: int) -> ErrorCode:
        version = coordinator.version_for(ApiKey.HEARTBEAT)
        body = {
            "group_id": self.config.group_id,
            "generation_id": generation_id,
            "member_id": self.generation.member_id,
            "group_instance_id": self.config.group_instance_id,
        }
        response = await coordinator.request(ApiKey.HEARTBEAT, version, body, self._request_timeout_s)
        return error_code(response.error_code)

    def _heartbeats_ended(self, task: asyncio.Task[None]) -> None:
        """A heartbeat task that died of an unexpected error must not leave the member silently
        heartbeat-less until the coordinator expels it: the caller hears of it and the next join
        raises it."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        self._logger.error("heartbeats failed", error=repr(exc))
        self._fatal = GroupError(ErrorCode.UNKNOWN_SERVER_ERROR, f"heartbeats failed: {exc!r}")
        self._end_generation(f"heartbeats failed: {exc!r}")

    async def _stop_heartbeats(self) -> None:
        task, self._heartbeats = self._heartbeats, None
        await cancel_and_wait(task)  # an error that ended the task was recorded by _heartbeats_ended

    # -- offsets -----------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        """Commit ``offsets`` (the next offset to consume, per partition) for this generation.

        Raises :class:`CommitFailedError` when the group rebalanced (the caller rejoins), and
        :class:`GroupError` or a KafkaResponseError for a partition the coordinator refused.
        Retriable errors are retried until the request timeout has passed.
        """
        if not offsets:
            return
        if not self.generation.valid:  # Kafka fails such a commit without sending it, too: an
            # Empty group would take it, and roll back what the partitions' new owners committed
            raise CommitFailedError(
                ErrorCode.ILLEGAL_GENERATION, "this member is not in a generation of the group"
            )
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": offset, "committed_metadata": metadata}
            )
        body = {
            "group_id": self.config.group_id,
            "generation_id_or_member_epoch": self.generation.generation_id,
            "member_id": self.generation.member_id,
            "group_instance_id": self.config.group_instance_id,
            "topics": [{"name": name, "partitions": ps} for name, ps in by_topic.items()],
        }
        await self._retrying("commit offsets", lambda c: self._commit_once(c, body))

    async def _commit_once(self, coordinator: KafkaConnection, body: Mapping[str, Any]) -> None:
        version = coordinator.version_for(ApiKey.OFFSET_COMMIT)
        response = await coordinator.request(ApiKey.OFFSET_COMMIT, version, body, self._request_timeout_s)
        for topic in response.topics:
            for p in topic.partitions:
                code = error_code(p.error_code)
                if code is ErrorCode.NONE:
                    continue
                context = f"commit {topic.name}-{p.partition_index}"
                if code in REJOIN_ERRORS:
                    self._end_generation(f"commit refused: {code.name}", reset=code)
                    raise CommitFailedError(code, context=context)
                raise KafkaResponseError(code, context=context)

    async def committed(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where nothing was committed)."""
        if not tps:
            return {}
        return await self._retrying("fetch committed offsets", lambda c: self._fetch_offsets_once(c, tps))

    async def _fetch_offsets_once(
        self, coordinator: KafkaConnection, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [{"name": name, "partition_indexes": ps} for name, ps in by_topic.items()]
        version = coordinator.version_for(ApiKey.OFFSET_FETCH)
        if version >= 8:
            body: dict[str, Any] = {
                "groups": [{"group_id": self.config.group_id, "topics": topics}],
                "require_stable": True,
            }
        else:
            body = {"group_id": self.config.group_id, "topics": topics, "require_stable": True}
        response = await coordinator.request(ApiKey.OFFSET_FETCH, version, body, self._request_timeout_s)
        group = response.groups[0] if version >= 8 else response
        code = error_code(group.error_code)
        if code is not ErrorCode.NONE:
            raise KafkaResponseError(code, context=f"fetch offsets of group {self.config.group_id}")
        out: dict[TopicPartition, int | None] = dict.fromkeys(tps)
        for topic in group.topics:
            for p in topic.partitions:
                code = error_code(p.error_code)
                if code is not ErrorCode.NONE:
                    raise KafkaResponseError(code, context=f"fetch offset {topic.name}-{p.partition_index}")
                tp = TopicPartition(topic.name, p.partition_index)
                if tp in out and p.committed_offset >= 0:
                    out[tp] = p.committed_offset
        return out

    async def _retrying(self, what: str, attempt: Callable[[KafkaConnection], Awaitable[_T]]) -> _T:
        """Run ``attempt`` at the coordinator, retrying retriable failures within the request timeout."""
        deadline = time.monotonic() + self._request_timeout_s
        while True:
            coordinator = None
            try:
                coordinator = await self._coordinator_connection(deadline)
                return await attempt(coordinator)
            except KafkaResponseError as exc:
                if not exc.retriable or isinstance(exc, CommitFailedError) or time.monotonic() > deadline:
                    raise
                if exc.code in COORDINATOR_MOVED:
                    self._coordinator_lost(coordinator)
                self._logger.info("retrying", what=what, error=str(exc))
            except ClientError as exc:
                if time.monotonic() > deadline:
                    raise
                self._logger.info("retrying", what=what, error=str(exc))
                self._coordinator_lost(coordinator)
            await self._backoff()

    # -- leaving -----------------------------------------------------------------------------------

    async def close(self, reason: str = "the consumer is closing") -> None:
        """Stop heartbeating and, for a dynamic member, leave the group; closes the coordinator link."""
        await self._stop_heartbeats()
        try:
            if self.generation.member_id and self.config.group_instance_id is None:
                async with asyncio.timeout(self._request_timeout_s):
                    await self._leave(reason)
        except (ClientError, TimeoutError) as exc:  # the session timeout removes the member then
            self._logger.warning("leaving the group failed", error=str(exc) or "timed out")
        finally:
            self.generation = Generation()
            self._coordinator_lost()

    async def _leave(self, reason: str) -> None:
        coordinator = await self._coordinator_connection(time.monotonic() + self._request_timeout_s)
        version = coordinator.version_for(ApiKey.LEAVE_GROUP)
        member_id = self.generation.member_id
        body: dict[str, Any] = {"group_id": self.config.group_id, "member_id": member_id}
        if version >= 3:
            body["members"] = [{"member_id": member_id, "group_instance_id": None, "reason": reason}]
        response = await coordinator.request(ApiKey.LEAVE_GROUP, version, body, self._request_timeout_s)
        codes = [error_code(response.error_code)]
        codes += [error_code(m.error_code) for m in getattr(response, "members", None) or []]
        refused = [code for code in codes if code is not ErrorCode.NONE]
        if refused and refused[0] is not ErrorCode.UNKNOWN_MEMBER_ID:  # already gone is fine
            raise KafkaResponseError(refused[0], context=f"leave group {self.config.group_id}")
        self._logger.info("left group", member_id=member_id)

    # -- the coordinator ---------------------------------------------------------------------------

    async def _coordinator_connection(self, deadline: float | None = None) -> KafkaConnection:
        """The connection to the group's coordinator, looked up (FindCoordinator) when unknown."""
        async with self._lookup:
            if self._coordinator is not None and not self._coordinator.closed:
                return self._coordinator
            self._coordinator = None
            return await self._look_up_coordinator(deadline)

    async def _look_up_coordinator(self, deadline: float | None) -> KafkaConnection:
        """FindCoordinator until it names one (retriable errors are retried until ``deadline``)."""
        while True:
            connection = await self.cluster.any_connection()
            try:
                node_id, host, port = await self._find_coordinator(connection)
            except KafkaResponseError as exc:
                if not exc.retriable:
                    raise GroupError(exc.code, exc.message, context=exc.context) from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                self._logger.info("coordinator not available yet", error=str(exc))
                await self._backoff()
                continue
            except ClientError:
                self.cluster.forget(connection)
                raise
            self._coordinator = await self.cluster.open_connection(host, port)
            self._logger.info("found coordinator", node_id=node_id, host=host, port=port)
            return self._coordinator

    async def _find_coordinator(self, connection: KafkaConnection) -> tuple[int, str, int]:
        version = connection.version_for(ApiKey.FIND_COORDINATOR)
        group = self.config.group_id
        if version >= 4:
            body: dict[str, Any] = {"key_type": GROUP_KEY_TYPE, "coordinator_keys": [group]}
        else:
            body = {"key": group, "key_type": GROUP_KEY_TYPE}
        response = await connection.request(ApiKey.FIND_COORDINATOR, version, body, self._request_timeout_s)
        found = response.coordinators[0] if version >= 4 else response
        code = error_code(found.error_code)
        if code is not ErrorCode.NONE:
            message = getattr(found, "error_message", None)
            raise KafkaResponseError(code, message, context=f"find coordinator of {group}")
        return found.node_id, found.host, found.port

    def _coordinator_lost(self, connection: KafkaConnection | None = None) -> None:
        """Drop the coordinator connection (the one a failure came from, if given and still current:
        the other task may have replaced it with a good one meanwhile)."""
        if connection is not None and connection is not self._coordinator:
            return
        if self._coordinator is not None:
            self._coordinator.close("the coordinator moved or failed")
        self._coordinator = None

    # -- error handling ----------------------------------------------------------------------------

    def _handle_group_error(self, code: ErrorCode, what: str) -> None:
        """React to a JoinGroup/SyncGroup/Heartbeat error: rejoin, look up the coordinator, or raise."""
        if code in COORDINATOR_MOVED:
            self._coordinator_lost()
        elif code in REJOIN_ERRORS:
            self._end_generation(f"{what}: {code.name}", reset=code)
        elif code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            pass
        elif not code.retriable:
            raise GroupError(code, context=f"{what} in group {self.config.group_id}")

    def _end_generation(self, reason: str, reset: ErrorCode | None = None) -> None:
        """This member's generation is over: forget what must be forgotten and tell the caller once."""
        if reset is ErrorCode.UNKNOWN_MEMBER_ID:
            self.generation.member_id = UNKNOWN_MEMBER_ID
        if reset in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.generation.generation_id = NO_GENERATION
        if self.rejoin_reason is not None or self._joining:
            return
        self.rejoin_reason = reason
        self._logger.info("group rebalancing", reason=reason)
        if self._on_rejoin_needed is not None:
            self._on_rejoin_needed()

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    @property
    def _request_timeout_s(self) -> float:
        return self.config.request_timeout_ms / 1000

    async def _backoff(self) -> None:
        await asyncio.sleep(self.config.retry_backoff_ms / 1000)


__all__ = [
    "DEFAULT_ASSIGNORS",
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_REBALANCE_TIMEOUT_MS",
    "DEFAULT_REQUEST_TIMEOUT_MS",
    "DEFAULT_RETRY_BACKOFF_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "ClusterAccess",
    "CommitFailedError",
    "Generation",
    "GroupError",
    "GroupMember",
    "GroupMemberConfig",
]
