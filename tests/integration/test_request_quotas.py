"""request_percentage (KIP-124) on a real broker: a client over its share of the event loop gets
throttle times in its responses, is muted for them and keeps working; kafka-python's AlterClientQuotas
sets the quota (see test_client_quotas.py for why kafka-python's own request class).

Quotas are measured over 11 windows of one second, a young one over ten seconds: 0.01 % of a
thread allows 1 ms of loop time in ten seconds, which a handful of Metadata requests exceed. The
request throttle is bounded to one window (1 s), as Kafka bounds it.
"""

from __future__ import annotations

import time
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

METADATA_VERSION = 12


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("request-quotas")).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def admin(node: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="quota-admin")
    yield client
    client.close()


def metadata(client: WireClient, client_id: str) -> Any:
    body = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    return client.request(int(ApiKey.METADATA), METADATA_VERSION, body, client_id=client_id).body


def test_a_client_over_its_request_percentage_is_throttled_and_keeps_working(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    assert set_quota(admin, [("client-id", "busy")], "request_percentage", 0.01).entries[0].error_code == 0
    with WireClient(node.port, timeout_s=30) as busy:
        throttle_ms = 0
        for _ in range(200):
            response = metadata(busy, "busy")
            assert response.brokers  # answered in full
            throttle_ms = response.throttle_time_ms
            if throttle_ms > 0:
                break
        assert 0 < throttle_ms <= 1000  # bounded to one window
        started = time.monotonic()
        after = metadata(busy, "busy")  # served once the mute is over
        assert after.brokers
        assert time.monotonic() - started >= throttle_ms / 1000 - 0.2
    with WireClient(node.port) as free:
        assert metadata(free, "free").throttle_time_ms == 0
    labels = {"quota": "Request", "user": "ANONYMOUS", "client_id": "busy"}
    assert node.metric("kafka_server_quota_throttled_requests_total", **labels) >= 1
    assert node.metric("kafka_server_quota_throttle_time_ms_total", **labels) >= throttle_ms
    # Kafka's type=Request request-time, as percent-seconds: over 0.01 % for one second at least
    assert node.metric("kafka_server_request_request_time_total", user="ANONYMOUS", client_id="busy") > 0.01


def test_confluent_producer_over_its_request_percentage_sees_throttles_and_delivers_everything(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    from confluent_kafka import Producer

    admin.create_topics([NewTopic("request-quota", 1, 1)])
    entries = set_quota(admin, [("client-id", "busy-producer")], "request_percentage", 0.01).entries
    assert entries[0].error_code == 0
    throttles: list[int] = []
    delivered: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "client.id": "busy-producer",
            "linger.ms": 0,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    for i in range(20):
        producer.produce(
            "request-quota", b"v%d" % i, on_delivery=lambda err, _: delivered.append(0 if err else 1)
        )
        producer.flush(30)  # one request at a time: each is measured
    producer.poll(1)
    assert sum(delivered) == 20
    assert throttles and max(throttles) > 0
