"""Replication on a 3-broker kipling cluster: acks=-1 throughput and latency, and follower catch-up.

Three questions, answered in one run with real broker processes on loopback (bench/cluster_proc.py;
broker 1 also runs the controller):

1. **What does acks=-1 on replication factor 3 cost against acks=1 on one replica?** A confluent-kafka
   producer (bench/throughput.py's settings: linger 5 ms, 1 MB batches, 1 KiB values) writes up to
   ``--mb`` MB or ``--max-seconds`` per phase to one partition. Cases: acks=-1 on an RF3 topic with
   ``min.insync.replicas=2`` (replicas [2, 3, 1]: led by broker 2, which is not the controller), acks=1
   on the same RF3 topic (the followers replicate asynchronously), acks=1 on an RF1 topic led by broker
   2 of the same cluster, and acks=1 on a separate single-node broker (bench/broker_proc.py). Phases
   are interleaved round by round, in a rotated order, so load from other processes lands on every
   case; before each phase the bench waits until the RF3 followers hold the leader's bytes, so one
   phase's replication never runs into the next. The ratio acks=-1 RF3 / acks=1 RF1 is taken per
   round and its median reported. CPU is every broker and follower process of the cluster
   (``/proc/<pid>/stat``) from the first send until both followers hold every byte, per GB acked, so
   acks=1 on RF3 is charged for the replication that finishes after its last ack; it is also split
   by process (each broker, each broker's follower processes). On 2 cores the client, three brokers
   and their follower processes share the CPUs, so MB/s says as much about the machine as about
   replication. The leader's request counters (its ``/metrics``) give records per Produce request
   and follower Fetch requests per MB.
2. **How long does an acks=-1 write take?** Produce-send → delivery report (the ack: the high watermark
   passed the record, so both followers have it) and produce-send → a consumer on the leader receives
   it (bounded by the same high watermark), as p50/p90/p99 over ``--latency-samples`` records, linger
   0, in two modes: one record at a time (the next is sent once the previous one was acked and
   received) and open loops at each of ``--latency-rates`` records/s. acks=1 on RF1, one at a time,
   is measured the same way for scale. Both clocks are this process's ``perf_counter``; the consumer
   runs in its own thread, librdkafka's poll releasing the GIL. With linger 0 and librdkafka's
   default of up to a million in-flight requests, every record of an open loop is its own Produce
   request, and a broker serves one request per connection at a time (as Kafka): when the offered
   rate exceeds what one acks=-1 round trip per request allows, the queue grows for as long as the
   run lasts and the percentiles measure the run's length. The p50 of the first and of the last
   quarter of the samples is kept, and such a run is flagged as not stable.
3. **How fast does a restarted follower catch up?** Broker 3 (a follower of the RF3 topic) is stopped
   (SIGTERM by default, ``--stop-signal kill``), ``--catchup-mb`` MB are produced with
   ``--catchup-acks`` while it is down (min ISR 2 still allows acks=-1 with two live replicas), then it
   is restarted. Its progress is the size of its partition's ``.log`` segment files on disk, sampled
   every 5 ms by a thread: segments are not preallocated and the follower appends with plain writes,
   so the size is the bytes it has appended (no fsync needed to see them). Caught up = the follower's
   size equals the leader's (the leader is idle by then); the replicas' bytes are compared afterwards
   (SHA-256 of the concatenated segments). Reported: the timeline from the restart (port listening,
   listed in Metadata, first byte fetched, caught up, back in the ISR by Metadata) and the catch-up
   rate from first byte to caught up (the fetch path) and from the restart (what an operator waits).
   The follower's lag gauge (``kafka_server_fetcherlagmetrics_consumerlag``) and fetcher byte counter
   from broker 3's ``/metrics`` are read at the end as a cross-check.

Every broker runs with the default flush policy (no ``log.flush.interval.messages``: appends go to the
page cache, fsync only at segment roll and shutdown, as Kafka by default), and the cluster with
Kafka's default lag and session timeouts (bench/cluster_proc.py). Broker output at WARNING and above is
counted and stored with the figures.

Run from the repository root: ``python -m bench.replication`` (options: ``--help``); writes
``bench/results/replication.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import os
import signal
import statistics
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from bench import write_results
from bench.broker_proc import KiplingProcess
from bench.client_logs import client_base, exit_on_termination, rdkafka_lines
from bench.cluster_proc import (
    ClusterBroker,
    KiplingCluster,
    problem_lines,
    process_cpu_seconds,
    tree_cpu_seconds,
    wait_until,
)
from bench.long_poll import percentile
from bench.throughput import GB, MB, VALUE_SIZE, client_cpu, consumer_config, producer_config

CONSUMER_LAG = "kafka_server_fetcherlagmetrics_consumerlag"
FETCHER_BYTES = "kafka_server_fetcherstats_bytespersec_total"
REQUESTS = "kafka_network_requestmetrics_requests_total"
BY_PROCESS = "cluster_cpu_s_per_gb_by_process"
LEADER = 2
"""Leads both cluster topics: not broker 1, so the controller's work is not on the leader's core."""
RESTARTED = 3
"""The follower stopped and restarted in the catch-up phase."""
RF3_TOPIC = "rf3"
RF1_TOPIC = "rf1"
SINGLE_TOPIC = "single"
RF3_REPLICAS = [LEADER, RESTARTED, 1]
WARMUP_MB = 20
POLL_EVERY = 10_000
"""Messages between two ``poll(0)`` calls and time checks in the produce loop."""
SETTLE_TIMEOUT_S = 180.0
SAMPLE_INTERVAL_S = 0.005
"""Period of the catch-up sampler (stat of a few segment files: tens of microseconds)."""
ISR_NOTE_S = 3.0
"""An ISR rejoin later than this after catch-up and registration is pointed out (heartbeat: 2 s)."""
LATENCY_WARMUP = 200
"""Records sent and dropped before each latency run: connections, fetch sessions, first compile."""

# -- cases and topics --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One throughput case: which broker(s), topic and acks."""

    key: str
    label: str
    target: str
    """``cluster`` or ``single``."""
    topic: str
    acks: str
    replicas: tuple[int, ...]


CASES = {
    case.key: case
    for case in (
        Case("rf3-all", "acks=-1 RF3 (min ISR 2)", "cluster", RF3_TOPIC, "-1", tuple(RF3_REPLICAS)),
        Case("rf3-1", "acks=1 RF3", "cluster", RF3_TOPIC, "1", tuple(RF3_REPLICAS)),
        Case("rf1-1", "acks=1 RF1 (cluster)", "cluster", RF1_TOPIC, "1", (LEADER,)),
        Case("single-1", "acks=1 single node", "single", SINGLE_TOPIC, "1", (1,)),
    )
}


def create_topic(bootstrap: str, topic: str, replicas: list[int] | None, min_isr: int) -> None:
    """One partition; ``replicas`` pins the assignment (first = leader), None = the broker's default."""
    admin = AdminClient(client_base(bootstrap))
    config = {"min.insync.replicas": str(min_isr)}
    new = (
        NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=config)
        if replicas
        else NewTopic(topic, num_partitions=1, replication_factor=1, config=config)
    )
    for future in admin.create_topics([new]).values():
        future.result(timeout=60)
    want = len(replicas) if replicas else 1

    def ready() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None or 0 not in meta.partitions:
            return False
        partition = meta.partitions[0]
        leader_ok = partition.leader == replicas[0] if replicas else partition.leader >= 0
        return leader_ok and len(partition.isrs) == want

    wait_until(ready, 60, f"topic {topic} to have its leader and full ISR", interval_s=0.1)


def isr(admin: AdminClient, topic: str) -> list[int]:
    """The partition's ISR as the Metadata response of some broker gives it."""
    return list(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs)


def high_watermark(bootstrap: str, topic: str) -> int:
    """ListOffsets(latest) of partition 0: a check on what the producer was told, apart from the client."""
    consumer = Consumer({**consumer_config(bootstrap), **client_base(bootstrap)})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def settle(cluster: KiplingCluster, topic: str = RF3_TOPIC, nodes: tuple[int, ...] = (1, 3)) -> float:
    """Wait until the followers ``nodes`` hold as many log bytes as the leader; the seconds it took."""
    leader = cluster.brokers[LEADER]

    def equal() -> bool:
        size = leader.log_size(topic, 0)
        return all(cluster.brokers[n].log_size(topic, 0) == size for n in nodes)

    return wait_until(equal, SETTLE_TIMEOUT_S, f"followers {nodes} of {topic} to catch up")


def log_digest(broker: ClusterBroker, topic: str) -> str:
    """SHA-256 of the partition's segments in offset order (replicas must be byte-identical)."""
    digest = hashlib.sha256()
    for path in sorted(broker.partition_dir(topic, 0).glob("*.log")):
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


# -- throughput --------------------------------------------------------------------------------------


def produce(
    bootstrap: str, topic: str, acks: str, mb: float, max_s: float, cpu: Callable[[], float]
) -> dict[str, Any]:
    """Produce up to ``mb`` MB of 1 KiB values to partition 0; flush; MB/s and CPU per GB."""
    value = os.urandom(VALUE_SIZE)
    target = int(mb * MB) // VALUE_SIZE
    errors: list[str] = []
    failed = [0]

    def report(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failed[0] += 1
            if len(errors) < 5:
                errors.append(str(err))

    producer = Producer(
        {
            **producer_config(bootstrap, acks),
            **client_base(bootstrap),
            "error_cb": lambda e: errors.append(str(e)) if len(errors) < 5 else None,
            "on_delivery": report,
            "delivery.report.only.error": True,
        }
    )
    producer.list_topics(topic, timeout=10)  # connect and learn the leader before the clock starts
    cpu0, client0, t0 = cpu(), client_cpu(), time.perf_counter()
    sent = 0
    while sent < target:
        try:
            producer.produce(topic, value, partition=0)
        except BufferError:
            producer.poll(0.001)
            continue
        sent += 1
        if sent % POLL_EVERY == 0:
            producer.poll(0)
            if time.perf_counter() - t0 > max_s:
                break
    left = producer.flush(120)
    elapsed = time.perf_counter() - t0
    broker_cpu, client = cpu() - cpu0, client_cpu() - client0
    del producer  # destroyed now: its threads would compete for the cores in the next phase
    gc.collect()
    if left:
        raise RuntimeError(f"{left} messages to {topic} still unacknowledged after flush: {errors[:3]}")
    acked = sent - failed[0]
    volume = acked * VALUE_SIZE
    return {
        "messages": acked,
        "failed": failed[0],
        "mb": volume / MB,
        "seconds": elapsed,
        "mb_per_s": volume / MB / elapsed,
        "msgs_per_s": acked / elapsed,
        "broker_cpu_s": broker_cpu,
        "broker_cpu_s_per_gb": broker_cpu / (volume / GB) if volume else None,
        "broker_cores_busy": broker_cpu / elapsed,
        "client_cpu_s_per_gb": client / (volume / GB) if volume else None,
        "errors": errors,
    }


@dataclass
class Brokers:
    """What a case runs on: the cluster and, unless ``--no-single``, the single-node broker."""

    cluster: KiplingCluster
    single: KiplingProcess | None

    def bootstrap(self, case: Case) -> str:
        if case.target == "single":
            assert self.single is not None
            return self.single.bootstrap
        return self.cluster.bootstrap

    def cpu(self, case: Case) -> Callable[[], float]:
        if case.target == "single":
            single = self.single
            assert single is not None
            return lambda: tree_cpu_seconds(single.pid)
        return self.cluster.total_cpu_seconds


def request_counts(broker: KiplingProcess) -> dict[str, float]:
    """Produce and Fetch requests the broker's client listeners have served (its /metrics; not the
    controller listener's Raft fetches); on the leader, Fetch = followers'."""
    out = {"Produce": 0.0, "Fetch": 0.0}
    for family in text_string_to_metric_families(broker.metrics_text()):
        for sample in family.samples:
            api = sample.labels.get("request", "")
            if sample.name == REQUESTS and api in out and sample.labels.get("listener") != "CONTROLLER":
                out[api] += sample.value
    return out


def run_case(brokers: Brokers, case: Case, mb: float, max_s: float) -> dict[str, Any]:
    """One phase: settle the RF3 followers, produce, wait for the followers, check the high watermark.

    Broker CPU is counted from before the produce until the followers hold every byte, so acks=1 on
    RF3 is charged for the replication that goes on after its last ack.
    """
    cluster = brokers.cluster
    settle(cluster)
    bootstrap = brokers.bootstrap(case)
    leader = brokers.single if case.target == "single" else cluster.brokers[LEADER]
    assert leader is not None
    before = high_watermark(bootstrap, case.topic)
    cpu = brokers.cpu(case)
    requests0, breakdown0, cpu0 = request_counts(leader), cluster.cpu_breakdown(), cpu()
    result = produce(bootstrap, case.topic, case.acks, mb, max_s, cpu)
    if case.topic == RF3_TOPIC:
        # acks=1: the followers are still fetching; the time they need is part of the cost
        result["followers_caught_up_after_s"] = settle(cluster)
    cpu_total = cpu() - cpu0
    breakdown1 = cluster.cpu_breakdown()
    requests1 = request_counts(leader)
    gigabytes = result["mb"] * MB / GB
    result["broker_cpu_s_until_replicated"] = cpu_total
    if case.target == "cluster" and gigabytes:
        result[BY_PROCESS] = {
            name: (breakdown1[name] - breakdown0.get(name, 0.0)) / gigabytes for name in breakdown1
        }
    result["broker_cpu_s_per_gb_until_replicated"] = cpu_total / gigabytes if gigabytes else None
    result["leader_produce_requests"] = requests1["Produce"] - requests0["Produce"]
    result["leader_fetch_requests"] = requests1["Fetch"] - requests0["Fetch"]
    result["messages_per_produce_request"] = (
        result["messages"] / result["leader_produce_requests"] if result["leader_produce_requests"] else None
    )
    fetches = result["leader_fetch_requests"]
    result["follower_fetches_per_mb"] = fetches / result["mb"] if result["mb"] else None
    try:
        wait_until(
            lambda: high_watermark(bootstrap, case.topic) - before >= result["messages"],
            15,
            "the high watermark",
            0.2,
        )
    except TimeoutError:
        result["note"] = (
            f"high watermark moved by {high_watermark(bootstrap, case.topic) - before}, "
            f"{result['messages']} acknowledged"
        )
        print(f"  note: {case.label}: {result['note']}")
    return result


def summarize_case(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["mb_per_s"] for r in rounds]
    cpus = [r["broker_cpu_s_per_gb_until_replicated"] for r in rounds]
    cpus = [c for c in cpus if c is not None]
    out: dict[str, Any] = {
        "mb_per_s_best": max(rates),
        "mb_per_s_median": statistics.median(rates),
        "msgs_per_s_median": statistics.median(r["msgs_per_s"] for r in rounds),
        "broker_cpu_s_per_gb_median": statistics.median(cpus) if cpus else None,
        "broker_cores_busy_median": statistics.median(r["broker_cores_busy"] for r in rounds),
        "client_cpu_s_per_gb_median": statistics.median(r["client_cpu_s_per_gb"] or 0 for r in rounds),
        "messages_per_produce_request_median": median_of(r["messages_per_produce_request"] for r in rounds),
        "follower_fetches_per_mb_median": median_of(r["follower_fetches_per_mb"] for r in rounds),
        "rounds": rounds,
    }
    by_process = [r[BY_PROCESS] for r in rounds if BY_PROCESS in r]
    if by_process:
        out["cluster_cpu_s_per_gb_by_process_median"] = {
            name: statistics.median(b.get(name, 0.0) for b in by_process) for name in by_process[0]
        }
    lags = [r["followers_caught_up_after_s"] for r in rounds if "followers_caught_up_after_s" in r]
    if lags:
        out["followers_caught_up_after_s_median"] = statistics.median(lags)
    return out


def median_of(values: Iterable[float | None]) -> float | None:
    """Median of the rounds that have the figure (a single node has no follower fetches)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def ratio(results: dict[str, Any], num: str, den: str) -> dict[str, Any] | None:
    """num/den MB/s per round (adjacent phases, so the same load) and the median over rounds."""
    if num not in results or den not in results:
        return None
    per_round = [
        a["mb_per_s"] / b["mb_per_s"]
        for a, b in zip(results[num]["rounds"], results[den]["rounds"], strict=False)
    ]
    return {
        "mb_per_s_median_of_rounds": statistics.median(per_round),
        "per_round": per_round,
        "of_medians": results[num]["mb_per_s_median"] / results[den]["mb_per_s_median"],
    }


# -- latency -----------------------------------------------------------------------------------------


class Receiver(threading.Thread):
    """A consumer on the partition's end, in its own thread: arrival time per sequence number."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="latency-consumer", daemon=True)
        self.consumer = Consumer({**consumer_config(bootstrap), **client_base(bootstrap)})
        start = high_watermark(bootstrap, topic)
        self.consumer.assign([TopicPartition(topic, 0, start)])
        self.received: dict[int, int] = {}
        self.errors: list[str] = []
        self._cond = threading.Condition()
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                msg = self.consumer.poll(0.05)
                if msg is None:
                    continue
                now = time.perf_counter_ns()
                if msg.error() is not None:
                    self.errors.append(str(msg.error()))
                    continue
                (seq,) = struct.unpack_from(">Q", msg.value() or b"\0" * 8)
                with self._cond:
                    self.received[seq] = now
                    self._cond.notify_all()
        finally:
            self.consumer.close()

    def wait_for(self, seq: int, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: seq in self.received, timeout_s)

    def wait_count(self, count: int, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.received) >= count, timeout_s)

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)


def latency_run(
    bootstrap: str,
    topic: str,
    acks: str,
    samples: int,
    rate: float,
    leader: KiplingProcess,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send ``samples`` 1 KiB records (after a warm-up); ``rate`` 0 = one at a time, else open loop.

    ``extra`` is added to the producer's settings (e.g. ``max.in.flight.requests.per.connection``).
    The leader's Produce request count says how librdkafka grouped the records; the p50 of the first
    and of the last quarter of the samples says whether the run was stable or a queue kept growing
    (an open-loop rate above what the path sustains).
    """
    receiver = Receiver(bootstrap, topic)
    receiver.start()
    producer = Producer(
        {
            **client_base(bootstrap),
            "acks": acks,
            "linger.ms": 0,
            "compression.type": "none",
            "enable.idempotence": False,
            "socket.nagle.disable": True,
            **(extra or {}),
        }
    )
    sent_at: dict[int, int] = {}
    acked_at: dict[int, int] = {}
    failures: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        now = time.perf_counter_ns()
        (seq,) = struct.unpack_from(">Q", msg.value() or b"\0" * 8)
        if err is None:
            acked_at[seq] = now
        else:
            failures.append(str(err))

    padding = os.urandom(VALUE_SIZE - 8)
    total = LATENCY_WARMUP + samples
    try:
        producer.list_topics(topic, timeout=10)
        for seq in range(LATENCY_WARMUP):  # one at a time: also gets the consumer fetching
            producer.produce(topic, struct.pack(">Q", seq) + padding, partition=0, on_delivery=delivered)
            producer.flush(30)
            receiver.wait_for(seq, 30)
        requests0 = request_counts(leader)["Produce"]
        start = time.perf_counter()
        for seq in range(LATENCY_WARMUP, total):
            if rate > 0:
                due = start + (seq - LATENCY_WARMUP) / rate
                while (now := time.perf_counter()) < due:
                    producer.poll(due - now)
            sent_at[seq] = time.perf_counter_ns()
            producer.produce(topic, struct.pack(">Q", seq) + padding, partition=0, on_delivery=delivered)
            if rate <= 0:
                deadline = time.monotonic() + 30
                while seq not in acked_at and time.monotonic() < deadline and len(failures) < 100:
                    producer.poll(0.1)
                receiver.wait_for(seq, 30)
        producer.flush(30)
        receiver.wait_count(total, 30)
        elapsed = time.perf_counter() - start
        produce_requests = request_counts(leader)["Produce"] - requests0
    finally:
        del producer
        receiver.stop()
    keys = range(LATENCY_WARMUP, total)
    ack_us = [(acked_at[s] - sent_at[s]) / 1000 for s in keys if s in acked_at]
    recv_us = [(receiver.received[s] - sent_at[s]) / 1000 for s in keys if s in receiver.received]
    quarter = max(1, len(ack_us) // 4)
    return {
        "acks": acks,
        "topic": topic,
        "mode": "one at a time" if rate <= 0 else f"open loop {rate:g}/s",
        "samples": samples,
        "achieved_rate_per_s": samples / elapsed,
        "leader_produce_requests": produce_requests,
        "messages_per_produce_request": samples / produce_requests if produce_requests else None,
        "send_to_ack_p50_first_quarter_us": percentile(ack_us[:quarter], 50),
        "send_to_ack_p50_last_quarter_us": percentile(ack_us[-quarter:], 50),
        "send_to_ack_us": distribution(ack_us),
        "send_to_consumer_us": distribution(recv_us),
        "missing_acks": samples - len(ack_us),
        "missing_receipts": samples - len(recv_us),
        "delivery_failures": failures[:5],
        "consumer_errors": receiver.errors[:5],
        "raw_send_to_ack_us": [round(v) for v in ack_us],
        "raw_send_to_consumer_us": [round(v) for v in recv_us],
    }


def distribution(values: list[float]) -> dict[str, float]:
    """Percentiles by nearest rank (bench/long_poll.py's), so the two latency benches read alike."""
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


# -- follower catch-up -------------------------------------------------------------------------------


@dataclass
class SizeSampler:
    """A thread sampling one replica's log size until it reaches ``target`` bytes (or is stopped)."""

    broker: ClusterBroker
    topic: str
    target: int
    trace: list[tuple[float, int]] = field(default_factory=list)
    """(perf_counter seconds, bytes) at every change of size, and the first sample."""
    done_at: float | None = None
    on_done: Callable[[], object] | None = None
    """Called in the sampler's thread the moment the target is reached (to read CPU meters then)."""
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> SizeSampler:
        self._thread = threading.Thread(target=self._run, name="catch-up-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        last = -1
        while not self._stopping.is_set():
            now = time.perf_counter()
            size = self.broker.log_size(self.topic, 0)
            if size != last:
                self.trace.append((now, size))
                last = size
            if size == self.target:
                self.done_at = now
                if self.on_done is not None:
                    self.on_done()
                return
            time.sleep(SAMPLE_INTERVAL_S)

    def wait(self, timeout_s: float) -> bool:
        assert self._thread is not None
        self._thread.join(timeout_s)
        return self.done_at is not None

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)


def catch_up(cluster: KiplingCluster, mb: float, acks: str, sig: int, max_s: float) -> dict[str, Any]:
    """Stop broker 3, produce ``mb`` MB without it, restart it and time it back to the leader's log end."""
    leader, follower = cluster.brokers[LEADER], cluster.brokers[RESTARTED]
    live = ",".join(b.bootstrap for n, b in cluster.brokers.items() if n != RESTARTED)
    admin = AdminClient(client_base(live))
    settle(cluster)
    before_stop = follower.log_size(RF3_TOPIC, 0)
    t_stop = time.perf_counter()
    follower.stop(sig=sig)
    stopped_s = time.perf_counter() - t_stop
    shrink_s = wait_until(lambda: RESTARTED not in isr(admin, RF3_TOPIC), 90, "the ISR to shrink", 0.05)
    print(
        f"  broker {RESTARTED} stopped ({signal.Signals(sig).name}) in {stopped_s:.2f}s, "
        f"out of the ISR {shrink_s:.2f}s later; producing {mb:g} MB with acks={acks}...",
        flush=True,
    )
    produced = produce(live, RF3_TOPIC, acks, mb, max_s, cluster.total_cpu_seconds)
    other_settle_s = settle(cluster, nodes=(1,))
    target = leader.log_size(RF3_TOPIC, 0)
    at_restart = follower.log_size(RF3_TOPIC, 0)
    down_s = time.perf_counter() - t_stop
    leader_cpu0 = leader.total_cpu_seconds()
    output_lines0 = len(follower.log_path.read_text(errors="replace").splitlines())
    cpu_at_done: dict[str, float] = {}

    def read_cpu() -> None:
        with contextlib.suppress(Exception):  # the broker may still be starting: no follower pids yet
            cpu_at_done["restarted"] = follower.total_cpu_seconds()
            cpu_at_done["followers"] = sum(process_cpu_seconds(p) for p in follower.follower_pids())
            cpu_at_done["leader"] = leader.total_cpu_seconds() - leader_cpu0

    sampler = SizeSampler(follower, RF3_TOPIC, target, on_done=read_cpu).start()
    t0 = time.perf_counter()
    try:
        follower.start(timeout_s=120)
        t_listen = time.perf_counter()
        cluster.wait_registered(120)
        t_registered = time.perf_counter()
        caught_up = sampler.wait(300)
        wait_until(lambda: RESTARTED in isr(admin, RF3_TOPIC), 120, "the follower back in the ISR", 0.05)
        t_isr = time.perf_counter()
    finally:
        sampler.stop()
    if not caught_up or sampler.done_at is None:
        raise RuntimeError(f"broker {RESTARTED} did not reach {target} bytes: {sampler.trace[-3:]}")
    first_change, first_size = next(
        ((t, size) for t, size in sampler.trace if size != at_restart), (sampler.done_at, target)
    )
    lowest = min(size for _, size in sampler.trace)
    behind = target - at_restart
    fetched = target - lowest  # bytes appended after restart (more than ``behind`` if it truncated)
    # the rate counts from the first change seen: the bytes that arrived with it took unseen time
    fetch_s, fetch_bytes = sampler.done_at - first_change, target - first_size
    metrics_text = follower.metrics_text()
    digests = {n: log_digest(cluster.brokers[n], RF3_TOPIC) for n in (LEADER, 1, RESTARTED)}
    new_lines = follower.log_path.read_text(errors="replace").splitlines()[output_lines0:]
    return {
        "stop_signal": signal.Signals(sig).name,
        "produce_while_down": produced,
        "produce_acks": acks,
        "stop_seconds": stopped_s,
        "isr_shrink_after_stop_s": shrink_s,
        "other_follower_settle_s": other_settle_s,
        "down_seconds": down_s,
        "follower_bytes_at_stop": before_stop,
        "follower_bytes_at_restart": at_restart,
        "leader_bytes": target,
        "bytes_behind": behind,
        "lowest_bytes_after_restart": lowest,
        "bytes_fetched": fetched,
        "timeline_s": {
            "listening": t_listen - t0,
            "in_metadata": t_registered - t0,
            "first_byte": first_change - t0,
            "caught_up": sampler.done_at - t0,
            "in_isr": t_isr - t0,
        },
        "catch_up_mb_per_s_fetching": fetch_bytes / MB / fetch_s if fetch_s > 0 else None,
        "catch_up_rate_window": {"seconds": fetch_s, "bytes": fetch_bytes},
        "catch_up_mb_per_s_from_restart": fetched / MB / (sampler.done_at - t0),
        "restarted_broker_cpu_s_until_caught_up": cpu_at_done.get("restarted"),
        "restarted_follower_processes_cpu_s_until_caught_up": cpu_at_done.get("followers"),
        "leader_cpu_s_during_catch_up": cpu_at_done.get("leader"),
        "follower_lag_gauge_after": metric_sum(metrics_text, CONSUMER_LAG),
        "follower_fetcher_bytes_counter": metric_sum(metrics_text, FETCHER_BYTES),
        "replicas_identical": len(set(digests.values())) == 1,
        "registration_refusals": sum("DUPLICATE_BROKER_REGISTRATION" in line for line in new_lines),
        "trace": downsample([(t - t0, size) for t, size in sampler.trace], 400),
    }


def metric_sum(text: str, name: str) -> float:
    """A /metrics sample summed over its label sets (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def downsample(points: list[tuple[float, int]], limit: int) -> list[tuple[float, int]]:
    """At most ``limit`` + 1 points of a trace, the last kept: enough to plot, small enough for JSON."""
    if len(points) <= limit:
        return points
    step = len(points) / limit
    return [points[int(i * step)] for i in range(limit)] + [points[-1]]


# -- output ------------------------------------------------------------------------------------------


def print_throughput(results: dict[str, Any], ratios: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"\nProducer throughput: confluent-kafka, linger 5 ms, 1 MB batches, 1 KiB values, one partition, "
        f"up to {args.mb:g} MB or {args.max_seconds:g} s per phase, {args.rounds} rounds interleaved"
    )
    header = (
        f"{'case':<26} {'MB/s med':>9} {'MB/s best':>10} {'msgs/s med':>11} {'CPU-s/GB':>9} "
        f"{'cores':>6} {'client CPU-s/GB':>16} {'msgs/req':>9} {'fetches/MB':>11} {'repl. lag s':>12}"
    )
    print(header)
    print("-" * len(header))
    for key, res in results.items():
        lag = res.get("followers_caught_up_after_s_median")
        fetches = res["follower_fetches_per_mb_median"]
        fetch_text = f"{fetches:.1f}" if fetches is not None and CASES[key].topic == RF3_TOPIC else ""
        print(
            f"{CASES[key].label:<26} {res['mb_per_s_median']:>9,.0f} {res['mb_per_s_best']:>10,.0f} "
            f"{res['msgs_per_s_median']:>11,.0f} {_num(res['broker_cpu_s_per_gb_median']):>9.2f} "
            f"{res['broker_cores_busy_median']:>6.2f} {res['client_cpu_s_per_gb_median']:>16.2f} "
            f"{_num(res['messages_per_produce_request_median']):>9,.0f} "
            f"{fetch_text:>11} "
            f"{'' if lag is None else f'{lag:.2f}':>12}"
        )
    for key, res in results.items():
        split = res.get("cluster_cpu_s_per_gb_by_process_median")
        if split and CASES[key].topic == RF3_TOPIC:
            parts = ", ".join(f"{name} {value:.2f}" for name, value in split.items())
            print(f"  CPU-s/GB by process, {CASES[key].label}: {parts}")
    for name, r in ratios.items():
        if r is not None:
            rounds = ", ".join(f"{x:.2f}" for x in r["per_round"])
            print(f"ratio {name}: {r['mb_per_s_median_of_rounds']:.2f}x (median; per round: {rounds})")
    print(
        "CPU-s/GB: every broker + follower process of the cluster (or the single node), from the first "
        "send until both followers held every byte, per GB acked; cores: during the produce only;\n"
        "msgs/req: records per Produce request and fetches/MB: follower Fetch requests per MB, both "
        "counted at the leader; repl. lag s: after the last ack, until both followers held the leader's bytes"
    )


def _num(value: float | None) -> float:
    """NaN for a figure that could not be measured, so a table row still formats."""
    return float("nan") if value is None else value


def print_latency(runs: list[dict[str, Any]]) -> None:
    print(
        "\nEnd-to-end latency, ms: 1 KiB records, linger.ms=0, librdkafka's default in-flight requests; "
        "send = produce() call, consumer on the leader; rate/s = records / (first send .. last receipt); "
        "msgs/req = records per Produce request at the leader"
    )
    header = (
        f"{'case':<36} {'n':>5} {'rate/s':>7} {'msgs/req':>8} | {'send→ack p50':>12} {'p90':>7} "
        f"{'p99':>7} {'max':>7} | {'send→consumer p50':>17} {'p90':>7} {'p99':>7} {'max':>7}"
    )
    print(header)
    print("-" * len(header))
    for run in runs:
        a, c = run["send_to_ack_us"], run["send_to_consumer_us"]
        label = f"acks={run['acks']} {run['label']}, {run['mode']}"
        per_request = run["messages_per_produce_request"]
        print(
            f"{label:<36} {a['count']:>5} {run['achieved_rate_per_s']:>7,.0f} "
            f"{per_request if per_request is not None else float('nan'):>8.2f} | {a['p50'] / 1000:>12.2f} "
            f"{a['p90'] / 1000:>7.2f} {a['p99'] / 1000:>7.2f} {a['max'] / 1000:>7.1f} | "
            f"{c['p50'] / 1000:>17.2f} {c['p90'] / 1000:>7.2f} {c['p99'] / 1000:>7.2f} "
            f"{c['max'] / 1000:>7.1f}"
        )
        first, last = run["send_to_ack_p50_first_quarter_us"], run["send_to_ack_p50_last_quarter_us"]
        if last > 2 * first and last > 5000:
            print(
                f"  not stable: send→ack p50 grew from {first / 1000:.1f} ms (first quarter) to "
                f"{last / 1000:.1f} ms (last quarter): the offered rate is above what this path sustains"
            )
        missing = run["missing_acks"] + run["missing_receipts"] + len(run["delivery_failures"])
        if missing:
            print(
                f"  missing: {run['missing_acks']} acks, {run['missing_receipts']} receipts, "
                f"failures {run['delivery_failures']}"
            )


def print_catch_up(res: dict[str, Any]) -> None:
    tl = res["timeline_s"]
    produced = res["produce_while_down"]
    print(
        f"\nFollower catch-up: broker {RESTARTED} stopped with {res['stop_signal']} "
        f"(out of the ISR {res['isr_shrink_after_stop_s']:.2f} s later), {produced['mb']:.0f} MB produced "
        f"with acks={res['produce_acks']} at {produced['mb_per_s']:.0f} MB/s by 2 replicas, "
        f"restarted {res['down_seconds']:.1f} s after the stop"
    )
    names = {
        "listening": "listening",
        "in_metadata": "in Metadata",
        "first_byte": "first byte",
        "caught_up": "caught up",
        "in_isr": "in ISR",
    }
    events = sorted(tl.items(), key=lambda item: item[1])
    steps = " → ".join(f"{names[k]} {v:.2f} s" for k, v in events)
    print(f"  restart → {steps} (seconds from the restart)")
    fetching = res["catch_up_mb_per_s_fetching"]
    print(
        f"  {res['bytes_fetched'] / MB:.1f} MB fetched "
        f"({res['bytes_behind'] / MB:.1f} MB behind at restart): "
        f"{fetching if fetching is not None else float('nan'):.0f} MB/s from first byte to caught up, "
        f"{res['catch_up_mb_per_s_from_restart']:.0f} MB/s from the restart"
    )
    print(
        "  CPU from the restart until caught up: restarted broker (start-up included) + its follower "
        f"process {_num(res['restarted_broker_cpu_s_until_caught_up']):.2f} s, of which the follower "
        f"process {_num(res['restarted_follower_processes_cpu_s_until_caught_up']):.2f} s; "
        f"leader {_num(res['leader_cpu_s_during_catch_up']):.2f} s; lag gauge after: "
        f"{res['follower_lag_gauge_after']:.0f}; replicas byte-identical: {res['replicas_identical']}"
    )
    late = tl["in_isr"] - max(tl["caught_up"], tl["in_metadata"])
    if late > ISR_NOTE_S:
        print(
            f"  note: back in the ISR {late:.1f} s after it was both caught up and listed in Metadata "
            "(unfencing takes a heartbeat; see bench/README.md for the rest)"
        )
    if res["registration_refusals"]:
        print(
            f"  note: the restarted broker's registration was refused {res['registration_refusals']} times "
            "(DUPLICATE_BROKER_REGISTRATION) until its old session expired"
        )


# -- main --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def running(brokers: list[KiplingCluster | KiplingProcess]) -> Iterator[None]:
    """Clean every cluster and broker up on the way out, whatever happened."""
    try:
        yield
    finally:
        gc.collect()  # destroy clients first, so they do not log refused connections to stopped brokers
        for item in brokers:
            with contextlib.suppress(Exception):
                item.cleanup()


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` options as broker overrides (Kafka's key names, as ``--override``)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set wants KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--mb", type=float, default=200, help="MB per throughput phase at most (200)")
    parser.add_argument("--max-seconds", type=float, default=20.0, help="seconds per phase at most (20)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the throughput cases")
    parser.add_argument("--cases", default=",".join(CASES), help=f"throughput cases ({', '.join(CASES)})")
    parser.add_argument("--no-single", action="store_true", help="no single-node broker")
    parser.add_argument("--latency-samples", type=int, default=2000, help="records per latency run")
    parser.add_argument(
        "--latency-rates", default="250,1000", help="open-loop rates/s, comma-separated ('' or 0: none)"
    )
    parser.add_argument(
        "--catchup-mb", type=float, default=200, help="MB produced while the follower is down"
    )
    parser.add_argument("--catchup-acks", default="-1", help="acks of that produce (-1 or 1)")
    parser.add_argument("--stop-signal", choices=("term", "kill"), default="term", help="how to stop it")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency runs")
    parser.add_argument("--no-catchup", action="store_true", help="skip the follower catch-up phase")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    parser.add_argument("--keep-dir", action="store_true", help="keep the brokers' directories and logs")
    args = parser.parse_args()
    case_keys = [k for k in args.cases.split(",") if k]
    unknown = [k for k in case_keys if k not in CASES]
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; known: {list(CASES)}")
    if args.no_single:
        case_keys = [k for k in case_keys if CASES[k].target != "single"]
    settings = parse_settings(args.set)
    exit_on_termination()

    cluster = KiplingCluster(settings=settings, keep_dir=args.keep_dir)
    single = None
    if not args.no_single:  # in the cluster's directory: removed with it unless --keep-dir
        single = KiplingProcess(cluster.work_dir / "single-node", overrides=settings or None)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    latency: list[dict[str, Any]] = []
    catch: dict[str, Any] | None = None
    problems: dict[str, list[str]] = {}
    everything: list[KiplingCluster | KiplingProcess] = [cluster] + ([single] if single else [])
    with running(everything):
        print(
            f"starting 3 brokers in {cluster.work_dir}" + (" and a single node" if single else ""), flush=True
        )
        cluster.start()
        if single is not None:
            single.start()
            create_topic(single.bootstrap, SINGLE_TOPIC, None, 1)
        create_topic(cluster.bootstrap, RF3_TOPIC, RF3_REPLICAS, 2)
        create_topic(cluster.bootstrap, RF1_TOPIC, [LEADER], 1)
        brokers = Brokers(cluster, single)
        for key in case_keys:  # compile codecs, open connections and segments, fault in code
            case = CASES[key]
            print(f"  warm-up: {case.label}", flush=True)
            produce(brokers.bootstrap(case), case.topic, case.acks, WARMUP_MB, 30, brokers.cpu(case))
        rounds: dict[str, list[dict[str, Any]]] = {k: [] for k in case_keys}
        for r in range(args.rounds):
            order = case_keys[r % len(case_keys) :] + case_keys[: r % len(case_keys)] if case_keys else []
            for key in order:
                res = run_case(brokers, CASES[key], args.mb, args.max_seconds)
                print(
                    f"  round {r + 1}: {CASES[key].label:<26} {res['mb_per_s']:>6,.0f} MB/s "
                    f"{res['mb']:>5,.0f} MB in {res['seconds']:.1f} s",
                    flush=True,
                )
                rounds[key].append(res)
        results = {k: summarize_case(v) for k, v in rounds.items() if v}

        settle(cluster)
        rates = [float(r) for r in args.latency_rates.split(",") if r and float(r) > 0]
        latency_cases = [
            ("RF3", RF3_TOPIC, "-1", 0.0),
            *[("RF3", RF3_TOPIC, "-1", rate) for rate in rates],
            ("RF1", RF1_TOPIC, "1", 0.0),
        ]
        if args.no_latency:
            latency_cases = []
        for label, topic, acks, rate in latency_cases:
            print(
                f"  latency: acks={acks} {label}, {'one at a time' if rate <= 0 else f'{rate:g}/s'}",
                flush=True,
            )
            leader = cluster.brokers[LEADER]
            run = latency_run(cluster.bootstrap, topic, acks, args.latency_samples, rate, leader)
            run["label"] = label
            latency.append(run)

        if not args.no_catchup:
            sig = signal.SIGKILL if args.stop_signal == "kill" else signal.SIGTERM
            catch = catch_up(cluster, args.catchup_mb, args.catchup_acks, sig, args.max_seconds * 3)
        gc.collect()
        for node, broker in cluster.brokers.items():
            problems[f"broker-{node}"] = broker.problem_lines()
        if single is not None:
            problems["single"] = problem_lines(single.log_path)
    total_s = time.perf_counter() - started

    ratios = {
        "acks=-1 RF3 / acks=1 RF1": ratio(results, "rf3-all", "rf1-1"),
        "acks=-1 RF3 / acks=1 single node": ratio(results, "rf3-all", "single-1"),
        "acks=1 RF3 / acks=1 RF1": ratio(results, "rf3-1", "rf1-1"),
    }
    print(
        f"\nkipling, 3 brokers on loopback (broker 1 hosts the controller), {os.cpu_count()} CPUs; "
        f"RF3 topic replicas {RF3_REPLICAS} (leader {LEADER}), min.insync.replicas=2; RF1 topic on broker "
        f"{LEADER}; default flush policy (no fsync per append: page cache); total {total_s:.0f} s"
    )
    if results:
        print_throughput(results, ratios, args)
    if latency:
        print_latency(latency)
    if catch is not None:
        print_catch_up(catch)
    print("\nBroker output at WARNING and above:")
    for name, lines in problems.items():
        refusals = sum("DUPLICATE_BROKER_REGISTRATION" in line for line in lines)
        others = [line for line in lines if "DUPLICATE_BROKER_REGISTRATION" not in line]
        print(f"  {name}: {len(others)} lines" + (f" (+{refusals} registration refused)" if refusals else ""))
        for line in others[:5]:
            print(f"    {line[:160]}")
    out = write_results(
        "replication",
        {
            "storage": "disk, default flush policy (no fsync per append)",
            "client": "confluent-kafka (librdkafka)",
            "value_bytes": VALUE_SIZE,
            "cluster": {
                "brokers": 3,
                "controller": "broker 1 (broker,controller)",
                "settings": cluster.settings,
                "rf3_topic": {"replicas": RF3_REPLICAS, "min_insync_replicas": 2},
                "rf1_topic": {"replicas": [LEADER]},
            },
            "options": vars(args),
            "producer_config": {
                k: v for k, v in producer_config("", "1").items() if k != "bootstrap.servers"
            },
            "throughput": results,
            "ratios": ratios,
            "latency": latency,
            "catch_up": catch,
            "broker_problem_lines": {k: v[:50] for k, v in problems.items()},
            "librdkafka_log_lines": rdkafka_lines[:50],
            "total_seconds": total_s,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    try:
        main()
    except KafkaException as exc:
        raise SystemExit(f"client error: {exc}") from exc
