"""An idempotent producer whose acknowledgments are lost retries, and the log holds each message once.

- Lost answers: a :class:`~tests.integration.fault_proxy.FaultProxy` sits between an idempotent
  producer (confluent-kafka, kafka-python, aiokafka) and a single broker, which advertises the
  proxy's address so the client never bypasses it. For every tenth Produce request (twelve times)
  the proxy lets the broker append the batch, drops the answer and cuts the connection. The
  producer retries every request that was in flight with the same producer id, epoch and
  sequences; the broker must answer those duplicates with the offsets of the first write instead
  of appending them again. The proxy checks that the retried batches did reach the broker.
- A killed leader: on three brokers, the leader of a replicated partition is SIGKILLed while an
  idempotent confluent-kafka producer writes about a thousand values a second. Batches in flight at
  that moment may have been replicated without being acknowledged; their retries reach the new
  leader, which must know them from the producer state it rebuilt from the replicated batches.

Both check the whole log: every value sent is in it exactly once (counted, not just compared as a
set) and at the offset its acknowledgment reported.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from tests.integration.broker_process import BrokerProcess
from tests.integration.cluster import Cluster, log_bytes, read_values, wait_until
from tests.integration.fault_proxy import FaultProxy
from tests.integration.group_members import PacedProducer, create_topic

TOPIC = "idempotent"
MESSAGES = 1000
DROP_EVERY = 10
MAX_DROPS = 12
TIMEOUT_S = 60


def _assert_each_once(values: list[bytes], acked: dict[bytes, int]) -> None:
    """``values`` is the partition's log: each acknowledged value once, at its acknowledged offset."""
    counts = Counter(values)
    repeated = sorted((v, n) for v, n in counts.items() if n > 1)
    assert not repeated, f"{len(repeated)} values are in the log more than once, e.g. {repeated[:5]}"
    missing = sorted(set(acked) - set(counts))
    assert not missing, f"{len(missing)} acknowledged values are not in the log, e.g. {missing[:5]}"
    assert len(values) == len(acked), f"{len(values) - len(acked)} values in the log were never sent"
    misplaced = [(v, o) for v, o in acked.items() if values[o] != v]
    assert not misplaced, f"acknowledged at an offset that holds another value: {misplaced[:5]}"


def _produce_confluent(bootstrap: str, enough: Callable[[int], bool]) -> dict[bytes, int]:
    """confluent-kafka, idempotent, acks=all, up to 5 requests in flight; sends ``value-<n>`` until
    ``enough(n)``; returns value → acknowledged offset.

    A short ``linger.ms`` and a pause after each send make many small requests, so that many answers
    can be lost. Every delivery must succeed: the retries are the client's, none are the test's.
    """
    from confluent_kafka import Producer

    acked: dict[bytes, int] = {}
    failed: list[str] = []

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked[msg.value()] = msg.offset()
        else:
            failed.append(f"{msg.value()!r}: {err}")

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 1,
            "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 50,
            "message.timeout.ms": 60_000,
        }
    )
    sent = 0
    deadline = time.monotonic() + TIMEOUT_S
    while not enough(sent):
        assert time.monotonic() < deadline, f"sent {sent} values in {TIMEOUT_S}s without enough faults"
        producer.produce(TOPIC, f"value-{sent}".encode(), partition=0, on_delivery=delivered)
        sent += 1
        producer.poll(0.002)
    assert producer.flush(TIMEOUT_S) == 0, "some messages never got an outcome"
    assert not failed, f"{len(failed)} deliveries failed: {failed[:5]}"
    assert len(acked) == sent
    return acked


def _produce_kafka_python(bootstrap: str, enough: Callable[[int], bool]) -> dict[bytes, int]:
    """kafka-python, idempotent, acks=all, up to 5 requests in flight."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        max_in_flight_requests_per_connection=5,
        linger_ms=1,
        retry_backoff_ms=50,
        reconnect_backoff_ms=50,
        delivery_timeout_ms=60_000,
    )
    try:
        futures = []
        deadline = time.monotonic() + TIMEOUT_S
        while not enough(len(futures)):
            assert time.monotonic() < deadline, f"sent {len(futures)} values without enough faults"
            value = f"value-{len(futures)}".encode()
            futures.append((value, producer.send(TOPIC, value, partition=0)))
            time.sleep(0.002)
        producer.flush(TIMEOUT_S)
        return {value: future.get(timeout=TIMEOUT_S).offset for value, future in futures}
    finally:
        producer.close(timeout=10)


def _produce_aiokafka(bootstrap: str, enough: Callable[[int], bool]) -> dict[bytes, int]:
    """aiokafka, idempotent, acks=all (aiokafka keeps one batch per partition in flight)."""
    from aiokafka import AIOKafkaProducer

    async def run() -> dict[bytes, int]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=1,
            retry_backoff_ms=50,
            request_timeout_ms=30_000,
        )
        await producer.start()
        try:
            futures = []
            deadline = time.monotonic() + TIMEOUT_S
            while not enough(len(futures)):
                assert time.monotonic() < deadline, f"sent {len(futures)} values without enough faults"
                value = f"value-{len(futures)}".encode()
                futures.append((value, await producer.send(TOPIC, value, partition=0)))
                await asyncio.sleep(0.002)
            return {value: (await future).offset for value, future in futures}
        finally:
            await producer.stop()

    return asyncio.run(run())


PRODUCERS = {
    "confluent-kafka": _produce_confluent,
    "kafka-python": _produce_kafka_python,
    "aiokafka": _produce_aiokafka,
}


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[BrokerProcess, FaultProxy]]:
    """A broker behind a fault proxy that drops the answer of every tenth Produce (at most 12)."""
    broker = BrokerProcess(tmp_path / "broker", overrides=["num.partitions=1"])
    proxy = FaultProxy(broker.port, lambda n: n % DROP_EVERY == 0 and n // DROP_EVERY <= MAX_DROPS).start()
    broker.overrides.append(f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}")
    try:
        broker.start()
        yield broker, proxy
    finally:
        proxy.stop()
        broker.stop()


@pytest.mark.parametrize("client", list(PRODUCERS))
def test_an_idempotent_producer_whose_answers_are_lost_writes_each_message_once(
    proxied: tuple[BrokerProcess, FaultProxy], client: str
) -> None:
    broker, proxy = proxied
    create_topic(f"127.0.0.1:{proxy.port}", TOPIC, 1)
    acked = PRODUCERS[client](
        f"127.0.0.1:{proxy.port}", lambda sent: sent >= MESSAGES and proxy.dropped >= MAX_DROPS
    )
    assert not proxy.errors, proxy.errors
    assert proxy.dropped == MAX_DROPS
    # each lost answer was for a batch the broker had written: the client sent it again
    assert proxy.retried_batches() >= MAX_DROPS, f"{proxy.retried_batches()} batches were sent twice"
    _assert_each_once(read_values(broker.data_dir / "logs" / f"{TOPIC}-0"), acked)


# ---------------------------------------------------------------------------------------- the cluster


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    running = Cluster(tmp_path).start()
    request.node._kipling_brokers = list(running.brokers.values())
    try:
        yield running
    finally:
        running.stop()


def _read_partition(cluster: Cluster) -> list[bytes]:
    """The whole partition, offset 0 to its end, through whoever leads it now (kafka-python, no group)."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(TOPIC, 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read {len(values)} of {end} records in {TIMEOUT_S}s"
            values.extend(r.value for records in consumer.poll(timeout_ms=500).values() for r in records)
        return values
    finally:
        consumer.close()


def test_retries_after_the_leader_is_killed_do_not_duplicate(cluster: Cluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15_000)
    try:  # broker 1 runs the single controller: broker 2 leads, 3 and 1 follow
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [2, 3, 1]})])
    finally:
        admin.close()
    leader = cluster.brokers[2]
    producer = PacedProducer(cluster.bootstrap, TOPIC, 1, "k", rate=1000)
    try:
        producer.start()
        producer.wait_for_more(500, "before the leader is killed")
        leader.stop(signal.SIGKILL)
        producer.wait_for_more(500, "after the leader was killed")
        leader.start()
        producer.wait_for_more(200, "after the old leader came back")
        acked = {value: offset for value, (_, offset) in producer.stop().items()}
    finally:
        producer.stop(check=False)
        if leader.process is None:
            leader.start()

    _assert_each_once(_read_partition(cluster), acked)

    def replicas_agree() -> bool:
        logs = [log_bytes(cluster.partition_dir(node, TOPIC, 0)) for node in (1, 2, 3)]
        return len(set(logs)) == 1

    wait_until(replicas_agree, TIMEOUT_S, "the three replicas to hold the same log")
    for node in (1, 2, 3):
        _assert_each_once(read_values(cluster.partition_dir(node, TOPIC, 0)), acked)
