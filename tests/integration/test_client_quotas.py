"""Client quotas on a real broker: AlterClientQuotas / DescribeClientQuotas through kafka-python's
own request classes (kafka-python 3.0.12 has no admin call for them; confluent-kafka 2.16.1 and
aiokafka 0.14.0 have none either) and kipling's AdminClient, and their enforcement: a producer or
consumer over its byte-rate quota gets a throttle time in its response and its connection muted
for that long; a client without a quota is never throttled.

Quotas are measured over ``quota.window.num`` (11) windows of one second: a first request is
measured over ten seconds, so 250 kB against a 20 kB/s producer quota is 25 kB/s, 25 % over, and
throttled for a quarter of the ten seconds (Kafka's throttle time), 2.5 s.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest

from client.admin import AdminClient
from protocol.api_keys import ApiKey
from protocol.records import Record, build_batch
from tests.integration.broker_process import BrokerProcess
from tests.integration.wire_client import WireClient
from tools.cli import build_parser
from tools.commands.client_quotas import run_client_quotas
from tools.commands.topics import ClusterConnections, bootstrap_servers, run_async

pytestmark = [pytest.mark.timeout(180)]

PRODUCE_VERSION = 9
FETCH_VERSION = 12


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("client-quotas")).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def admin(node: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="quota-admin")
    yield client
    client.close()


def set_quota(admin: KafkaAdminClient, entity: list[tuple[str, str | None]], key: str, value: float) -> Any:
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[entry.OpData(key=key, value=value, remove=False)],
            )
        ],
        validate_only=False,
    )
    return admin._manager.run(admin._manager.send, request)


def batch(size: int, count: int = 1) -> bytes:
    return build_batch([Record(key=None, value=b"x" * (size // count), timestamp=0) for _ in range(count)])


def produce(
    client: WireClient, topic: str, records: bytes, client_id: str, version: int = PRODUCE_VERSION
) -> Any:
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    return client.request(int(ApiKey.PRODUCE), version, body, client_id=client_id).body


def fetch(
    client: WireClient, topic: str, offset: int, client_id: str, max_bytes: int = 50 * 1024 * 1024
) -> Any:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return client.request(int(ApiKey.FETCH), FETCH_VERSION, body, client_id=client_id).body


def test_kafka_python_alters_and_describes_quotas(admin: KafkaAdminClient) -> None:
    response = set_quota(admin, [("user", "alice"), ("client-id", "app")], "producer_byte_rate", 1024.0)
    assert [(e.error_code, e.error_message) for e in response.entries] == [(0, None)]
    refused = set_quota(admin, [("user", "alice")], "producer_byte_rate", 1.5)
    assert [(e.error_code, e.error_message) for e in refused.entries] == [
        (42, "producer_byte_rate cannot be a fractional value.")
    ]
    component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(
        components=[component(entity_type="user", match_type=0, match="alice")], strict=False
    )
    described = admin._manager.run(admin._manager.send, request)
    assert described.error_code == 0
    [entry] = described.entries
    assert sorted((e.entity_type, e.entity_name) for e in entry.entity) == [
        ("client-id", "app"),
        ("user", "alice"),
    ]
    assert [(v.key, v.value) for v in entry.values] == [("producer_byte_rate", 1024.0)]


async def _kipling_admin(node: BrokerProcess) -> None:
    cluster = ClusterConnections(bootstrap_servers(node.bootstrap), client_id="kipling-admin")
    try:
        admin = AdminClient(await cluster.any_connection())
        [(entity, error, message)] = await admin.alter_client_quotas(
            [((("client-id", None),), {"consumer_byte_rate": 5e6})]
        )
        assert (entity, error.name, message) == ((("client-id", None),), "NONE", None)
        described = await admin.describe_client_quotas([("client-id", 1, None)], strict=True)
        assert described == [((("client-id", None),), {"consumer_byte_rate": 5e6})]
        [(_, error, _)] = await admin.alter_client_quotas(
            [((("client-id", None),), {"consumer_byte_rate": None})]
        )
        assert error.name == "NONE"
        assert await admin.describe_client_quotas([("client-id", 1, None)], strict=True) == []
    finally:
        await cluster.close()


def test_kipling_admin_sets_describes_and_removes_a_default_quota(node: BrokerProcess) -> None:
    run_async(_kipling_admin(node))


def test_a_producer_over_its_quota_is_throttled_and_muted(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    admin.create_topics([NewTopic("quota-produce", 1, 1)])
    assert (
        set_quota(admin, [("client-id", "slow-producer")], "producer_byte_rate", 20_000.0)
        .entries[0]
        .error_code
        == 0
    )
    records = batch(250_000, count=10)
    with WireClient(node.port) as free:
        unthrottled = produce(free, "quota-produce", records, "free-producer")
        assert unthrottled.throttle_time_ms == 0
    with WireClient(node.port, timeout_s=30) as slow:
        first = produce(slow, "quota-produce", records, "slow-producer")
        assert first.responses[0].partition_responses[0].error_code == 0  # appended all the same
        throttle_ms = first.throttle_time_ms
        assert 2000 <= throttle_ms <= 3000  # (25 kB/s - 20 kB/s) / 20 kB/s x 10 s
        started = time.monotonic()
        produce(slow, "quota-produce", batch(100), "slow-producer")  # served once the mute is over
        assert time.monotonic() - started >= throttle_ms / 1000 - 0.2
    labels = {"quota": "Produce", "user": "ANONYMOUS", "client_id": "slow-producer"}
    assert node.metric("kafka_server_quota_throttled_requests_total", **labels) >= 1
    assert node.metric("kafka_server_quota_throttle_time_ms_total", **labels) >= throttle_ms


def test_a_consumer_over_its_quota_gets_an_empty_throttled_fetch(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    admin.create_topics([NewTopic("quota-fetch", 1, 1)])
    with WireClient(node.port) as producer:
        for _ in range(15):
            produce(producer, "quota-fetch", batch(20_000, count=4), "loader")
    assert (
        set_quota(admin, [("client-id", "slow-consumer")], "consumer_byte_rate", 20_000.0)
        .entries[0]
        .error_code
        == 0
    )
    with WireClient(node.port, timeout_s=30) as consumer:
        # max_bytes is capped to the quota over 10 windows (200 kB): the first fetch is not throttled
        first = fetch(consumer, "quota-fetch", 0, "slow-consumer")
        assert first.throttle_time_ms == 0
        first_bytes = len(first.responses[0].partitions[0].records)
        assert 100_000 <= first_bytes <= 200_000 + 25_000
        # the rest takes the rate over the quota: nothing is returned, the throttle time says why
        second = fetch(consumer, "quota-fetch", 1, "slow-consumer")
        assert second.throttle_time_ms > 0
        assert second.responses == []
        started = time.monotonic()
        third = fetch(consumer, "quota-fetch", 1, "slow-consumer")
        assert time.monotonic() - started >= second.throttle_time_ms / 1000 - 0.2
        assert third.throttle_time_ms >= 0
    with WireClient(node.port) as free:
        everything = fetch(free, "quota-fetch", 0, "free-consumer")
        assert everything.throttle_time_ms == 0
        assert len(everything.responses[0].partitions[0].records) > 250_000


def run_configs(node: BrokerProcess, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["configs", "--bootstrap-server", node.bootstrap, *argv])
    out, err = io.StringIO(), io.StringIO()
    status = run_async(run_client_quotas(args, out, err))
    return status, out.getvalue(), err.getvalue()


def test_kipling_configs_alters_and_describes_client_and_user_quotas(node: BrokerProcess) -> None:
    assert run_configs(
        node,
        "--entity-type",
        "clients",
        "--entity-name",
        "tool-app",
        "--alter",
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    ) == (0, "Completed updating config for client tool-app.\n", "")
    assert run_configs(
        node,
        "--entity-type",
        "users",
        "--entity-default",
        "--alter",
        "--add-config",
        "request_percentage=12.5",
    ) == (0, "Completed updating default config for users in the cluster.\n", "")
    assert run_configs(
        node, "--user", "bob", "--client", "tool-app", "--alter", "--add-config", "producer_byte_rate=1e7"
    ) == (
        0,
        "Completed updating config for client tool-app.\n",  # Kafka's order: --client before --user
        "",
    )
    assert run_configs(node, "--entity-type", "clients", "--entity-name", "tool-app", "--describe") == (
        0,
        "Quota configs for client-id 'tool-app' are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n",
        "",
    )
    assert run_configs(node, "--entity-type", "users", "--entity-default", "--describe") == (
        0,
        "Quota configs for the default user-principal are request_percentage=12.5\n",
        "",
    )
    assert run_configs(node, "--user", "bob", "--client", "tool-app", "--describe") == (
        0,
        "Quota configs for user-principal 'bob', client-id 'tool-app' are producer_byte_rate=1.0E7\n",
        "",
    )
    assert run_configs(
        node,
        "--entity-type",
        "clients",
        "--entity-name",
        "tool-app",
        "--alter",
        "--delete-config",
        "request_percentage",
    ) == (1, "", "Invalid config(s): request_percentage\n")
    assert run_configs(
        node, "--entity-type", "clients", "--entity-name", "tool-app", "--alter", "--add-config", "nonsense=1"
    ) == (1, "", "INVALID_REQUEST: Invalid configuration key nonsense\n")
    assert run_configs(
        node,
        "--entity-type",
        "clients",
        "--entity-name",
        "tool-app",
        "--alter",
        "--delete-config",
        "producer_byte_rate,consumer_byte_rate",
    ) == (0, "Completed updating config for client tool-app.\n", "")
    assert run_configs(node, "--entity-type", "clients", "--entity-name", "tool-app", "--describe") == (
        0,
        "",
        "",
    )


def test_confluent_producer_is_throttled_and_delivers_everything(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    from confluent_kafka import Producer

    admin.create_topics([NewTopic("quota-confluent", 1, 1)])
    assert (
        set_quota(admin, [("client-id", "cq-producer")], "producer_byte_rate", 50_000.0).entries[0].error_code
        == 0
    )
    throttles: list[int] = []
    delivered: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "client.id": "cq-producer",
            "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    value = b"v" * 10_000
    for _ in range(80):  # 800 kB at 50 kB/s: throttled along the way
        producer.produce(
            "quota-confluent", value, on_delivery=lambda err, msg: delivered.append(0 if err else 1)
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(1)
    assert sum(delivered) == 80
    assert throttles and max(throttles) > 0


def test_kafka_python_consumer_with_fetch_sessions_reads_everything_under_a_quota(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    from kafka import KafkaConsumer, TopicPartition

    admin.create_topics([NewTopic("quota-consumer", 1, 1)])
    with WireClient(node.port) as producer:
        for _ in range(12):
            produce(producer, "quota-consumer", batch(20_000, count=4), "loader")
    assert (
        set_quota(admin, [("client-id", "kp-consumer")], "consumer_byte_rate", 20_000.0).entries[0].error_code
        == 0
    )
    consumer = KafkaConsumer(
        bootstrap_servers=node.bootstrap,
        client_id="kp-consumer",
        enable_auto_commit=False,
        consumer_timeout_ms=30_000,
    )
    try:
        tp = TopicPartition("quota-consumer", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        count = 0
        for _ in consumer:
            count += 1
            if count == 48:
                break
        # 240 kB at 20 kB/s: the first fetch is capped to the quota's 200 kB, the next throttled
        assert count == 48
        throttles = [
            v for group in consumer.metrics().values() for k, v in group.items() if k == "throttle-time-max"
        ]
        assert max(throttles, default=0) > 0  # kafka-python saw the throttle times
    finally:
        consumer.close()


def test_an_old_producer_gets_its_throttled_response_late(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    """Produce v5 predates KIP-219: the client does not back off by itself, so the broker holds
    the throttled response for the throttle time, as Kafka does."""
    admin.create_topics([NewTopic("quota-old-producer", 1, 1)])
    assert (
        set_quota(admin, [("client-id", "old-producer")], "producer_byte_rate", 20_000.0)
        .entries[0]
        .error_code
        == 0
    )
    with WireClient(node.port, timeout_s=30) as old:
        started = time.monotonic()
        response = produce(old, "quota-old-producer", batch(250_000, count=10), "old-producer", version=5)
        elapsed = time.monotonic() - started
    assert response.throttle_time_ms >= 2000
    assert elapsed >= response.throttle_time_ms / 1000 - 0.2
