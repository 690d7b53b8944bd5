"""Calling the cluster admin handlers (ElectLeaders, DescribeCluster, DescribeTopicPartitions) as
a client would: requests through the request codec, responses through the response codec."""

from __future__ import annotations

from typing import Any

from broker.handlers.base import Handler, RequestContext
from protocol.data import MessageData
from protocol.messages import REQUESTS, RESPONSES
from tests.metadata.controller.helpers import SESSION_MS, Cluster


def ctx(handler: Handler, version: int, listener: str = "PLAINTEXT") -> RequestContext:
    return RequestContext(int(handler.api_key), version, 7, "test-client", "127.0.0.1:5555", 1, 0, listener)


def decoded(handler: Handler, version: int, body: dict[str, Any]) -> MessageData:
    codec = REQUESTS[int(handler.api_key)].codec(version)
    return codec.decode(codec.encode(body))


def encoded(handler: Handler, version: int, response: Any) -> MessageData:
    codec = RESPONSES[int(handler.api_key)].codec(version)
    return codec.decode(codec.encode(response))


async def call(
    handler: Handler, version: int, body: dict[str, Any], listener: str = "PLAINTEXT"
) -> MessageData:
    """Send ``body`` as a real request would arrive; return the response as a client decodes it."""
    response = await handler.handle(ctx(handler, version, listener), decoded(handler, version, body))
    return encoded(handler, version, response)


def three_brokers() -> Cluster:
    cluster = Cluster()
    cluster.join(1, 2, 3)
    return cluster


def fence(cluster: Cluster, broker_id: int) -> None:
    """Let ``broker_id``'s session expire while the others heartbeat."""
    cluster.clock.advance(SESSION_MS + 1)
    cluster.keep_alive(b for b in cluster.image.live_broker_ids() if b != broker_id)
    cluster.controller.tick()
