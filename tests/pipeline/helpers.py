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


# -- log directories written by storage's own writer (for the kipling-segments tests) ---------------
# (Imported here rather than at the top: this section was appended to a shared helper module.)

from pathlib import Path  # noqa: E402

from protocol.records import (  # noqa: E402
    CompressionType,
    Record,
    build_batch,
    build_end_txn_marker_batch,
    stamp_base_offset,
)
from storage.checkpoint import OffsetCheckpointFile  # noqa: E402
from storage.clock import FakeClock  # noqa: E402
from storage.config import LogConfig  # noqa: E402
from storage.log import PartitionLog  # noqa: E402


@dataclass(frozen=True, slots=True)
class Written:
    """One record appended to a crafted log: its offset and what it held."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


def append_records(
    log: PartitionLog,
    count: int,
    *,
    per_batch: int = 10,
    compression: CompressionType = CompressionType.NONE,
    first: int = 0,
    control_after_each_batch: bool = False,
) -> list[Written]:
    """Append ``count`` records in batches of ``per_batch`` as a leader would; returns them with offsets.

    Record ``i`` has key ``k<i>`` (None every seventh), value ``v<i>...`` and headers like
    :func:`produce`. With ``control_after_each_batch`` a COMMIT marker batch (a control batch, which
    readers must skip) follows every data batch, as a transactional producer's would.
    """
    written: list[Written] = []
    for batch_start in range(first, first + count, per_batch):
        records = []
        for i in range(batch_start, min(batch_start + per_batch, first + count)):
            key = None if i % 7 == 0 else f"k{i:06d}".encode()
            headers: tuple[tuple[str, bytes | None], ...] = (("idx", str(i).encode()),)
            if i % 5 == 0:
                headers += (("empty", None),)
            value = f"v{i:06d}-{'x' * (i % 37)}".encode()
            timestamp = BASE_TIMESTAMP_MS + i * 1000
            records.append(Record(value=value, key=key, headers=headers, timestamp=timestamp))
        info = log.append_as_leader(build_batch(records, compression=compression), leader_epoch=0)
        written.extend(
            Written(log.partition, info.first_offset + n, r.key, r.value, tuple(r.headers), r.timestamp)
            for n, r in enumerate(records)
        )
        if control_after_each_batch:
            marker = build_end_txn_marker_batch(
                commit=True, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=BASE_TIMESTAMP_MS
            )
            log.append_as_follower(stamp_offset(marker, log.log_end_offset))
    return written


def stamp_offset(batch: bytes, base_offset: int) -> bytes:
    """``batch`` with its base offset set, as a follower receives it from its leader."""
    buf = bytearray(batch)
    stamp_base_offset(buf, 0, base_offset)
    return bytes(buf)


def open_partition_log(
    log_dir: Path, topic: str, partition: int, *, segment_bytes: int = 1024
) -> PartitionLog:
    """A partition log in ``log_dir`` written by storage's own code, rolling every ``segment_bytes``."""
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=256)
    return PartitionLog.open(log_dir / f"{topic}-{partition}", config, FakeClock(BASE_TIMESTAMP_MS))


def write_offsets_checkpoint(log_dir: Path, name: str, offsets: dict[tuple[str, int], int]) -> None:
    """A log dir's offset checkpoint file (``replication-offset-checkpoint`` and the like)."""
    OffsetCheckpointFile(log_dir / name).write(offsets)
