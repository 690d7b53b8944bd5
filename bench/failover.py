"""Failover: how long acks=all writes stall when a partition leader or the active controller is SIGKILLed.

A three-node kipling cluster of real processes on loopback (bench/cluster_proc.py): every node is a
combined broker and controller voter (``process.roles=broker,controller``, a CONTROLLER listener
each, ``controller.quorum.voters`` naming all three), so the metadata quorum (Raft) elects one of them
leader, the active controller, and survives the loss of any one. Kafka's default broker session:
``broker.session.timeout.ms=9000`` and ``broker.heartbeat.interval.ms=2000``, as
config/cluster/*.properties and the dev cluster run. Which voter leads is asked with DescribeQuorum
(api 55, v2) on each voter's controller port: only the leader answers without an error. Two modes,
``--victim``:

* ``leader`` (default): the victim leads the round's partition and is **not** the active controller;
  the two nodes that are not the controller are killed in turn, replica assignment [victim, other,
  controller]. The metadata quorum keeps its leader: this is a broker failover.
* ``controller``: the victim is the active controller, made to lead the round's partition with the
  replica assignment [controller, other, other]; the quorum elects another leader, which then fences
  the dead broker and moves the partition. The controller moves at every kill, so the victim is
  whichever voter leads when the round starts (and is checked again just before the kill).

Each round (``--kills``, default 20):

1. The active controller is found; a new topic, one partition, replication factor 3,
   ``min.insync.replicas=2``, is created with the mode's replica assignment, so the victim leads it
   (waited for in Metadata, full ISR).
2. A confluent-kafka producer (acks=all, ``enable.idempotence=true``, retries unbounded, a 120 s
   delivery timeout that rides out any failover, linger 5 ms, librdkafka's defaults otherwise) sends
   a steady stream (``--rate``, 200 records/s of 12-byte values) from a thread; its delivery
   callback timestamps every ack (``perf_counter``, the clock of the whole bench).
3. After ``--steady-s`` of acks, the victim is SIGKILLed: the broker process and, right after, its
   follower processes (a machine crash; ``ClusterBroker.stop`` then only reaps them). A broker runs
   follower processes only for partitions it follows, so in the first round the victim may have none
   (earlier rounds' topics give it some later). Measured from the kill:
   (a) **resume**: until the first ack of a record produced after the kill;
   (b) **longest gap** between two consecutive acks, from ``--steady-s`` before the kill until the
       victim is restarted (the gap that spans the kill, unless a later one is longer; it can end
       up a little shorter than (a) when an ack already on its way at the kill is read just after);
   and, to split (a): until Metadata (asked of the live brokers every 50 ms) names a new leader;
   the rest of (a) is the producer (librdkafka) learning that leader and its retries getting through.
   When the victim was the active controller, also **controller failover**: until a surviving voter
   answers DescribeQuorum as leader of a higher epoch than the one at the kill (each survivor polled
   every 50 ms by a thread of its own). The new leader in Metadata comes after it: the new controller
   still has to fence the dead broker and elect the partition's leader.
4. ``--after-s`` after the first post-kill ack the victim is restarted (same directory), and the
   round waits until it is registered, the partition's ISR is whole again (three replicas in
   Metadata) and, the victim being a voter, the quorum leader's DescribeQuorum shows its metadata log
   at the leader's high watermark: restart → ISR whole, restart → voter caught up and the longest ack
   gap over that time are recorded too. A kipling broker listens only once the controller has
   unfenced it, so the restart figures include that. The stream goes on for another second, then the
   producer flushes (every record sent gets an outcome).
5. The partition is read from the beginning (a consumer up to the high watermark) and compared with
   the acks: **lost** = acknowledged values not in the log, **duplicated** = extra copies of a value,
   **moved** = acknowledged values found at another offset than the ack said. After the last round
   every round's partition is read again, since later kills hit its replicas too.

The figures are measured, never asserted: the bench prints a table per round and p50/p90/p99/max
(nearest rank, as bench/long_poll.py) of each figure (controller failover only over rounds that
killed the controller), notes rounds where the controller moved when the mode did not intend it, and
writes ``bench/results/failover-<victim>.json`` (``failover-leader.json``, ``failover-controller.json``:
one file per mode, so a run of one mode keeps the other's figures). Each round takes about 15 s
(controller rounds a little more), so the default 20 kills about 5-6 minutes. Every broker and
follower process is stopped on exit, Ctrl-C, SIGTERM or SIGHUP; ``--keep-dir`` keeps the cluster's
directory, where each broker writes its output to ``broker-N/broker-N.out`` (the bench marks its
starts and kills there).

Run from the repository root:
``python -m bench.failover [--victim leader|controller] [--kills N] [--set KEY=VALUE ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import os
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from bench import write_results
from bench.client_logs import client_base, exit_on_termination, rdkafka_lines
from bench.cluster_proc import ClusterBroker, KiplingCluster, QuorumState, wait_until
from bench.long_poll import percentile
from bench.throughput import consumer_config

MODES = ("leader", "controller")
"""``--victim``: the partition leader that is not the active controller, or the active controller."""
PARTITION = 0
METADATA_POLL_S = 0.05
QUORUM_POLL_S = 0.05
"""Period of the DescribeQuorum polls of each surviving voter after the kill."""
TIMEOUT_S = 120.0
"""Upper bound for every wait of a round (start-up, resume, ISR): a timeout means a broken failover."""
PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "retries": 2_147_483_647,
    "delivery.timeout.ms": 120_000,
    "linger.ms": 5,
    "socket.nagle.disable": True,
}
"""Producer settings besides the bootstrap list (``--producer-set`` adds or replaces keys)."""

# -- the producer ------------------------------------------------------------------------------------


class SteadyProducer(threading.Thread):
    """Sends ``rate`` records/s to partition 0 on a fixed schedule; every ack is timestamped.

    The schedule is open-loop: ``produce`` never blocks, so records keep being sent (and queue in
    librdkafka) while the partition has no leader, and the first record sent after the kill is known.
    Delivery callbacks run in this thread (inside ``poll``/``flush``), so the dictionaries are written
    by it alone; the main thread reads them under the lock.
    """

    def __init__(self, bootstrap: str, topic: str, rate: float, tag: str, extra: dict[str, Any]) -> None:
        super().__init__(name=f"producer-{topic}", daemon=True)
        self.topic = topic
        self.interval = 1.0 / rate
        self.tag = tag
        self.config = {**client_base(bootstrap), **PRODUCER_CONFIG, **extra}
        self.sent_at: list[float] = []
        """Index = sequence number: when ``produce`` was called."""
        self.acked: dict[int, tuple[float, int]] = {}
        """Sequence number → (ack time, offset)."""
        self.failed: dict[int, str] = {}
        self.errors: list[str] = []
        self.unflushed = -1
        self.lock = threading.Lock()
        self._stopping = threading.Event()

    def value(self, seq: int) -> bytes:
        return f"{self.tag}-{seq:08d}".encode()

    def seq_of(self, value: bytes) -> int:
        return int(value.rsplit(b"-", 1)[1])

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        now = time.perf_counter()
        seq = self.seq_of(msg.value() or b"-0")
        with self.lock:
            if err is None:
                self.acked[seq] = (now, msg.offset() or 0)
            else:
                self.failed[seq] = str(err)

    def run(self) -> None:
        producer = Producer(
            {
                **self.config,
                "error_cb": lambda e: self.errors.append(str(e)) if len(self.errors) < 20 else None,
            }
        )
        try:
            due = time.perf_counter()
            while not self._stopping.is_set():
                now = time.perf_counter()
                if now < due:
                    producer.poll(due - now)
                    continue
                if now - due > 1.0:  # this thread was starved for a second: do not send a burst
                    due = now
                seq = len(self.sent_at)
                at = time.perf_counter()
                try:
                    producer.produce(
                        self.topic, self.value(seq), partition=PARTITION, on_delivery=self._delivered
                    )
                except BufferError:
                    producer.poll(0.01)
                    continue
                with self.lock:
                    self.sent_at.append(at)
                due += self.interval
                producer.poll(0)
            self.unflushed = producer.flush(TIMEOUT_S)
        finally:
            del producer

    def ack_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def first_ack_of_sent_after(self, t: float) -> float | None:
        """Earliest ack time of a record whose ``produce`` came after ``t`` (None: none yet)."""
        with self.lock:
            times = [a for seq, (a, _) in self.acked.items() if self.sent_at[seq] > t]
        return min(times) if times else None

    def request_stop(self) -> None:
        """Stop sending; the thread then flushes (every record sent gets its outcome) and ends."""
        self._stopping.set()

    def stop(self) -> None:
        self.request_stop()
        self.join(TIMEOUT_S + 30)
        if self.is_alive():
            raise RuntimeError(f"producer of {self.topic} did not finish flushing")


def longest_gap(ack_times: list[float], start: float, end: float) -> tuple[float, float]:
    """Longest interval between consecutive acks in [start, end], the window's edges included.

    Returns (gap seconds, when it began). The edges count as acks, so a window with no ack at all
    reports its whole length rather than nothing.
    """
    points = [start, *sorted(t for t in ack_times if start <= t <= end), end]
    best, began = 0.0, start
    for a, b in itertools.pairwise(points):
        if b - a > best:
            best, began = b - a, a
    return best, began


class QuorumWatch:
    """After a kill of the active controller: when a surviving voter first leads a later epoch.

    One thread per surviving voter sends it DescribeQuorum every ``QUORUM_POLL_S`` (a voter answers
    without an error only while it leads), so a voter slow to answer does not delay seeing another.
    ``found`` is (time the answer arrived, leader, epoch) of the first answer with an epoch above
    ``above_epoch``.
    """

    def __init__(self, cluster: KiplingCluster, nodes: list[int], above_epoch: int) -> None:
        self.cluster = cluster
        self.above_epoch = above_epoch
        self.found: tuple[float, int, int] | None = None
        self.polls = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._poll, args=(node,), name=f"quorum-{node}", daemon=True)
            for node in nodes
        ]

    def start(self) -> QuorumWatch:
        for thread in self._threads:
            thread.start()
        return self

    def _poll(self, node: int) -> None:
        while not self._stopping.is_set():
            began = time.perf_counter()
            answer = self.cluster.describe_quorum(node, timeout_s=1.0)
            now = time.perf_counter()
            with self._lock:
                self.polls += 1
                if answer is not None and answer.epoch > self.above_epoch:
                    if self.found is None or now < self.found[0]:
                        self.found = (now, answer.leader, answer.epoch)
                    self._stopping.set()
                    return
            self._stopping.wait(max(0.0, QUORUM_POLL_S - (time.perf_counter() - began)))

    def result(self) -> tuple[float, int, int] | None:
        with self._lock:
            return self.found

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(5.0)


# -- cluster helpers ---------------------------------------------------------------------------------


def quorum_leader_state(cluster: KiplingCluster, first: int | None = None) -> QuorumState | None:
    """DescribeQuorum of whichever live voter leads now (``first`` asked first); None if none does."""
    order = sorted(cluster.voters, key=lambda n: n != first)
    for node in order:
        if cluster.brokers[node].alive():
            state = cluster.describe_quorum(node, timeout_s=1.0)
            if state is not None:
                return state
    return None


def choose_replicas(cluster: KiplingCluster, number: int, mode: str) -> tuple[list[int], int, int]:
    """(replicas, active controller, its epoch) for round ``number``: the victim is replicas[0].

    ``leader``: the two nodes that are not the active controller lead in turn, [victim, other,
    controller]. ``controller``: the active controller leads, [controller, other, other], the two
    others swapping places from round to round.
    """
    controller, epoch = cluster.active_controller(timeout_s=TIMEOUT_S)
    others = sorted(n for n in cluster.brokers if n != controller)
    if number % 2 == 0:
        others.reverse()
    replicas = [controller, *others] if mode == "controller" else [*others, controller]
    return replicas, controller, epoch


def create_topic(admin: AdminClient, topic: str, replicas: list[int]) -> None:
    """One partition with ``replicas`` (first = leader), min ISR 2; wait for that leader and a full ISR."""
    new = NewTopic(
        topic, num_partitions=1, replica_assignment=[replicas], config={"min.insync.replicas": "2"}
    )
    for future in admin.create_topics([new]).values():
        future.result(timeout=60)
    wait_until(
        lambda: partition_state(admin, topic) == (replicas[0], len(replicas)),
        60,
        f"{topic} to be led by {replicas[0]} with a full ISR",
        0.1,
    )


def partition_state(admin: AdminClient, topic: str) -> tuple[int, int] | None:
    """(leader, ISR size) of partition 0 as some live broker's Metadata gives it; None on no answer."""
    with contextlib.suppress(KafkaException):
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None and PARTITION in meta.partitions:
            p = meta.partitions[PARTITION]
            return p.leader, len(p.isrs)
    return None


def sigkill_with_followers(broker: ClusterBroker) -> tuple[float, int]:
    """SIGKILL the broker process, then its follower processes at once; returns (kill time, followers)."""
    followers = broker.follower_pids()
    pid = broker.pid
    t_kill = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    for child in followers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    broker.stop(sig=signal.SIGKILL)  # reaps the process; kills any follower left (none by now)
    return t_kill, len(followers)


def read_partition(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    """Every (offset, value) of partition 0 from the beginning up to its high watermark."""
    consumer = Consumer({**consumer_config(bootstrap), **client_base(bootstrap)})
    out: list[tuple[int, bytes]] = []
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, PARTITION), timeout=30)
        consumer.assign([TopicPartition(topic, PARTITION, OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT_S
        while high > 0 and consumer.position([TopicPartition(topic, PARTITION)])[0].offset < high:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: read {len(out)} records, high watermark {high}")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                raise KafkaException(msg.error())
            out.append((msg.offset() or 0, msg.value() or b""))
    finally:
        consumer.close()
    return out


def check_log(producer: SteadyProducer, log: list[tuple[int, bytes]]) -> dict[str, int]:
    """Compare the partition with the acks: lost, duplicated, moved; unacknowledged values present."""
    with producer.lock:
        acked = {seq: offset for seq, (_, offset) in producer.acked.items()}
    found: dict[int, list[int]] = {}
    foreign = 0
    for offset, value in log:
        if not value.startswith(producer.tag.encode() + b"-"):
            foreign += 1
            continue
        found.setdefault(producer.seq_of(value), []).append(offset)
    copies = Counter({seq: len(offsets) for seq, offsets in found.items()})
    return {
        "records_in_log": len(log),
        "acked": len(acked),
        "lost": sum(1 for seq in acked if seq not in found),
        "duplicated": sum(n - 1 for n in copies.values() if n > 1),
        "moved": sum(1 for seq, offset in acked.items() if seq in found and offset not in found[seq]),
        "unacked_present": sum(1 for seq in found if seq not in acked),
        "foreign": foreign,
    }


# -- a round -----------------------------------------------------------------------------------------


@dataclass
class Round:
    number: int
    topic: str
    victim: int = -1
    """Chosen when the round starts: the active controller moves from round to round."""
    figures: dict[str, Any] = field(default_factory=dict)
    producer: SteadyProducer | None = None


def run_round(cluster: KiplingCluster, rnd: Round, args: argparse.Namespace, extra: dict[str, Any]) -> None:
    replicas, controller, epoch = choose_replicas(cluster, rnd.number, args.victim)
    rnd.victim = replicas[0]
    victim = cluster.brokers[rnd.victim]
    admin = AdminClient(client_base(cluster.bootstrap))
    create_topic(admin, rnd.topic, replicas)
    producer = SteadyProducer(cluster.bootstrap, rnd.topic, args.rate, f"r{rnd.number:03d}", extra)
    rnd.producer = producer
    producer.start()
    wait_until(lambda: producer.ack_count() > 0, 60, f"the first ack on {rnd.topic}")
    t_steady = time.perf_counter()
    time.sleep(args.steady_s)

    # who is the active controller right at the kill (it should not have moved since the round began)
    controller_at_kill, epoch_at_kill = cluster.active_controller(timeout_s=TIMEOUT_S)
    survivors = [n for n in cluster.voters if n != rnd.victim]
    t_kill, followers = sigkill_with_followers(victim)
    watch = (
        QuorumWatch(cluster, survivors, epoch_at_kill).start() if controller_at_kill == rnd.victim else None
    )
    live = ",".join(b.bootstrap for n, b in cluster.brokers.items() if n != rnd.victim)
    live_admin = AdminClient(client_base(live))
    new_leader, t_meta = -1, None
    resumed_at = None
    deadline = t_kill + TIMEOUT_S
    while (
        t_meta is None or resumed_at is None or (watch is not None and watch.result() is None)
    ) and time.perf_counter() < deadline:
        if t_meta is None:
            state = partition_state(live_admin, rnd.topic)
            if state is not None and state[0] not in (rnd.victim, -1):
                new_leader, t_meta = state[0], time.perf_counter()
        if resumed_at is None:
            resumed_at = producer.first_ack_of_sent_after(t_kill)
        time.sleep(METADATA_POLL_S)
    elected = None
    if watch is not None:
        watch.stop()
        elected = watch.result()
    if resumed_at is None:
        raise TimeoutError(f"round {rnd.number}: no ack of a record sent after the kill within {TIMEOUT_S}s")
    time.sleep(max(0.0, resumed_at + args.after_s - time.perf_counter()))

    t_restart = time.perf_counter()
    victim.start(timeout_s=TIMEOUT_S)
    t_listening = time.perf_counter()
    cluster.wait_registered(TIMEOUT_S)
    t_registered = time.perf_counter()
    # the ISR whole again, and (a voter) the victim's metadata log caught up with the quorum's
    is_voter = rnd.victim in cluster.voters
    t_isr: float | None = None
    t_voter: float | None = None
    quorum_first = elected[1] if elected is not None else controller_at_kill
    while t_isr is None or (is_voter and t_voter is None):
        if time.perf_counter() - t_restart > TIMEOUT_S:
            raise TimeoutError(
                f"round {rnd.number}: {rnd.topic}'s ISR whole {t_isr is not None}, voter {rnd.victim} "
                f"caught up {t_voter is not None}, {TIMEOUT_S}s after the restart"
            )
        if t_isr is None and (partition_state(live_admin, rnd.topic) or (0, 0))[1] == len(replicas):
            t_isr = time.perf_counter()
        if is_voter and t_voter is None:
            quorum = quorum_leader_state(cluster, quorum_first)
            if quorum is not None and quorum.voter_log_end.get(rnd.victim, -1) >= quorum.high_watermark:
                t_voter = time.perf_counter()
        time.sleep(METADATA_POLL_S)
    time.sleep(1.0)
    t_end = time.perf_counter()
    producer.stop()
    controller_after, epoch_after = cluster.active_controller(timeout_s=TIMEOUT_S)

    with producer.lock:
        ack_times = [a for a, _ in producer.acked.values()]
        first_any = min((a for a in ack_times if a > t_kill), default=None)
        sent, failed = len(producer.sent_at), dict(producer.failed)
        sent_before_kill = sum(1 for s in producer.sent_at if s <= t_kill)
    gap, gap_began = longest_gap(ack_times, t_kill - args.steady_s, t_restart)
    steady_gap, _ = longest_gap(ack_times, t_steady, t_kill)
    restart_gap, _ = longest_gap(ack_times, t_restart, t_end)
    check = check_log(producer, read_partition(cluster.bootstrap, rnd.topic))
    final = partition_state(admin, rnd.topic)
    rnd.figures = {
        "round": rnd.number,
        "topic": rnd.topic,
        "mode": args.victim,
        "replicas": replicas,
        "victim": rnd.victim,
        "follower_processes_killed": followers,
        "controller_at_start": controller,
        "controller_epoch_at_start": epoch,
        "controller_at_kill": controller_at_kill,
        "controller_epoch_at_kill": epoch_at_kill,
        "victim_was_controller": controller_at_kill == rnd.victim,
        "new_controller": None if elected is None else elected[1],
        "new_controller_epoch": None if elected is None else elected[2],
        "controller_failover_s": None if elected is None else elected[0] - t_kill,
        "quorum_polls": None if watch is None else watch.polls,
        "controller_at_end": controller_after,
        "controller_epoch_at_end": epoch_after,
        "new_leader": new_leader,
        "resume_s": resumed_at - t_kill,
        "longest_gap_s": gap,
        "longest_gap_began_s": gap_began - t_kill,
        "first_ack_after_kill_s": None if first_any is None else first_any - t_kill,
        "new_leader_in_metadata_s": None if t_meta is None else t_meta - t_kill,
        "steady_longest_gap_s": steady_gap,
        "restart_after_kill_s": t_restart - t_kill,
        "restart_listening_s": t_listening - t_restart,
        "restart_registered_s": t_registered - t_restart,
        "restart_isr_whole_s": t_isr - t_restart,
        "restart_voter_caught_up_s": None if t_voter is None else t_voter - t_restart,
        "restart_longest_gap_s": restart_gap,
        "leader_at_end": None if final is None else final[0],
        "sent": sent,
        "sent_before_kill": sent_before_kill,
        "delivery_failures": len(failed),
        "delivery_failure_examples": list(failed.values())[:3],
        "unflushed": producer.unflushed,
        "producer_errors": producer.errors[:5],
        **check,
    }


# -- output ------------------------------------------------------------------------------------------


COLUMNS = (
    ("round", "round", 5, None),
    ("victim", "killed", 6, None),
    ("controller_at_kill", "ctrl", 4, None),
    ("new_controller", "new ctrl", 8, None),
    ("controller_failover_s", "ctrl failover s", 15, 2),
    ("new_leader", "new", 4, None),
    ("new_leader_in_metadata_s", "leader in md s", 14, 2),
    ("resume_s", "(a) resume s", 12, 2),
    ("longest_gap_s", "(b) gap s", 9, 2),
    ("steady_longest_gap_s", "steady gap s", 12, 3),
    ("restart_isr_whole_s", "restart→ISR s", 13, 2),
    ("restart_voter_caught_up_s", "restart→voter s", 15, 2),
    ("restart_longest_gap_s", "restart gap s", 13, 2),
    ("acked", "acked", 6, None),
    ("delivery_failures", "failed", 6, None),
    ("lost", "lost", 4, None),
    ("duplicated", "dup", 4, None),
    ("moved", "moved", 5, None),
)
"""Per-round table: figure key, title, width, decimals (None: an integer)."""


def print_rounds(rounds: list[dict[str, Any]]) -> None:
    header = " ".join(f"{title:>{width}}" for _, title, width, _ in COLUMNS)
    print(header)
    print("-" * len(header))
    for r in rounds:
        cells = []
        for key, _, width, decimals in COLUMNS:
            value = r.get(key)
            if value is None:
                cells.append(f"{'-':>{width}}")
            elif decimals is None:
                cells.append(f"{value:>{width}}")
            else:
                cells.append(f"{value:>{width}.{decimals}f}")
        print(" ".join(cells))


def summary(values: list[float]) -> dict[str, float]:
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


# -- main --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def running(cluster: KiplingCluster, rounds: list[Round]) -> Iterator[None]:
    """Stop the producers, then every broker and follower process, whatever happened."""
    try:
        yield
    finally:
        for rnd in rounds:
            if rnd.producer is not None and rnd.producer.is_alive():
                rnd.producer.request_stop()
        gc.collect()
        cluster.cleanup()


def parse_pairs(pairs: list[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"{option} wants KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="rounds, one SIGKILL each (20)")
    parser.add_argument("--rate", type=float, default=200.0, help="records/s of the producer (200)")
    parser.add_argument("--steady-s", type=float, default=3.0, help="acks before the kill, seconds (3)")
    parser.add_argument(
        "--after-s", type=float, default=2.0, help="seconds after the first post-kill ack until restart (2)"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    parser.add_argument(
        "--producer-set", action="append", default=[], metavar="KEY=VALUE", help="producer setting"
    )
    parser.add_argument("--keep-dir", action="store_true", help="keep the brokers' directories and logs")
    parser.add_argument(
        "--victim",
        choices=MODES,
        default="leader",
        help="kill the partition leader that is not the active controller (leader, the default) or the "
        "active controller, made to lead the round's partition (controller)",
    )
    args = parser.parse_args()
    if args.kills < 1 or args.rate <= 0:
        raise SystemExit("--kills must be at least 1 and --rate positive")
    settings = parse_pairs(args.set, "--set")
    extra: dict[str, Any] = dict(parse_pairs(args.producer_set, "--producer-set"))
    exit_on_termination()

    cluster = KiplingCluster(settings=settings, keep_dir=args.keep_dir)
    rounds = [Round(i + 1, f"failover-{i + 1:03d}") for i in range(args.kills)]
    started = time.perf_counter()
    final_checks: dict[str, dict[str, int]] = {}
    problems: dict[str, list[str]] = {}
    session = {k: cluster.settings[k] for k in ("broker.session.timeout.ms", "broker.heartbeat.interval.ms")}
    with running(cluster, rounds):
        print(
            f"starting 3 brokers in {cluster.work_dir} (voters {cluster.voters}: every broker is also a "
            f"controller voter); session {session}; victim: {args.victim}",
            flush=True,
        )
        cluster.start()
        for rnd in rounds:
            run_round(cluster, rnd, args, extra)
            f = rnd.figures
            ctrl = (
                f"active controller (epoch {f['controller_epoch_at_kill']}); new controller "
                f"{f['new_controller']} (epoch {f['new_controller_epoch']}) after "
                + ("-" if f["controller_failover_s"] is None else f"{f['controller_failover_s']:.2f}")
                + " s"
                if f["victim_was_controller"]
                else f"not the controller ({f['controller_at_kill']})"
            )
            print(
                f"  round {rnd.number}: killed broker {rnd.victim} (+{f['follower_processes_killed']} "
                f"follower processes), {ctrl}; "
                f"new leader {f['new_leader']}: resume {f['resume_s']:.2f} s, "
                f"longest gap {f['longest_gap_s']:.2f} s; restarted, ISR whole "
                f"{f['restart_isr_whole_s']:.2f} s later; {f['acked']} acked, {f['lost']} lost, "
                f"{f['duplicated']} duplicated",
                flush=True,
            )
        print("  reading every round's partition again...", flush=True)
        for rnd in rounds:
            assert rnd.producer is not None
            final_checks[rnd.topic] = check_log(rnd.producer, read_partition(cluster.bootstrap, rnd.topic))
        for node, broker in cluster.brokers.items():
            problems[f"broker-{node}"] = broker.problem_lines()
    total_s = time.perf_counter() - started

    figures = [r.figures for r in rounds]
    resume = summary([f["resume_s"] for f in figures])
    gaps = summary([f["longest_gap_s"] for f in figures])
    meta = summary(
        [f["new_leader_in_metadata_s"] for f in figures if f["new_leader_in_metadata_s"] is not None]
    )
    isr_back = summary([f["restart_isr_whole_s"] for f in figures])
    ctrl_failover = summary(
        [f["controller_failover_s"] for f in figures if f["controller_failover_s"] is not None]
    )
    voter_back = summary(
        [f["restart_voter_caught_up_s"] for f in figures if f["restart_voter_caught_up_s"] is not None]
    )
    mismatched = [
        f["round"]
        for f in figures
        if f["victim_was_controller"] != (args.victim == "controller")
        or (args.victim == "leader" and f["controller_epoch_at_end"] != f["controller_epoch_at_kill"])
    ]
    what = (
        "the active controller, made to lead the round's partition"
        if args.victim == "controller"
        else "the partition leader, never the active controller"
    )
    totals = {
        key: sum(c[key] for c in final_checks.values())
        for key in ("acked", "lost", "duplicated", "moved", "unacked_present")
    }
    failures = sum(f["delivery_failures"] for f in figures)
    print(
        f"\nkipling failover, 3 brokers on loopback, {os.cpu_count()} CPUs; broker.session.timeout.ms="
        f"{session['broker.session.timeout.ms']}, broker.heartbeat.interval.ms="
        f"{session['broker.heartbeat.interval.ms']}; three combined voters (broker,controller); "
        f"{args.kills} SIGKILLs of {what}; producer acks=all, idempotent, "
        f"{args.rate:g} records/s; total {total_s:.0f} s"
    )
    print_rounds(figures)
    print(
        "(a) resume: kill → first ack of a record produced after the kill; (b) gap: longest time between "
        "two consecutive acks from "
        f"{args.steady_s:g} s before the kill until the restart; leader in md: kill → Metadata of a live "
        "broker names a new leader; ctrl: the active controller at the kill; ctrl failover: kill → a "
        "surviving voter answers DescribeQuorum as leader of a later epoch (only when the controller was "
        "killed); steady gap: longest ack gap before the kill; restart→ISR: restart → ISR of 3 in "
        "Metadata; restart→voter: restart → the leader's DescribeQuorum shows the victim's metadata log "
        "at its high watermark; restart gap: longest ack gap from the restart until the producer stopped"
    )
    if mismatched:
        print(
            f"NOTE rounds {mismatched}: the active controller moved outside the kill this mode intends "
            "(see controller_at_start / _at_kill / _at_end in the JSON)"
        )
    print(f"\n{'seconds':<32} {'p50':>6} {'p90':>6} {'p99':>6} {'max':>6}   (n = {args.kills}, nearest rank)")
    for name, s in (
        ("(a) kill → resume", resume),
        ("(b) longest ack gap", gaps),
        ("kill → new leader in Metadata", meta),
        ("kill → new active controller", ctrl_failover),
        ("restart → ISR whole", isr_back),
        ("restart → voter caught up", voter_back),
    ):
        if not s["count"]:
            print(f"{name:<32} {'-':>6} {'-':>6} {'-':>6} {'-':>6}   (no round)")
            continue
        print(f"{name:<32} {s['p50']:>6.2f} {s['p90']:>6.2f} {s['p99']:>6.2f} {s['max']:>6.2f}")
    print(
        f"\nafter the last round, every partition read from the beginning: {totals['acked']} acknowledged, "
        f"{totals['lost']} lost, {totals['duplicated']} duplicated, {totals['moved']} at another offset "
        f"than acknowledged; {totals['unacked_present']} unacknowledged present; {failures} delivery "
        "failures"
    )
    print("\nBroker output at WARNING and above:")
    for name, lines in problems.items():
        print(f"  {name}: {len(lines)} lines")
        for line in lines[:5]:
            print(f"    {line[:160]}")
    out = write_results(
        f"failover-{args.victim}",
        {
            "storage": "disk, default flush policy (no fsync per append)",
            "client": "confluent-kafka (librdkafka)",
            "victim": args.victim,
            "cluster": {
                "brokers": 3,
                "controller_voters": cluster.voters,
                "victim": what,
                "settings": cluster.settings,
                "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
            },
            "options": vars(args),
            "producer_config": {**PRODUCER_CONFIG, **extra},
            "resume_s": resume,
            "longest_gap_s": gaps,
            "new_leader_in_metadata_s": meta,
            "controller_failover_s": ctrl_failover,
            "restart_isr_whole_s": isr_back,
            "restart_voter_caught_up_s": voter_back,
            "rounds_with_unexpected_controller_moves": mismatched,
            "totals_after_last_round": {**totals, "delivery_failures": failures},
            "final_checks": final_checks,
            "rounds": figures,
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
