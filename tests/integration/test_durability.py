"""Nothing acknowledged with acks=-1 is lost across a broker restart, graceful (SIGTERM) or not (SIGKILL).

The broker runs with ``log.flush.interval.messages=1`` (fsync after every append), the setting under
which an acknowledgement means "on disk". A SIGKILL here loses no page cache, so these tests cannot
tell an fsync from a plain write; they check what comes before and after it: recovery of the log
(re-validating batches, rebuilding the high watermark a consumer may read to, the last stable offset
a read_committed consumer may read to, and the idempotent producers' state), offsets that continue
where they were, and clients that reconnect and carry on. The invariants are those of
``reference/reliability.md`` §3 that one broker can show: I1 (no lost acknowledged write), I2 (one
value per offset), I3 (no duplicates from an idempotent producer), I4 and I5 (offsets and order).
"""

from __future__ import annotations

import signal
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import (
    KCAT_HEADERS,
    ConfluentReport,
    Delivered,
    Message,
    consume_aiokafka,
    consume_confluent,
    consume_kafka_python,
    consume_kcat,
    create_topic,
    end_offsets,
    make_messages,
    produce_confluent,
    produce_confluent_report,
    produce_kcat,
    unique_topic,
    verify_round_trip,
    wait_until,
)

FLUSH_EVERY_MESSAGE = ["log.flush.interval.messages=1"]
SIGNALS = [pytest.param(signal.SIGTERM, id="sigterm"), pytest.param(signal.SIGKILL, id="sigkill")]


@pytest.mark.parametrize("sig", SIGNALS)
def test_acknowledged_records_survive_restart(
    broker_factory: Callable[[Sequence[str]], BrokerProcess], sig: signal.Signals
) -> None:
    """Produce (kafka-python idempotent, librdkafka plain, both acks=-1), restart, read with all four.

    The kafka-python producer stays open across the restart and then sends a second round: the
    broker must have rebuilt its producer state from the log (Kafka does), so the producer's next
    sequences are accepted without a new InitProducerId, and its offsets continue right after the
    last acknowledged one.
    """
    broker = broker_factory(FLUSH_EVERY_MESSAGE)
    topic = unique_topic(f"durable-{sig.name.lower()}")
    partitions = 3
    create_topic(broker.bootstrap, topic, partitions)

    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type="gzip", linger_ms=10, batch_size=64 * 1024
    )
    try:
        first = make_messages(3_000, f"{topic}-kp1")
        delivered = _send_all(producer, topic, first)
        librdkafka = make_messages(1_000, f"{topic}-cf")
        delivered += produce_confluent(broker.bootstrap, topic, librdkafka, "zstd")
        ends_before = _ends(delivered, partitions)

        assert broker.stop(sig) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
        broker.start()

        sent = first + librdkafka
        for consume in (consume_kafka_python, consume_aiokafka, consume_confluent):
            records = consume(broker.bootstrap, topic, partitions, len(sent))
            verify_round_trip(sent, records, delivered, partitions=partitions)
        kcat_records = consume_kcat(broker.bootstrap, topic, len(sent))
        verify_round_trip(sent, kcat_records, delivered, partitions=partitions)

        second = make_messages(1_000, f"{topic}-kp2")
        delivered_second = _send_all(producer, topic, second)
    finally:
        producer.close(timeout=10)

    assert broker.metric("kafka_network_requestmetrics_requests_total", request="InitProducerId") == 0, (
        "the idempotent producer needed a new producer id after the restart: its state was not recovered"
    )
    for partition in range(partitions):
        offsets = sorted(d.offset for d in delivered_second if d.partition == partition)
        assert offsets == list(range(ends_before[partition], ends_before[partition] + len(offsets)))
    everything = first + librdkafka + second
    records = consume_kafka_python(broker.bootstrap, topic, partitions, len(everything))
    verify_round_trip(everything, records, delivered + delivered_second, partitions=partitions)


@pytest.mark.parametrize("sig", SIGNALS)
def test_restart_while_producing_loses_and_duplicates_nothing(
    broker_factory: Callable[[Sequence[str]], BrokerProcess], sig: signal.Signals
) -> None:
    """The broker is stopped and restarted while an idempotent librdkafka producer keeps producing.

    The producer sends at a steady pace (about 2,000 messages/s); a second thread stops the broker
    once 1,500 are acknowledged, so batches are in flight at the stop and more are queued while it
    is down. librdkafka retries what was not acknowledged with the same producer id and sequences;
    batches the broker appended before it died must be recognised as duplicates from the recovered
    producer state. So every message is delivered exactly once, at the offset reported to the
    producer, and nothing is reported failed.
    """
    broker = broker_factory(FLUSH_EVERY_MESSAGE)
    topic = unique_topic(f"inflight-{sig.name.lower()}")
    partitions = 2
    create_topic(broker.bootstrap, topic, partitions)
    messages = make_messages(6_000, topic)
    report = ConfluentReport([], [], [])
    acknowledged_at_stop: list[int] = []

    def restart_when_busy() -> None:
        wait_until(lambda: len(report.delivered) >= 1_500, 30, interval_s=0.005)
        acknowledged_at_stop.append(len(report.delivered))
        broker.stop(sig)
        broker.start()

    restarter = threading.Thread(target=restart_when_busy)
    restarter.start()
    try:
        produce_confluent_report(
            broker.bootstrap,
            topic,
            messages,
            "lz4",
            on_each=lambda i: time.sleep(0.05) if i % 100 == 99 else None,
            flush_timeout_s=90,
            report=report,
            **{
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.size": 16_384,
                "message.timeout.ms": 60_000,
            },
        )
    finally:
        restarter.join()
    assert acknowledged_at_stop and acknowledged_at_stop[0] < len(messages), "stopped after the last ack"
    assert not report.failed, f"{len(report.failed)} failed deliveries, first: {report.failed[:3]}"
    assert len(report.delivered) == len(messages)
    records = consume_confluent(broker.bootstrap, topic, partitions, len(messages))
    verify_round_trip(messages, records, report.delivered, partitions=partitions)


def test_kcat_acks_all_survives_sigkill(broker_factory: Callable[[Sequence[str]], BrokerProcess]) -> None:
    """kcat (librdkafka 2.0.2, acks=-1) writes, the broker is killed, kcat reads everything back."""
    broker = broker_factory(FLUSH_EVERY_MESSAGE)
    topic = unique_topic("kcat-kill")
    create_topic(broker.bootstrap, topic, 1)
    sent = make_messages(3_000, topic, headers=False)
    produce_kcat(broker.bootstrap, topic, sent, "snappy")
    broker.stop(signal.SIGKILL)
    broker.start()
    records = consume_kcat(broker.bootstrap, topic, len(sent))
    verify_round_trip(sent, records, expect_headers=KCAT_HEADERS)


def _send_all(producer: KafkaProducer, topic: str, messages: Sequence[Message]) -> list[Delivered]:
    """Send through a producer the caller keeps (it must outlive the restart), then await every ack."""
    futures = [(m, producer.send(topic, key=m.key, value=m.value, headers=list(m.headers))) for m in messages]
    producer.flush(timeout=60)
    return [Delivered(m, md.partition, md.offset) for m, f in futures for md in [f.get(timeout=60)]]


def _ends(delivered: Sequence[Delivered], partitions: int) -> dict[int, int]:
    """Each partition's log end offset as the acknowledgements show it (nothing else was written)."""
    ends = dict.fromkeys(range(partitions), 0)
    for d in delivered:
        ends[d.partition] = max(ends[d.partition], d.offset + 1)
    return ends


@pytest.mark.parametrize("sig", SIGNALS)
def test_many_segments_read_across_rolls_and_recovered(
    broker_factory: Callable[[Sequence[str]], BrokerProcess], sig: signal.Signals
) -> None:
    """32 KiB segments: reads cross segment boundaries, and a restart recovers every segment.

    Offsets inside later segments are found through each segment's offset index, rebuilt if the
    broker died without closing it; a consumer starting at an offset in the middle of the log must
    get exactly the records from there, and a new producer's records continue the last segment.
    """
    broker = broker_factory(FLUSH_EVERY_MESSAGE)
    topic = unique_topic(f"segments-{sig.name.lower()}")
    partitions = 2
    create_topic(broker.bootstrap, topic, partitions, {"segment.bytes": "32768"})
    sent = make_messages(4_000, topic)
    delivered = produce_confluent(broker.bootstrap, topic, sent, "none", **{"batch.size": 4_096})
    segment_files = {
        p: sorted((broker.data_dir / "logs" / f"{topic}-{p}").glob("*.log")) for p in range(partitions)
    }
    assert all(len(files) >= 4 for files in segment_files.values()), segment_files

    broker.stop(sig)
    broker.start()
    for consume in (consume_kafka_python, consume_confluent):
        verify_round_trip(sent, consume(broker.bootstrap, topic, partitions, len(sent)), delivered)
    ends = _ends(delivered, partitions)
    start = min(ends.values()) // 2 + 7
    for consume in (consume_kafka_python, consume_confluent):
        records = consume(
            broker.bootstrap, topic, partitions, sum(e - start for e in ends.values()), start_offset=start
        )
        for p in range(partitions):
            assert [r.offset for r in records if r.partition == p] == list(range(start, ends[p])), (
                consume,
                p,
            )

    more = make_messages(500, f"{topic}-after")
    delivered_more = produce_confluent(broker.bootstrap, topic, more, "none", **{"batch.size": 4_096})
    for p in range(partitions):
        offsets = sorted(d.offset for d in delivered_more if d.partition == p)
        assert offsets == list(range(ends[p], ends[p] + len(offsets))), p
    everything = consume_kafka_python(broker.bootstrap, topic, partitions, len(sent) + len(more))
    assert len(everything) == len(sent) + len(more)
    verify_round_trip(sent + more, everything, delivered + delivered_more, partitions=partitions)


@pytest.mark.parametrize("sig", SIGNALS)
def test_open_consumers_continue_after_restart(
    broker_factory: Callable[[Sequence[str]], BrokerProcess], sig: signal.Signals
) -> None:
    """Consumers that stay open across the restart resume at their positions: no rewind, no skip.

    kafka-python (incremental session, then a new one after reconnecting; it may validate its
    position with OffsetForLeaderEpoch) and librdkafka (sessionless, read_committed) read the first
    half, the broker restarts, the second half is produced, and each consumer's next records are
    exactly the second half: a reset to earliest would show up as duplicates, to latest as losses.
    """
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition
    from kafka import KafkaConsumer, TopicPartition

    broker = broker_factory(FLUSH_EVERY_MESSAGE)
    topic = unique_topic(f"follow-{sig.name.lower()}")
    partitions = 2
    create_topic(broker.bootstrap, topic, partitions)
    first = make_messages(1_000, f"{topic}-a")
    delivered = produce_confluent(broker.bootstrap, topic, first, "gzip")

    kp = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",
        fetch_max_wait_ms=200,
        reconnect_backoff_max_ms=200,
    )
    cf = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "kipling-it-unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "fetch.wait.max.ms": 200,
            "reconnect.backoff.max.ms": 200,
        }
    )
    try:
        kp.assign([TopicPartition(topic, p) for p in range(partitions)])
        for p in range(partitions):
            kp.seek(TopicPartition(topic, p), 0)
        cf.assign([ConfluentTopicPartition(topic, p, 0) for p in range(partitions)])
        readers: dict[str, Callable[[], list[tuple[int, int, bytes]]]] = {
            "kafka-python": lambda: [
                (r.partition, r.offset, r.key) for b in kp.poll(timeout_ms=200).values() for r in b
            ],
            "confluent": lambda: [
                (m.partition(), m.offset(), m.key()) for m in cf.consume(1_000, 0.2) if m.error() is None
            ],
        }
        seen: dict[str, list[tuple[int, int, bytes]]] = {name: [] for name in readers}

        def read_until(total: int) -> None:
            deadline = time.monotonic() + 30
            while any(len(s) < total for s in seen.values()) and time.monotonic() < deadline:
                for name, read in readers.items():
                    seen[name] += read()

        read_until(len(first))
        broker.stop(sig)
        broker.start()
        second = make_messages(1_000, f"{topic}-b")
        delivered += produce_confluent(broker.bootstrap, topic, second, "gzip")
        read_until(len(first) + len(second))
        time.sleep(0.3)
        for name, read in readers.items():
            seen[name] += read()  # anything extra (a rewind) shows up here
    finally:
        kp.close()
        cf.close()
    expected = sorted((d.partition, d.offset, d.message.key) for d in delivered)
    for name, records in seen.items():
        assert sorted(records) == expected, (name, len(records), len(expected))


def _batch_starts(segment: Path) -> list[tuple[int, int]]:
    """(file position, base offset) of each record batch in a segment file (v2 header: offset, length)."""
    data = segment.read_bytes()
    starts, position = [], 0
    while position + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, position)
        if length <= 0 or position + 12 + length > len(data):
            break
        starts.append((position, base_offset))
        position += 12 + length
    return starts


@pytest.mark.parametrize("damage", ["garbage-after-tail", "torn-last-batch"])
def test_damaged_tail_is_truncated_on_recovery(
    broker_factory: Callable[[Sequence[str]], BrokerProcess], damage: str
) -> None:
    """After a SIGKILL the active segment ends in a partial batch; recovery cuts it off.

    ``garbage-after-tail``: bytes that look like the start of another batch follow the last complete
    one (a write the kernel never finished); every acknowledged record survives. ``torn-last-batch``:
    the last batch itself is cut in half (what losing un-fsynced data does without
    flush.messages=1); the records before it survive, none of the torn batch is served, and the log
    continues at that batch's base offset, so no offset is ever given two values that clients see.
    """
    broker = broker_factory(FLUSH_EVERY_MESSAGE)
    topic = unique_topic(f"torn-{damage}")
    create_topic(broker.bootstrap, topic, 1)
    sent = make_messages(1_000, topic)
    delivered = produce_confluent(broker.bootstrap, topic, sent, "none", **{"batch.size": 8_192})
    broker.stop(signal.SIGKILL)

    segment = next((broker.data_dir / "logs" / f"{topic}-0").glob("*.log"))
    starts = _batch_starts(segment)
    assert len(starts) >= 5, starts
    size = segment.stat().st_size
    if damage == "garbage-after-tail":
        with segment.open("ab") as f:
            f.write(struct.pack(">qi", 1_000, 4_000) + b"\x00\x00\x00\x00\x02" + bytes(40))
        survivors = 1_000
    else:
        position, survivors = starts[-1]
        with segment.open("r+b") as f:
            f.truncate(position + (size - position) // 2)
    broker.start()

    kept = [d for d in delivered if d.offset < survivors]
    kept_messages = [d.message for d in sorted(kept, key=lambda d: d.offset)]
    assert end_offsets(broker.bootstrap, topic, 1) == {0: survivors}
    for consume in (consume_kafka_python, consume_confluent):
        records = consume(broker.bootstrap, topic, 1, survivors)
        assert len(records) == survivors, consume
        verify_round_trip(kept_messages, records, kept)

    more = make_messages(200, f"{topic}-after")
    delivered_more = produce_confluent(broker.bootstrap, topic, more, "none")
    assert [d.offset for d in delivered_more] == list(range(survivors, survivors + len(more)))
    records = consume_kafka_python(broker.bootstrap, topic, 1, survivors + len(more))
    verify_round_trip(kept_messages + more, records, kept + delivered_more)
