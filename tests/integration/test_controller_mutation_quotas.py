"""controller_mutation_rate (KIP-599) on a real broker: kafka-python's admin (CreateTopics v7, a
strict version) creating a burst of topics over its rate gets THROTTLING_QUOTA_EXCEEDED with
Kafka's message for the topics over it, and a throttle time; an old CreateTopics (v5, permissive)
is carried out in full and throttled.

The bucket holds rate x quota.window.num (11) x 1 s tokens: at 1 mutation/s, 11 partitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.api_keys import ApiKey
from tests.integration.broker_process import BrokerProcess
from tests.integration.test_client_quotas import set_quota
from tests.integration.wire_client import WireClient

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("mutation-quotas")).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def admin(node: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="quota-admin")
    yield client
    client.close()


def test_a_create_topics_burst_over_the_rate_is_refused_for_a_strict_client(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    assert (
        set_quota(admin, [("client-id", "burst")], "controller_mutation_rate", 1.0).entries[0].error_code == 0
    )
    burst = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="burst")
    try:
        # 11 tokens: burst-a (5) and burst-b (5) leave 1, burst-c (5) runs 4 into debt, burst-d waits
        topics = [NewTopic(f"burst-{name}", 5, 1) for name in "abcd"]
        result: Any = burst.create_topics(topics, raise_errors=False)
        by_name = {t["name"]: t for t in result["topics"]}
        assert [by_name[f"burst-{n}"]["error_code"] for n in "abc"] == [0, 0, 0]
        assert by_name["burst-d"]["error_code"] == 89  # THROTTLING_QUOTA_EXCEEDED
        assert by_name["burst-d"]["error_message"] == "The throttling quota has been exceeded."
        # the refused topic was not created; the others were
        names = set(admin.list_topics())  # (kafka-python pauses the throttled connection)
        assert {"burst-a", "burst-b", "burst-c"} <= names and "burst-d" not in names
    finally:
        burst.close()
    labels = {"quota": "ControllerMutation", "user": "ANONYMOUS", "client_id": "burst"}
    assert node.metric("kafka_server_quota_throttled_requests_total", **labels) >= 1


def create_topics_v5(client: WireClient, names: list[str], partitions: int, client_id: str) -> Any:
    body = {
        "topics": [
            {
                "name": n,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for n in names
        ],
        "timeout_ms": 10_000,
        "validate_only": False,
    }
    return client.request(int(ApiKey.CREATE_TOPICS), 5, body, client_id=client_id).body


def test_an_old_create_topics_is_carried_out_and_throttled(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    assert (
        set_quota(admin, [("client-id", "old-admin")], "controller_mutation_rate", 1.0).entries[0].error_code
        == 0
    )
    with WireClient(node.port, timeout_s=30) as old:
        response = create_topics_v5(old, ["old-a", "old-b", "old-c"], 6, "old-admin")
    assert [t.error_code for t in response.topics] == [0, 0, 0]
    # 18 mutations against 11 tokens: 7 in debt at 1/s, less the time the request took
    assert 5000 <= response.throttle_time_ms <= 7000
