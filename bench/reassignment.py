"""Partition reassignment: how long a new replica takes to catch up, with and without a throttle.

A 3-broker cluster (bench/cluster_proc.py). Per round and mode, a new topic of one partition on
broker 1 (replication factor 1) gets ``--mb`` MB (confluent-kafka, acks=1, 1 KiB values); then
``kipling reassign-partitions --execute`` moves it to [1, 2] (broker 2's new replica copies the log
through its follower process) — ``--throttle`` B/s in the throttled mode, none in the other — and
the bench times, from the moment the tool returned:

* **caught up**: broker 2's ``.log`` files hold as many bytes as broker 1's (sampled every 10 ms);
* **complete**: ListPartitionReassignments no longer lists the partition (the new replica joined
  the ISR and the controller completed the move).

``--verify`` then clears the throttles. Modes alternate round by round, so load from other
processes lands on both; the figures are medians, and the ratio is throttled / unthrottled. The
quota is Kafka's (11 samples of 1 s, the rate counted over at least 10 s): a throttle of R B/s lets
about 10-11 s worth of bytes through in a burst, then nothing until that sample leaves the window,
so a long throttled copy averages about R and takes about ``MB / R`` seconds (the unthrottled copy's
time is negligible beside it). Results in ``bench/results/reassignment.json``.

On this machine (2 cores, shared), 24 MB per move, throttle 1 MiB/s, 2 rounds: unthrottled caught up
in 0.43 s (56.9 MB/s; complete 0.50 s), throttled in 22.18 s (1.1 MB/s; complete 22.28 s): 52x.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench import write_results
from bench.client_logs import client_base
from bench.cluster_proc import KiplingCluster, wait_until
from tools.cli import main as kipling

MB = 1024 * 1024
VALUE = b"r" * 1024


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient(client_base(bootstrap))
    new = NewTopic(topic, num_partitions=1, replica_assignment=[[1]], config={"min.insync.replicas": "1"})
    for future in admin.create_topics([new]).values():
        future.result(timeout=60)

    def ready() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        return (
            meta is not None
            and meta.error is None
            and 0 in meta.partitions
            and meta.partitions[0].leader == 1
        )

    wait_until(ready, 60, f"topic {topic} led by broker 1", interval_s=0.1)


def fill(bootstrap: str, topic: str, mb: float) -> None:
    producer = Producer({**client_base(bootstrap), "acks": "1", "linger.ms": 5, "batch.size": 1_000_000})
    for i in range(int(mb * MB / len(VALUE))):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records not delivered")


def tool(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = kipling(["reassign-partitions", *argv])
    if code != 0:
        raise RuntimeError(f"reassign-partitions {argv[2]} failed: {out.getvalue()}")
    return out.getvalue()


def move(cluster: KiplingCluster, topic: str, throttle: int | None, work: Path) -> dict[str, Any]:
    leader, target = cluster.brokers[1], cluster.brokers[2]
    size = leader.log_size(topic, 0)
    plan = work / f"{topic}.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2]}]})
    )
    bootstrap = leader.bootstrap
    args = ["--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(plan)]
    if throttle is not None:
        args += ["--throttle", str(throttle)]
    tool(*args)
    t0 = time.perf_counter()
    caught_up = wait_until(
        lambda: target.log_size(topic, 0) >= size, 600, f"{topic} copied to broker 2", 0.01
    )
    admin = AdminClient(client_base(bootstrap))

    def complete() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        return sorted(meta.replicas) == [1, 2] and sorted(meta.isrs) == [1, 2]

    done = wait_until(complete, 600, f"{topic} reassignment complete", 0.02)
    tool("--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(plan))
    return {
        "bytes": size,
        "caught_up_s": caught_up,
        "complete_s": time.perf_counter() - t0,
        "caught_up_mb_per_s": size / MB / caught_up if caught_up > 0 else None,
        "complete_after_caught_up_s": done,
    }


def median(rounds: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(float(r[key]) for r in rounds))


def run(args: argparse.Namespace) -> dict[str, Any]:
    cluster = KiplingCluster(size=3, voters=1).start()
    results: dict[str, list[dict[str, Any]]] = {"unthrottled": [], "throttled": []}
    try:
        cluster.wait_registered(120)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for i in range(args.rounds):
                order = ["unthrottled", "throttled"] if i % 2 == 0 else ["throttled", "unthrottled"]
                for mode in order:
                    topic = f"move-{mode}-{i}"
                    create_topic(cluster.bootstrap, topic)
                    fill(cluster.bootstrap, topic, args.mb)
                    figures = move(cluster, topic, args.throttle if mode == "throttled" else None, work)
                    results[mode].append(figures)
                    print(
                        f"round {i} {mode:>11}: {figures['bytes'] / MB:6.1f} MB caught up in "
                        f"{figures['caught_up_s']:6.2f} s ({figures['caught_up_mb_per_s'] or 0:6.1f} MB/s), "
                        f"complete after {figures['complete_s']:6.2f} s",
                        flush=True,
                    )
    finally:
        cluster.stop()
    summary: dict[str, dict[str, Any]] = {
        mode: {
            "caught_up_s_median": median(rounds, "caught_up_s"),
            "complete_s_median": median(rounds, "complete_s"),
            "caught_up_mb_per_s_median": statistics.median(r["caught_up_mb_per_s"] or 0 for r in rounds),
            "rounds": rounds,
        }
        for mode, rounds in results.items()
    }
    ratio = summary["throttled"]["caught_up_s_median"] / summary["unthrottled"]["caught_up_s_median"]
    expected = args.mb * MB / args.throttle
    print(
        f"\n{args.mb:g} MB per move, throttle {args.throttle / MB:.2f} MB/s, {args.rounds} round(s):\n"
        f"  unthrottled: caught up {summary['unthrottled']['caught_up_s_median']:.2f} s "
        f"({summary['unthrottled']['caught_up_mb_per_s_median']:.1f} MB/s), "
        f"complete {summary['unthrottled']['complete_s_median']:.2f} s\n"
        f"  throttled:   caught up {summary['throttled']['caught_up_s_median']:.2f} s "
        f"({summary['throttled']['caught_up_mb_per_s_median']:.1f} MB/s), "
        f"complete {summary['throttled']['complete_s_median']:.2f} s\n"
        f"  throttled / unthrottled catch-up time: {ratio:.2f}x "
        f"(a copy averaging the throttle takes about {expected:.1f} s)"
    )
    return {
        "mb": args.mb,
        "throttle_bytes_per_s": args.throttle,
        "rounds": args.rounds,
        "results": summary,
        "throttled_over_unthrottled_catch_up": ratio,
        "throttled_copy_at_the_rate_s": expected,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=40.0, help="MB in the moved partition (default 40)")
    parser.add_argument(
        "--throttle", type=int, default=2 * MB, help="B/s for the throttled moves (default 2 MiB/s)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="moves per mode (default 3)")
    figures = run(parser.parse_args())
    print(f"results: {write_results('reassignment', figures)}")


if __name__ == "__main__":
    main()
