"""Fetch (1) of ``__cluster_metadata-0`` on the controller listener: Raft replication and observers.

A voter following the quorum's leader fetches with its own replica id and its epoch; a broker
fetches as an observer (replica id -1). Both reach :meth:`RaftNode.handle_fetch
<metadata.raft.quorum.RaftNode.handle_fetch>` through the :class:`RaftManager`: the fetch offset and
last fetched epoch are checked against the leader's log (a DivergingEpoch when they left it), a
voter's fetch offset moves the high watermark, an observer gets committed batches only. Every
response names the current leader and epoch (CurrentLeader), which is how brokers and voters find
the leader. An empty answer is parked until the log or the high watermark moves or ``max_wait_ms``
runs out, so a commit reaches the followers and the brokers within a round trip, without polling.

The request is parsed and the response encoded by the broker's ordinary Fetch code
(:func:`broker.handlers.fetch.fetch_request`, :func:`broker.fetch.response.response_body`).
Sessions are not offered (session id 0), as Kafka's Raft fetch does not use them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.fetch.response import encode_response, response_body
from broker.fetch.service import PartitionPayload
from broker.fetch_session import FetchResponseParts, PartitionFetchResult, SessionId, TopicPartitionKey
from broker.handlers.base import Handler, RequestContext
from broker.handlers.fetch import fetch_request
from broker.quorum.raft_manager import RaftManager
from metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from metadata.raft.messages import FetchRequest, FetchResponse, RaftError
from metadata.raft.wire import error_code
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET

__all__ = ["MetadataFetchHandler"]

MIN_VERSION = 12
"""The first Fetch version with LastFetchedEpoch and DivergingEpoch: Raft needs both."""
NO_SESSION = SessionId(0)


class MetadataFetchHandler(Handler):
    api_key = ApiKey.FETCH
    min_version = MIN_VERSION
    max_version = 17

    def __init__(self, raft: RaftManager, cluster_id: str | None = None) -> None:
        self._raft = raft
        self._cluster_id = cluster_id
        self._hw_sent: dict[int, int] = {}
        """The high watermark last sent to each voter: a change is news even without records."""

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        cluster_id = request.cluster_id
        if cluster_id is not None and self._cluster_id is not None and cluster_id != self._cluster_id:
            raise KafkaError(
                ErrorCode.INCONSISTENT_CLUSTER_ID, f"cluster {cluster_id!r} is not {self._cluster_id!r}"
            )
        fetch = fetch_request(ctx.api_version, request)
        parts: list[tuple[TopicPartitionKey, PartitionFetchResult]] = []
        for key, params in fetch.fetch_data:
            if not _is_metadata_partition(key):
                parts.append(
                    (
                        key,
                        PartitionFetchResult(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, erroneous=True),
                    )
                )
                continue
            answer = await self._fetch(
                self._fetcher_id(fetch.replica_id, params.current_leader_epoch),
                params.current_leader_epoch,
                params.fetch_offset,
                params.last_fetched_epoch,
                fetch.max_wait_ms,
            )
            parts.append((_key(key), _result(answer)))
        body = response_body(
            ctx.api_version, FetchResponseParts(ErrorCode.NONE, NO_SESSION, parts), read_committed=False
        )
        return encode_response(ctx.api_version, body)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        body = response_body(
            ctx.api_version, FetchResponseParts(int(code), NO_SESSION, []), read_committed=False
        )
        return encode_response(ctx.api_version, body)

    def _fetcher_id(self, replica_id: int, leader_epoch: int) -> int:
        """The replica id the quorum sees: a voter fetches with its epoch; a fetch naming a voter's
        id without one is a broker (an observer whose node.id the voter list also has, possible with
        controller.quorum.bootstrap.servers), and must never count towards the commit."""
        if replica_id in self._raft.voters and leader_epoch == NO_LEADER_EPOCH:
            return -1
        return replica_id

    async def _fetch(
        self, replica_id: int, leader_epoch: int, fetch_offset: int, last_fetched_epoch: int, max_wait_ms: int
    ) -> FetchResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        while True:
            epoch = self._raft.epoch if leader_epoch == NO_LEADER_EPOCH else leader_epoch
            request = FetchRequest(
                replica_id, self._raft.node_id, epoch, fetch_offset, max(last_fetched_epoch, 0)
            )
            answer = self._raft.receive(request)
            assert isinstance(answer, FetchResponse)
            remaining = deadline - loop.time()
            news = (
                answer.entries
                or answer.snapshot_id is not None
                or answer.diverging_epoch is not None
                or answer.error is not RaftError.NONE
                or (replica_id >= 0 and self._hw_sent.get(replica_id) != answer.high_watermark)
            )
            if news or remaining <= 0:
                if replica_id >= 0:
                    self._hw_sent[replica_id] = answer.high_watermark
                return answer
            await self._raft.wait_for_change(remaining)


def _is_metadata_partition(key: TopicPartitionKey) -> bool:
    if key.partition != METADATA_PARTITION:
        return False
    return key.topic_id == METADATA_TOPIC_ID or key.topic_name == METADATA_TOPIC


def _key(key: TopicPartitionKey) -> TopicPartitionKey:
    return TopicPartitionKey(METADATA_TOPIC_ID, METADATA_TOPIC, METADATA_PARTITION)


def _result(answer: FetchResponse) -> PartitionFetchResult:
    records = b"".join(entry.payload for entry in answer.entries)
    diverging = answer.diverging_epoch
    leader = (-1 if answer.leader_id is None else answer.leader_id, answer.epoch)
    return PartitionFetchResult(
        error_code=error_code(answer.error),
        high_watermark=answer.high_watermark,
        last_stable_offset=answer.high_watermark,
        log_start_offset=answer.log_start_offset,
        records_size=len(records),
        diverging_epoch=NO_LEADER_EPOCH if diverging is None else diverging.epoch,
        payload=PartitionPayload(
            records,
            diverging_end_offset=UNDEFINED_EPOCH_OFFSET if diverging is None else diverging.end_offset,
            current_leader=leader,
            snapshot_id=answer.snapshot_id,
        ),
    )
