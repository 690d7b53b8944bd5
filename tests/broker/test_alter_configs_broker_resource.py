"""AlterConfigs of BROKER resources, as Kafka's ConfigAdminManager and ConfigurationControlManager
handle them.

* Legacy AlterConfigs may name the BROKER resource ``""`` (the cluster defaults) on a broker: Kafka
  checks the broker id only for a non-empty name, and the controller replaces the defaults' whole
  override set with the keys given.
* A bad value or an unknown key of a BROKER resource is INVALID_REQUEST, as Kafka's broker answers
  after its own check (DynamicBrokerConfig.validate, KAFKA-13609), not INVALID_CONFIG.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.alter_configs import AlterConfigsHandler
from broker.handlers.base import RequestContext
from broker.handlers.incremental_alter_configs import ForwardedAlterConfigsHandler
from metadata.controller.config_control import AlterableConfig, ConfigResourceChange
from metadata.image import MetadataImage
from metadata.records import ConfigResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import Cluster

BROKER = int(ConfigResourceType.BROKER)
NODE = 1


class _Channel:
    """A controller that accepts every resource forwarded to it."""

    def __init__(self) -> None:
        self.bodies: list[MessageData] = []

    async def forward(self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float) -> Any:
        self.bodies.append(body)
        responses = [
            MessageData(
                error_code=0, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name
            )
            for r in body.resources
        ]
        return MessageData(throttle_time_ms=0, responses=responses)


class _Loader:
    def __init__(self) -> None:
        self.image = MetadataImage()

    async def wait_for(self, predicate: Any, timeout_s: float) -> bool:
        return True


def _resource(name: str, **configs: str) -> MessageData:
    return MessageData(
        resource_type=BROKER,
        resource_name=name,
        configs=[MessageData(name=k, value=v, config_operation=0) for k, v in configs.items()],
    )


async def test_a_broker_forwards_legacy_alter_configs_of_the_cluster_defaults() -> None:
    channel = _Channel()
    handler = ForwardedAlterConfigsHandler(AlterConfigsHandler, channel, _Loader(), NODE)  # type: ignore[arg-type]
    request = MessageData(
        resources=[
            _resource("", **{"log.retention.ms": "60000"}),
            _resource("2", **{"log.retention.ms": "1"}),
        ],
        validate_only=False,
    )
    ctx = RequestContext(int(ApiKey.ALTER_CONFIGS), 2, 1, "client", "127.0.0.1:1", 1, 0)
    response = await handler.handle(ctx, request)
    assert [(r["resource_name"], r["error_code"], r["error_message"]) for r in response["responses"]] == [
        ("", ErrorCode.NONE, None),
        ("2", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2"),
    ]
    [sent] = channel.bodies
    assert [r.resource_name for r in sent.resources] == [""]


def _set(name: str, **configs: str) -> ConfigResourceChange:
    return ConfigResourceChange(BROKER, name, tuple(AlterableConfig(k, v) for k, v in configs.items()))


def test_legacy_alter_configs_replaces_the_cluster_defaults_as_a_whole() -> None:
    cluster = Cluster()
    cluster.join(1)
    first = cluster.controller.incremental_alter_configs(
        [_set("", **{"log.retention.ms": "60000", "message.max.bytes": "2048"})]
    )
    assert [r.error for r in first] == [ErrorCode.NONE]
    legacy = cluster.controller.alter_configs([_set("", **{"log.segment.bytes": "1048576"})])
    assert [(r.error, r.message) for r in legacy] == [(ErrorCode.NONE, None)]
    assert cluster.image.broker_configs("") == {"log.segment.bytes": "1048576"}


def test_bad_broker_values_and_unknown_listener_keys_are_invalid_requests() -> None:
    """A key no definition knows is stored as Kafka stores it (test_config_control), except under
    ``listener.name.``: kipling takes only a listener's keystore at run time."""
    cluster = Cluster()
    cluster.join(1)
    results = cluster.controller.incremental_alter_configs(
        [
            _set("1", **{"message.max.bytes": "-1"}),
            _set("", **{"log.retention.ms": "soon"}),
            _set("3", **{"listener.name.ssl.ssl.client.auth": "required"}),
            _set("4", **{"num.partitions": "3"}),
        ]
    )
    assert [r.error for r in results] == [ErrorCode.INVALID_REQUEST] * 4
    assert results[3].message == "Cannot update these configs dynamically: Set(num.partitions)"
    assert "message.max.bytes" in (results[0].message or "")
    assert "log.retention.ms" in (results[1].message or "")


def test_append_to_a_broker_key_that_is_not_a_list_has_kafkas_broker_message() -> None:
    """Kafka's broker checks APPEND / SUBTRACT of a BROKER resource (ConfigAdminManager
    .prepareIncrementalConfigs) before the controller sees it; a TOPIC keeps the controller's words."""
    cluster = Cluster()
    cluster.join(1)
    cluster.create("orders", 1, 1)
    results = cluster.controller.incremental_alter_configs(
        [
            ConfigResourceChange(BROKER, "1", (AlterableConfig("log.retention.ms", "5", 2),)),
            ConfigResourceChange(BROKER, "", (AlterableConfig("message.max.bytes", "5", 3),)),
            ConfigResourceChange(2, "orders", (AlterableConfig("retention.ms", "5", 2),)),
        ]
    )
    assert [(r.error, r.message) for r in results] == [
        (ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms"),
        (ErrorCode.INVALID_CONFIG, "Config value subtract is not allowed for config key: message.max.bytes"),
        (ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."),
    ]
