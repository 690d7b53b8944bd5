"""Produce (key 0, v3-11): append each partition's batch on this leader and report its offsets.

Thin: the request becomes a :class:`~broker.produce.service.ProduceRequest`, the
:class:`~broker.produce.service.ProduceService` appends (and for acks=-1 waits for the high
watermark; its module docstring lists the request-level and per-partition rules), and the
response is built from the per-partition outcomes, with CurrentLeader for NOT_LEADER_OR_FOLLOWER
at v10+.

A client over its ``producer_byte_rate`` quota gets the throttle time in the response and its
connection muted for that long (:mod:`broker.quotas.enforcement`).

With an authorizer each topic needs WRITE (else TOPIC_AUTHORIZATION_FAILED for its partitions,
whether it exists or not) and a transactional produce WRITE on its transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), as in KafkaApis.handleProduceRequest.

acks=0 gets no response; if any partition failed, the connection is closed instead (Kafka does
the same, since the producer reads no response and would never learn of the error otherwise).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import structlog

from broker.handlers.authorization import ALLOW_EVERYTHING, allowed, denied_names
from broker.handlers.base import NO_RESPONSE, Handler, RequestContext
from broker.produce.service import PartitionOutcome, ProducePartitionData, ProduceRequest, ProduceService
from broker.quotas.enforcement import CLIENT_THROTTLES_PRODUCE_VERSION, BrokerQuotas
from broker.server.dispatcher import CloseConnection
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import NO_TIMESTAMP, UNKNOWN_OFFSET

CURRENT_LEADER_VERSION = 10

_log = structlog.get_logger("kipling.produce")


class ProduceHandler(Handler):
    api_key = ApiKey.PRODUCE
    min_version = 3
    max_version = 11

    def __init__(
        self,
        service: ProduceService,
        quotas: BrokerQuotas | None = None,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        self._service = service
        self._quotas = quotas
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        produced = produce_request(ctx, request)
        if self._authorizer.enabled:
            outcomes = await self._produce_authorized(ctx, produced)
        else:
            outcomes = await self._service.produce(produced)
        throttle_ms = 0
        if self._quotas is not None:
            size = sum(len(p.records) for p in produced.partitions if p.records is not None)
            throttle_ms = self._quotas.produce_throttle_ms(ctx.connection_id, ctx.client_id, size)
            if throttle_ms and request.acks != 0:
                await self._quotas.hold_for_old_client(
                    ctx.connection_id, ctx.api_version, CLIENT_THROTTLES_PRODUCE_VERSION
                )
        if request.acks == 0:
            failed = [o for o in outcomes if o.error_code is not ErrorCode.NONE]
            if failed:
                reason = f"acks=0 produce failed: {failed[0].error_code.name}"
                _log.info("closing connection", peer=ctx.peer, reason=reason)
                raise CloseConnection(reason)
            return NO_RESPONSE
        return self._response(ctx.api_version, request, outcomes, throttle_ms)

    async def _produce_authorized(
        self, ctx: RequestContext, produced: ProduceRequest
    ) -> list[PartitionOutcome]:
        """Kafka's checks: a transactional produce needs WRITE on its transactional id (else the
        whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE (else its
        partitions are TOPIC_AUTHORIZATION_FAILED, whether the topic exists or not); the
        authorized partitions are appended, the outcomes kept in request order."""
        txn_id = produced.transactional_id
        if txn_id is not None and not allowed(
            self._authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
        ):
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        denied = denied_names(
            self._authorizer,
            ctx,
            AclOperation.WRITE,
            ResourceType.TOPIC,
            (p.topic for p in produced.partitions),
        )
        if not denied:
            return await self._service.produce(produced)
        kept = [p for p in produced.partitions if p.topic not in denied]
        done = iter(
            await self._service.produce(dataclasses.replace(produced, partitions=kept)) if kept else ()
        )
        return [
            PartitionOutcome(p.topic, p.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if p.topic in denied
            else next(done)
            for p in produced.partitions
        ]

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every partition gets ``code``; acks=0 (or an unreadable body) closes the connection."""
        if request is None or request.acks == 0:
            return None
        outcomes = [PartitionOutcome(p.topic, p.index, code) for p in _partitions(request)]
        return self._response(ctx.api_version, request, outcomes)

    # -- response --------------------------------------------------------------------------------

    def _response(
        self, version: int, request: MessageData, outcomes: list[PartitionOutcome], throttle_ms: int = 0
    ) -> dict[str, Any]:
        by_topic: list[dict[str, Any]] = []
        remaining = iter(outcomes)
        for topic in request.topic_data:
            partitions = [self._partition_response(version, next(remaining)) for _ in topic.partition_data]
            by_topic.append({"name": topic.name, "partition_responses": partitions})
        return {"responses": by_topic, "throttle_time_ms": throttle_ms}

    def _partition_response(self, version: int, outcome: PartitionOutcome) -> dict[str, Any]:
        result = outcome.result
        body: dict[str, Any] = {
            "index": outcome.index,
            "error_code": int(outcome.error_code),
            "base_offset": result.base_offset if result is not None else UNKNOWN_OFFSET,
            "log_append_time_ms": result.log_append_time_ms if result is not None else NO_TIMESTAMP,
            "log_start_offset": result.log_start_offset if result is not None else outcome.log_start_offset,
            "record_errors": [
                {"batch_index": e.batch_index, "batch_index_error_message": e.message}
                for e in outcome.record_errors
            ],
            "error_message": outcome.message if outcome.error_code is not ErrorCode.NONE else None,
        }
        if outcome.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER and version >= CURRENT_LEADER_VERSION:
            leader = self._service.current_leader(outcome.topic, outcome.index)
            if leader is not None:
                body["current_leader"] = {"leader_id": leader[0], "leader_epoch": leader[1]}
        return body


def produce_request(ctx: RequestContext, request: MessageData) -> ProduceRequest:
    """The domain form of a decoded ProduceRequest."""
    return ProduceRequest(
        version=ctx.api_version,
        client_id=ctx.client_id,
        acks=request.acks,
        timeout_ms=request.timeout_ms,
        transactional_id=request.transactional_id,
        partitions=_partitions(request),
    )


def _partitions(request: MessageData) -> list[ProducePartitionData]:
    return [
        ProducePartitionData(topic.name, data.index, data.records)
        for topic in request.topic_data
        for data in topic.partition_data
    ]
