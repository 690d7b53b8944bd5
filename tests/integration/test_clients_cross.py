"""All four clients on one topic: each writes with its own codec, each reads everything back identically.

One topic then holds batches of five codecs from four producers (with and without producer ids,
Produce v7 to v10) interleaved in each partition. Every consumer (Fetch v11, v12 with sessions,
v16 with topic ids; read_committed and read_uncommitted) must see the same record at every
(partition, offset): the broker serves stored batches unchanged, whatever wrote them.
"""

from __future__ import annotations

import dataclasses

from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import (
    KCAT_HEADERS,
    Consumed,
    Message,
    consume_aiokafka,
    consume_confluent,
    consume_kafka_python,
    consume_kcat,
    create_topic,
    make_messages,
    now_ms,
    produce_aiokafka,
    produce_confluent,
    produce_kafka_python,
    produce_kcat,
    unique_topic,
    verify_round_trip,
)

PARTITIONS = 3
PER_PRODUCER = 600


def _as_map(records: list[Consumed], *, headers: bool) -> dict[tuple[int, int], tuple[object, ...]]:
    return {(r.partition, r.offset): (r.key, r.value, r.headers if headers else None) for r in records}


def test_every_client_reads_what_every_client_wrote(broker: BrokerProcess) -> None:
    topic = unique_topic("cross")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    sent: dict[bytes, Message] = {}
    acknowledged: dict[bytes, tuple[int, int]] = {}

    batches = [
        (
            make_messages(PER_PRODUCER, f"{topic}-kp"),
            lambda m: produce_kafka_python(broker.bootstrap, topic, m, "gzip"),
        ),
        (
            make_messages(PER_PRODUCER, f"{topic}-aio"),
            lambda m: produce_aiokafka(broker.bootstrap, topic, m, "lz4"),
        ),
        (
            make_messages(PER_PRODUCER, f"{topic}-cf"),
            lambda m: produce_confluent(broker.bootstrap, topic, m, "zstd"),
        ),
        (
            make_messages(PER_PRODUCER, f"{topic}-kp2"),
            lambda m: produce_kafka_python(broker.bootstrap, topic, m, "none"),
        ),
    ]
    for messages, produce in batches:
        for d in produce(messages):
            acknowledged[d.message.key] = (d.partition, d.offset)
        sent.update((m.key, m) for m in messages)
    kcat_messages = make_messages(PER_PRODUCER, f"{topic}-kcat", headers=False)
    produce_kcat(broker.bootstrap, topic, kcat_messages, "snappy")
    sent.update((m.key, dataclasses.replace(m, headers=KCAT_HEADERS)) for m in kcat_messages)
    total = len(sent)

    reads = {
        "kafka-python": consume_kafka_python(broker.bootstrap, topic, PARTITIONS, total),
        "aiokafka": consume_aiokafka(broker.bootstrap, topic, PARTITIONS, total),
        "confluent": consume_confluent(broker.bootstrap, topic, PARTITIONS, total),
        "kcat": consume_kcat(broker.bootstrap, topic, total),
    }
    for client, records in reads.items():
        assert len(records) == total, client
        for partition in range(PARTITIONS):
            offsets = [r.offset for r in records if r.partition == partition]
            assert offsets == list(range(len(offsets))), (client, partition)
        for r in records:
            assert r.key is not None
            message = sent[r.key]
            assert (r.value, r.headers) == (message.value, message.headers), (client, r)
            if r.key in acknowledged:
                assert acknowledged[r.key] == (r.partition, r.offset), (client, r)
    reference = _as_map(reads["kafka-python"], headers=True)
    for client, records in reads.items():
        assert _as_map(records, headers=True) == reference, client


def test_every_client_starts_inside_a_compressed_batch(broker: BrokerProcess) -> None:
    """A fetch at an offset inside a batch returns that whole batch; the client skips the records before.

    1,000 gzip messages in one large batch: starting at offsets in the middle of the batch (and
    at its last record), each consumer must get exactly the records from there to the end. A broker
    that answered with the *next* batch would silently lose the rest of the first one.
    """
    topic = unique_topic("mid-batch")
    create_topic(broker.bootstrap, topic, 1)
    sent = make_messages(1_000, topic)
    delivered = produce_kafka_python(broker.bootstrap, topic, sent, "gzip", linger_ms=200, batch_size=1 << 20)
    assert [d.offset for d in delivered] == list(range(len(sent)))
    by_offset = {d.offset: d.message for d in delivered}
    for start in (1, 517, 999):
        expected = len(sent) - start
        reads = {
            "kafka-python": consume_kafka_python(broker.bootstrap, topic, 1, expected, start_offset=start),
            "aiokafka": consume_aiokafka(broker.bootstrap, topic, 1, expected, start_offset=start),
            "confluent": consume_confluent(broker.bootstrap, topic, 1, expected, start_offset=start),
            "kcat": consume_kcat(broker.bootstrap, topic, expected, start_offset=start),
        }
        for client, records in reads.items():
            assert [r.offset for r in records] == list(range(start, len(sent))), (client, start)
            assert all(r.key == by_offset[r.offset].key for r in records), (client, start)


def test_out_of_range_offset_resets_to_earliest(broker: BrokerProcess) -> None:
    """A fetch past the log end gets OFFSET_OUT_OF_RANGE; each client then applies its reset policy.

    With ``earliest`` the client asks ListOffsets for the log start and reads everything: a broker
    that answered the bad offset with an empty success instead would leave the consumer waiting
    forever at an offset that does not exist.
    """
    topic = unique_topic("out-of-range")
    create_topic(broker.bootstrap, topic, 1)
    sent = make_messages(300, topic)
    delivered = produce_confluent(broker.bootstrap, topic, sent, "none")
    beyond = 1_000_000
    reads = {
        "kafka-python": consume_kafka_python(broker.bootstrap, topic, 1, len(sent), start_offset=beyond),
        "aiokafka": consume_aiokafka(broker.bootstrap, topic, 1, len(sent), start_offset=beyond),
        "confluent": consume_confluent(
            broker.bootstrap, topic, 1, len(sent), start_offset=beyond, **{"auto.offset.reset": "earliest"}
        ),
    }
    for records in reads.values():
        verify_round_trip(sent, records, delivered)


def test_log_append_time_topic(broker: BrokerProcess) -> None:
    """``message.timestamp.type=LogAppendTime``: the broker stamps each batch; clients see its time.

    The producers set timestamps a day old. The broker must replace them with its append time in
    the batch header (attributes bit 3 and max timestamp, CRC recomputed, compressed payload left
    as is), return it in the Produce response (kafka-python reports it as the record's timestamp),
    and every consumer must then read that time, not the producer's.
    """
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    topic = unique_topic("append-time")
    create_topic(broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    day_ago = now_ms() - 86_400_000
    before = now_ms()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", linger_ms=20)
    futures = [
        producer.send(topic, key=f"kp{i}".encode(), value=b"x" * 50, timestamp_ms=day_ago) for i in range(200)
    ]
    producer.flush()
    metadata = [f.get(timeout=30) for f in futures]
    producer.close()
    librdkafka = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "zstd", "linger.ms": 20}
    )
    for i in range(200):
        librdkafka.produce(topic, key=f"cf{i}".encode(), value=b"y" * 50, timestamp=day_ago)
    assert librdkafka.flush(30) == 0
    after = now_ms()

    assert all(before <= m.timestamp <= after for m in metadata), {m.timestamp for m in metadata}
    reads = {
        "kafka-python": consume_kafka_python(broker.bootstrap, topic, 1, 400),
        "aiokafka": consume_aiokafka(broker.bootstrap, topic, 1, 400),
        "confluent": consume_confluent(broker.bootstrap, topic, 1, 400),
        "kcat": consume_kcat(broker.bootstrap, topic, 400),
    }
    for client, records in reads.items():
        assert [r.offset for r in records] == list(range(400)), client
        stamps = {r.timestamp for r in records}
        assert all(before <= t <= after for t in stamps), (client, sorted(stamps)[:3])
    kp_stamps = [r.timestamp for r in reads["kafka-python"][:200]]
    assert kp_stamps == [m.timestamp for m in metadata]
