"""The client package against a real kipling broker process.

Covers what only a real broker can show: version negotiation with its handler registry, pipelining
on its in-order connection, a long-poll Fetch outliving the client's timeout, a restart, the admin
calls, and produce + fetch through an incremental fetch session over several rounds.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from client import (
    AdminClient,
    ConnectError,
    ConnectionClosedError,
    Consumer,
    KafkaConnection,
    KafkaResponseError,
    NewTopic,
    Producer,
    ReconnectingConnection,
    RequestTimeoutError,
    TopicPartition,
)
from client.fetch_session import INVALID_SESSION_ID
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.records import Record
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tests.integration.broker_process import BrokerProcess

SESSIONS_GAUGE = "kafka_server_fetchsessioncache_numincrementalfetchsessions"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("client-broker")).start()
    yield process
    process.stop()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "broker").start()
    yield process
    process.stop()


@pytest.fixture
async def conn(broker: BrokerProcess) -> AsyncIterator[KafkaConnection]:
    connection = await KafkaConnection.open("127.0.0.1", broker.port, client_id="client-tests")
    yield connection
    connection.close()
    await connection.wait_closed()


def unique_topic(prefix: str = "client") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_negotiates_versions_with_the_broker(conn: KafkaConnection) -> None:
    assert conn.api_versions[ApiKey.API_VERSIONS].max_version == 4
    assert conn.api_versions[ApiKey.FETCH].max_version == 17
    assert conn.version_for(ApiKey.FETCH) == 17
    assert conn.version_for(ApiKey.FETCH, 12) == 12
    assert conn.version_for(ApiKey.PRODUCE) == 11
    assert conn.version_for(ApiKey.METADATA) == 12


async def test_pipelined_requests_of_different_apis(conn: KafkaConnection) -> None:
    metadata = conn.version_for(ApiKey.METADATA)
    versions = conn.version_for(ApiKey.API_VERSIONS, 2)
    tasks = []
    for i in range(30):
        if i % 2:
            tasks.append(asyncio.create_task(conn.request(ApiKey.METADATA, metadata, {"topics": []})))
        else:
            tasks.append(asyncio.create_task(conn.request(ApiKey.API_VERSIONS, versions, {})))
    await asyncio.sleep(0)
    assert conn.in_flight == 30
    responses = await asyncio.gather(*tasks)
    for i, response in enumerate(responses):
        if i % 2:
            assert response.topics == [] and response.brokers
        else:
            assert response.error_code == 0 and response.api_keys
    assert conn.in_flight == 0


async def test_fetch_outliving_the_request_timeout_closes_the_connection(broker: BrokerProcess) -> None:
    topic = unique_topic("timeout")
    async with await KafkaConnection.open("127.0.0.1", broker.port) as admin_conn:
        await AdminClient(admin_conn).create_topic(topic)
    conn = await KafkaConnection.open("127.0.0.1", broker.port)
    consumer = Consumer(conn, max_wait_ms=2000, min_bytes=1)
    consumer.assign(TopicPartition(topic, 0), 0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    fetch = asyncio.create_task(consumer.fetch(timeout_s=0.2))
    await asyncio.sleep(0)
    behind = asyncio.create_task(conn.request(ApiKey.METADATA, 9, {"topics": []}))
    with pytest.raises(RequestTimeoutError):
        await fetch
    assert loop.time() - started < 1.5
    with pytest.raises(ConnectionClosedError):
        await behind
    assert conn.closed
    assert consumer.session.next_metadata == (INVALID_SESSION_ID, 0)
    async with await KafkaConnection.open("127.0.0.1", broker.port) as again:
        assert (await again.request(ApiKey.METADATA, 9, {"topics": []})).brokers


async def test_broker_restart_closes_then_a_new_connection_works(fresh_broker: BrokerProcess) -> None:
    conn = await KafkaConnection.open("127.0.0.1", fresh_broker.port)
    reconnecting = ReconnectingConnection.to("127.0.0.1", fresh_broker.port)
    await reconnecting.request(ApiKey.METADATA, 9, {"topics": []})
    await asyncio.to_thread(fresh_broker.stop)
    with pytest.raises(ConnectionClosedError):
        await conn.request(ApiKey.METADATA, 9, {"topics": []})
    # Its connection is gone; the attempt to replace it is refused while the broker is down.
    with pytest.raises((ConnectionClosedError, ConnectError)):
        await reconnecting.request(ApiKey.METADATA, 9, {"topics": []})
    await asyncio.to_thread(fresh_broker.start)
    async with await KafkaConnection.open("127.0.0.1", fresh_broker.port) as fresh:
        assert (await fresh.request(ApiKey.METADATA, 9, {"topics": []})).brokers
    assert (await reconnecting.request(ApiKey.METADATA, 9, {"topics": []})).brokers
    await reconnecting.close()


async def test_admin_create_describe_list_delete(conn: KafkaConnection) -> None:
    admin = AdminClient(conn)
    topic = unique_topic("admin")
    results = await admin.create_topics(
        [NewTopic(topic, num_partitions=3, configs={"retention.ms": "3600000"}), NewTopic("bad name!")]
    )
    assert results[topic].error is ErrorCode.NONE
    assert results["bad name!"].error is ErrorCode.INVALID_TOPIC_EXCEPTION
    with pytest.raises(KafkaResponseError) as info:
        await admin.create_topic(topic)
    assert info.value.code is ErrorCode.TOPIC_ALREADY_EXISTS

    assert topic in await admin.list_topics()
    described = (await admin.describe_topics([topic]))[topic]
    assert described.error is ErrorCode.NONE
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    assert all(p.leader == p.replicas[0] and p.isr == p.replicas for p in described.partitions)
    cluster = await admin.metadata([])
    assert cluster.brokers and cluster.topics == {}

    await admin.delete_topic(topic)
    assert topic not in await admin.list_topics()
    missing = (await admin.describe_topics([topic]))[topic]
    assert missing.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaResponseError) as info:
        await admin.delete_topic(topic)
    assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_produce_with_each_acks_and_list_offsets(conn: KafkaConnection) -> None:
    topic = unique_topic("acks")
    await AdminClient(conn).create_topic(topic)
    tp = TopicPartition(topic, 0)
    assert await Producer(conn, acks=1).send(topic, 0, [b"a", b"b"]) == 0
    assert await Producer(conn, acks=-1).send(topic, 0, [Record(b"c", key=b"k")]) == 2
    assert await Producer(conn, acks=0).send(topic, 0, [b"d"]) is None
    consumer = Consumer(conn, max_wait_ms=100)
    assert await consumer.list_offset(tp, EARLIEST_TIMESTAMP) == 0
    assert await consumer.list_offset(tp, LATEST_TIMESTAMP) == 4  # the acks=0 batch is behind the others
    with pytest.raises(KafkaResponseError) as info:
        await Producer(conn).send(unique_topic("missing"), 0, [b"x"])
    assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_produce_and_fetch_through_an_incremental_session(fresh_broker: BrokerProcess) -> None:
    conn = await KafkaConnection.open("127.0.0.1", fresh_broker.port)
    topic = unique_topic("session")
    await AdminClient(conn).create_topic(topic, num_partitions=3)
    producer = Producer(conn)
    consumer = Consumer(conn, max_wait_ms=100)
    partitions = [TopicPartition(topic, p) for p in range(3)]
    for tp in partitions:
        consumer.assign(tp, 0)
        await producer.send(topic, tp.partition, [f"{tp.partition}-0".encode()])

    first = await consumer.fetch()
    assert first.metadata == (0, 0) and first.partitions_sent == 3
    session_id = consumer.session.session_id
    assert session_id != INVALID_SESSION_ID
    assert sorted(r.value for r in first.records()) == [b"0-0", b"1-0", b"2-0"]
    assert all(consumer.position(tp) == 1 for tp in partitions)

    seen: list[bytes] = []
    for round_ in range(1, 6):
        partition = round_ % 3
        await producer.send(topic, partition, [f"{partition}-{round_}".encode()])
        result = await consumer.fetch()
        assert result.valid and result.error is ErrorCode.NONE
        assert result.metadata == (session_id, round_)
        # Only positions that moved in the previous round are re-sent: all three after the first
        # (full) fetch, then just the partition that returned a record.
        assert result.partitions_sent == (3 if round_ == 1 else 1)
        seen += [r.value for r in result.records()]  # acks=1 on one replica: readable at once
    assert seen == [f"{r % 3}-{r}".encode() for r in range(1, 6)]
    assert consumer.session.session_id == session_id
    assert fresh_broker.metric(SESSIONS_GAUGE) == 1

    await consumer.close()
    assert fresh_broker.metric(SESSIONS_GAUGE) == 0
    conn.close()
    await conn.wait_closed()
