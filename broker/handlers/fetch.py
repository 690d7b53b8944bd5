"""Fetch (key 1, v4-17): consumers and followers read record batches, possibly after a long poll.

Thin: the request becomes a :class:`~broker.fetch.service.FetchRequest` (topic names up to v12,
topic ids from v13; the replica id, and the follower's broker epoch, from ReplicaState from v15),
the :class:`FetchService` serves it, and the response is encoded around the records' file slices
(:mod:`broker.fetch.response`).
A consumer over its ``consumer_byte_rate`` quota gets an empty response with the throttle time
and its connection muted for that long (:mod:`broker.quotas.enforcement`); followers are never
throttled by client quotas.
v4 is the lowest version served: it is the first with record batch v2, which kipling stores.
With an authorizer a consumer needs READ on each topic and a follower CLUSTER_ACTION on the cluster;
a denied partition is answered TOPIC_AUTHORIZATION_FAILED (see ``FetchRequest.topic_authorized``).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from broker.fetch.response import BrokerList, encode_response, response_body
from broker.fetch.service import CLIENT_METADATA_VERSION, FetchRequest, FetchService
from broker.fetch_session import (
    FetchResponseParts,
    PartitionFetchParams,
    PartitionFetchResult,
    TopicPartitionKey,
)
from broker.fetch_session.session import INVALID_SESSION_ID
from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from broker.quotas.enforcement import CLIENT_THROTTLES_FETCH_VERSION, BrokerQuotas
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.messages.fetch import FETCH_TOPIC_ID_VERSION as TOPIC_ID_VERSION
from protocol.sentinels import ZERO_UUID, IsolationLevel

REPLICA_STATE_VERSION = 15
"""v15 moved ReplicaId into the tagged ReplicaState (KIP-903)."""
TOP_LEVEL_ERROR_VERSION = 7


class FetchHandler(Handler):
    api_key = ApiKey.FETCH
    min_version = 4
    max_version = 17

    def __init__(
        self,
        service: FetchService,
        *,
        brokers: BrokerList | None = None,
        quotas: BrokerQuotas | None = None,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        """``brokers`` lists the advertised endpoints, for NodeEndpoints (v16+)."""
        self._service = service
        self._brokers = brokers
        self._quotas = quotas
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        fetch = fetch_request(ctx.api_version, request, ctx.listener)
        if self._authorizer.enabled:
            fetch = dataclasses.replace(fetch, topic_authorized=self._topic_check(ctx, fetch))
        if self._quotas is not None and fetch.replica_id < 0:
            capped = self._quotas.fetch_max_bytes(ctx.client_id, fetch.max_bytes)
            if capped != fetch.max_bytes:
                fetch = dataclasses.replace(fetch, max_bytes=capped)
        parts = await self._service.fetch(fetch)
        throttle_ms = 0
        if self._quotas is not None and fetch.replica_id < 0:
            size = sum(result.records_size for _, result in parts.partitions)
            throttle_ms = self._quotas.fetch_throttle_ms(ctx.connection_id, ctx.client_id, size)
            if throttle_ms > 0:
                parts = _throttled(fetch, parts)
                await self._quotas.hold_for_old_client(
                    ctx.connection_id, ctx.api_version, CLIENT_THROTTLES_FETCH_VERSION
                )
        body = response_body(
            ctx.api_version,
            parts,
            read_committed=fetch.isolation_level == IsolationLevel.READ_COMMITTED,
            brokers=self._brokers,
        )
        body["throttle_time_ms"] = throttle_ms
        return encode_response(ctx.api_version, body)

    def _topic_check(self, ctx: RequestContext, fetch: FetchRequest) -> Callable[[str], bool] | None:
        """Kafka's rules: a follower needs CLUSTER_ACTION on the cluster (else every partition is
        TOPIC_AUTHORIZATION_FAILED), a consumer READ on each topic (asked once per topic)."""
        if fetch.is_from_follower:
            if cluster_allowed(self._authorizer, ctx, AclOperation.CLUSTER_ACTION):
                return None
            return _deny_all
        decided: dict[str, bool] = {}
        authorizer = self._authorizer

        def may_read(topic: str) -> bool:
            verdict = decided.get(topic)
            if verdict is None:
                verdict = decided[topic] = allowed(
                    authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, topic
                )
            return verdict

        return may_read

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Kafka's getErrorResponse: the top-level error (v7+), copied to every partition before v13.

        Without a top-level ErrorCode (v4-6) and no request to list partitions from, there is no
        place for the error and the connection is closed.
        """
        version = ctx.api_version
        partitions: list[tuple[TopicPartitionKey, PartitionFetchResult]] = []
        if request is not None and version < TOPIC_ID_VERSION:
            result = PartitionFetchResult(error_code=code)
            partitions = [(key, result) for key, _ in _fetch_data(version, request)]
        elif version < TOP_LEVEL_ERROR_VERSION:
            return None
        parts = FetchResponseParts(code, INVALID_SESSION_ID, partitions)
        return response_body(version, parts, read_committed=False)


def _deny_all(topic: str) -> bool:
    return False


def _throttled(fetch: FetchRequest, parts: FetchResponseParts) -> FetchResponseParts:
    """Kafka's throttled fetch response: no partitions; an incremental session keeps its id (the
    partitions stay dirty until the client fetches them again), a full fetch answers no session."""
    incremental = fetch.session_id != INVALID_SESSION_ID and fetch.session_epoch > 0
    return FetchResponseParts(parts.error_code, parts.session_id if incremental else INVALID_SESSION_ID, [])


def fetch_request(version: int, request: MessageData, listener: str = "") -> FetchRequest:
    """The domain form of a decoded FetchRequest; an unknown isolation level is INVALID_REQUEST.

    ``listener`` is the one the request came in on (a preferred read replica must be reachable there).
    """
    try:
        isolation_level = IsolationLevel(request.isolation_level)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"unknown isolation level {request.isolation_level}"
        ) from None
    if version < REPLICA_STATE_VERSION:
        replica_id, replica_epoch = request.replica_id, -1
    else:
        replica_id, replica_epoch = request.replica_state.replica_id, request.replica_state.replica_epoch
    return FetchRequest(
        version=version,
        replica_id=replica_id,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=isolation_level,
        session_id=request.session_id,
        session_epoch=request.session_epoch,
        fetch_data=_fetch_data(version, request),
        to_forget=_to_forget(version, request),
        replica_epoch=replica_epoch,
        rack_id=(request.rack_id or "") if version >= CLIENT_METADATA_VERSION else "",
        listener=listener,
    )


def _fetch_data(version: int, request: MessageData) -> list[tuple[TopicPartitionKey, PartitionFetchParams]]:
    data = []
    for topic in request.topics:
        topic_id, name = _topic(version, topic)
        for p in topic.partitions:
            params = PartitionFetchParams(
                fetch_offset=p.fetch_offset,
                log_start_offset=p.log_start_offset,
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                last_fetched_epoch=p.last_fetched_epoch,
            )
            data.append((TopicPartitionKey(topic_id, name, p.partition), params))
    return data


def _to_forget(version: int, request: MessageData) -> list[TopicPartitionKey]:
    forgotten: list[TopicPartitionKey] = []
    for topic in request.forgotten_topics_data or ():
        topic_id, name = _topic(version, topic)
        forgotten.extend(TopicPartitionKey(topic_id, name, index) for index in topic.partitions)
    return forgotten


def _topic(version: int, topic: MessageData) -> tuple[uuid.UUID, str | None]:
    """(topic id, name) of a request topic: the id from v13 (name resolved later), else the name."""
    if version >= TOPIC_ID_VERSION:
        return topic.topic_id, None
    return ZERO_UUID, topic.topic
