"""IncrementalAlterConfigs and AlterConfigs handlers: the controller's answer, and a broker's checks
before it forwards (a BROKER resource must name this broker), its reassembly in request order, and
the wait for its own metadata to show the change."""

from __future__ import annotations

from typing import Any

from broker.cluster.controller_channel import ControllerUnavailableError
from broker.handlers.alter_configs import AlterConfigsHandler
from broker.handlers.base import RequestContext
from broker.handlers.incremental_alter_configs import (
    ForwardedAlterConfigsHandler,
    IncrementalAlterConfigsHandler,
)
from metadata.controller.active import ActiveController
from metadata.image import MetadataImage
from metadata.records import ConfigRecord, ConfigResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import Cluster

TOPIC, BROKER = int(ConfigResourceType.TOPIC), int(ConfigResourceType.BROKER)
NODE = 1


class Channel:
    """The controller: answers NONE for every resource it gets, or is unreachable."""

    def __init__(self, *, reachable: bool = True) -> None:
        self.reachable = reachable
        self.bodies: list[MessageData] = []

    async def forward(self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float) -> Any:
        self.bodies.append(body)
        if not self.reachable:
            raise ControllerUnavailableError("connection refused")
        return MessageData(
            throttle_time_ms=0,
            responses=[
                MessageData(
                    error_code=0,
                    error_message=None,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in body.resources
            ],
        )


class Loader:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.shown: list[bool] = []

    async def wait_for(self, predicate: Any, timeout_s: float) -> bool:
        self.shown.append(predicate(self.image))
        return self.shown[-1]


def context(api_key: ApiKey, version: int = 1) -> RequestContext:
    return RequestContext(int(api_key), version, 1, "client", "127.0.0.1:1", 1, 0)


def resource(resource_type: int, name: str, *configs: tuple[str, str | None, int]) -> MessageData:
    return MessageData(
        resource_type=resource_type,
        resource_name=name,
        configs=[MessageData(name=k, value=v, config_operation=op) for k, v, op in configs],
    )


async def test_broker_resources_must_name_this_broker_and_answers_keep_request_order() -> None:
    image = MetadataImage()
    image.apply(ConfigRecord(BROKER, "", "log.retention.ms", "5"), 0, 1)
    channel, loader = Channel(), Loader(image)
    forwarding = ForwardedAlterConfigsHandler(IncrementalAlterConfigsHandler, channel, loader, NODE)  # type: ignore[arg-type]
    request = MessageData(
        resources=[
            resource(BROKER, "2", ("log.retention.ms", "5", 0)),
            resource(BROKER, "", ("log.retention.ms", "5", 0)),
            resource(BROKER, "x", ("log.retention.ms", "5", 0)),
            resource(BROKER, str(NODE), ("log.retention.ms", None, 1)),
        ],
        validate_only=False,
    )
    response = await forwarding.handle(context(ApiKey.INCREMENTAL_ALTER_CONFIGS), request)
    got = [(r["resource_name"], r["error_code"], r["error_message"]) for r in response["responses"]]
    assert got == [
        ("2", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2"),
        ("", ErrorCode.NONE, None),
        ("x", ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: x"),
        (str(NODE), ErrorCode.NONE, None),
    ]
    [sent] = channel.bodies
    assert [r.resource_name for r in sent.resources] == ["", str(NODE)]
    assert loader.shown == [True]  # the image holds log.retention.ms=5 for "" and nothing for 1


async def test_legacy_alter_configs_forwards_the_cluster_default_and_times_out_without_controller() -> None:
    forwarding = ForwardedAlterConfigsHandler(
        AlterConfigsHandler, Channel(reachable=False), Loader(MetadataImage()), NODE
    )  # type: ignore[arg-type]
    assert (forwarding.api_key, forwarding.min_version, forwarding.max_version) == (
        ApiKey.ALTER_CONFIGS,
        0,
        2,
    )
    request = MessageData(
        resources=[
            MessageData(resource_type=BROKER, resource_name="", configs=[]),
            MessageData(resource_type=TOPIC, resource_name="t", configs=[]),
        ],
        validate_only=False,
    )
    response = await forwarding.handle(context(ApiKey.ALTER_CONFIGS), request)
    assert [(r["error_code"], r["error_message"]) for r in response["responses"]] == [
        (ErrorCode.REQUEST_TIMED_OUT, None),  # Kafka's broker forwards "" (the cluster defaults)
        (ErrorCode.REQUEST_TIMED_OUT, None),
    ]


async def test_controller_handler_answers_from_the_active_controller() -> None:
    cluster = Cluster()
    cluster.join(1)
    cluster.create("orders", 1, 1)
    handler = IncrementalAlterConfigsHandler(cluster.controller)
    request = MessageData(
        resources=[
            resource(TOPIC, "orders", ("retention.ms", "1000", 0)),
            resource(TOPIC, "nope", ("retention.ms", "1", 0)),
        ],
        validate_only=False,
    )
    response = await handler.handle(context(ApiKey.INCREMENTAL_ALTER_CONFIGS), request)
    assert [(r["error_code"], r["error_message"]) for r in response["responses"]] == [
        (ErrorCode.NONE, None),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
    ]
    assert cluster.image.get("orders").configs == {"retention.ms": "1000"}
    inactive = AlterConfigsHandler(ActiveController(1))
    response = await inactive.handle(context(ApiKey.ALTER_CONFIGS), request)
    assert {r["error_code"] for r in response["responses"]} == {ErrorCode.NOT_CONTROLLER}
