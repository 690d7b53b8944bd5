"""Reach a kipling cluster from Spark's Python processes: metadata, partition leaders, ListOffsets.

Spark calls the data source synchronously (planning on the driver, ``read()``/``write()`` in executor
workers), while kipling's client is asyncio. :class:`BrokerSession` bridges the two with one
``asyncio.Runner`` per planning step or task: its event loop lives exactly as long as the ``with`` block,
so connections opened for one call are reused by the next (metadata, then ListOffsets to each leader),
and nothing outlives the block. Nothing here is created in ``__init__`` of a Spark object, because
those objects are pickled (pyspark-notes.md §3.1).

:class:`ClusterClient` is the asyncio half, used directly by code already inside the loop (the task's
fetch loop and the sink). Requests go to each partition's leader (from Metadata); retriable errors
(leadership moving, a topic just created) and lost connections are retried ``fetchOffset.numRetries``
times, ``fetchOffset.retryIntervalMs`` apart, as Spark's Kafka source does for its offset lookups.
A refused SASL login is not retried (Kafka's clients treat it as fatal too): the same credentials would
be refused again, and the job should fail at once with the broker's reason.

TLS and SASL come from the options' :class:`~client.security.ClientSecurityConfig`: each
:class:`ClusterClient` builds the SSLContext once, for its one connection pool, because building one
reads the truststore and keystore files and the options (pickled to the executors) must stay plain data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar

import structlog

from client.admin import AdminClient, ClusterMetadata
from client.connection import KafkaConnection
from client.connection_pool import ConnectionPool
from client.errors import AuthenticationFailedError, ClientError, KafkaResponseError
from client.fetch_session import TopicPartition
from client.offsets import list_offsets
from client.security import ClientSecurity
from pipeline.errors import KiplingOptionError
from pipeline.options import (
    Assign,
    BrokerAddress,
    ConnectionSettings,
    Subscribe,
    SubscribePattern,
    Subscription,
    security_error_message,
)
from protocol.error_codes import ErrorCode
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, IsolationLevel

T = TypeVar("T")

_log = structlog.get_logger("kipling.pipeline.cluster")

CONNECT_TIMEOUT_S = 10.0


class ClusterClient:
    """Connections to the brokers of one cluster, opened on demand and kept until :meth:`close`."""

    def __init__(
        self,
        settings: ConnectionSettings,
        *,
        retries: int = 3,
        retry_interval_ms: int = 1000,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    ) -> None:
        self.settings = settings
        self.retries = retries
        self.retry_interval_s = retry_interval_ms / 1000
        self.isolation_level = isolation_level
        self._pool = ConnectionPool(
            client_id=settings.client_id,
            connect_timeout_s=CONNECT_TIMEOUT_S,
            request_timeout_s=settings.request_timeout_ms / 1000,
            security=_build_security(settings),
        )
        self._brokers: dict[int, BrokerAddress] = {}

    # -- connections -------------------------------------------------------------------------------

    async def connection(self, address: BrokerAddress) -> KafkaConnection:
        """An open connection to ``address`` (a new one if the cached one closed)."""
        return await self._pool.shared(address.host, address.port)

    async def any_connection(self) -> KafkaConnection:
        """A connection to the first reachable bootstrap broker (or any broker already connected)."""
        connection = self._pool.any_open()
        if connection is not None:
            return connection
        errors = []
        for address in self.settings.bootstrap:
            try:
                return await self.connection(address)
            except AuthenticationFailedError:
                raise  # every broker takes the same login: trying the next would be refused too
            except ClientError as exc:
                errors.append(f"{address}: {exc}")
        raise ClientError(f"no bootstrap broker reachable: {'; '.join(errors)}")

    def forget(self, address: BrokerAddress) -> None:
        """Drop a connection that failed, so the next call opens a new one."""
        self._pool.forget_address(address.host, address.port)

    async def close(self) -> None:
        await self._pool.close()

    # -- metadata ----------------------------------------------------------------------------------

    async def metadata(self, topics: Sequence[str] | None) -> ClusterMetadata:
        """Metadata of ``topics`` (all when None); remembers broker addresses for :meth:`leader_address`."""
        connection = await self.any_connection()
        metadata = await AdminClient(connection).metadata(topics)
        self._brokers = {b.node_id: BrokerAddress(b.host, b.port) for b in metadata.brokers}
        return metadata

    async def partitions(
        self, subscription: Subscription, *, missing_topics: Literal["error", "ignore"]
    ) -> list[TopicPartition]:
        """The subscription's partitions now, sorted.

        A subscribed topic that does not exist is an error for a batch query and nothing yet for a
        stream (it may be created later, as a Kafka consumer's subscription would see it).
        """
        if isinstance(subscription, SubscribePattern):
            metadata = await self.metadata(None)
            topics = {
                name: t
                for name, t in metadata.topics.items()
                if t.error is ErrorCode.NONE and not t.is_internal and subscription.matches(name)
            }
            return sorted(
                TopicPartition(name, p.partition) for name, t in topics.items() for p in t.partitions
            )
        names = subscription.topics if isinstance(subscription, Subscribe) else _topics_of(subscription)
        metadata = await self.metadata(list(names))
        existing: dict[str, set[int]] = {}
        for name in names:
            topic = metadata.topics.get(name)
            if topic is None or topic.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                if missing_topics == "error":
                    raise KiplingOptionError(f"Topic '{name}' does not exist")
                _log.warning("subscribed topic does not exist (yet)", topic=name)
                continue
            if topic.error is not ErrorCode.NONE:
                raise KafkaResponseError(topic.error, context=f"metadata of topic {name}")
            existing[name] = {p.partition for p in topic.partitions}
        if isinstance(subscription, Subscribe):
            return sorted(TopicPartition(name, p) for name, ps in existing.items() for p in ps)
        absent = [tp for tp in subscription.partitions if tp.partition not in existing.get(tp.topic, set())]
        if absent and missing_topics == "error":
            raise KiplingOptionError(
                "Assigned partitions do not exist: "
                + ", ".join(f"{tp.topic}-{tp.partition}" for tp in absent)
            )
        return sorted(tp for tp in subscription.partitions if tp not in absent)

    async def leaders(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, BrokerAddress]:
        """Each partition's leader; a partition without one (or unknown) raises a retriable error."""
        wanted = list(partitions)
        metadata = await self.metadata(sorted({tp.topic for tp in wanted}))
        out: dict[TopicPartition, BrokerAddress] = {}
        for tp in wanted:
            topic = metadata.topics.get(tp.topic)
            if topic is None or topic.error is not ErrorCode.NONE:
                code = topic.error if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise KafkaResponseError(code, context=f"metadata of {tp.topic}-{tp.partition}")
            info = next((p for p in topic.partitions if p.partition == tp.partition), None)
            if info is None:
                raise KafkaResponseError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=f"metadata of {tp.topic}-{tp.partition}"
                )
            address = self._brokers.get(info.leader)
            if info.leader < 0 or address is None:
                raise KafkaResponseError(
                    ErrorCode.LEADER_NOT_AVAILABLE, context=f"metadata of {tp.topic}-{tp.partition}"
                )
            out[tp] = address
        return out

    # -- offsets -----------------------------------------------------------------------------------

    async def list_offsets(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets for every partition, each asked of its leader, with retries."""
        if not timestamps:
            return {}
        return await self.with_retries("list offsets", lambda: self._list_offsets_once(timestamps))

    async def _list_offsets_once(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        leaders = await self.leaders(timestamps)
        by_leader: dict[BrokerAddress, dict[TopicPartition, int]] = {}
        for tp, timestamp in timestamps.items():
            by_leader.setdefault(leaders[tp], {})[tp] = timestamp

        async def ask(address: BrokerAddress, asked: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
            try:
                connection = await self.connection(address)
                answers = await list_offsets(connection, asked, isolation_level=self.isolation_level)
            except KafkaResponseError:
                raise
            except ClientError:
                self.forget(address)  # the connection is gone; the retry opens a new one
                raise
            out = {}
            for tp, answer in answers.items():
                if not answer.ok:
                    raise KafkaResponseError(
                        answer.error, context=f"list offsets of {tp.topic}-{tp.partition}"
                    )
                out[tp] = answer.offset
            return out

        results = await asyncio.gather(*(ask(a, asked) for a, asked in by_leader.items()))
        return {tp: offset for result in results for tp, offset in result.items()}

    async def with_retries(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt``; retry retriable broker errors and lost connections (Kafka's classification)."""
        for number in range(self.retries + 1):
            try:
                return await attempt()
            except KafkaResponseError as exc:
                if not exc.retriable or number == self.retries:
                    raise
                _log.info("retrying", what=what, attempt=number + 1, error=str(exc))
            except AuthenticationFailedError:
                raise
            except ClientError as exc:
                if number == self.retries:
                    raise
                _log.info("retrying after a connection error", what=what, attempt=number + 1, error=str(exc))
                await self.close()
            await asyncio.sleep(self.retry_interval_s)
        raise AssertionError("unreachable")  # the loop returns or raises


class BrokerSession:
    """Synchronous access for Spark's calls: ``with BrokerSession(settings) as s: s.latest(tps)``.

    Implements :class:`pipeline.offsets.OffsetLookup`.
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        *,
        retries: int = 3,
        retry_interval_ms: int = 1000,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    ) -> None:
        self.client = ClusterClient(
            settings, retries=retries, retry_interval_ms=retry_interval_ms, isolation_level=isolation_level
        )
        self._runner: asyncio.Runner | None = None

    def __enter__(self) -> BrokerSession:
        self._runner = asyncio.Runner()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            runner.run(self.client.close())
        finally:
            runner.close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run one coroutine on this session's loop (connections persist between calls)."""
        if self._runner is None:
            coroutine.close()
            raise RuntimeError("BrokerSession used outside its with-block")
        return self._runner.run(coroutine)

    def partitions(
        self, subscription: Subscription, *, missing_topics: Literal["error", "ignore"]
    ) -> list[TopicPartition]:
        return self.run(
            self.client.with_retries(
                "metadata", lambda: self.client.partitions(subscription, missing_topics=missing_topics)
            )
        )

    def leaders(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, BrokerAddress]:
        wanted = list(partitions)
        if not wanted:
            return {}
        return self.run(self.client.with_retries("metadata", lambda: self.client.leaders(wanted)))

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.run(self.client.list_offsets(dict.fromkeys(partitions, EARLIEST_TIMESTAMP)))

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.run(self.client.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP)))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self.run(self.client.list_offsets(timestamps))


def _build_security(settings: ConnectionSettings) -> ClientSecurity | None:
    """The SSLContext and SASL login of ``settings`` (None: PLAINTEXT). The options were checked on the
    driver; what fails here is TLS material the executor cannot read (a truststore path that exists
    only on the driver), reported as the option at fault."""
    if settings.security is None:
        return None
    try:
        return settings.security.build()
    except ValueError as exc:
        raise KiplingOptionError(security_error_message(exc)) from None


def _topics_of(subscription: Assign) -> tuple[str, ...]:
    return tuple(dict.fromkeys(tp.topic for tp in subscription.partitions))


__all__ = ["BrokerSession", "ClusterClient"]
