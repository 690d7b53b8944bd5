"""Drive a real broker with kafka-python, aiokafka, confluent-kafka and kcat, and check what comes back.

Every client gets the same three operations so that the tests of each client read alike:

- ``produce_<client>(bootstrap, topic, messages, codec, ...)`` sends keyed messages with headers and
  returns what the broker acknowledged (partition and offset per message) where the client reports it;
- ``consume_<client>(bootstrap, topic, partitions, expected, ...)`` reads from offset 0 (or
  ``start_offset``) of every partition with manual assignment (no group, no commits: the broker has
  no group APIs yet) until it has ``expected`` records or its deadline passes;
- :func:`verify_round_trip` checks the result against what was sent: the delivery invariants of
  ``reference/reliability.md`` §3 that a single producer and a single consumer can observe (I1 no
  lost acknowledged write, I2 one value per offset, I3 no duplicates, I4 contiguous increasing
  offsets, I5 the producer's order kept within a partition).

Producers batch (linger, large batches, one producer per call) because the issue asks for 10,000
messages per codec and client and the whole end-to-end suite must stay within a few minutes on two
cores.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

Headers = tuple[tuple[str, bytes], ...]

CODECS: tuple[str, ...] = ("none", "gzip", "snappy", "lz4", "zstd")
"""Kafka's compression codecs, by the names every client here accepts."""

KCAT = "/usr/bin/kcat"
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Message:
    """One message to send: its index in the run is recoverable from the key."""

    key: bytes
    value: bytes
    headers: Headers


@dataclass(frozen=True, slots=True)
class Delivered:
    """A message the broker acknowledged, where it said it put it."""

    message: Message
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Consumed:
    """A record as a consumer handed it out."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int = -1
    """In ms: CreateTime as the producer set it, or the broker's time on a LogAppendTime topic."""


def unique_topic(prefix: str) -> str:
    """A fresh topic name per test: tests on a shared broker never see each other's records."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


_FILLER = "the quick brown fox jumps over the lazy dog, ünïcødé ✓ "


def make_messages(count: int, run: str, *, headers: bool = True) -> list[Message]:
    """``count`` distinct keyed messages of ~110 bytes: compressible but not trivially so.

    Values carry multi-byte UTF-8 to catch any re-encoding on the way; keys, values and header values
    hold no tab or newline so that kcat's line formats can carry them unchanged. Header values differ
    per message (a constant header alone would not catch a broker mixing up records' headers).
    """
    messages = []
    for i in range(count):
        key = f"{run}-k{i:06d}".encode()
        value = f"{run}|{i:06d}|{_FILLER[i % 17 :]}{i * 7919 % 100003}".encode()
        hdrs: Headers = (("idx", str(i).encode()), ("run", run.encode())) if headers else ()
        messages.append(Message(key, value, hdrs))
    return messages


# --------------------------------------------------------------------------------------------- topics


def create_topic(
    bootstrap: str, topic: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    """Create a topic with kafka-python's admin client, so that tests do not depend on auto-creation."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kipling-it-admin")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's end offset as kafka-python sees it (ListOffsets latest, read_uncommitted)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------------ producers


def _codec_or_none(codec: str) -> str | None:
    return None if codec == "none" else codec


def produce_kafka_python(
    bootstrap: str, topic: str, messages: Sequence[Message], codec: str, **config: Any
) -> list[Delivered]:
    """kafka-python 3: idempotent, acks=-1 by default (InitProducerId v4, per-partition sequences).

    All sends are queued first and awaited once at the end, so batches fill up to ``batch_size``.
    """
    from kafka import KafkaProducer

    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "compression_type": _codec_or_none(codec),
        "linger_ms": 20,
        "batch_size": 256 * 1024,
        "client_id": "kipling-it-kafka-python",
    }
    options.update(config)
    producer = KafkaProducer(**options)
    try:
        futures = [
            (m, producer.send(topic, key=m.key, value=m.value, headers=list(m.headers))) for m in messages
        ]
        producer.flush(timeout=DEFAULT_TIMEOUT_S)
        delivered = []
        for message, future in futures:
            metadata = future.get(timeout=DEFAULT_TIMEOUT_S)
            delivered.append(Delivered(message, metadata.partition, metadata.offset))
        return delivered
    finally:
        producer.close(timeout=10)


async def produce_aiokafka_async(
    bootstrap: str, topic: str, messages: Sequence[Message], codec: str, **config: Any
) -> list[Delivered]:
    """aiokafka: acks=1 by default, not idempotent; sends queued without awaiting each delivery."""
    from aiokafka import AIOKafkaProducer

    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "compression_type": _codec_or_none(codec),
        "linger_ms": 20,
        "max_batch_size": 256 * 1024,
        "client_id": "kipling-it-aiokafka",
    }
    options.update(config)
    producer = AIOKafkaProducer(**options)
    await producer.start()
    try:
        futures = []
        for m in messages:
            futures.append(await producer.send(topic, value=m.value, key=m.key, headers=list(m.headers)))
        results = await asyncio.wait_for(asyncio.gather(*futures), DEFAULT_TIMEOUT_S)
        # acks=0: aiokafka learns nothing and resolves each send with None; reported as offset -1.
        return [
            Delivered(m, r.partition, r.offset) if r is not None else Delivered(m, -1, -1)
            for m, r in zip(messages, results, strict=True)
        ]
    finally:
        await producer.stop()


def produce_aiokafka(
    bootstrap: str, topic: str, messages: Sequence[Message], codec: str, **config: Any
) -> list[Delivered]:
    return asyncio.run(produce_aiokafka_async(bootstrap, topic, messages, codec, **config))


@dataclass
class ConfluentReport:
    """What librdkafka reported: deliveries that succeeded, and those that failed with their error."""

    delivered: list[Delivered]
    failed: list[tuple[Message, str]]
    errors: list[str]


def produce_confluent_report(
    bootstrap: str,
    topic: str,
    messages: Iterable[Message],
    codec: str,
    *,
    on_each: Callable[[int], None] | None = None,
    flush_timeout_s: float = DEFAULT_TIMEOUT_S,
    report: ConfluentReport | None = None,
    **config: Any,
) -> ConfluentReport:
    """confluent-kafka (librdkafka 2.16): acks=-1; not idempotent unless ``enable.idempotence`` is set.

    Failed deliveries are returned, not raised, so that fault tests can tell acknowledged writes from
    failed ones. ``on_each(i)`` runs after the i-th produce() call (fault tests pace the stream
    with it); ``report`` may be passed in to watch deliveries while the call runs.
    """
    from confluent_kafka import KafkaError, Producer

    report = report if report is not None else ConfluentReport([], [], [])
    options: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "client.id": "kipling-it-confluent",
        "error_cb": lambda err: report.errors.append(str(err)),
    }
    options.update(config)
    producer = Producer(options)

    def callback(message: Message) -> Callable[[KafkaError | None, Any], None]:
        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                report.failed.append((message, str(err)))
            else:
                report.delivered.append(Delivered(message, msg.partition(), msg.offset()))

        return on_delivery

    for i, m in enumerate(messages):
        while True:
            try:
                producer.produce(
                    topic, key=m.key, value=m.value, headers=list(m.headers), on_delivery=callback(m)
                )
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.05)
        producer.poll(0)
        if on_each is not None:
            on_each(i)
    remaining = producer.flush(flush_timeout_s)
    assert remaining == 0, (
        f"{remaining} messages still undelivered after {flush_timeout_s}s: {report.errors[-5:]}"
    )
    return report


def produce_confluent(
    bootstrap: str, topic: str, messages: Sequence[Message], codec: str, **config: Any
) -> list[Delivered]:
    report = produce_confluent_report(bootstrap, topic, messages, codec, **config)
    assert not report.failed, f"{len(report.failed)} deliveries failed, first: {report.failed[:3]}"
    return report.delivered


KCAT_HEADERS: Headers = (("client", b"kcat"), ("suite", b"kipling"))
"""kcat -P adds the same ``-H name=value`` headers to every message: it cannot send per-message headers."""


def produce_kcat(
    bootstrap: str,
    topic: str,
    messages: Sequence[Message],
    codec: str,
    *,
    extra: Sequence[str] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> None:
    """kcat 1.7.1 (librdkafka 2.0.2): keyed lines on stdin (``key<TAB>value``), acks=-1.

    kcat reports no per-message partition or offset, so nothing is returned: callers check offsets
    by consuming. Each message gets :data:`KCAT_HEADERS`, not its own headers (see there).
    """
    args = [KCAT, "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", "acks=all"]
    args += ["-X", f"compression.codec={codec}", "-X", "linger.ms=20", "-X", "message.timeout.ms=30000"]
    for name, value in KCAT_HEADERS:
        args += ["-H", f"{name}={value.decode()}"]
    args += list(extra)
    payload = b"".join(m.key + b"\t" + m.value + b"\n" for m in messages)
    result = subprocess.run(args, input=payload, capture_output=True, timeout=timeout_s, check=False)
    assert result.returncode == 0, f"kcat -P exited {result.returncode}: {result.stderr.decode()[-2000:]}"
    assert b"ERROR" not in result.stderr, result.stderr.decode()[-2000:]


# ------------------------------------------------------------------------------------------ consumers


def _progress(records: Sequence[Consumed]) -> dict[int, int]:
    counts: Counter[int] = Counter(r.partition for r in records)
    return dict(sorted(counts.items()))


def _headers(headers: Iterable[tuple[str, bytes]]) -> Headers:
    return tuple((k, bytes(v)) for k, v in headers)


def consume_kafka_python(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    start_offset: int | None = None,
    **config: Any,
) -> list[Consumed]:
    """kafka-python: assign every partition, seek to the beginning (or ``start_offset``), poll.

    read_uncommitted, with incremental fetch sessions.
    """
    from kafka import KafkaConsumer, TopicPartition

    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "isolation_level": "read_uncommitted",  # kafka-python's default, stated: bounded by the HW
        "client_id": "kipling-it-kafka-python",
    }
    options.update(config)
    consumer = KafkaConsumer(**options)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        if start_offset is None:
            consumer.seek_to_beginning()
        else:
            for p in range(partitions):
                consumer.seek(TopicPartition(topic, p), start_offset)
        records: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500, max_records=10_000).values():
                records.extend(
                    Consumed(r.partition, r.offset, r.key, r.value, _headers(r.headers), r.timestamp)
                    for r in batch
                )
        assert len(records) >= expected, (
            f"kafka-python consumed {len(records)} of {expected} in {timeout_s}s: {_progress(records)}"
        )
        return records
    finally:
        consumer.close()


async def consume_aiokafka_async(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    start_offset: int | None = None,
    **config: Any,
) -> list[Consumed]:
    """aiokafka: assign, seek to the beginning (or ``start_offset``), getmany.

    read_uncommitted, sessionless fetches.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "isolation_level": "read_uncommitted",  # aiokafka's default, stated
        "client_id": "kipling-it-aiokafka",
    }
    options.update(config)
    consumer = AIOKafkaConsumer(**options)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        if start_offset is None:
            await consumer.seek_to_beginning()
        else:
            for p in range(partitions):
                consumer.seek(TopicPartition(topic, p), start_offset)
        records: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for batch in batches.values():
                records.extend(
                    Consumed(r.partition, r.offset, r.key, r.value, _headers(r.headers), r.timestamp)
                    for r in batch
                )
        assert len(records) >= expected, (
            f"aiokafka consumed {len(records)} of {expected} in {timeout_s}s: {_progress(records)}"
        )
        return records
    finally:
        await consumer.stop()


def consume_aiokafka(
    bootstrap: str, topic: str, partitions: int, expected: int, **kwargs: Any
) -> list[Consumed]:
    return asyncio.run(consume_aiokafka_async(bootstrap, topic, partitions, expected, **kwargs))


def consume_confluent(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    start_offset: int | None = None,
    **config: Any,
) -> list[Consumed]:
    """confluent-kafka: assign at OFFSET_BEGINNING or ``start_offset`` (read_committed by default).

    confluent-kafka's Consumer refuses to start without ``group.id``; assign() with explicit offsets
    uses neither the coordinator nor committed offsets, and auto commit is off, so the group id only
    satisfies that check.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    errors: list[str] = []
    options: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"kipling-it-unused-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",  # librdkafka's default, stated: bounded by the LSO
        "client.id": "kipling-it-confluent",
        "error_cb": lambda err: errors.append(str(err)),
    }
    options.update(config)
    consumer = Consumer(options)
    try:
        start = OFFSET_BEGINNING if start_offset is None else start_offset
        consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        records: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None:
                    errors.append(str(msg.error()))
                    continue
                headers = tuple((k, bytes(v) if v is not None else b"") for k, v in (msg.headers() or ()))
                timestamp = msg.timestamp()[1]
                records.append(
                    Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, timestamp)
                )
        assert len(records) >= expected, (
            f"confluent consumed {len(records)} of {expected} in {timeout_s}s: {_progress(records)}; "
            f"errors: {errors[-5:]}"
        )
        return records
    finally:
        consumer.close()


def _parse_kcat_headers(text: str) -> Headers:
    if not text:
        return ()
    pairs = []
    for item in text.split(","):
        name, _, value = item.partition("=")
        pairs.append((name, value.encode()))
    return tuple(pairs)


def consume_kcat(
    bootstrap: str,
    topic: str,
    expected: int,
    *,
    partition: int | None = None,
    extra: Sequence[str] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
    start_offset: int | str | None = None,
) -> list[Consumed]:
    """kcat -C (simple consumer: manual assignment, no group) from the beginning (or ``start_offset``)
    to the end (``-e``).

    ``start_offset`` takes kcat's ``-o`` forms too (``-100`` from the end, ``s@<ms>`` by time).
    Without ``partition`` kcat assigns all of the topic's partitions itself. Records are printed as
    ``partition TAB offset TAB timestamp TAB key TAB value TAB headers``, headers as kcat's ``n=v`` CSV.
    """
    start = "beginning" if start_offset is None else str(start_offset)
    args = [KCAT, "-C", "-b", bootstrap, "-t", topic, "-o", start, "-e", "-q"]
    if partition is not None:
        args += ["-p", str(partition)]
    args += ["-f", "%p\\t%o\\t%T\\t%k\\t%s\\t%h\\n", *extra]
    result = subprocess.run(args, capture_output=True, timeout=timeout_s, check=False)
    assert result.returncode == 0, f"kcat -C exited {result.returncode}: {result.stderr.decode()[-2000:]}"
    records = []
    for line in result.stdout.decode().splitlines():
        p, o, t, k, v, h = line.split("\t", 5)
        records.append(Consumed(int(p), int(o), k.encode(), v.encode(), _parse_kcat_headers(h), int(t)))
    assert len(records) >= expected, (
        f"kcat consumed {len(records)} of {expected}: {_progress(records)}; stderr: {result.stderr[-2000:]!r}"
    )
    return records


# ------------------------------------------------------------------------------------------- checking


def _index_of(key: bytes | None, index: dict[bytes, int]) -> int | None:
    return index.get(key) if key is not None else None


def verify_round_trip(
    sent: Sequence[Message],
    consumed: Sequence[Consumed],
    delivered: Sequence[Delivered] | None = None,
    *,
    partitions: int = 1,
    expect_headers: Headers | None = None,
    produced_between_ms: tuple[int, int] | None = None,
) -> None:
    """Assert that ``consumed`` is exactly ``sent``: every key once, its value and headers, valid offsets.

    - Per partition, offsets start at 0 and rise by one: a compressed or uncompressed v2 batch has
      no gaps, and nothing else (no control batch, no compaction) was written.
    - Per partition, the producer's order is kept (one producer per run, so I5 applies).
    - If the producer reported deliveries, each acknowledged message is at the partition and offset the
      broker acknowledged (I1, I2).
    - With ``partitions`` > 1 every partition received data (keys spread over all of them).
    - With ``produced_between_ms``, every record's timestamp lies in that window (the producers set
      CreateTime when sending; a broker that rewrote or mis-decoded timestamp deltas fails this).
    - ``expect_headers`` replaces each message's own headers for clients that send fixed headers (kcat).
    """
    index = {m.key: i for i, m in enumerate(sent)}
    problems: list[str] = []

    def problem(text: str) -> None:
        if len(problems) < 20:
            problems.append(text)

    by_partition: dict[int, list[Consumed]] = defaultdict(list)
    for record in consumed:
        by_partition[record.partition].append(record)
    seen: Counter[bytes | None] = Counter(r.key for r in consumed)
    for key, count in seen.items():
        if count > 1:
            problem(f"key {key!r} consumed {count} times (duplicate)")
        if key not in index:
            problem(f"unexpected key {key!r}")
    missing = [m.key for m in sent if m.key not in seen]
    if missing:
        problem(f"{len(missing)} of {len(sent)} keys never consumed, first {missing[:3]!r}")

    for partition, records in sorted(by_partition.items()):
        offsets = [r.offset for r in records]
        if offsets != list(range(len(offsets))):
            gaps = [(a, b) for a, b in itertools.pairwise(offsets) if b != a + 1][:3]
            problem(
                f"partition {partition}: offsets {offsets[:3]}...{offsets[-3:]} not contiguous from 0: {gaps}"
            )
        order = [_index_of(r.key, index) for r in records]
        known = [i for i in order if i is not None]
        if known != sorted(known):
            bad = next(j for j in range(1, len(known)) if known[j] < known[j - 1])
            problem(
                f"partition {partition}: producer order broken at {bad}: {known[bad - 1]} then {known[bad]}"
            )
        for record in records:
            if produced_between_ms is not None:
                low, high = produced_between_ms
                if not low - 1000 <= record.timestamp <= high + 1000:
                    problem(
                        f"p{partition}@{record.offset}: timestamp {record.timestamp} not in {low}..{high}"
                    )
            i = _index_of(record.key, index)
            if i is None:
                continue
            message = sent[i]
            if record.value != message.value:
                problem(f"p{partition}@{record.offset}: value {record.value!r} != {message.value!r}")
            want = expect_headers if expect_headers is not None else message.headers
            if record.headers != want:
                problem(
                    f"p{partition}@{record.offset} {record.key!r}: headers {record.headers!r} != {want!r}"
                )

    if partitions > 1:
        empty = sorted(set(range(partitions)) - set(by_partition))
        if empty:
            problem(f"partitions {empty} received no data (keys should spread over all {partitions})")
    if delivered is not None:
        at = {(r.partition, r.offset): r for r in consumed}
        for d in delivered:
            record = at.get((d.partition, d.offset))
            if record is None:
                problem(f"acknowledged {d.message.key!r} at p{d.partition}@{d.offset} not found (lost write)")
            elif record.key != d.message.key:
                problem(f"p{d.partition}@{d.offset}: acknowledged {d.message.key!r} but read {record.key!r}")
    assert not problems, "round trip failed:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------------------------------- waits


def now_ms() -> int:
    """Wall-clock time in ms, as producers stamp CreateTime."""
    return int(time.time() * 1000)


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout_s`` passes; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
