"""DeleteRecords against a real single-node broker: kafka-python's and confluent-kafka's admin clients
and ``kipling delete-records``; the segments below the new log start offset go, ListOffsets earliest
answers it, and consumers below it get OFFSET_OUT_OF_RANGE (and reset by their policy)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, OffsetOutOfRangeError

from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import create_topic, unique_topic
from tools.cli import main

RECORDS = 30
SEGMENT_BYTES = "1024"


def fill(broker: BrokerProcess, prefix: str) -> str:
    """A one-partition topic of small segments holding offsets 0..RECORDS-1, one batch each."""
    topic = unique_topic(prefix)
    create_topic(broker.bootstrap, topic, 1, {"segment.bytes": SEGMENT_BYTES})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, acks=1)
    try:
        for i in range(RECORDS):
            producer.send(topic, value=b"x" * 200, key=str(i).encode(), partition=0).get(timeout=10)
    finally:
        producer.close(timeout=10)
    return topic


def segment_bases(broker: BrokerProcess, topic: str) -> list[int]:
    directory = broker.data_dir / "logs" / f"{topic}-0"
    return sorted(int(p.name.removesuffix(".log")) for p in directory.glob("*.log"))


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kipling-delete-records-test")
    yield client
    client.close()


def consumer_at(broker: BrokerProcess, topic: str, offset: int, reset: str) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset=reset
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    return consumer


def test_kafka_python_delete_records(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = fill(broker, "dr-kp")
    tp = TopicPartition(topic, 0)
    before = segment_bases(broker, topic)
    assert len(before) > 3
    result = admin.delete_records({tp: 12}, timeout_ms=10_000)
    assert result[tp]["low_watermark"] == 12
    after = segment_bases(broker, topic)
    assert after[0] <= 12 and all(base in before for base in after) and len(after) < len(before)
    assert [b for b in before if b not in after] == [b for b in before if b < after[0]]

    # never backwards; ListOffsets earliest answers the new start
    assert admin.delete_records({tp: 3}, timeout_ms=10_000)[tp]["low_watermark"] == 12
    consumer = consumer_at(broker, topic, 0, "earliest")
    try:
        assert consumer.beginning_offsets([tp])[tp] == 12
        records = consumer.poll(timeout_ms=10_000, max_records=1).get(tp, [])
        assert [r.offset for r in records] == [12]  # reset from 0 (OFFSET_OUT_OF_RANGE) to the earliest
    finally:
        consumer.close()
    consumer = consumer_at(broker, topic, 5, "none")
    try:
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(50):
                consumer.poll(timeout_ms=200)
    finally:
        consumer.close()

    # -1: up to the high watermark; above it: OFFSET_OUT_OF_RANGE
    assert admin.delete_records({tp: -1}, timeout_ms=10_000)[tp]["low_watermark"] == RECORDS
    with pytest.raises(KafkaError) as exc:
        admin.delete_records({tp: RECORDS + 5}, timeout_ms=10_000)
    assert "OffsetOutOfRange" in repr(exc.value)


def test_confluent_delete_records(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import AdminClient

    topic = fill(broker, "dr-cf")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.delete_records([CTopicPartition(topic, 0, 15)], request_timeout=15).values()
    assert future.result(timeout=20).low_watermark == 15
    [future] = admin.delete_records([CTopicPartition(topic, 0, RECORDS + 1)], request_timeout=15).values()
    with pytest.raises(KafkaException) as exc:
        future.result(timeout=20)
    assert "OFFSET_OUT_OF_RANGE" in str(exc.value) or "out of range" in str(exc.value).lower()

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_topic("dr-cf-g"),
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([CTopicPartition(topic, 0, 2)])
        message = None
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None and message.offset() == 15
    finally:
        consumer.close()


def test_cli_delete_records(
    broker: BrokerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = fill(broker, "dr-cli")
    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 7}], "version": 1})
    )
    assert (
        main(["delete-records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(offsets)])
        == 0
    )
    assert capsys.readouterr().out == (
        "Executing records delete operation\nRecords delete operation completed:\n"
        f"partition: {topic}-0\tlow_watermark: 7\n"
    )
    offsets.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": topic, "partition": 0, "offset": 1000},
                    {"topic": topic, "partition": 3, "offset": 1},
                ],
                "version": 1,
            }
        )
    )
    assert (
        main(["delete-records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(offsets)])
        == 1
    )
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith(f"partition: {topic}-0\terror: OFFSET_OUT_OF_RANGE")
    assert out[3].startswith(f"partition: {topic}-3\terror: UNKNOWN_TOPIC_OR_PARTITION")
