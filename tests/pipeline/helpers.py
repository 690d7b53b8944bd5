"""Test data for the Spark pipeline tests: topics, and records produced by confluent-kafka.

Records are produced by an independent client (librdkafka), with keys, headers, explicit CreateTime
timestamps and compression, so that what the ``kipling`` source reads back is compared with what a
real Kafka client wrote, not with what kipling's own producer thinks it wrote.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from tests.integration.client_helpers import create_topic

BASE_TIMESTAMP_MS = (int(time.time()) - 3600) * 1000
"""Explicit CreateTime timestamps start an hour ago, one second per record (recent, so that the default
7-day time retention keeps them; older ones are how the data-loss tests make retention delete data)."""


@dataclass(frozen=True, slots=True)
class Produced:
    """One record as produced and acknowledged: where it went and what it held."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def new_topic(bootstrap: str, prefix: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    topic = unique_topic(prefix)
    create_topic(bootstrap, topic, partitions, configs)
    return topic


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    partitions: Sequence[int] = (0,),
    compression: str = "none",
    first: int = 0,
    with_headers: bool = True,
    null_key_every: int = 0,
    base_timestamp_ms: int = BASE_TIMESTAMP_MS,
) -> list[Produced]:
    """Produce ``count`` records round-robin over ``partitions``; returns them as acknowledged.

    Record ``i`` (counting from ``first``) has key ``k<i>`` (None every ``null_key_every`` records),
    value ``v<i>``, headers ``idx=<i>`` and ``run=<topic>`` (none when ``with_headers`` is false, and a
    header with a null value on every fifth record) and timestamp ``base_timestamp_ms`` + i seconds.
    """
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": compression,
            "linger.ms": 5,
            "batch.size": 200_000,
            "client.id": "kipling-pipeline-tests",
        }
    )
    delivered: list[Produced] = []
    failures: list[str] = []
    for n in range(count):
        i = first + n
        key = None if null_key_every and i % null_key_every == 0 else f"k{i:06d}".encode()
        value = f"v{i:06d}-{'x' * (i % 37)}".encode()
        headers: list[tuple[str, bytes | None]] = []
        if with_headers:
            headers = [("idx", str(i).encode()), ("run", topic.encode())]
            if i % 5 == 0:
                headers.append(("empty", None))
        timestamp = base_timestamp_ms + i * 1000
        partition = partitions[n % len(partitions)]

        def on_delivery(err, msg, *, _key=key, _value=value, _headers=tuple(headers), _ts=timestamp):  # type: ignore[no-untyped-def]
            if err is not None:
                failures.append(str(err))
            else:
                delivered.append(Produced(msg.partition(), msg.offset(), _key, _value, _headers, _ts))

        producer.produce(
            topic,
            value=value,
            key=key,
            partition=partition,
            headers=headers or None,
            timestamp=timestamp,
            on_delivery=on_delivery,
        )
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not failures, f"produce failed: {remaining} left, errors {failures[:3]}"
    return sorted(delivered, key=lambda p: (p.partition, p.offset))
