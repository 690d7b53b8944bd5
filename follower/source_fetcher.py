"""The fetcher of one source broker inside a follower process, with its connection to that broker.

Kafka runs one fetcher thread per (source broker, fetcher id); a follower process is one fetcher id,
so it runs one :class:`SourceBrokerFetcher` per leader its partitions follow. Each connects to the
leader (retrying while the leader is unreachable), then runs a
:class:`~follower.fetcher.ReplicaFetcher` over a :class:`~follower.network_endpoint.NetworkLeaderEndpoint`.
Partitions given to it before it is connected wait: their initial fetch state depends on what the
leader supports (truncation on fetch), which only the connection tells.

A lost connection is reopened before the next request (:class:`ReconnectingLeaderEndpoint`); until
then the fetcher's own backoff applies, exactly as for any failed request.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Set
from dataclasses import dataclass

import structlog

from client.connection import KafkaConnection
from client.errors import ConnectError
from client.replica_messages import FollowerSettings, fetcher_client_id
from client.replication_quota import ReplicationQuota
from client.security import ClientSecurity, ClientSecurityConfig
from client.tasks import cancel_and_wait
from follower.fetch_state import (
    InitialFetchState,
    LeaderEpoch,
    MonotonicClock,
    Offset,
    PartitionFetchState,
    TopicPartition,
)
from follower.fetcher import AfterRound, BeforeTruncate, ReplicaFetcher
from follower.leader_endpoint import (
    EpochEndOffset,
    FetchPartitionData,
    FetchPartitionParams,
    FollowerFetchRequest,
    OffsetAndEpoch,
)
from follower.metrics import FetcherStats
from follower.network_endpoint import NetworkLeaderEndpoint
from follower.replica_log import ReplicaLog, initial_fetch_offset

_log = structlog.get_logger(__name__)

Connect = Callable[[], Awaitable[KafkaConnection]]
FailureCallback = Callable[[TopicPartition, str], None]


@dataclass(frozen=True, slots=True)
class SourceBroker:
    """Where a leader is: its broker id and address (a moved broker gets a new fetcher)."""

    broker_id: int
    host: str
    port: int


def fetcher_name(fetcher_id: int, source_broker_id: int) -> str:
    """Kafka's fetcher thread name, used as its client id and metrics label."""
    return fetcher_client_id(fetcher_id, source_broker_id)


@functools.lru_cache(maxsize=4)
def _client_security(config: ClientSecurityConfig) -> ClientSecurity | None:
    """One TLS context per process (building one reads the truststore and keystore files)."""
    return config.build()


def leader_security(settings: FollowerSettings) -> ClientSecurity | None:
    """The broker's inter-broker TLS and SASL settings, from its ``configure`` message (the broker
    checked them at start-up, so they build)."""
    if not settings.security:
        return None
    return _client_security(ClientSecurityConfig.from_json(settings.security))


def connector(source: SourceBroker, settings: FollowerSettings, client_id: str) -> Connect:
    """Opens connections to ``source`` with the replica.* timeouts, authenticated as the broker
    does on its inter-broker listener."""
    timeout_s = settings.replica_socket_timeout_ms / 1000
    security = leader_security(settings)

    async def connect() -> KafkaConnection:
        return await KafkaConnection.open(
            source.host,
            source.port,
            client_id=settings.client_id or client_id,
            connect_timeout_s=timeout_s,
            request_timeout_s=timeout_s,
            security=security,
        )

    return connect


class ReconnectingLeaderEndpoint:
    """A NetworkLeaderEndpoint that opens a new connection to its leader when the last one closed.

    Reconnecting happens at the start of the next call, so a failed connect surfaces as a failed
    request and the fetcher backs off; nothing is re-sent behind the fetcher's back.
    """

    def __init__(self, endpoint: NetworkLeaderEndpoint, connect: Connect) -> None:
        self._endpoint = endpoint
        self._connect = connect

    @property
    def inner(self) -> NetworkLeaderEndpoint:
        return self._endpoint

    @property
    def supports_truncation_on_fetch(self) -> bool:
        return self._endpoint.supports_truncation_on_fetch

    @property
    def supports_offset_for_leader_epoch(self) -> bool:
        return self._endpoint.supports_offset_for_leader_epoch

    def build_fetch(
        self, partitions: Mapping[TopicPartition, FetchPartitionParams], changed: Set[TopicPartition]
    ) -> FollowerFetchRequest | None:
        return self._endpoint.build_fetch(partitions, changed)

    async def fetch(self, request: FollowerFetchRequest) -> dict[TopicPartition, FetchPartitionData]:
        await self._ensure_connected()
        return await self._endpoint.fetch(request)

    async def fetch_epoch_end_offsets(
        self, partitions: Mapping[TopicPartition, tuple[LeaderEpoch, LeaderEpoch]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        await self._ensure_connected()
        return await self._endpoint.fetch_epoch_end_offsets(partitions)

    async def fetch_earliest_offset(
        self, tp: TopicPartition, current_leader_epoch: LeaderEpoch
    ) -> OffsetAndEpoch:
        await self._ensure_connected()
        return await self._endpoint.fetch_earliest_offset(tp, current_leader_epoch)

    async def fetch_latest_offset(
        self, tp: TopicPartition, current_leader_epoch: LeaderEpoch
    ) -> OffsetAndEpoch:
        await self._ensure_connected()
        return await self._endpoint.fetch_latest_offset(tp, current_leader_epoch)

    async def _ensure_connected(self) -> None:
        if self._endpoint.connection.closed:
            connection = await self._connect()
            self._endpoint.replace_connection(connection)
            _log.info("reconnected to the leader", leader=f"{connection.host}:{connection.port}")

    def close(self) -> None:
        self._endpoint.connection.close("fetcher stopped")


@dataclass(frozen=True, slots=True)
class _Pending:
    leader_epoch: int
    topic_id: uuid.UUID | None


class SourceBrokerFetcher:
    """Fetches the partitions led by one source broker into the logs this process owns."""

    def __init__(
        self,
        fetcher_id: int,
        source: SourceBroker,
        logs: Mapping[TopicPartition, ReplicaLog],
        settings: FollowerSettings,
        *,
        replica_id: int,
        stats: FetcherStats,
        on_failed: FailureCallback,
        connect: Connect | None = None,
        quota: ReplicationQuota | None = None,
        before_truncate: BeforeTruncate | None = None,
        after_round: AfterRound | None = None,
    ) -> None:
        """``before_truncate`` and ``after_round`` go to the :class:`ReplicaFetcher` (the read
        offsets the broker is told, follower/read_offsets.py)."""
        self.name = fetcher_name(fetcher_id, source.broker_id)
        self._quota = quota
        self._before_truncate = before_truncate
        self._after_round = after_round
        self.source = source
        self._logs = logs
        self._settings = settings
        self._replica_id = replica_id
        self._broker_epoch = settings.broker_epoch
        self._stats = stats
        self._on_failed = on_failed
        self._connect = connect or connector(source, settings, self.name)
        self._pending: dict[TopicPartition, _Pending] = {}
        self._endpoint: ReconnectingLeaderEndpoint | None = None
        self._fetcher: ReplicaFetcher | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._logger = _log.bind(fetcher=self.name, leader=f"{source.host}:{source.port}")

    # -- partitions ----------------------------------------------------------------------------------

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        started = self._fetcher.partitions | self._fetcher.failed_partitions if self._fetcher else frozenset()
        return started | frozenset(self._pending)

    def add_partition(self, tp: TopicPartition, leader_epoch: int, topic_id: uuid.UUID | None) -> None:
        """Follow ``tp`` at ``leader_epoch`` (its log must be in ``logs``); a new epoch restarts its state."""
        if self._fetcher is None:
            self._pending[tp] = _Pending(leader_epoch, topic_id)
        else:
            self._fetcher.add_partitions({tp: self._initial_state(tp, leader_epoch, topic_id)})

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stop fetching ``tps`` now: no append reaches their logs after this returns."""
        tps = list(tps)
        for tp in tps:
            self._pending.pop(tp, None)
        if self._fetcher is not None:
            self._fetcher.remove_partitions(tps)

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        return self._fetcher.fetch_state(tp) if self._fetcher is not None else None

    @property
    def failed_partitions(self) -> frozenset[TopicPartition]:
        return self._fetcher.failed_partitions if self._fetcher is not None else frozenset()

    @property
    def connected(self) -> bool:
        return self._endpoint is not None and not self._endpoint.inner.connection.closed

    @property
    def broker_epoch(self) -> int:
        return self._broker_epoch

    def set_broker_epoch(self, epoch: int) -> None:
        self._broker_epoch = epoch
        if self._endpoint is not None:
            self._endpoint.inner.broker_epoch = epoch

    def _initial_state(
        self, tp: TopicPartition, leader_epoch: int, topic_id: uuid.UUID | None
    ) -> InitialFetchState:
        assert self._endpoint is not None
        offset = initial_fetch_offset(self._logs[tp], self._endpoint.supports_truncation_on_fetch)
        return InitialFetchState(Offset(offset), LeaderEpoch(leader_epoch), topic_id)

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)
        self._task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._logger.error("fetcher died; its partitions are not replicated", exc_info=task.exception())

    async def stop(self) -> None:
        """Stop at once: a round in flight is cancelled while it awaits the leader, never mid-append."""
        self._stop.set()
        await cancel_and_wait(self._task)  # a crash was logged when it happened; the endpoint still closes
        if self._endpoint is not None:
            self._endpoint.close()
        self._logger.info("fetcher stopped")

    async def _run(self) -> None:
        connection = await self._connect_until_up()
        settings = self._settings
        endpoint = NetworkLeaderEndpoint(
            connection,
            replica_id=self._replica_id,
            broker_epoch=self._broker_epoch,
            max_wait_ms=settings.replica_fetch_wait_max_ms,
            min_bytes=settings.replica_fetch_min_bytes,
            max_bytes=settings.replica_fetch_response_max_bytes,
            partition_max_bytes=settings.replica_fetch_max_bytes,
        )
        self._endpoint = ReconnectingLeaderEndpoint(endpoint, self._connect)
        self._fetcher = ReplicaFetcher(
            self.name,
            self._endpoint,
            self._logs,
            MonotonicClock(),
            self._stats,
            backoff_ms=settings.replica_fetch_backoff_ms,
            on_failed=self._on_failed,
            quota=self._quota,
            before_truncate=self._before_truncate,
            after_round=self._after_round,
        )
        pending, self._pending = self._pending, {}
        self._fetcher.add_partitions(
            {tp: self._initial_state(tp, p.leader_epoch, p.topic_id) for tp, p in pending.items()}
        )
        self._logger.info("fetcher started", partitions=len(pending))
        await self._fetcher.run(self._stop)

    async def _connect_until_up(self) -> KafkaConnection:
        """Connect to the leader, retrying every replica.fetch.backoff.ms while it is unreachable."""
        attempts = 0
        while True:
            try:
                return await self._connect()
            except ConnectError as exc:
                attempts += 1
                log = self._logger.warning if attempts == 1 or attempts % 30 == 0 else self._logger.debug
                log("cannot connect to the leader; retrying", error=str(exc), attempts=attempts)
            await asyncio.sleep(self._settings.replica_fetch_backoff_ms / 1000)


__all__ = [
    "ReconnectingLeaderEndpoint",
    "SourceBroker",
    "SourceBrokerFetcher",
    "connector",
    "fetcher_name",
]
