"""aiokafka 0.14.0 against a real broker: keyed, compressed produce (acks=1) and a full read back.

aiokafka produces with acks=1 and no idempotence (Produce v7, zstd allowed from v7) and consumes
read_uncommitted with sessionless fetches (Fetch v11, session id 0 / epoch -1). Two partitions, so
its murmur2 partitioner and the per-partition checks are exercised as well.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import (
    CODECS,
    consume_aiokafka,
    create_topic,
    make_messages,
    now_ms,
    produce_aiokafka,
    unique_topic,
    verify_round_trip,
)

MESSAGES = 10_000
PARTITIONS = 2


@pytest.mark.parametrize("codec", CODECS)
def test_keyed_round_trip(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"aio-{codec}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    sent = make_messages(MESSAGES, topic)
    produced_from = now_ms()
    delivered = produce_aiokafka(broker.bootstrap, topic, sent, codec)
    produced_until = now_ms()
    consumed = consume_aiokafka(broker.bootstrap, topic, PARTITIONS, MESSAGES)
    verify_round_trip(
        sent, consumed, delivered, partitions=PARTITIONS, produced_between_ms=(produced_from, produced_until)
    )


def test_acks_all_round_trip(broker: BrokerProcess) -> None:
    """aiokafka with acks=-1 (not its default): the single-replica ISR acknowledges at append."""
    topic = unique_topic("aio-acks-all")
    create_topic(broker.bootstrap, topic, 1)
    sent = make_messages(1_000, topic)
    delivered = produce_aiokafka(broker.bootstrap, topic, sent, "gzip", acks="all")
    assert [d.offset for d in delivered] == list(range(len(sent)))
    verify_round_trip(sent, consume_aiokafka(broker.bootstrap, topic, 1, len(sent)), delivered)


def test_sessionless_fetches_create_no_session(broker: BrokerProcess) -> None:
    """aiokafka fetches with session id 0 / epoch -1 (sessionless), so the session cache must not grow.

    Each of its fetches is a full fetch: a broker that granted it a session anyway would fill the
    cache with sessions no client ever uses again.
    """
    topic = unique_topic("aio-sessionless")
    create_topic(broker.bootstrap, topic, 1)
    sent = make_messages(100, topic)
    produce_aiokafka(broker.bootstrap, topic, sent, "none")
    sessions = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
    before = broker.metric(sessions)
    client_fetches = {"request": "Fetch", "listener": "PLAINTEXT"}  # not the broker's Raft fetches
    fetches_before = broker.metric("kafka_network_requestmetrics_requests_total", **client_fetches)

    async def consume_then_idle() -> int:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            got = 0
            deadline = time.monotonic() + 30
            while got < len(sent) and time.monotonic() < deadline:
                got += sum(len(b) for b in (await consumer.getmany(timeout_ms=500)).values())
            await consumer.getmany(timeout_ms=1000)  # a few idle fetches too
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(consume_then_idle()) == len(sent)
    assert broker.metric("kafka_network_requestmetrics_requests_total", **client_fetches) > fetches_before
    assert broker.metric(sessions) == before


def test_acks_zero_round_trip(broker: BrokerProcess) -> None:
    """acks=0: the broker sends no Produce response, yet every record is appended in order.

    aiokafka reports offset -1 for such sends (it learns nothing); the records are checked by reading.
    A broker that answered acks=0 requests would desynchronise the client's correlation ids.
    """
    topic = unique_topic("aio-acks0")
    create_topic(broker.bootstrap, topic, 1)
    sent = make_messages(2_000, topic)
    delivered = produce_aiokafka(broker.bootstrap, topic, sent, "snappy", acks=0)
    assert {d.offset for d in delivered} == {-1}
    verify_round_trip(sent, consume_aiokafka(broker.bootstrap, topic, 1, len(sent)))
