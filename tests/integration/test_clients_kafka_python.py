"""kafka-python 3.0.12 against a real broker: keyed, compressed, idempotent produce and a full read back.

kafka-python produces idempotently with acks=-1 by default (InitProducerId v4, Produce v9) and
consumes read_uncommitted with incremental fetch sessions (Fetch v12). The topic has four partitions
and keyed messages, so the client's murmur2 partitioner spreads them over all four.
"""

from __future__ import annotations

import kafka.codec
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import (
    CODECS,
    Message,
    consume_kafka_python,
    create_topic,
    end_offsets,
    make_messages,
    now_ms,
    produce_kafka_python,
    unique_topic,
    verify_round_trip,
)

MESSAGES = 10_000
PARTITIONS = 4


def _require_codec(codec: str) -> None:
    """kafka-python compresses snappy only through python-snappy, an optional dependency of it.

    The issue allows skipping snappy for kafka-python only when that library is missing; the skip
    says so in the report (``-ra``). Every other codec must work.
    """
    if codec == "snappy" and not kafka.codec.has_snappy():
        pytest.skip("python-snappy is not installed: kafka-python cannot write snappy without it")


@pytest.mark.parametrize("codec", CODECS)
def test_keyed_round_trip(broker: BrokerProcess, codec: str) -> None:
    _require_codec(codec)
    topic = unique_topic(f"kp-{codec}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    init_producer_ids = broker.metric("kafka_network_requestmetrics_requests_total", request="InitProducerId")

    sent = make_messages(MESSAGES, topic)
    produced_from = now_ms()
    delivered = produce_kafka_python(broker.bootstrap, topic, sent, codec)
    produced_until = now_ms()

    # The default producer is idempotent: it asked for a producer id before its first batch.
    assert (
        broker.metric("kafka_network_requestmetrics_requests_total", request="InitProducerId")
        > init_producer_ids
    )
    consumed = consume_kafka_python(broker.bootstrap, topic, PARTITIONS, MESSAGES)
    verify_round_trip(
        sent, consumed, delivered, partitions=PARTITIONS, produced_between_ms=(produced_from, produced_until)
    )
    ends = end_offsets(broker.bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == MESSAGES, ends


def test_null_keys_values_and_empty_headers(broker: BrokerProcess) -> None:
    """Null key (no partition by key), null value (a tombstone), empty value and header values survive.

    A broker or codec that maps null to empty (or back) would silently change a tombstone into a
    record, which compaction and every consumer would read differently.
    """
    topic = unique_topic("kp-nulls")
    create_topic(broker.bootstrap, topic, 1)
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    cases: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (None, b"value without key", []),
        (b"tombstone", None, []),
        (b"empty", b"", [("empty-header", b""), ("binary", bytes(range(256)))]),
        (b"", b"empty key", [("dup", b"1"), ("dup", b"2")]),
    ]
    futures = [producer.send(topic, key=k, value=v, headers=h, partition=0) for k, v, h in cases]
    producer.flush()
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == [0, 1, 2, 3]

    consumed = consume_kafka_python(broker.bootstrap, topic, 1, len(cases))
    assert [(r.offset, r.key, r.value, [(k, v) for k, v in r.headers]) for r in consumed] == [
        (i, k, v, h) for i, (k, v, h) in enumerate(cases)
    ]


def test_produce_order_across_batches_one_partition(broker: BrokerProcess) -> None:
    """Small batches (batch_size 1 KiB) with five in flight: the idempotent producer's order is kept.

    With max_in_flight 5 the broker receives several batches per partition before answering any; the
    offsets must still follow the send order (I5), and the sequences must be accepted in order.
    """
    topic = unique_topic("kp-inflight")
    create_topic(broker.bootstrap, topic, 1)
    sent = make_messages(2_000, topic)
    delivered = produce_kafka_python(
        broker.bootstrap,
        topic,
        sent,
        "none",
        batch_size=1024,
        linger_ms=0,
        max_in_flight_requests_per_connection=5,
    )
    assert [d.offset for d in delivered] == list(range(len(sent)))
    consumed = consume_kafka_python(broker.bootstrap, topic, 1, len(sent))
    verify_round_trip(sent, consumed, delivered)


def test_record_larger_than_fetch_limits_is_returned(broker: BrokerProcess) -> None:
    """KIP-74: the first batch at the fetch offset comes whole even when it exceeds max_bytes.

    The consumer allows 16 KiB per partition and per fetch; records of 300 KiB must still arrive
    (otherwise the consumer is stuck at that offset forever), followed by the small ones after.
    """
    topic = unique_topic("kp-large")
    create_topic(broker.bootstrap, topic, 1)
    big = [Message(f"big-{i}".encode(), bytes([i]) * 300_000, (("size", b"300000"),)) for i in range(3)]
    small = make_messages(50, topic)
    sent = [big[0], *small[:25], big[1], big[2], *small[25:]]
    delivered = produce_kafka_python(broker.bootstrap, topic, sent, "none", max_request_size=2_000_000)
    consumed = consume_kafka_python(
        broker.bootstrap, topic, 1, len(sent), max_partition_fetch_bytes=16_384, fetch_max_bytes=16_384
    )
    verify_round_trip(sent, consumed, delivered)


def test_timestamps_and_offsets_for_times(broker: BrokerProcess) -> None:
    """Producer timestamps (CreateTime) come back unchanged, and ListOffsets finds offsets by time.

    ListOffsets by timestamp returns the first offset whose timestamp is >= the one asked for;
    earliest and latest are the log start and end offsets.
    """
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique_topic("kp-times")
    create_topic(broker.bootstrap, topic, 1)
    base = 1_700_000_000_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=50, compression_type="lz4")
    futures = [
        producer.send(topic, key=str(i).encode(), value=b"v", partition=0, timestamp_ms=base + 1000 * i)
        for i in range(100)
    ]
    producer.flush()
    assert [f.get(timeout=30).offset for f in futures] == list(range(100))
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 100}
        found = consumer.offsets_for_times({tp: base + 41_500})[tp]
        assert (found.offset, found.timestamp) == (42, base + 42_000)
        assert consumer.offsets_for_times({tp: base + 100_000})[tp] is None
    finally:
        consumer.close()
    consumed = consume_kafka_python(broker.bootstrap, topic, 1, 100)
    assert [(r.offset, r.timestamp) for r in consumed] == [(i, base + 1000 * i) for i in range(100)]


def test_a_record_two_hours_ahead_is_refused(broker: BrokerProcess) -> None:
    """message.timestamp.after.max.ms (one hour by default): the send fails with INVALID_TIMESTAMP and
    nothing is appended; a record half an hour ahead goes through.

    kafka-python's idempotent producer treats the error as fatal and fails every later send, so the
    accepted record goes through a producer of its own.
    """
    from kafka import KafkaProducer
    from kafka.errors import InvalidTimestampError

    topic = unique_topic("kp-future")
    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        future = producer.send(topic, value=b"late", partition=0, timestamp_ms=now_ms() + 2 * 3_600_000)
        with pytest.raises(InvalidTimestampError):
            future.get(timeout=30)
    finally:
        producer.close()
    assert end_offsets(broker.bootstrap, topic, 1) == {0: 0}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        within = producer.send(topic, value=b"soon", partition=0, timestamp_ms=now_ms() + 1_800_000)
        assert within.get(timeout=30).offset == 0
    finally:
        producer.close()
