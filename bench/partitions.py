"""Partitions per broker: one broker process holding N partitions under a low open-files limit.

What issue 18 asks of a broker at 100,000 partitions, measured on a real process from outside:

* the bench lowers its own open-files limit (soft and hard) to ``--file-limit`` (8,192) before it
  starts the broker, which inherits it: N partitions have 3N segment files, far more than that;
* N partitions are created (topics of 100), each gets one record (Produce requests of 2,000);
* a librdkafka consumer assigned to all N reads every record (sessionless fetches of all N);
* one incremental fetch session (KIP-227) over all N: the full fetch, the incremental fetch that
  lists every moved partition once, then rounds that produce to ``--changed`` partitions and fetch
  incrementally (nothing listed); broker CPU per fetch from ``/proc/<pid>/task/*/schedstat``;
* a Metadata request for every topic and a ListOffsets (latest) for every partition;
* a restart: clean shutdown, start-up until the port listens, and until a full fetch answers.

Figures: wall time and broker CPU of each phase, the broker's RSS and open descriptors after each.
Timings are for reading, never asserted. Run from the repository root:
``python -m bench.partitions`` (``--partitions``, ``--file-limit``, ``--changed``, ``--rounds``);
writes ``bench/results/partitions.json``. The same checks at 20,000 partitions are a test
(tests/integration/test_many_partitions.py).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import time
from typing import Any

from bench import write_results
from bench.broker_proc import KiplingProcess
from bench.fetch_sessions import PARTITIONS_PER_TOPIC, FetchClient, Layout, Producer
from bench.wire import Connection, create_topics, wait_for_leaders
from protocol.api_keys import ApiKey

CREATE_CHUNK = 1_000
"""Partitions per CreateTopics request: each request is one metadata delta the broker applies."""
PRODUCE_CHUNK = 2_000


class Phase:
    """Wall time and broker CPU of one phase, plus the broker's RSS and descriptors after it."""

    def __init__(self, broker: KiplingProcess, name: str, figures: dict[str, Any]) -> None:
        self.broker, self.name, self.figures = broker, name, figures

    def __enter__(self) -> Phase:
        self.wall0, self.cpu0 = time.perf_counter(), self._cpu()
        return self

    def _cpu(self) -> float:
        """The broker's CPU seconds so far; a phase that starts the process counts from 0."""
        return self.broker.cpu_seconds() if self.broker.alive() else 0.0

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            return
        entry: dict[str, Any] = {"wall_s": round(time.perf_counter() - self.wall0, 2)}
        if self.broker.alive():  # a phase that stops the broker has no CPU figure: it left with the process
            entry["broker_cpu_s"] = round(self._cpu() - self.cpu0, 2)
            entry["broker_rss_mb"] = round(self.broker.rss_mb(), 1)
            entry["broker_open_files"] = self.broker.open_files()
        self.figures[self.name] = entry
        print(f"  {self.name:<28} " + "  ".join(f"{k}={v}" for k, v in entry.items()), flush=True)


def lower_file_limit(limit: int) -> None:
    """Soft and hard open-files limit of this process (and so of the broker it starts) to ``limit``."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < limit:
        raise SystemExit(f"the hard open-files limit is {hard}, below --file-limit {limit}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def produce_one_each(conn: Connection, layout: Layout) -> None:
    """One record to every partition, acks=1, in Produce requests of ``PRODUCE_CHUNK`` partitions.

    Over the wire rather than through librdkafka: a librdkafka producer of 100,000 partitions spends
    minutes of its own CPU (it walks every partition in its loops) before the broker sees them all.
    """
    producer = Producer(conn, 9)
    for start in range(0, layout.n, PRODUCE_CHUNK):
        producer.produce(list(range(start, min(layout.n, start + PRODUCE_CHUNK))))


def consume_all(bootstrap: str, layout: Layout, timeout_s: float = 900) -> int:
    """How many partitions a librdkafka consumer assigned to all of them got their record from.

    The consumer runs in a child process that reports the count and exits without closing it: with
    100,000 partitions librdkafka's close spends many minutes of its own CPU tearing them down, which
    says nothing about the broker.
    """
    context = multiprocessing.get_context("fork")  # no librdkafka object exists in this process yet
    counts: multiprocessing.Queue[int] = context.Queue()
    child = context.Process(target=_consume, args=(bootstrap, layout.topics, layout.n, timeout_s, counts))
    child.start()
    try:
        return counts.get(timeout=timeout_s + 120)
    finally:
        child.join(5)
        if child.is_alive():
            child.kill()


def _consume(
    bootstrap: str,
    topics: list[tuple[str, int]],
    n: int,
    timeout_s: float,
    counts: multiprocessing.Queue[int],
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-partitions", "enable.auto.commit": False}
    )
    # offset 0, the log start: from OFFSET_BEGINNING librdkafka sends one ListOffsets per partition
    consumer.assign([TopicPartition(name, p, 0) for name, size in topics for p in range(size)])
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + timeout_s
    while len(seen) < n and time.monotonic() < deadline:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error() is None:
                seen.add((message.topic(), message.partition()))
    counts.put(len(seen))
    counts.close()
    counts.join_thread()
    os._exit(0)  # no close: see consume_all


def metadata_and_list_offsets(conn: Connection, layout: Layout) -> tuple[int, int]:
    """(partitions in a Metadata response for every topic, partitions ListOffsets answered)."""
    body = conn.request(
        ApiKey.METADATA,
        9,
        {"topics": [{"name": n} for n, _ in layout.topics], "allow_auto_topic_creation": False},
    ).response.body
    in_metadata = sum(len(t.partitions) for t in body.topics if t.error_code == 0)
    request = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": n,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(size)
                ],
            }
            for n, size in layout.topics
        ],
    }
    listed = conn.request(ApiKey.LIST_OFFSETS, 5, request).response.body
    answered = sum(1 for t in listed.topics for p in t.partitions if p.error_code == 0 and p.offset == 1)
    return in_metadata, answered


def session_rounds(
    broker: KiplingProcess,
    conn: Connection,
    layout: Layout,
    changed: int,
    rounds: int,
    figures: dict[str, Any],
) -> None:
    """The full fetch, the catch-up incremental fetch, then ``rounds`` of produce + incremental fetch."""
    client = FetchClient(conn, layout, 12, session=True)
    full = client.fetch(broker, max_wait_ms=0)
    catch_up = client.fetch(broker, max_wait_ms=0)  # lists every partition that moved: all N
    producer = Producer(conn, 9)
    samples = []
    step = max(layout.n // changed, 1)
    for r in range(rounds):
        producer.produce([(r + i * step) % layout.n for i in range(changed)])
        samples.append(client.fetch(broker, max_wait_ms=0))
        client.fetch(broker, max_wait_ms=0)  # lists the moved ones: the session catches up again
    figures["session"] = {
        "full_fetch_partitions_with_records": full.partitions_with_records,
        "full_fetch_broker_cpu_ms": round(full.cpu_us / 1e3, 1),
        "full_fetch_wall_ms": round(full.wall_us / 1e3, 1),
        "catch_up_fetch_listed": catch_up.partitions_listed,
        "catch_up_fetch_broker_cpu_ms": round(catch_up.cpu_us / 1e3, 1),
        "incremental_changed": changed,
        "incremental_returned_mean": statistics.fmean(s.partitions_with_records for s in samples),
        "incremental_broker_cpu_us_median": round(statistics.median(s.cpu_us for s in samples)),
        "incremental_broker_cpu_us_per_changed": round(
            statistics.median(s.cpu_us for s in samples) / changed, 1
        ),
        "session_restarts": client.session_restarts,
        "partition_errors": client.partition_errors,
    }
    print(f"  session {figures['session']}", flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    lower_file_limit(args.file_limit)
    layout = Layout(args.partitions)
    figures: dict[str, Any] = {"partitions": args.partitions, "file_limit": args.file_limit}
    broker = KiplingProcess(overrides={"broker.session.timeout.ms": "60000"})
    try:
        with Phase(broker, "start_empty", figures):
            broker.start(timeout_s=120)
        with Connection("127.0.0.1", broker.port, timeout_s=1800) as conn:
            with Phase(broker, "create", figures):
                layout.topic_ids = create_topics(
                    conn, layout.topics, version=7, chunk_partitions=CREATE_CHUNK
                )
            with Phase(broker, "produce_one_record_each", figures):
                produce_one_each(conn, layout)
            with Phase(broker, "consumer_assigned_to_all", figures):
                figures["consumed_partitions"] = consume_all(broker.bootstrap, layout)
            with Phase(broker, "metadata_and_list_offsets", figures):
                figures["metadata_partitions"], figures["list_offsets_answered"] = metadata_and_list_offsets(
                    conn, layout
                )
            with Phase(broker, "incremental_session", figures):
                session_rounds(broker, conn, layout, args.changed, args.rounds, figures)
        with Phase(broker, "clean_shutdown", figures):
            broker.stop(timeout_s=1800)
        with Phase(broker, "restart_until_listening", figures):
            broker.start(timeout_s=1800)
        with Connection("127.0.0.1", broker.port, timeout_s=1800) as conn:
            # the broker listens before its metadata has made it the leader of every partition again
            with Phase(broker, "restart_until_all_led", figures):
                wait_for_leaders(conn, [name for name, _ in layout.topics], version=9, timeout_s=1800)
            with Phase(broker, "first_full_fetch", figures):
                reader = FetchClient(conn, layout, 12, session=False)
                first = reader.fetch(broker, max_wait_ms=0)
            figures["restart_full_fetch_with_records"] = first.partitions_with_records
            figures["restart_full_fetch_partition_errors"] = reader.partition_errors
    except BaseException:
        broker.stop(timeout_s=1800)
        print(f"failed: the broker's directory is kept: {broker.work_dir}\n{broker.tail(30)}", flush=True)
        raise
    broker.stop(timeout_s=1800)
    broker.cleanup()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--file-limit", type=int, default=8_192)
    parser.add_argument(
        "--changed", type=int, default=10, help="partitions produced to per incremental round"
    )
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if args.partitions % PARTITIONS_PER_TOPIC:
        parser.error(f"--partitions must be a multiple of {PARTITIONS_PER_TOPIC}")
    print(
        f"partitions bench: {args.partitions:,} partitions, open-files limit {args.file_limit:,}", flush=True
    )
    path = write_results("partitions", run(args))
    print(f"figures in {path}")


if __name__ == "__main__":
    main()
