"""Transactional produce against idempotent produce, and read_committed against read_uncommitted reads.

What do transactions (KIP-98) cost on kipling? One broker process (``bench/broker_proc.py``), one
confluent-kafka (librdkafka) client, 1 KiB random values, no compression, both producers with
``acks=all`` and the same batching (linger 5 ms, batches up to 1 MB):

* **idempotent**: ``enable.idempotence=true``, no transactional id; the records are flushed once at
  the end.
* **transactional**: a ``transactional.id``; ``begin_transaction``, ``--per-txn`` records (default
  1,000), ``commit_transaction``, again. Each transaction costs the broker AddPartitionsToTxn (the
  partitions it writes), the produce verification against the transaction coordinator (KIP-890),
  EndTxn with two writes to ``__transaction_state`` (PrepareCommit, CompleteCommit) and one COMMIT
  marker per partition; and it costs the client a flush per transaction (``commit_transaction``
  waits for every record's ack), so batches hold at most ``per_txn / partitions`` records.

The two producers alternate, ``--rounds`` times per partition count, each round on new topics, so a
burst of load from another process lands on both; the ratio is the median of the rounds' ratios.
``commit_transaction`` latency (p50, p99, max over every transaction) is reported too.

Then the records of the last round are read back from the beginning by an assigned consumer (no
group) with ``isolation.level`` read_committed and read_uncommitted, alternating, ``--rounds`` times
each, from both topics: read_committed is bounded by the last stable offset and gets the aborted
transactions of every fetched range (none here: every transaction commits), and the client drops the
control batch (the marker) of each transaction. Every read must return exactly the records produced.

Broker CPU-seconds per GB is ``utime + stime`` of the broker process from ``/proc`` over the phase;
client CPU-seconds per GB is this process's. On 2 cores librdkafka needs much of a core itself, so
MB/s is bounded by the client as much as by the broker (see bench/README.md).

Run from the repository root: ``python -m bench.transactions`` (``--records``, ``--partitions``,
``--per-txn``, ``--rounds``, ``--max-seconds``); writes ``bench/results/transactions.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from bench import write_results
from bench.broker_proc import KiplingProcess
from bench.throughput import client_cpu, create_topic
from protocol.records import iter_batches

VALUE_SIZE = 1024
MB = 1_000_000
GB = 1_000_000_000
POLL_EVERY = 1_000
WARMUP_RECORDS = 20_000


def producer_config(bootstrap: str, transactional: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "batch.num.messages": 100_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "compression.type": "none",
        "socket.nagle.disable": True,
    }
    if transactional:
        config["transactional.id"] = f"bench-txn-{uuid.uuid4().hex[:8]}"
        config["transaction.timeout.ms"] = 60_000
    return config


def consumer_config(bootstrap: str, isolation: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "kipling-bench-txn",  # offsets are assigned explicitly: no group join, no commits
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 1,
        "fetch.wait.max.ms": 100,
        "enable.partition.eof": False,
        "socket.nagle.disable": True,
    }


def figures(records: int, elapsed: float, broker_cpu: float, client_cpu_s: float) -> dict[str, Any]:
    volume = records * VALUE_SIZE
    return {
        "records": records,
        "mb": volume / MB,
        "seconds": elapsed,
        "records_per_s": records / elapsed,
        "mb_per_s": volume / MB / elapsed,
        "broker_cpu_s": broker_cpu,
        "broker_cpu_s_per_gb": broker_cpu / (volume / GB) if volume else None,
        "client_cpu_s_per_gb": client_cpu_s / (volume / GB) if volume else None,
    }


def produce(
    broker: KiplingProcess,
    topic: str,
    partitions: int,
    records: int,
    per_txn: int | None,
    max_s: float,
) -> dict[str, Any]:
    """Produce ``records`` 1 KiB values round-robin over the partitions: in transactions of
    ``per_txn`` records each, or (None) idempotently with one flush at the end."""
    value = os.urandom(VALUE_SIZE)
    errors: list[str] = []
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    producer = Producer(
        {
            **producer_config(broker.bootstrap, per_txn is not None),
            "error_cb": lambda e: errors.append(str(e)),
            "on_delivery": on_delivery,
        }
    )
    producer.list_topics(topic, timeout=10)  # connect and learn the leaders before the clock starts
    if per_txn is not None:
        producer.init_transactions(30)
    else:  # the producer id (InitProducerId) before the clock starts, as init_transactions does
        producer.produce(topic, value, partition=0)
        producer.flush(30)
    commits_ms: list[float] = []
    cpu0, client0, t0 = broker.cpu_seconds(), client_cpu(), time.perf_counter()
    sent = 0
    while sent < records and time.perf_counter() - t0 < max_s:
        batch = min(per_txn or records, records - sent)
        if per_txn is not None:
            producer.begin_transaction()
        for i in range(batch):
            while True:
                try:
                    producer.produce(topic, value, partition=(sent + i) % partitions)
                    break
                except BufferError:
                    producer.poll(0.001)
            if i % POLL_EVERY == 0:
                producer.poll(0)
        sent += batch
        if per_txn is not None:
            c0 = time.perf_counter()
            producer.commit_transaction(60)
            commits_ms.append((time.perf_counter() - c0) * 1000)
    left = producer.flush(60)
    elapsed = time.perf_counter() - t0
    cpu, client = broker.cpu_seconds() - cpu0, client_cpu() - client0
    del producer  # destroyed now, not when the collector gets to it (its threads use the cores)
    if left or failed:
        raise RuntimeError(f"{left} records unacknowledged, {len(failed)} failed: {failed[:3]} {errors[:3]}")
    result = figures(sent, elapsed, cpu, client)
    result["records_in_topic"] = sent if per_txn is not None else sent + 1
    if commits_ms:
        ordered = sorted(commits_ms)
        result["transactions"] = len(commits_ms)
        result["commit_ms"] = {
            "p50": statistics.median(ordered),
            "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "max": ordered[-1],
        }
    result["client_errors"] = errors[:5]
    return result


def consume(
    broker: KiplingProcess, topic: str, partitions: int, expected: int, isolation: str, max_s: float
) -> dict[str, Any]:
    """Read the topic from the beginning of every partition (assigned, no group) until ``expected``
    records arrived, with ``isolation``."""
    consumer = Consumer(consumer_config(broker.bootstrap, isolation))
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
        # Nothing more may come: every record once, the markers not among them.
        extra = consumer.consume(num_messages=10_000, timeout=0.5)
        got_after = got + sum(1 for m in extra if m.error() is None)
    finally:
        consumer.close()
    return {
        **figures(got, elapsed, cpu, client),
        "expected_records": expected,
        "exact": got_after == expected,
        "received": got_after,
        "errors": errors[:5],
    }


def stored_batches(broker: KiplingProcess, topic: str, partitions: int) -> dict[str, Any]:
    """The data and control batches the broker stored for ``topic``, from its segment files
    (read after the phase: the batch size sets the cost of every later fetch)."""
    data = control = data_bytes = 0
    for p in range(partitions):
        for segment in sorted((broker.log_dir / f"{topic}-{p}").glob("*.log")):
            for _, header in iter_batches(segment.read_bytes()):
                if header.is_control:
                    control += 1
                else:
                    data += 1
                    data_bytes += header.size
    return {
        "data_batches": data,
        "control_batches": control,
        "mean_data_batch_kb": data_bytes / data / 1000 if data else 0.0,
    }


def ratio(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    return {
        "mb_per_s": a["mb_per_s"] / b["mb_per_s"],
        "broker_cpu_s_per_gb": a["broker_cpu_s_per_gb"] / b["broker_cpu_s_per_gb"],
        "client_cpu_s_per_gb": a["client_cpu_s_per_gb"] / b["client_cpu_s_per_gb"],
    }


def median_ratio(ratios: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in ratios) for key in ratios[0]}


def print_row(label: str, res: dict[str, Any]) -> None:
    commit = res.get("commit_ms")
    extra = f"  commit p50 {commit['p50']:.1f} ms p99 {commit['p99']:.1f} ms" if commit else ""
    stored = res.get("stored")
    if stored:
        extra += (
            f"  {stored['data_batches']:,} batches of {stored['mean_data_batch_kb']:,.0f} kB"
            f" + {stored['control_batches']:,} markers"
        )
    if "exact" in res and not res["exact"]:
        extra += f"  NOT EXACT: {res['received']:,} of {res['expected_records']:,}"
    print(
        f"  {label:<44} {res['records_per_s']:>10,.0f} {res['mb_per_s']:>8,.1f} {res['seconds']:>6.2f} "
        f"{res['broker_cpu_s_per_gb']:>9.2f} {res['client_cpu_s_per_gb']:>9.2f}{extra}"
    )


def print_ratio(label: str, r: dict[str, float]) -> None:
    print(
        f"  {label:<44} {'':>10} {r['mb_per_s']:>7.2f}x {'':>6} "
        f"{r['broker_cpu_s_per_gb']:>8.2f}x {r['client_cpu_s_per_gb']:>8.2f}x"
    )


HEADER = f"  {'':<44} {'records/s':>10} {'MB/s':>8} {'s':>6} {'brk CPU':>9} {'cli CPU':>9}"
"""CPU columns: CPU-seconds per GB of values, the broker process and this client process."""


def run_partitions(broker: KiplingProcess, partitions: int, args: argparse.Namespace) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    print(f"\n{partitions} partition(s), {args.records:,} records of {VALUE_SIZE} B per phase")
    print(HEADER)
    topics: dict[str, tuple[str, int]] = {}
    for r in range(args.rounds):
        results: dict[str, Any] = {}
        for mode, per_txn in (("idempotent", None), ("transactional", args.per_txn)):
            topic = f"txn-bench-{partitions}p-{mode}-{r}-{uuid.uuid4().hex[:6]}"
            create_topic(broker.bootstrap, topic, partitions)
            results[mode] = produce(broker, topic, partitions, args.records, per_txn, args.max_seconds)
            topics[mode] = (topic, results[mode]["records_in_topic"])
            results[mode]["stored"] = stored_batches(broker, topic, partitions)
            print_row(f"round {r + 1} produce {mode}", results[mode])
        results["ratio"] = ratio(results["transactional"], results["idempotent"])
        print_ratio(f"round {r + 1} transactional/idempotent", results["ratio"])
        rounds.append(results)
    produce_ratio = median_ratio([r["ratio"] for r in rounds])

    reads: dict[str, list[dict[str, Any]]] = {}
    for r in range(args.rounds):
        for mode in ("transactional", "idempotent"):
            topic, count = topics[mode]
            for isolation in ("read_committed", "read_uncommitted"):
                res = consume(broker, topic, partitions, count, isolation, args.max_seconds)
                reads.setdefault(f"{mode} {isolation}", []).append(res)
                print_row(f"round {r + 1} read {mode} {isolation}", res)
    read_ratios = {
        mode: median_ratio(
            [ratio(c, u) for c, u in zip(reads[f"{mode} read_committed"], reads[f"{mode} read_uncommitted"])]
        )
        for mode in ("transactional", "idempotent")
    }
    return {
        "partitions": partitions,
        "rounds": rounds,
        "produce_ratio_txn_over_idempotent": produce_ratio,
        "reads": reads,
        "read_ratio_committed_over_uncommitted": read_ratios,
    }


def print_summary(cases: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\nSummary: medians over {args.rounds} rounds; {args.records:,} records of {VALUE_SIZE} B, "
        f"{args.per_txn:,} per transaction, acks=all; kipling on disk (no fsync per append); "
        f"{os.cpu_count()} CPUs"
    )
    print(HEADER)
    for case in cases:
        p = case["partitions"]
        for mode in ("idempotent", "transactional"):
            print_row(f"{p}p produce {mode}", median_figures([r[mode] for r in case["rounds"]]))
        print_ratio(f"{p}p transactional/idempotent", case["produce_ratio_txn_over_idempotent"])
        for mode in ("transactional", "idempotent"):
            for isolation in ("read_uncommitted", "read_committed"):
                print_row(
                    f"{p}p read {mode} {isolation}", median_figures(case["reads"][f"{mode} {isolation}"])
                )
            print_ratio(
                f"{p}p {mode}: committed/uncommitted", case["read_ratio_committed_over_uncommitted"][mode]
            )


def median_figures(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure the median over the rounds (each column on its own)."""
    keys = ("records_per_s", "mb_per_s", "seconds", "broker_cpu_s_per_gb", "client_cpu_s_per_gb")
    out: dict[str, Any] = {key: statistics.median(r[key] for r in results) for key in keys}
    if "stored" in results[0]:
        out["stored"] = {
            key: statistics.median(r["stored"][key] for r in results) for key in results[0]["stored"]
        }
    if "commit_ms" in results[0]:
        out["commit_ms"] = {
            key: statistics.median(r["commit_ms"][key] for r in results) for key in ("p50", "p99", "max")
        }
    if "exact" in results[0]:
        out["exact"] = all(r["exact"] for r in results)
        out["received"] = results[-1]["received"]
        out["expected_records"] = results[-1]["expected_records"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per produce phase")
    parser.add_argument("--partitions", default="1,8", help="partition counts, comma-separated")
    parser.add_argument("--per-txn", type=int, default=1_000, help="records per transaction")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two producers")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="seconds per phase at most")
    args = parser.parse_args()
    broker = KiplingProcess()
    cases: list[dict[str, Any]] = []
    try:
        broker.start()
        # Compile codecs, create __transaction_state and fault in code before any timing.
        create_topic(broker.bootstrap, "warmup", 1)
        produce(broker, "warmup", 1, WARMUP_RECORDS, None, 60)
        produce(broker, "warmup", 1, WARMUP_RECORDS, args.per_txn, 60)
        consume(broker, "warmup", 1, 2 * WARMUP_RECORDS + 1, "read_committed", 60)
        for partitions in (int(p) for p in args.partitions.split(",")):
            cases.append(run_partitions(broker, partitions, args))
    finally:
        broker.cleanup()
    print_summary(cases, args)
    out = write_results(
        "transactions",
        {
            "value_bytes": VALUE_SIZE,
            "records": args.records,
            "per_txn": args.per_txn,
            "rounds": args.rounds,
            "kipling_storage": "disk, default flush policy (no fsync per append)",
            "client": "confluent-kafka (librdkafka)",
            "producer_config": {
                k: v
                for k, v in producer_config("", True).items()
                if k not in ("bootstrap.servers", "transactional.id")
            },
            "consumer_config": {
                k: v
                for k, v in consumer_config("", "").items()
                if k not in ("bootstrap.servers", "isolation.level")
            },
            "cases": cases,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    try:
        main()
    except KafkaException as exc:
        raise SystemExit(f"client error: {exc}") from exc
