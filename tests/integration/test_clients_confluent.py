"""confluent-kafka 2.16.1 (librdkafka 2.16) against a real broker: keyed produce, read_committed read back.

librdkafka produces with acks=-1 and, unless ``enable.idempotence`` is set, without a producer id
(Produce v10); it consumes read_committed (Fetch v16 with topic ids, sessionless), so what it reads
is bounded by the last stable offset, not only the high watermark. Four partitions, keyed with
librdkafka's default consistent_random partitioner (CRC32 of the key).
"""

from __future__ import annotations

import pytest

from protocol.records import CompressionType, iter_batches
from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import (
    CODECS,
    Message,
    consume_confluent,
    create_topic,
    make_messages,
    now_ms,
    produce_confluent,
    unique_topic,
    verify_round_trip,
)

MESSAGES = 10_000
PARTITIONS = 4


@pytest.mark.parametrize("codec", CODECS)
def test_keyed_round_trip(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"cf-{codec}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    sent = make_messages(MESSAGES, topic)
    produced_from = now_ms()
    delivered = produce_confluent(broker.bootstrap, topic, sent, codec)
    produced_until = now_ms()
    consumed = consume_confluent(broker.bootstrap, topic, PARTITIONS, MESSAGES)
    verify_round_trip(
        sent, consumed, delivered, partitions=PARTITIONS, produced_between_ms=(produced_from, produced_until)
    )


def test_idempotent_producer_round_trip(broker: BrokerProcess) -> None:
    """``enable.idempotence=true``: InitProducerId v4, producer id and sequences in every batch.

    librdkafka keeps up to five requests in flight per partition; the broker must accept the
    sequences in order and keep send order within each partition.
    """
    topic = unique_topic("cf-idempotent")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    before = broker.metric("kafka_network_requestmetrics_requests_total", request="InitProducerId")
    sent = make_messages(5_000, topic)
    delivered = produce_confluent(
        broker.bootstrap, topic, sent, "lz4", **{"enable.idempotence": True, "batch.size": 16_384}
    )
    assert broker.metric("kafka_network_requestmetrics_requests_total", request="InitProducerId") > before
    consumed = consume_confluent(broker.bootstrap, topic, PARTITIONS, len(sent))
    verify_round_trip(sent, consumed, delivered, partitions=PARTITIONS)


def test_null_keys_values_and_empty_headers(broker: BrokerProcess) -> None:
    """Null key, null value (tombstone), empty value and an empty header value, read back unchanged."""
    from confluent_kafka import Producer

    topic = unique_topic("cf-nulls")
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    cases: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (None, b"value without key", []),
        (b"tombstone", None, []),
        (b"empty", b"", [("empty-header", b""), ("binary", bytes(range(256)))]),
    ]
    errors: list[str] = []
    for key, value, headers in cases:
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=headers,
            partition=0,
            on_delivery=lambda err, _msg: errors.append(str(err)) if err else None,
        )
    assert producer.flush(30) == 0
    assert errors == []
    consumed = consume_confluent(broker.bootstrap, topic, 1, len(cases))
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in consumed] == [
        (i, k, v, h) for i, (k, v, h) in enumerate(cases)
    ]


def test_record_larger_than_fetch_limits_is_returned(broker: BrokerProcess) -> None:
    """KIP-74 with librdkafka: 16 KiB fetch limits, 300 KiB records still arrive, then the small ones.

    librdkafka sizes its receive buffer from ``receive.message.max.bytes``, not from the fetch limits,
    so it accepts the oversized first batch as Kafka sends it.
    """
    topic = unique_topic("cf-large")
    create_topic(broker.bootstrap, topic, 1)
    big = [Message(f"big-{i}".encode(), bytes([i]) * 300_000, (("size", b"300000"),)) for i in range(3)]
    small = make_messages(50, topic)
    sent = [big[0], *small[:25], big[1], big[2], *small[25:]]
    delivered = produce_confluent(broker.bootstrap, topic, sent, "none", **{"batch.size": 100_000})
    consumed = consume_confluent(
        broker.bootstrap,
        topic,
        1,
        len(sent),
        **{"max.partition.fetch.bytes": 16_384, "fetch.max.bytes": 16_384, "message.max.bytes": 16_384},
    )
    verify_round_trip(sent, consumed, delivered)


def test_admin_topic_configs_and_broker_side_recompression(broker: BrokerProcess) -> None:
    """librdkafka's AdminClient creates a topic with Kafka 4 configs, compaction ones included, and
    describe_configs shows them; gzip batches produced to the lz4 topic are stored as lz4 and read back
    unchanged. A value out of range is INVALID_CONFIG, naming the key."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

    topic = unique_topic("cf-configs")
    configs = {"compression.type": "lz4", "delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0.3"}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic(topic, 1, 1, config=configs)], request_timeout=15)
    created[topic].result(timeout=30)

    bad = unique_topic("cf-bad-config")
    refused = admin.create_topics(
        [NewTopic(bad, 1, 1, config={"min.cleanable.dirty.ratio": "2"})], request_timeout=15
    )
    with pytest.raises(KafkaException) as caught:
        refused[bad].result(timeout=30)
    assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "min.cleanable.dirty.ratio" in caught.value.args[0].str()

    resource = ConfigResource("topic", topic)
    described = admin.describe_configs([resource], request_timeout=15)[resource].result(timeout=30)
    for key, value in configs.items():
        assert (described[key].value, described[key].source) == (
            value,
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
        ), key
    assert "log.cleaner.delete.retention.ms" in described["delete.retention.ms"].synonyms
    assert "log.cleaner.min.cleanable.ratio" in described["min.cleanable.dirty.ratio"].synonyms
    assert (described["min.compaction.lag.ms"].value, described["min.compaction.lag.ms"].source) == (
        "0",
        ConfigSource.DEFAULT_CONFIG.value,
    )
    assert described["remote.storage.enable"].value == "false"
    assert described["message.timestamp.after.max.ms"].value == "3600000"

    sent = make_messages(500, topic)
    delivered = produce_confluent(broker.bootstrap, topic, sent, "gzip")
    consumed = consume_confluent(broker.bootstrap, topic, 1, len(sent))
    verify_round_trip(sent, consumed, delivered)
    segment = broker.data_dir / "logs" / f"{topic}-0" / "00000000000000000000.log"
    codecs = {header.compression for _, header in iter_batches(segment.read_bytes())}
    assert codecs == {CompressionType.LZ4}
