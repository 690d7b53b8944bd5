"""kcat 1.7.1 (librdkafka 2.0.2, the oldest client here) against a real broker.

kcat probes features by advertised version ranges (message format v2 needs Produce v3 / Fetch v4 in
range, zstd needs Produce v7 / Fetch v10), then sends the highest common version: Produce v7,
ListOffsets v2, Fetch v11, read_committed. If the broker advertised ranges that start too high, kcat
would silently write magic-0 message sets or refuse zstd; these tests would see that as failures.

What kcat cannot do, and what is asserted instead:

- ``kcat -P`` has no per-message headers, only ``-H name=value`` applied to every message, so the
  checks expect :data:`~tests.integration.client_helpers.KCAT_HEADERS` on every record (the
  per-message header checks are covered by the three other clients).
- ``kcat -P`` reports no partitions or offsets for what it produced, so acknowledged positions are
  checked through what is consumed: contiguous offsets from 0 in input order per partition.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import (
    CODECS,
    KCAT,
    KCAT_HEADERS,
    consume_kcat,
    create_topic,
    end_offsets,
    make_messages,
    now_ms,
    produce_kcat,
    unique_topic,
    verify_round_trip,
)

MESSAGES = 10_000
PARTITIONS = 2


@pytest.mark.parametrize("codec", CODECS)
def test_keyed_round_trip(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"kcat-{codec}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    sent = make_messages(MESSAGES, topic, headers=False)
    produced_from = now_ms()
    produce_kcat(broker.bootstrap, topic, sent, codec)
    produced_until = now_ms()
    consumed = consume_kcat(broker.bootstrap, topic, MESSAGES)
    verify_round_trip(
        sent,
        consumed,
        partitions=PARTITIONS,
        produced_between_ms=(produced_from, produced_until),
        expect_headers=KCAT_HEADERS,
    )
    assert sum(end_offsets(broker.bootstrap, topic, PARTITIONS).values()) == MESSAGES


def test_single_partition_read(broker: BrokerProcess) -> None:
    """``kcat -C -p N``: one partition only, from the beginning to its end."""
    topic = unique_topic("kcat-p1")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    sent = make_messages(2_000, topic, headers=False)
    produce_kcat(broker.bootstrap, topic, sent, "zstd")
    ends = end_offsets(broker.bootstrap, topic, PARTITIONS)
    consumed = consume_kcat(broker.bootstrap, topic, ends[1], partition=1)
    assert {r.partition for r in consumed} == {1}
    assert [r.offset for r in consumed] == list(range(ends[1]))
    wanted = {m.key: m.value for m in sent}
    assert all(wanted[r.key] == r.value for r in consumed if r.key is not None)


def test_auto_created_topic_and_relative_offsets(broker: BrokerProcess) -> None:
    """kcat writes to a topic nobody created (auto.create.topics.enable, default num.partitions=1), then
    reads its last 100 records with ``-o -100`` (ListOffsets latest, minus 100)."""
    topic = unique_topic("kcat-auto")
    sent = make_messages(1_000, topic, headers=False)
    produce_kcat(broker.bootstrap, topic, sent, "gzip")
    assert end_offsets(broker.bootstrap, topic, 1) == {0: len(sent)}
    tail = consume_kcat(broker.bootstrap, topic, 100, start_offset="-100")
    assert [r.offset for r in tail] == list(range(900, 1000))
    assert [r.key for r in tail] == [m.key for m in sent[900:]]


def test_offsets_by_timestamp(broker: BrokerProcess) -> None:
    """``kcat -Q`` and ``-o s@ts``: ListOffsets by timestamp gives the first offset at or after it."""
    from kafka import KafkaProducer

    topic = unique_topic("kcat-times")
    create_topic(broker.bootstrap, topic, 1)
    base = 1_700_000_000_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=20)
    for i in range(100):
        producer.send(topic, key=f"k{i}".encode(), value=b"v", timestamp_ms=base + 1000 * i, partition=0)
    producer.flush()
    producer.close()
    query = subprocess.run(
        [KCAT, "-Q", "-b", broker.bootstrap, "-t", f"{topic}:0:{base + 41_500}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert query.stdout.split() == [topic, "[0]", "offset", "42"], query.stdout
    records = consume_kcat(broker.bootstrap, topic, 58, start_offset=f"s@{base + 41_500}")
    assert [(r.offset, r.timestamp) for r in records] == [(i, base + 1000 * i) for i in range(42, 100)]
