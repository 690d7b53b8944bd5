"""The LeaderEndpoint over kipling's network client: Kafka's RemoteLeaderEndPoint.

One :class:`NetworkLeaderEndpoint` per fetcher and source broker. It owns the fetcher's fetch session
(client/fetch_session.py, kafka-behaviour.md 3.9): ``build_fetch`` feeds only the changed partitions
into the session handler, so an incremental request costs O(changed) to build.

Failures follow Kafka's RemoteLeaderEndPoint.fetch:

* the request got no usable answer (connection lost, timeout, undecodable response, encode error):
  the session handler is told (the next request is full) and the exception propagates, so the
  fetcher delays every partition;
* the response was rejected by the session handler (a top-level error such as
  FETCH_SESSION_ID_NOT_FOUND, or a response that does not match the session): the next request is
  full; FETCH_SESSION_TOPIC_ID_ERROR is raised (every partition backs off), anything else yields an
  empty result, so the fetcher retries at once with the full request.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from types import MappingProxyType
from typing import Any

from client.connection import KafkaConnection
from client.errors import UnsupportedApiVersionError
from client.fetch_session import (
    FetchRequestData,
    FetchSessionHandler,
    PartitionData,
    TopicPartition,
    fetch_request_body,
)
from follower.fetch_state import LeaderEpoch, Offset
from follower.fetch_state import TopicPartition as FetcherTopicPartition
from follower.leader_endpoint import (
    EpochEndOffset,
    FetchPartitionData,
    FetchPartitionParams,
    FollowerFetchRequest,
    OffsetAndEpoch,
)
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_LEADER_EPOCH,
    ZERO_UUID,
    IsolationLevel,
)

FETCH_MAX_VERSION = 17
FETCH_MIN_VERSION = 4
"""The oldest Fetch version :func:`client.fetch_session.fetch_request_body` writes."""
TRUNCATION_ON_FETCH_MIN_VERSION = 12
"""LastFetchedEpoch / DivergingEpoch (KIP-595)."""
NO_TOPIC_IDS_MAX_VERSION = 12
REPLICA_STATE_MIN_VERSION = 15
"""From here the replica is named in the ReplicaState tagged field instead of ReplicaId."""
OFFSET_FOR_LEADER_EPOCH_MAX_VERSION = 4
LIST_OFFSETS_MIN_VERSION = 1


class NetworkLeaderEndpoint:
    """A :class:`follower.leader_endpoint.LeaderEndpoint` that talks to the leader over one connection.

    ``connection`` must be open (its API versions negotiated): what the leader supports is read from
    it once, here. One fetch may be in flight at a time, as the fetcher does.
    """

    def __init__(
        self,
        connection: KafkaConnection,
        *,
        replica_id: int,
        broker_epoch: int = -1,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 10 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
    ) -> None:
        self._connection = connection
        self.replica_id = replica_id
        self.broker_epoch = broker_epoch
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self._session = FetchSessionHandler(f"{connection.host}:{connection.port}")
        self._params: dict[FetcherTopicPartition, FetchPartitionParams] = {}
        """The session's partitions with the fetcher's parameters (mirrors the handler's session)."""
        self._params_view = MappingProxyType(self._params)
        self._built: tuple[FollowerFetchRequest, FetchRequestData] | None = None
        self._read_versions(connection)

    def _read_versions(self, connection: KafkaConnection) -> None:
        self._fetch_version = connection.version_for(ApiKey.FETCH, FETCH_MAX_VERSION, FETCH_MIN_VERSION)
        self.supports_truncation_on_fetch = self._fetch_version >= TRUNCATION_ON_FETCH_MIN_VERSION
        try:
            connection.version_for(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_MAX_VERSION)
        except UnsupportedApiVersionError:
            self.supports_offset_for_leader_epoch = False
        else:
            self.supports_offset_for_leader_epoch = True

    @property
    def session(self) -> FetchSessionHandler:
        """The fetch session handler (for metrics and tests)."""
        return self._session

    @property
    def connection(self) -> KafkaConnection:
        return self._connection

    def replace_connection(self, connection: KafkaConnection) -> None:
        """Continue over a new connection to the same leader (the last one was lost).

        The session's partitions are kept, so the fetcher's O(changed) bookkeeping stays valid
        across reconnects; the failed request already made the session handler start over with a
        full request (a fetch session belongs to the leader, not to a connection, so a request
        built before the reconnect may still be sent). The leader's API versions are read again: it
        may have been upgraded in between.
        """
        self._connection = connection
        self._read_versions(connection)

    # -- fetch ---------------------------------------------------------------------------------------

    def build_fetch(
        self,
        partitions: Mapping[FetcherTopicPartition, FetchPartitionParams],
        changed: Set[FetcherTopicPartition],
    ) -> FollowerFetchRequest | None:
        session = self._session
        if self._built is not None:
            # The last built request was never sent: its changes are in the session but not at the
            # broker, and only a full request is sure to carry them.
            session.handle_error()
            self._built = None
        for tp in changed:
            params = partitions.get(tp)
            key = TopicPartition(*tp)
            if params is None:
                session.remove(key)
                self._params.pop(tp, None)
            else:
                session.mark_changed(key, self._partition_data(params))
                self._params[tp] = params
        data = session.build()
        if not data.session_partitions and not data.to_forget:
            self._built = None
            return None
        if data.is_full:
            to_send: Mapping[FetcherTopicPartition, FetchPartitionParams] = self._params_view
        else:
            to_send = {tp: self._params[tp] for tp in data.to_send}
        forgotten = frozenset((t.topic, t.partition) for t in data.to_forget)
        request = FollowerFetchRequest(self._params_view, to_send, forgotten)
        self._built = (request, data)
        return request

    def _partition_data(self, params: FetchPartitionParams) -> PartitionData:
        return PartitionData(
            fetch_offset=params.fetch_offset,
            max_bytes=self.partition_max_bytes,
            log_start_offset=params.log_start_offset,
            current_leader_epoch=params.current_leader_epoch,
            last_fetched_epoch=NO_LEADER_EPOCH
            if params.last_fetched_epoch is None
            else params.last_fetched_epoch,
            topic_id=ZERO_UUID if params.topic_id is None else params.topic_id,
        )

    async def fetch(self, request: FollowerFetchRequest) -> dict[FetcherTopicPartition, FetchPartitionData]:
        built, self._built = self._built, None
        if built is None or built[0] is not request:
            self._session.handle_error()
            raise ValueError("fetch() must be given the request the last build_fetch() returned")
        data = built[1]
        version = self._fetch_version
        if not data.can_use_topic_ids:
            version = min(version, NO_TOPIC_IDS_MAX_VERSION)
        try:
            body = fetch_request_body(
                data,
                version,
                max_wait_ms=self.max_wait_ms,
                min_bytes=self.min_bytes,
                max_bytes=self.max_bytes,
                replica_id=self.replica_id,
                replica_epoch=self.broker_epoch,
            )
            response = await self._connection.request(ApiKey.FETCH, version, body)
        except BaseException:
            self._session.handle_error()
            raise
        if not self._session.handle_response(response, version):
            if response.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR:
                raise KafkaError(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
            return {}
        result: dict[FetcherTopicPartition, FetchPartitionData] = {}
        for tp, partition in self._session.response_partitions(response, version):
            result[tp] = _partition_result(partition)
        return result

    # -- OffsetForLeaderEpoch --------------------------------------------------------------------------

    async def fetch_epoch_end_offsets(
        self, partitions: Mapping[FetcherTopicPartition, tuple[LeaderEpoch, LeaderEpoch]]
    ) -> dict[FetcherTopicPartition, EpochEndOffset]:
        if not partitions:
            return {}
        version = self._connection.version_for(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_MAX_VERSION
        )
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (current_epoch, epoch) in partitions.items():
            topics.setdefault(topic, []).append(
                {"partition": partition, "current_leader_epoch": current_epoch, "leader_epoch": epoch}
            )
        body = {
            "replica_id": self.replica_id,
            "topics": [{"topic": topic, "partitions": parts} for topic, parts in topics.items()],
        }
        response = await self._connection.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)
        result: dict[FetcherTopicPartition, EpochEndOffset] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.topic, p.partition)
                if tp not in partitions:
                    continue  # never asked for: ignore rather than confuse the fetcher
                result[tp] = EpochEndOffset(
                    ErrorCode.for_code(p.error_code), LeaderEpoch(p.leader_epoch), Offset(p.end_offset)
                )
        return result

    # -- ListOffsets -----------------------------------------------------------------------------------

    async def fetch_earliest_offset(
        self, tp: FetcherTopicPartition, current_leader_epoch: LeaderEpoch
    ) -> OffsetAndEpoch:
        return await self._list_offset(tp, current_leader_epoch, EARLIEST_TIMESTAMP)

    async def fetch_latest_offset(
        self, tp: FetcherTopicPartition, current_leader_epoch: LeaderEpoch
    ) -> OffsetAndEpoch:
        return await self._list_offset(tp, current_leader_epoch, LATEST_TIMESTAMP)

    async def _list_offset(
        self, tp: FetcherTopicPartition, current_leader_epoch: LeaderEpoch, timestamp: int
    ) -> OffsetAndEpoch:
        version = self._connection.version_for(ApiKey.LIST_OFFSETS, wanted_min=LIST_OFFSETS_MIN_VERSION)
        topic, partition = tp
        body = {
            "replica_id": self.replica_id,
            "isolation_level": IsolationLevel.READ_UNCOMMITTED,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "current_leader_epoch": current_leader_epoch,
                            "timestamp": timestamp,
                        }
                    ],
                }
            ],
        }
        response = await self._connection.request(ApiKey.LIST_OFFSETS, version, body)
        for t in response.topics:
            if t.name != topic:
                continue
            for p in t.partitions:
                if p.partition_index != partition:
                    continue
                if p.error_code:
                    raise KafkaError(ErrorCode.for_code(p.error_code), f"ListOffsets {topic}-{partition}")
                return OffsetAndEpoch(Offset(p.offset), LeaderEpoch(p.leader_epoch))
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets response has no {topic}-{partition}")


def _partition_result(partition: Any) -> FetchPartitionData:
    diverging = partition.get("diverging_epoch")
    diverging_epoch = None
    if diverging is not None and diverging.epoch >= 0:
        diverging_epoch = EpochEndOffset(
            ErrorCode.NONE, LeaderEpoch(diverging.epoch), Offset(diverging.end_offset)
        )
    records = partition.records
    return FetchPartitionData(
        error=ErrorCode.for_code(partition.error_code),
        high_watermark=Offset(partition.high_watermark),
        log_start_offset=Offset(partition.log_start_offset),
        records=b"" if records is None else records,
        diverging_epoch=diverging_epoch,
        last_stable_offset=Offset(partition.last_stable_offset),
    )


__all__ = ["NetworkLeaderEndpoint"]
