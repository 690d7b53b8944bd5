"""`kipling consume --group`: the console consumer as a member of a consumer group.

The partitions printed are the ones the group assigns to this member (client.group_member does the
join, sync and heartbeats), and what was printed is committed, so that

* several ``kipling consume --group G`` processes (or Java, librdkafka, kafka-python consumers in
  the same group) share the topic's partitions, each record printed by one of them;
* a consumer started again resumes where the group left off; partitions without a committed offset
  start as ``auto.offset.reset`` says (``latest``, or ``earliest`` with ``--from-beginning``).

What is committed is the position after the last record *printed* (not after the last one fetched,
as Kafka's console consumer commits on close): stopping at ``--max-messages`` leaves the rest for the
next consumer of the group. Commits happen every ``auto.commit.interval.ms``, before the partitions
are given up in a rebalance (rebalances are eager: every partition is given up, then the new
assignment is taken), and when the consumer stops. ``enable.auto.commit=false`` turns all three
off, as in Kafka.

The consumer settings are taken with ``--consumer-property`` under Kafka's names; the ones this
consumer has no use for are named in a warning. The group's leader checks the topic's partition
count every ``metadata.max.age.ms`` and rebalances the group when partitions were added, as Kafka's
leader does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from client.connection import KafkaConnection
from client.errors import ClientError, KafkaResponseError
from client.fetch_session import TopicPartition
from client.group_member import (
    DEFAULT_ASSIGNORS,
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_REBALANCE_TIMEOUT_MS,
    DEFAULT_REQUEST_TIMEOUT_MS,
    DEFAULT_RETRY_BACKOFF_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    CommitFailedError,
    GroupMember,
    GroupMemberConfig,
)
from protocol.error_codes import ErrorCode
from tools.commands.topics import ClusterConnections

DEFAULT_AUTO_COMMIT_INTERVAL_MS = 5_000
"""Kafka's ``auto.commit.interval.ms`` default."""
DEFAULT_METADATA_MAX_AGE_MS = 300_000
"""Kafka's ``metadata.max.age.ms`` default."""
OFFSET_RESET_POLICIES = ("earliest", "latest", "none")
ASSIGNOR_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
}
"""Java consumers name assignors by class; the same names work here."""

_log = structlog.get_logger("kipling.commands.consume")


class GroupConsumeError(Exception):
    """A group setting or state the console consumer cannot go on with (status 1)."""


@dataclass(frozen=True, slots=True)
class GroupOptions:
    """``--group`` and the ``--consumer-property`` settings a group member uses."""

    member: GroupMemberConfig
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = DEFAULT_AUTO_COMMIT_INTERVAL_MS
    auto_offset_reset: str = "latest"
    metadata_max_age_ms: int = DEFAULT_METADATA_MAX_AGE_MS
    """How often the group's leader checks the topic's partition count (a change means rebalance)."""
    ignored: tuple[str, ...] = field(default=())
    """Properties given that this consumer does not use (to warn about)."""

    KNOWN = (
        "group.id",
        "group.instance.id",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "partition.assignment.strategy",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "auto.offset.reset",
        "retry.backoff.ms",
        "request.timeout.ms",
        "metadata.max.age.ms",
    )

    @classmethod
    def from_properties(
        cls, group_id: str | None, properties: Mapping[str, str], *, from_beginning: bool
    ) -> GroupOptions:
        """The options of ``--group`` and ``--consumer-property``; ValueError for an invalid value.

        ``from_beginning`` is ``--from-beginning``: ``auto.offset.reset=earliest`` unless set otherwise.
        """
        given_group = properties.get("group.id")
        if group_id is not None and given_group is not None and given_group != group_id:
            raise ValueError(
                f"the group id is given twice, with different values: --group {group_id} "
                f"and group.id={given_group}"
            )
        group = group_id if group_id is not None else given_group
        if not group:
            raise ValueError("a consumer group needs a group id (--group)")
        reset = offset_reset_policy(properties, from_beginning=from_beginning)
        member = GroupMemberConfig(
            group_id=group,
            session_timeout_ms=_int(properties, "session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS),
            heartbeat_interval_ms=_int(properties, "heartbeat.interval.ms", DEFAULT_HEARTBEAT_INTERVAL_MS),
            rebalance_timeout_ms=_int(properties, "max.poll.interval.ms", DEFAULT_REBALANCE_TIMEOUT_MS),
            group_instance_id=properties.get("group.instance.id") or None,
            assignors=_assignors(properties.get("partition.assignment.strategy")),
            retry_backoff_ms=_int(properties, "retry.backoff.ms", DEFAULT_RETRY_BACKOFF_MS),
            request_timeout_ms=_int(properties, "request.timeout.ms", DEFAULT_REQUEST_TIMEOUT_MS),
        )
        return cls(
            member=member,
            enable_auto_commit=_bool(properties, "enable.auto.commit", True),
            auto_commit_interval_ms=_int(
                properties, "auto.commit.interval.ms", DEFAULT_AUTO_COMMIT_INTERVAL_MS
            ),
            auto_offset_reset=reset,
            metadata_max_age_ms=_int(properties, "metadata.max.age.ms", DEFAULT_METADATA_MAX_AGE_MS),
            ignored=tuple(sorted(set(properties) - set(cls.KNOWN))),
        )


def offset_reset_policy(properties: Mapping[str, str], *, from_beginning: bool) -> str:
    """``auto.offset.reset``: where a partition without a (valid) position starts.

    ``--from-beginning`` means ``earliest``; saying both with different values is refused, as
    Kafka's console consumer refuses it. ValueError for an unknown policy.
    """
    given = properties.get("auto.offset.reset")
    if given is None:
        return "earliest" if from_beginning else "latest"
    reset = given.strip()
    if reset not in OFFSET_RESET_POLICIES:
        raise ValueError(
            f"invalid auto.offset.reset {reset!r} (expected one of {', '.join(OFFSET_RESET_POLICIES)})"
        )
    if from_beginning and reset != "earliest":
        raise ValueError(f"--from-beginning and auto.offset.reset={reset} contradict each other")
    return reset


def _int(properties: Mapping[str, str], name: str, default: int) -> int:
    text = properties.get(name)
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"invalid {name} {text!r}: expected a number of milliseconds") from None
    if value < 1:
        raise ValueError(f"invalid {name} {value}: expected at least 1")
    return value


def _bool(properties: Mapping[str, str], name: str, default: bool) -> bool:
    text = properties.get(name)
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"invalid {name} {text!r}: expected true or false")
    return lowered == "true"


def _assignors(text: str | None) -> tuple[str, ...]:
    if text is None:
        return DEFAULT_ASSIGNORS
    names = [part.strip() for part in text.split(",") if part.strip()]
    return tuple(ASSIGNOR_CLASS_NAMES.get(name, name) for name in names)


class ToolClusterAccess:
    """client.group_member's view of the cluster, over the tool's :class:`ClusterConnections`."""

    def __init__(self, cluster: ClusterConnections) -> None:
        self.cluster = cluster

    async def any_connection(self) -> KafkaConnection:
        return await self.cluster.any_connection()

    async def open_connection(self, host: str, port: int) -> KafkaConnection:
        return await self.cluster.pool.dedicated(host, port)

    async def partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        metadata = await self.cluster.metadata(list(topics))
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is ErrorCode.NONE and name in topics
        }

    def forget(self, connection: KafkaConnection) -> None:
        self.cluster.forget(connection)


class PartitionOwner(Protocol):
    """The consumer whose partitions the group decides (tools.commands.consume.TopicConsumer)."""

    positions: dict[TopicPartition, int]
    """The position after the last record printed, per partition owned."""

    async def revoke_all(self) -> dict[TopicPartition, int]:
        """Stop fetching every partition; the positions (which stay until :meth:`assign`)."""
        ...

    async def assign(self, positions: Mapping[TopicPartition, int | None]) -> None:
        """Own exactly these partitions from these positions (None: auto.offset.reset)."""
        ...

    def wake(self) -> None: ...


class ConsoleGroupLink:
    """Drives a :class:`PartitionOwner` from a group membership: assignment, rebalances, commits.

    Positions are committed only under the generation that assigned their partitions: after a
    rebalance the partitions may be someone else's, and an Empty group would take any commit.
    Interval commits run in a task of their own (as Kafka's auto-commit is asynchronous), so a slow
    coordinator never holds up printing; the commits before a rebalance and at the end are awaited.
    """

    def __init__(self, cluster: ClusterConnections, topic: str, options: GroupOptions) -> None:
        self.topic = topic
        self.options = options
        self.member = GroupMember(ToolClusterAccess(cluster), options.member, on_rejoin_needed=self._wake)
        self._owner: PartitionOwner | None = None
        self._committed: dict[TopicPartition, int] = {}
        self._assigned_generation: int | None = None
        self._commit_task: asyncio.Task[None] | None = None
        now = time.monotonic()
        self._next_commit = now + options.auto_commit_interval_ms / 1000
        self._next_metadata_check = now + options.metadata_max_age_ms / 1000

    # -- what TopicConsumer calls ------------------------------------------------------------------

    async def start(self, owner: PartitionOwner) -> None:
        """Join the group and take this member's partitions."""
        self._owner = owner
        await self._join(owner)

    def due_in(self) -> float | None:
        """Seconds until the next interval commit or leader's metadata check (None: nothing timed)."""
        deadlines = [self._next_metadata_check] if self.member.generation.is_leader else []
        if self.options.enable_auto_commit:
            deadlines.append(self._next_commit)
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    async def tick(self, owner: PartitionOwner) -> None:
        """After a loop turn: rejoin if the generation ended; start a commit or a metadata check if due."""
        if self.member.rejoin_reason is not None:
            await self._rebalance(owner)
            return
        now = time.monotonic()
        if self.options.enable_auto_commit and now >= self._next_commit:
            self._next_commit = now + self.options.auto_commit_interval_ms / 1000
            if self._commit_task is None or self._commit_task.done():
                self._commit_task = asyncio.create_task(self._commit(dict(owner.positions)))
        if self.member.generation.is_leader and now >= self._next_metadata_check:
            self._next_metadata_check = now + self.options.metadata_max_age_ms / 1000
            try:
                if await self.member.partition_counts_changed():
                    await self._rebalance(owner)
            except ClientError as exc:
                _log.warning("checking the topic's partitions failed", error=str(exc))

    async def stop(self, owner: PartitionOwner) -> None:
        """Commit what was printed and leave the group (a static member stays, as in Kafka).

        The commit gets one request timeout in all, the leave another, so that stopping with the
        coordinator unreachable takes bounded time (Kafka's close waits 30 s by default).
        """
        try:
            async with asyncio.timeout(self.options.member.request_timeout_ms / 1000):
                await self._settle_commit()
                if self.options.enable_auto_commit:
                    await self._commit(owner.positions)
        except TimeoutError:
            _log.warning("the final commit did not complete in time", group=self.options.member.group_id)
        finally:
            await self.member.close()

    # -- internals ---------------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._owner is not None:
            self._owner.wake()

    async def _rebalance(self, owner: PartitionOwner) -> None:
        """Eager: stop fetching, commit what was printed (while the generation lasts), join again."""
        positions = await owner.revoke_all()
        await self._settle_commit()
        if self.options.enable_auto_commit:
            await self._commit(positions)
        await self._join(owner)

    async def _join(self, owner: PartitionOwner) -> None:
        """Join until the group assigns this member partitions and their committed offsets are known."""
        while True:
            assignment = await self.member.join([self.topic])
            tps = [TopicPartition(self.topic, p) for p in sorted(assignment.get(self.topic, []))]
            committed = await self._committed_offsets(tps)
            if committed is not None:
                break
        missing = sorted(tp.partition for tp, offset in committed.items() if offset is None)
        if missing and self.options.auto_offset_reset == "none":
            raise GroupConsumeError(
                f"Undefined offset with no reset policy for partitions: "
                f"{', '.join(f'{self.topic}-{p}' for p in missing)}"
            )
        self._committed = {tp: offset for tp, offset in committed.items() if offset is not None}
        self._assigned_generation = self.member.generation.generation_id
        _log.info(
            "partitions assigned",
            group=self.options.member.group_id,
            generation=self._assigned_generation,
            partitions=[tp.partition for tp in tps],
        )
        await owner.assign(committed)

    async def _committed_offsets(
        self, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None] | None:
        """The group's offsets of ``tps``, retried while the generation lasts (None: rejoin first)."""
        while self.member.rejoin_reason is None:
            try:
                return await self.member.committed(tps)
            except KafkaResponseError as exc:
                if not exc.retriable:
                    raise
                _log.warning("fetching the committed offsets failed, retrying", error=str(exc))
            except ClientError as exc:
                _log.warning("fetching the committed offsets failed, retrying", error=str(exc))
            await asyncio.sleep(self.options.member.retry_backoff_ms / 1000)
        return None

    async def _settle_commit(self) -> None:
        """Let an interval commit in flight finish (its failure was logged), so commits stay ordered."""
        task, self._commit_task = self._commit_task, None
        if task is not None:
            await asyncio.wait([task])

    async def _commit(self, positions: Mapping[TopicPartition, int]) -> None:
        """Commit the positions that moved since the last commit; a failure is a warning, as in Kafka."""
        generation = self.member.generation
        if not generation.valid or generation.generation_id != self._assigned_generation:
            return  # the partitions were assigned by another generation: they may be someone else's
        changed = {tp: offset for tp, offset in positions.items() if self._committed.get(tp) != offset}
        if not changed:
            return
        try:
            await self.member.commit(changed)
        except CommitFailedError as exc:
            _log.warning("commit refused: the group rebalanced", error=str(exc))
            return
        except ClientError as exc:
            _log.warning("commit failed", error=str(exc))
            return
        self._committed.update(changed)


__all__ = [
    "ConsoleGroupLink",
    "GroupConsumeError",
    "GroupOptions",
    "PartitionOwner",
    "ToolClusterAccess",
    "offset_reset_policy",
]
