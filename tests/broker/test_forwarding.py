"""ForwardingHandler: a broker's admin request goes to the controller as the client sent it."""

from __future__ import annotations

from typing import Any

from broker.cluster.controller_channel import ControllerUnavailableError
from broker.handlers.base import RequestContext
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.forwarding import FORWARD_TIMEOUT_FLOOR_S, ForwardingHandler, effect_of
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

VERSION = 7


class Channel:
    """The controller's side: answers every forwarded request, or is unreachable."""

    def __init__(self, *, reachable: bool = True) -> None:
        self.reachable = reachable
        self.sent: list[tuple[ApiKey, int, float]] = []

    async def forward(self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float) -> Any:
        self.sent.append((api_key, version, timeout_s))
        if not self.reachable:
            raise ControllerUnavailableError("connection refused")
        return MessageData(
            throttle_time_ms=0, topics=[MessageData(name=t.name, error_code=0) for t in body.topics]
        )


class Loader:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def wait_for(self, predicate: Any, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        return True


def request(timeout_ms: int) -> MessageData:
    topic = MessageData(name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])
    return MessageData(topics=[topic], timeout_ms=timeout_ms, validate_only=False)


def context() -> RequestContext:
    return RequestContext(int(ApiKey.CREATE_TOPICS), VERSION, 1, "client", "127.0.0.1:1", 1, 0)


def handler(channel: Channel, loader: Loader) -> ForwardingHandler:
    return ForwardingHandler(CreateTopicsHandler, channel, loader, effect_of(ApiKey.CREATE_TOPICS))  # type: ignore[arg-type]


async def test_a_zero_timeout_request_is_still_carried_out_by_the_controller() -> None:
    """timeout_ms bounds the wait for this broker's metadata, not the controller's answer."""
    channel, loader = Channel(), Loader()
    response = await handler(channel, loader).handle(context(), request(timeout_ms=0))
    assert [t.error_code for t in response.topics] == [ErrorCode.NONE]
    assert channel.sent == [(ApiKey.CREATE_TOPICS, VERSION, FORWARD_TIMEOUT_FLOOR_S)]
    assert loader.waits and loader.waits[0] < FORWARD_TIMEOUT_FLOOR_S


async def test_an_unreachable_controller_is_request_timed_out_for_every_topic() -> None:
    forwarding = handler(Channel(reachable=False), Loader())
    response = await forwarding.handle(context(), request(timeout_ms=30_000))
    assert [t["error_code"] for t in response["topics"]] == [ErrorCode.REQUEST_TIMED_OUT]
    assert (forwarding.api_key, forwarding.min_version, forwarding.max_version) == (
        CreateTopicsHandler.api_key,
        CreateTopicsHandler.min_version,
        CreateTopicsHandler.max_version,
    )
