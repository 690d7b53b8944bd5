"""``kipling configs --describe`` without ``--entity-name`` lists every topic, internal
ones included (Kafka's ConfigCommand lists topics with ``listInternal(true)``), and every broker
followed by the cluster defaults."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from tools.commands.client_quotas import completion_line
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


def test_quota_completion_line_follows_kafkas_option_order() -> None:
    """ConfigCommand completes about its first entity type: ``--entity-type``, then ``--client``,
    ``--user``, ``--client-defaults``, ``--user-defaults``."""

    def line(**options: Any) -> str:
        base: dict[str, Any] = {
            "entity_type": None,
            "entity_name": None,
            "entity_default": False,
            "user": None,
            "client": None,
            "user_defaults": False,
            "client_defaults": False,
        }
        return completion_line(argparse.Namespace(**{**base, **options}))

    assert line(user="bob", client="app") == "Completed updating config for client app."
    assert line(user="bob", client_defaults=True) == "Completed updating config for user bob."
    assert line(user_defaults=True, client="app") == "Completed updating config for client app."
    assert line(user_defaults=True) == "Completed updating default config for users in the cluster."
    assert line(entity_type="users", entity_name="bob", client="app") == (
        "Completed updating config for user bob."
    )
    assert line(entity_type="clients", entity_default=True) == (
        "Completed updating default config for clients in the cluster."
    )
