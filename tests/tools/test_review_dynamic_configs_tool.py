"""Review of ``kipling configs``: ``--describe`` without ``--entity-name`` lists every topic, internal
ones included (Kafka's ConfigCommand lists topics with ``listInternal(true)``), and every broker
followed by the cluster defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tools.commands.configs import ConfigTool


@dataclass
class _Topic:
    name: str
    is_internal: bool


@dataclass
class _Broker:
    node_id: int


@dataclass
class _Metadata:
    topics: dict[str, _Topic] = field(default_factory=dict)
    brokers: list[_Broker] = field(default_factory=list)


class _Cluster:
    def __init__(self, metadata: _Metadata) -> None:
        self._metadata = metadata

    async def metadata(self, topics: Any) -> _Metadata:
        return self._metadata


async def test_describe_lists_internal_topics_and_the_cluster_defaults() -> None:
    metadata = _Metadata(
        topics={
            "orders": _Topic("orders", False),
            "__consumer_offsets": _Topic("__consumer_offsets", True),
        },
        brokers=[_Broker(2), _Broker(1)],
    )
    topics = ConfigTool(_Cluster(metadata), "topics")  # type: ignore[arg-type]
    assert await topics.entities(None) == ["__consumer_offsets", "orders"]
    brokers = ConfigTool(_Cluster(metadata), "brokers")  # type: ignore[arg-type]
    assert await brokers.entities(None) == ["1", "2", ""]
    assert await topics.entities("orders") == ["orders"]
