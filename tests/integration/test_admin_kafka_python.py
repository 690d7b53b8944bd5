"""kafka-python's admin client against a real broker: topics are created, grown, described, deleted."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

from tests.integration.broker_process import BrokerProcess


@pytest.fixture
def admin(broker: BrokerProcess):  # type: ignore[no-untyped-def]
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kipling-admin-test")
    yield client
    client.close()


def test_create_describe_grow_delete(broker: BrokerProcess, admin) -> None:  # type: ignore[no-untyped-def]
    admin.create_topics([NewTopic("orders", 3, 1, topic_configs={"retention.ms": "3600000"})])
    assert "orders" in admin.list_topics()
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("orders", 3, 1)])
    described = admin.describe_topics(["orders"])[0]
    assert len(described["partitions"]) == 3
    admin.create_partitions({"orders": NewPartitions(5)})
    assert len(admin.describe_topics(["orders"])[0]["partitions"]) == 5
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"orders": NewPartitions(2)})
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "orders")])
    text = repr(configs)
    assert "retention.ms" in text and "3600000" in text
    logs = broker.data_dir / "logs"
    assert sorted(p.name for p in logs.glob("orders-*")) == [f"orders-{i}" for i in range(5)]
    admin.delete_topics(["orders"])
    assert "orders" not in admin.list_topics()
    deadline = time.monotonic() + 5
    while list(logs.glob("orders-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(logs.glob("orders-*")) == []


def test_describe_cluster(broker: BrokerProcess, admin) -> None:  # type: ignore[no-untyped-def]
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [b["port"] for b in cluster["brokers"]] == [broker.port]
