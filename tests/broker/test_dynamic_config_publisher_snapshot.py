"""Dynamic configs: a whole image published without a delta (a metadata snapshot installed
over a running broker) still brings config changes to the partitions led and followed here.

Before, the initial publisher only ran the replica transitions, which keep a led partition's log and
skip a followed one whose leader did not change: a config change inside the snapshot never reached
them (``DynamicConfigPublisher.apply_image`` now runs with every whole-image publication).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from broker.dynamic_config import DynamicBrokerConfig, DynamicConfigPublisher
from metadata.controller.config_control import AlterableConfig, ConfigResourceChange
from metadata.records import ConfigResourceType
from metadata.topics import TopicState
from protocol.error_codes import ErrorCode
from server_common.config import BrokerConfig
from storage.config import LogConfig
from tests.metadata.controller.helpers import Cluster


class _Replicas:
    def __init__(self) -> None:
        self.reconfigured: list[tuple[str, str | None]] = []

    def reconfigure_topics(self, topics: Iterable[TopicState]) -> int:
        self.reconfigured += [(topic.name, topic.configs.get("retention.ms")) for topic in topics]
        return len(self.reconfigured)


class _Supervisor:
    def __init__(self, followed: list[tuple[str, int]]) -> None:
        self.assignments: dict[tuple[str, int], Any] = dict.fromkeys(followed)
        self.sent: list[dict[tuple[str, int], LogConfig]] = []

    async def update_log_configs(self, configs: Mapping[tuple[str, int], LogConfig]) -> None:
        self.sent.append(dict(configs))


async def test_apply_image_reconfigures_led_and_followed_partitions() -> None:
    cluster = Cluster()
    cluster.join(1)
    cluster.create("orders", 2, 1)
    change = ConfigResourceChange(
        int(ConfigResourceType.TOPIC), "orders", (AlterableConfig("retention.ms", "1000"),)
    )
    assert [r.error for r in cluster.controller.incremental_alter_configs([change])] == [ErrorCode.NONE]
    static, _ = BrokerConfig.from_properties({"node.id": "1"})
    replicas, supervisor = _Replicas(), _Supervisor([("orders", 1)])
    publisher = DynamicConfigPublisher(
        DynamicBrokerConfig(static, cluster.image),
        replicas,  # type: ignore[arg-type]
        supervisor,  # type: ignore[arg-type]
    )
    await publisher.apply_image(cluster.image)
    assert replicas.reconfigured == [("orders", "1000")]
    [sent] = supervisor.sent
    assert list(sent) == [("orders", 1)]
    assert sent[("orders", 1)].retention_ms == 1000
