"""Fetch sessions (KIP-227) and the long poll, as real consumers drive them.

kafka-python implements KIP-227 fully: it asks for a session with (0, 0), then sends incremental
fetches with rising epochs, only the partitions that changed, forgotten partitions, and idle fetches
listing no partition at all. These tests check, from outside the broker, that such a client really
stays in one incremental session (the session cache gauges on /metrics, and the client's own session
id and epoch), that an idle incremental fetch long-polls instead of spinning, and that an append
wakes a parked fetch at once.

Reading the client's session handler (``consumer._fetcher._session_handlers``) is observation of the
real client, not a mock: it is the only place that shows whether the broker accepted each incremental
fetch (a rejected one makes the client start over with a new session id and epoch 1).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import create_topic, make_messages, unique_topic, wait_until

SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
PARTITIONS_CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"
REQUESTS = "kafka_network_requestmetrics_requests_total"
ERRORS = "kafka_network_requestmetrics_errors_total"


@pytest.fixture
def session_broker(broker_factory: Callable[[Sequence[str]], BrokerProcess]) -> BrokerProcess:
    """A broker of the test's own, so that the cache gauges count only this test's sessions."""
    return broker_factory([])


@pytest.fixture
def producer(session_broker: BrokerProcess) -> Iterator[KafkaProducer]:
    client = KafkaProducer(bootstrap_servers=session_broker.bootstrap, linger_ms=5)
    yield client
    client.close(timeout=10)


def _consumer(broker: BrokerProcess, **config: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        client_id="kipling-it-sessions",
        **config,
    )


def _session(consumer: KafkaConsumer) -> tuple[int, int]:
    """The (session id, next epoch) kafka-python will send to the (only) broker."""
    handlers = consumer._fetcher._session_handlers
    assert len(handlers) == 1, handlers
    metadata = next(iter(handlers.values())).next_metadata
    return metadata.session_id, metadata.epoch


def _poll_until(consumer: KafkaConsumer, count: int, timeout_s: float = 30) -> list[Any]:
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            records.extend(batch)
    assert len(records) >= count, f"got {len(records)} of {count} records in {timeout_s}s"
    return records


def _produce(producer: KafkaProducer, topic: str, count: int, partitions: Sequence[int]) -> None:
    futures = [
        producer.send(topic, key=m.key, value=m.value, partition=partitions[i % len(partitions)])
        for i, m in enumerate(make_messages(count, topic, headers=False))
    ]
    producer.flush()
    for future in futures:
        future.get(timeout=30)


def test_kafka_python_stays_in_one_incremental_session(
    session_broker: BrokerProcess, producer: KafkaProducer
) -> None:
    """One consumer, four partitions: one cached session with four partitions, incremental fetches.

    New data on some partitions is delivered through the incremental session (the changed partitions
    only), and reassigning to two partitions makes the client forget two: the gauge follows.
    """
    topic = unique_topic("sessions")
    create_topic(session_broker.bootstrap, topic, 4)
    _produce(producer, topic, 400, range(4))
    fetch_errors = session_broker.metric(ERRORS, request="Fetch")

    consumer = _consumer(session_broker, fetch_max_wait_ms=200)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        assert len(_poll_until(consumer, 400)) == 400
        consumer.poll(timeout_ms=500)  # idle incremental fetches
        session_id, epoch = _session(consumer)
        assert session_id != 0 and epoch >= 2, (session_id, epoch)
        assert session_broker.metric(SESSIONS) == 1
        assert session_broker.metric(PARTITIONS_CACHED) == 4

        _produce(producer, topic, 30, [1, 3])
        records = _poll_until(consumer, 30)
        assert {r.partition for r in records} == {1, 3}
        assert sorted(r.offset for r in records if r.partition == 1) == list(range(100, 115))
        later_id, later_epoch = _session(consumer)
        assert later_id == session_id and later_epoch > epoch, ((session_id, epoch), (later_id, later_epoch))
        assert session_broker.metric(SESSIONS) == 1

        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.seek(TopicPartition(topic, 0), 100)
        consumer.seek(TopicPartition(topic, 1), 115)
        _produce(producer, topic, 10, [0, 1, 2])
        assert {r.partition for r in _poll_until(consumer, 7)} <= {0, 1}

        # the forget travels in the consumer's next fetch: keep it fetching while waiting (under load
        # the records above may all have come from fetches sent before the reassignment)
        def forgotten() -> bool:
            consumer.poll(timeout_ms=100)
            return session_broker.metric(PARTITIONS_CACHED) == 2

        assert wait_until(forgotten, 15), session_broker.metric(PARTITIONS_CACHED)
        assert _session(consumer)[0] == session_id
        assert session_broker.metric(SESSIONS) == 1
        assert session_broker.metric(EVICTIONS) == 0
        assert session_broker.metric(ERRORS, request="Fetch") == fetch_errors
    finally:
        consumer.close()


def test_idle_incremental_fetch_long_polls(session_broker: BrokerProcess, producer: KafkaProducer) -> None:
    """An idle incremental fetch (no partitions listed) waits max_wait_ms (500) like any other.

    A broker answering it at once makes kafka-python spin at about 1,200 fetches/s; over 2 s idle a
    long-polling broker sees about four.
    """
    topic = unique_topic("idle")
    create_topic(session_broker.bootstrap, topic, 2)
    _produce(producer, topic, 20, range(2))
    consumer = _consumer(session_broker, fetch_max_wait_ms=500)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        _poll_until(consumer, 20)
        consumer.poll(timeout_ms=600)  # now in the incremental session, nothing left to read
        _, epoch_before = _session(consumer)
        fetches_before = session_broker.metric(REQUESTS, request="Fetch", listener="PLAINTEXT")
        started = time.monotonic()
        while time.monotonic() - started < 2.0:
            assert consumer.poll(timeout_ms=100) == {}
        fetches = session_broker.metric(REQUESTS, request="Fetch", listener="PLAINTEXT") - fetches_before
        _, epoch_after = _session(consumer)
        assert 1 <= fetches <= 10, f"{fetches} Fetch requests in 2 s idle (max_wait 500 ms): not long-polling"
        assert epoch_after > epoch_before, "the idle fetches were not incremental fetches of the session"
    finally:
        consumer.close()


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_append_wakes_a_parked_fetch(
    session_broker: BrokerProcess, producer: KafkaProducer, client: str
) -> None:
    """With max_wait 5 s, a record appended while the consumer's fetch is parked arrives at once.

    kafka-python's parked fetch is an idle incremental one (it lists no partitions: the broker must
    watch the session's partitions); aiokafka's is a sessionless full fetch.
    """
    topic = unique_topic(f"wake-{client}")
    create_topic(session_broker.bootstrap, topic, 1)
    _produce(producer, topic, 5, [0])
    acked_at: list[float] = []

    def produce_later() -> None:
        time.sleep(1.0)
        producer.send(topic, key=b"late", value=b"wakes the fetch", partition=0).get(timeout=10)
        acked_at.append(time.monotonic())

    if client == "kafka-python":
        consumer = _consumer(session_broker, fetch_max_wait_ms=5000)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            _poll_until(consumer, 5)
            consumer.poll(timeout_ms=200)
            thread = threading.Thread(target=produce_later)
            thread.start()
            late = _poll_until(consumer, 1, timeout_s=15)
            received_at = time.monotonic()
            thread.join()
        finally:
            consumer.close()
    else:
        import asyncio

        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as AioTopicPartition

        async def consume() -> tuple[list[Any], float]:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=session_broker.bootstrap, group_id=None, fetch_max_wait_ms=5000
            )
            await consumer.start()
            try:
                consumer.assign([AioTopicPartition(topic, 0)])
                await consumer.seek_to_beginning()
                got: list[Any] = []
                while len(got) < 5:
                    got += [r for b in (await consumer.getmany(timeout_ms=1000)).values() for r in b]
                thread = threading.Thread(target=produce_later)
                thread.start()
                late: list[Any] = []
                deadline = time.monotonic() + 15
                while not late and time.monotonic() < deadline:
                    late = [r for b in (await consumer.getmany(timeout_ms=100)).values() for r in b]
                received = time.monotonic()
                await asyncio.to_thread(thread.join)
                return late, received
            finally:
                await consumer.stop()

        late, received_at = asyncio.run(consume())
    assert [r.value for r in late] == [b"wakes the fetch"]
    latency = received_at - acked_at[0]
    assert latency < 1.5, f"record arrived {latency:.2f}s after its ack: the parked fetch was not woken"


def test_incremental_session_delivers_every_change_across_many_partitions(
    session_broker: BrokerProcess, producer: KafkaProducer
) -> None:
    """40 partitions in one session; rounds of appends to a few of them while the consumer polls.

    An incremental fetch reads only the partitions that changed (the dirty ones). Every appended
    record must still arrive, in offset order per partition, with no partition starved, and the
    session must hold all 40 partitions throughout.
    """
    topic = unique_topic("many")
    partitions = 40
    create_topic(session_broker.bootstrap, topic, partitions)
    consumer = _consumer(session_broker, fetch_max_wait_ms=100)
    received: dict[int, list[int]] = {p: [] for p in range(partitions)}
    expected: dict[int, int] = dict.fromkeys(range(partitions), 0)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        consumer.poll(timeout_ms=300)
        for round_ in range(12):
            chosen = [(round_ * 7 + k * 13) % partitions for k in range(3)]
            _produce(producer, topic, 3 * 5, chosen)
            for p in chosen:
                expected[p] += 5
            for batch in consumer.poll(timeout_ms=100).values():
                for r in batch:
                    received[r.partition].append(r.offset)
        deadline = time.monotonic() + 15
        while any(len(received[p]) < expected[p] for p in range(partitions)) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                for r in batch:
                    received[r.partition].append(r.offset)
        assert received == {p: list(range(expected[p])) for p in range(partitions)}
        assert session_broker.metric(SESSIONS) == 1
        assert session_broker.metric(PARTITIONS_CACHED) == partitions
        assert _session(consumer)[1] > 12
    finally:
        consumer.close()


def test_each_consumer_gets_its_own_session(session_broker: BrokerProcess, producer: KafkaProducer) -> None:
    """Three kafka-python consumers on the same four partitions: three sessions, twelve cached partitions.

    Sessions are per client connection state, not per partition set: each consumer's epochs advance
    independently, and each reads everything.
    """
    topic = unique_topic("three")
    create_topic(session_broker.bootstrap, topic, 4)
    _produce(producer, topic, 200, range(4))
    consumers = [_consumer(session_broker, fetch_max_wait_ms=100) for _ in range(3)]
    try:
        for consumer in consumers:
            consumer.assign([TopicPartition(topic, p) for p in range(4)])
        for consumer in consumers:
            assert len(_poll_until(consumer, 200)) == 200
        for consumer in consumers:
            consumer.poll(timeout_ms=300)
        ids = {_session(consumer)[0] for consumer in consumers}
        assert len(ids) == 3 and 0 not in ids, ids
        assert session_broker.metric(SESSIONS) == 3
        assert session_broker.metric(PARTITIONS_CACHED) == 12
    finally:
        for consumer in consumers:
            consumer.close()


def test_consumer_closing_during_a_parked_fetch_releases_its_connection(
    session_broker: BrokerProcess,
) -> None:
    """aiokafka stops while its fetch (max_wait 10 s) is parked: the broker lets go of it at once.

    The broker reads no more from a connection while its request is in progress, so it learns of
    the close only if it watches for it; otherwise the parked fetch would hold the connection (and
    its purgatory entry) for the whole max_wait.
    """
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    topic = unique_topic("close-parked")
    create_topic(session_broker.bootstrap, topic, 1)
    connections = "kafka_server_socketservermetrics_connection_count"
    clients = {"listener": "PLAINTEXT"}  # not the broker's own controller connections

    async def park_then_stop() -> float:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=session_broker.bootstrap, group_id=None, fetch_max_wait_ms=10_000
        )
        await consumer.start()
        consumer.assign([AioTopicPartition(topic, 0)])
        await consumer.seek_to_beginning()
        await consumer.getmany(timeout_ms=500)  # the next fetch is parked at the broker now
        assert session_broker.metric(connections, **clients) >= 1
        await consumer.stop()
        return time.monotonic()

    stopped_at = asyncio.run(park_then_stop())
    assert wait_until(lambda: session_broker.metric(connections, **clients) == 0, 2.0), session_broker.metric(
        connections
    )
    assert time.monotonic() - stopped_at < 2.0
