"""WriteTxnMarkers (key 27, v1-2): a transaction coordinator asks this broker, as leader, to end a
transaction on some partitions by appending a COMMIT or ABORT marker to each.

Each partition answers on its own: NONE once its marker is committed (acks=-1), NOT_LEADER_OR_FOLLOWER
or UNKNOWN_TOPIC_OR_PARTITION when this broker does not lead it (the coordinator finds the new leader
and retries), TRANSACTION_COORDINATOR_FENCED when a newer coordinator already wrote a marker for the
producer, INVALID_PRODUCER_EPOCH for a marker of an older producer epoch. Markers that reach
``__consumer_offsets`` also end the transaction's offset commits (:mod:`broker.transactions.markers`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from broker.transactions.markers import TxnMarker, TxnMarkerWriter
from metadata.authorizer.standard import Authorizer
from protocol.acl_types import AclOperation
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class WriteTxnMarkersHandler(Handler):
    api_key = ApiKey.WRITE_TXN_MARKERS
    min_version = 1
    max_version = 2

    def __init__(self, writer: TxnMarkerWriter, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        """With an authorizer the requester (a broker) needs ALTER or CLUSTER_ACTION on the cluster
        (else CLUSTER_AUTHORIZATION_FAILED on every partition), as in Kafka."""
        self._writer = writer
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        authorizer = self._authorizer
        if (
            authorizer.enabled
            and not cluster_allowed(authorizer, ctx, AclOperation.ALTER)
            and not cluster_allowed(authorizer, ctx, AclOperation.CLUSTER_ACTION)
        ):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        markers = [
            TxnMarker(
                m.producer_id,
                m.producer_epoch,
                m.coordinator_epoch,
                m.transaction_result,
                [(topic.name, index) for topic in m.topics for index in topic.partition_indexes],
            )
            for m in request.markers
        ]
        results = await asyncio.gather(*(self._writer.write(marker) for marker in markers))
        return {"markers": [_marker_result(m, errors) for m, errors in zip(markers, results, strict=True)]}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        if request is None:
            return None
        return {
            "markers": [
                {
                    "producer_id": m.producer_id,
                    "topics": [
                        {
                            "name": topic.name,
                            "partitions": [
                                {"partition_index": i, "error_code": int(code)}
                                for i in topic.partition_indexes
                            ],
                        }
                        for topic in m.topics
                    ],
                }
                for m in request.markers
            ]
        }


def _marker_result(marker: TxnMarker, errors: dict[tuple[str, int], ErrorCode]) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, index), code in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": int(code)})
    return {
        "producer_id": marker.producer_id,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()],
    }
