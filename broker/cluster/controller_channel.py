"""The broker's line to the active controller (KRaft's NodeToControllerChannelManager, reduced).

Every broker, including one that also runs the controller, talks to the controller over the
network with Kafka's own APIs: BrokerRegistration, BrokerHeartbeat, AlterPartition, the admin
requests it forwards (CreateTopics, DeleteTopics, CreatePartitions), and Fetch of the
``__cluster_metadata`` log. One code path for every node keeps a combined single node honest: it
runs exactly what a three-broker cluster runs.

The channel holds one connection to the controller, reopened on demand with Kafka's reconnect
backoff. A request that fails on the connection raises :class:`ControllerUnavailableError`; the
caller decides whether repeating it is safe (a heartbeat is, a forwarded CreateTopics is answered
with REQUEST_TIMED_OUT instead, as Kafka's forwarding does when the controller cannot be reached).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from client.connection import KafkaConnection, ReconnectingConnection
from client.errors import ClientError, ConnectError, PeerClosedError
from client.security import ClientSecurity
from metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.sentinels import NO_LEADER_EPOCH, UNKNOWN_OFFSET, IsolationLevel

__all__ = [
    "AlterPartitionItem",
    "AlterPartitionReply",
    "BrokerListener",
    "ControllerChannel",
    "ControllerUnavailableError",
    "HeartbeatReply",
    "MetadataFetch",
]

FETCH_SNAPSHOT_VERSION = 0
METADATA_FETCH_VERSION = 12
"""The first Fetch version with DivergingEpoch and topic names: enough for the metadata log."""
ALTER_PARTITION_VERSION = 2
"""Topic ids and plain ISR lists (v3 adds broker epochs per ISR member, which kipling ignores)."""

_log = structlog.get_logger("kipling.controller_channel")

AddressProvider = Callable[[], tuple[str, int]]


class ControllerUnavailableError(Exception):
    """The controller could not be reached or did not answer in time."""


@dataclass(frozen=True, slots=True)
class BrokerListener:
    """One advertised listener of a registering broker."""

    name: str
    host: str
    port: int
    security_protocol: int = 0
    """0 = PLAINTEXT (Kafka's SecurityProtocol id)."""


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    error: ErrorCode
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition's ISR proposal."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionReply:
    """The controller's answer for one proposed partition."""

    topic_id: uuid.UUID
    partition: int
    error: ErrorCode
    leader_id: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class MetadataFetch:
    """What one Fetch of the metadata log returned."""

    error: ErrorCode
    records: bytes
    """Whole record batches from the fetch offset on (possibly empty)."""
    high_watermark: int
    diverging_epoch: tuple[int, int] | None
    """(epoch, end offset) when the controller's log diverged from what this broker holds."""
    current_leader: tuple[int, int] | None = None
    """(leader id, epoch) of the metadata log as the answering voter knows it (-1 for no leader)."""
    snapshot_id: tuple[int, int] | None = None
    """(end offset, epoch) of the snapshot to fetch: the fetch offset is below the log start."""
    log_start_offset: int = 0


class ControllerChannel:
    """Requests to the active controller over one reconnecting connection."""

    def __init__(
        self,
        address: AddressProvider,
        *,
        client_id: str,
        request_timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        on_unreachable: Callable[[tuple[str, int], bool], None] | None = None,
        on_leader: Callable[[int, int], None] | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        """``on_unreachable(address, answered)`` hears of a controller that could not be reached
        (``answered`` False) or that answered NOT_CONTROLLER or too slowly (True);
        ``on_leader(id, epoch)`` of the metadata log's leader named in a fetch response: the
        :class:`~broker.cluster.controller_locator.ControllerLocator` then moves ``address`` to
        the voter that leads, and the next request goes there. ``security``: the TLS context and
        SASL login of the controller listener
        (:func:`broker.client_security.controller_client_security`); None for PLAINTEXT."""
        self._address = address
        self._client_id = client_id
        self._request_timeout_s = request_timeout_s
        self._on_unreachable = on_unreachable
        self._on_leader = on_leader
        self._connected_to: tuple[str, int] | None = None

        async def connect() -> KafkaConnection:
            host, port = self._address()
            self._connected_to = (host, port)
            return await KafkaConnection.open(
                host,
                port,
                client_id=client_id,
                connect_timeout_s=connect_timeout_s,
                request_timeout_s=request_timeout_s,
                security=security,
            )

        self._connection = ReconnectingConnection(connect, backoff_max_s=1.0)

    @property
    def request_timeout_s(self) -> float:
        return self._request_timeout_s

    async def close(self) -> None:
        await self._connection.close()

    # -- generic -----------------------------------------------------------------------------------

    async def request(
        self,
        api_key: ApiKey,
        body: Any,
        *,
        version: int | None = None,
        wanted_max: int | None = None,
        timeout_s: float | None = None,
    ) -> tuple[int, MessageData]:
        """Send ``body`` at ``version`` (or the highest both sides speak, capped at ``wanted_max``).

        The request goes to where ``address`` points now: an open connection to a voter it no
        longer points at is closed first. A failed request or a top-level NOT_CONTROLLER raises
        ControllerUnavailableError after telling ``on_unreachable``.
        """
        self._follow_address()
        try:
            if version is None:
                version = await self._connection.version_for(api_key, wanted_max)
            response = await self._connection.request(api_key, version, body, timeout_s)
        except ClientError as exc:
            # only a voter that cannot be reached (refused, reset, a handshake unanswered: dead or
            # paused) is doubted for a while; one that was merely slow keeps its leader hints
            self._unreachable(answered=not isinstance(exc, ConnectError | PeerClosedError))
            raise ControllerUnavailableError(f"{api_key.name} to the controller failed: {exc}") from exc
        if getattr(response, "error_code", ErrorCode.NONE) == ErrorCode.NOT_CONTROLLER:
            self._unreachable(answered=True)
            raise ControllerUnavailableError(
                f"{api_key.name}: {self._connected_to} is not the active controller"
            )
        return version, response

    def controller_moved(self) -> None:
        """The address now points at another voter: drop the connection to the old one, failing
        whatever waits on it (a heartbeat or a long poll stuck on a paused, deposed controller)."""
        self._follow_address()

    def _follow_address(self) -> None:
        current = self._connection.current
        if current is not None and self._connected_to is not None and self._address() != self._connected_to:
            current.close()  # the next request reconnects to where the address points now

    def _unreachable(self, *, answered: bool = False) -> None:
        if self._connected_to is not None and self._on_unreachable is not None:
            self._on_unreachable(self._connected_to, answered)
        current = self._connection.current
        if current is not None and self._address() != self._connected_to:
            current.close()

    async def forward(
        self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float
    ) -> MessageData:
        """Send an admin request as the client sent it, at the client's version; return the answer."""
        _, response = await self.request(api_key, body, version=version, timeout_s=timeout_s)
        return response

    # -- broker lifecycle --------------------------------------------------------------------------

    async def register(
        self,
        *,
        broker_id: int,
        cluster_id: str,
        incarnation_id: uuid.UUID,
        listeners: Sequence[BrokerListener],
        rack: str | None,
        previous_broker_epoch: int = -1,
    ) -> tuple[ErrorCode, int]:
        """BrokerRegistration: (error, broker epoch)."""
        body = {
            "broker_id": broker_id,
            "cluster_id": cluster_id,
            "incarnation_id": incarnation_id,
            "listeners": [
                {"name": li.name, "host": li.host, "port": li.port, "security_protocol": li.security_protocol}
                for li in listeners
            ],
            "features": [],
            "rack": rack,
            "previous_broker_epoch": previous_broker_epoch,
        }
        _, response = await self.request(ApiKey.BROKER_REGISTRATION, body)
        return ErrorCode(response.error_code), int(response.broker_epoch)

    async def heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        timeout_s: float | None = None,
    ) -> HeartbeatReply:
        body = {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "current_metadata_offset": current_metadata_offset,
            "want_fence": want_fence,
            "want_shut_down": want_shut_down,
        }
        _, response = await self.request(ApiKey.BROKER_HEARTBEAT, body, timeout_s=timeout_s)
        return HeartbeatReply(
            ErrorCode(response.error_code),
            bool(response.is_caught_up),
            bool(response.is_fenced),
            bool(response.should_shut_down),
        )

    async def allocate_producer_ids(self, *, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, int, int]:
        """AllocateProducerIds: (error, first id, block length) of this broker's next block."""
        body = {"broker_id": broker_id, "broker_epoch": broker_epoch}
        _, response = await self.request(ApiKey.ALLOCATE_PRODUCER_IDS, body, version=0)
        return ErrorCode(response.error_code), int(response.producer_id_start), int(response.producer_id_len)

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> tuple[ErrorCode, list[AlterPartitionReply]]:
        """AlterPartition for ``items``: (top-level error, per-partition replies)."""
        by_topic: dict[uuid.UUID, list[AlterPartitionItem]] = {}
        for item in items:
            by_topic.setdefault(item.topic_id, []).append(item)
        body = {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition_index": item.partition,
                            "leader_epoch": item.leader_epoch,
                            "new_isr": list(item.new_isr),
                            "leader_recovery_state": 0,
                            "partition_epoch": item.partition_epoch,
                        }
                        for item in topic_items
                    ],
                }
                for topic_id, topic_items in by_topic.items()
            ],
        }
        _, response = await self.request(ApiKey.ALTER_PARTITION, body, version=ALTER_PARTITION_VERSION)
        replies = [
            AlterPartitionReply(
                topic.topic_id,
                p.partition_index,
                ErrorCode(p.error_code),
                p.leader_id,
                p.leader_epoch,
                tuple(p.isr),
                p.partition_epoch,
            )
            for topic in response.topics
            for p in topic.partitions
        ]
        return ErrorCode(response.error_code), replies

    # -- metadata log ------------------------------------------------------------------------------

    async def fetch_metadata(
        self,
        *,
        broker_id: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        max_wait_ms: int,
        max_bytes: int = 8 * 1024 * 1024,
        replica_id: int = -1,
        current_leader_epoch: int = NO_LEADER_EPOCH,
        cluster_id: str | None = None,
    ) -> MetadataFetch:
        """One long-poll Fetch of the metadata log from ``fetch_offset``.

        Sessionless. A broker fetches as an observer (replica id -1): it never counts towards the
        high watermark and is sent committed batches only; a voter following the quorum's leader
        fetches with the same request and its own id (see broker/quorum/peers.py). The timeout is
        the wait plus the request timeout, so a long poll never looks like a dead controller. The
        leader a response names (CurrentLeader) goes to ``on_leader``, so every channel of this
        node learns where the active controller went.
        """
        body = metadata_fetch_body(
            cluster_id=cluster_id,
            broker_id=broker_id,
            replica_id=replica_id,
            fetch_offset=fetch_offset,
            last_fetched_epoch=last_fetched_epoch,
            current_leader_epoch=current_leader_epoch,
            max_wait_ms=max_wait_ms,
            max_bytes=max_bytes,
        )
        timeout_s = max_wait_ms / 1000 + self._request_timeout_s
        _, response = await self.request(
            ApiKey.FETCH, body, version=METADATA_FETCH_VERSION, timeout_s=timeout_s
        )
        fetched = parse_metadata_fetch(response)
        if fetched.current_leader is not None and self._on_leader is not None:
            self._on_leader(*fetched.current_leader)
        return fetched

    async def fetch_snapshot(
        self, *, replica_id: int, snapshot_id: tuple[int, int], position: int, max_bytes: int
    ) -> SnapshotChunk:
        """One FetchSnapshot (KIP-630) chunk of the metadata log's snapshot ``snapshot_id``."""
        end_offset, epoch = snapshot_id
        body = {
            "replica_id": replica_id,
            "max_bytes": max_bytes,
            "topics": [
                {
                    "name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition": METADATA_PARTITION,
                            "current_leader_epoch": NO_LEADER_EPOCH,
                            "snapshot_id": {"end_offset": end_offset, "epoch": epoch},
                            "position": position,
                        }
                    ],
                }
            ],
        }
        _, response = await self.request(ApiKey.FETCH_SNAPSHOT, body, version=FETCH_SNAPSHOT_VERSION)
        if response.error_code:
            return SnapshotChunk(ErrorCode(response.error_code), -1, position, b"", None)
        for topic in response.topics:
            for partition in topic.partitions:
                leader = partition.current_leader
                current = (
                    (int(leader.leader_id), int(leader.leader_epoch))
                    if leader is not None and leader.leader_epoch >= 0
                    else None
                )
                data = partition.unaligned_records
                return SnapshotChunk(
                    ErrorCode(partition.error_code),
                    int(partition.size),
                    int(partition.position),
                    bytes(data) if data is not None else b"",
                    current,
                )
        return SnapshotChunk(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, position, b"", None)


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """One FetchSnapshot answer: the snapshot's size and the bytes from ``position``."""

    error: ErrorCode
    size: int
    position: int
    data: bytes
    current_leader: tuple[int, int] | None


def metadata_fetch_body(
    *,
    cluster_id: str | None = None,
    broker_id: int,
    replica_id: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    current_leader_epoch: int,
    max_wait_ms: int,
    max_bytes: int,
) -> dict[str, Any]:
    """A sessionless Fetch of ``__cluster_metadata-0`` (v12: topic names, LastFetchedEpoch)."""
    return {
        "cluster_id": cluster_id,
        "replica_id": replica_id,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": IsolationLevel.READ_UNCOMMITTED,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition": METADATA_PARTITION,
                        "current_leader_epoch": current_leader_epoch,
                        "fetch_offset": fetch_offset,
                        "last_fetched_epoch": last_fetched_epoch,
                        "log_start_offset": UNKNOWN_OFFSET,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": f"broker-{broker_id}",
    }


def parse_metadata_fetch(response: MessageData) -> MetadataFetch:
    """The metadata partition's part of a Fetch response."""
    if response.error_code:
        return MetadataFetch(ErrorCode(response.error_code), b"", UNKNOWN_OFFSET, None)
    for topic in response.responses:
        for partition in topic.partitions:
            diverging = partition.diverging_epoch
            diverged = (
                (int(diverging.epoch), int(diverging.end_offset))
                if diverging is not None and diverging.end_offset >= 0
                else None
            )
            leader = partition.current_leader
            current_leader = (
                (int(leader.leader_id), int(leader.leader_epoch))
                if leader is not None and leader.leader_epoch >= 0
                else None
            )
            records = partition.records
            snapshot = partition.snapshot_id
            return MetadataFetch(
                ErrorCode(partition.error_code),
                bytes(records) if records is not None else b"",
                int(partition.high_watermark),
                diverged,
                current_leader,
                (int(snapshot.end_offset), int(snapshot.epoch))
                if snapshot is not None and snapshot.end_offset >= 0
                else None,
                max(int(partition.log_start_offset), 0),
            )
    return MetadataFetch(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, b"", UNKNOWN_OFFSET, None)
