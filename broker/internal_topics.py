"""What the coordinators on internal topics (``__consumer_offsets``, ``__transaction_state``) share.

Each coordinator lives on the leaders of its topic's partitions: a partition is loaded when this
broker starts leading it and unloaded when it stops (:class:`PartitionLoads`, one load task per
partition, a new leadership cancelling the load in flight); the coordinator of a key is the leader of
the key's partition (:func:`partition_leader_endpoint`); the topic is created on the first lookup
(:class:`TopicCreation`, retried at most every :data:`CREATION_RETRY_S`, each failure reason logged
once), which answers COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import structlog

from broker.handlers.metadata import BrokerEndpoint
from metadata.topics import NO_LEADER, TopicState
from protocol.error_codes import ErrorCode

CREATION_RETRY_S = 1.0
"""A failed creation (too few brokers, the controller away) is retried at most this often."""

TopicCreator = Callable[[], Awaitable[None]]
"""Creates the internal topic (raises when it cannot)."""

_log = structlog.get_logger("kipling.internal_topics")


class TopicCreation:
    """Creates one internal topic on demand, in the background."""

    def __init__(self, topic: str, create: TopicCreator) -> None:
        self._topic = topic
        self._create_topic = create
        self._task: asyncio.Task[None] | None = None
        self._retry_at = 0.0
        self._error: str | None = None

    def start(self) -> None:
        """Start creating the topic, unless a creation runs or failed less than a second ago."""
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done():
            return
        if loop.time() < self._retry_at:
            return
        self._retry_at = loop.time() + CREATION_RETRY_S
        self._task = loop.create_task(self._create())

    async def _create(self) -> None:
        try:
            await self._create_topic()
        except Exception as exc:  # answered COORDINATOR_NOT_AVAILABLE until it exists
            if str(exc) != self._error:  # once per distinct reason, not once a second
                _log.warning("could not create an internal topic", topic=self._topic, error=str(exc))
            self._error = str(exc)
        else:
            _log.info("created an internal topic", topic=self._topic)
            self._error = None

    def tasks(self) -> list[asyncio.Task[None]]:
        return [self._task] if self._task is not None else []


class PartitionLoads:
    """The load task of each partition being loaded; a new leadership cancels the one in flight."""

    def __init__(self) -> None:
        self._loads: dict[int, asyncio.Task[None]] = {}

    def cancel(self, index: int) -> None:
        previous = self._loads.pop(index, None)
        if previous is not None:
            previous.cancel()

    def start(self, index: int, load: Coroutine[Any, Any, None]) -> None:
        self.cancel(index)
        task = asyncio.get_running_loop().create_task(load)
        self._loads[index] = task
        task.add_done_callback(
            lambda done: self._loads.pop(index, None) if self._loads.get(index) is done else None
        )

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._loads.values())

    def clear(self) -> None:
        self._loads.clear()


def partition_leader_endpoint(
    topic: TopicState, partition: int, brokers: Sequence[BrokerEndpoint]
) -> tuple[ErrorCode, BrokerEndpoint | None]:
    """The endpoint of the partition's leader among ``brokers``: the coordinator of its keys;
    COORDINATOR_NOT_AVAILABLE while it has none (or the leader is not among the live brokers)."""
    state = topic.partitions.get(partition)
    if state is None or state.leader_id == NO_LEADER:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    for endpoint in brokers:
        if endpoint.node_id == state.leader_id:
            return ErrorCode.NONE, endpoint
    return ErrorCode.COORDINATOR_NOT_AVAILABLE, None


async def cancel_all(tasks: Sequence[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
