"""Transactions (KIP-98) on a cluster of three real broker processes, with faults.

Broker 1 also runs the single controller, so it is never the one killed: leadership can only move
while the controller lives. ``__transaction_state`` and ``__consumer_offsets`` have 3 partitions,
replication factor 3 and min.insync.replicas=2; the coordinator of a transactional id is the leader
of its ``__transaction_state`` partition.

- A checker: two transactional producers (coordinated by different brokers) write interleaved
  committed and aborted transactions over the three partitions of a topic whose leaders are on the
  three brokers, so markers are written locally and over the inter-broker listener. A read_committed
  consumer reading all along sees exactly the committed values, each once, in each producer's
  order per partition, and nothing of an aborted transaction; every replica's log and
  ``.txnindex`` files end up byte-for-byte the leader's.
- The coordinator's broker is killed (SIGKILL) while a consume-transform-produce application runs;
  it recovers, and the output holds every input value's effect exactly once (read_committed) while
  the group's committed offsets reach the input's end.
- A data partition's leader is killed during an open transaction: the new leader knows the
  transaction (its LSO stays at the transaction's start), the producer goes on writing to it, and
  after the commit the markers reach it (the coordinator retries): the LSO passes the transaction
  and a read_committed consumer sees it once.
- A new coordinator completes a prepared commit: see the test's docstring for how the transaction
  is held in PrepareCommit deterministically.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.transaction.store import partition_for
from tests.integration.broker_process import ROOT
from tests.integration.cluster import FAST_FAILOVER, Cluster, log_bytes
from tests.integration.group_members import committed_offsets, create_topic, produce
from tests.integration.transactions_support import (
    TRANSACTION_STATE,
    CommittedReader,
    TransactionalWriter,
    child_pids,
    control_markers,
    create_assigned_topic,
    find_transaction_coordinator,
    list_offset,
    partition_states,
    transaction_log_states,
    txnindex_bytes,
    txnindex_entries,
    wait_for_transaction_coordinator,
    wait_until,
)

pytestmark = [pytest.mark.timeout(240)]

TXN_PARTITIONS = 3
OVERRIDES = (
    *FAST_FAILOVER,
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=3",
    "offsets.topic.replication.factor=3",
    f"transaction.state.log.num.partitions={TXN_PARTITIONS}",
    "transaction.state.log.replication.factor=3",
    "transaction.state.log.min.isr=2",
)
CONTROLLER = 1
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("txn-cluster"), overrides=OVERRIDES).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(autouse=True)
def _broker_logs_on_failure(cluster: Cluster, request: pytest.FixtureRequest) -> None:
    request.node._kipling_brokers = list(cluster.brokers.values())


# ------------------------------------------------------------------------------------------- helpers


def transactional_ids(
    cluster: Cluster, prefix: str, count: int, avoid: frozenset[int] = frozenset()
) -> dict[str, int]:
    """``count`` transactional ids coordinated by distinct brokers outside ``avoid`` where possible
    (else by any): id → the coordinator's node."""
    chosen: dict[str, int] = {}
    fallback: dict[str, int] = {}
    for i in range(200):
        tid = f"{prefix}-{i}"
        node = wait_for_transaction_coordinator(cluster, tid, TIMEOUT_S)
        if node not in avoid and node not in chosen.values():
            chosen[tid] = node
        elif len(fallback) < count:
            fallback[tid] = node
        if len(chosen) == count:
            return chosen
    for tid, node in fallback.items():
        if len(chosen) == count:
            break
        chosen[tid] = node
    return chosen


def wait_for_full_isr(cluster: Cluster, topics: list[str]) -> None:
    def full() -> bool:
        for topic in topics:
            states = partition_states(cluster, topic)
            if not states or any(len(s.isr) != len(s.replicas) or s.leader < 0 for s in states.values()):
                return False
        return True

    wait_until(full, TIMEOUT_S, f"every partition of {topics} to have a full ISR")


def wait_for_leader(cluster: Cluster, topic: str, partition: int, avoid: int) -> int:
    found: list[int] = []

    def elected() -> bool:
        state = partition_states(cluster, topic).get(partition)
        if state is None or state.leader in (-1, avoid):
            return False
        found.append(state.leader)
        return True

    wait_until(elected, TIMEOUT_S, f"a leader of {topic}-{partition} other than {avoid}")
    return found[-1]


def read_committed(cluster: Cluster, topic: str, partitions: int) -> list[tuple[int, int, bytes]]:
    """Everything a read_committed consumer reads from offset 0 until its positions reach the
    partitions' high watermarks (past the last marker): (partition, offset, value)."""
    ends = {p: hw for p in range(partitions) if (hw := _offset(cluster, topic, p, committed=False))}
    reader = CommittedReader(cluster.bootstrap, topic, partitions).start()
    try:
        wait_until(
            lambda: all(reader.snapshot()[1].get(p, -1) >= end for p, end in ends.items()),
            TIMEOUT_S,
            f"a read_committed consumer of {topic} to reach {ends}",
        )
    finally:
        records = reader.stop()
    return records


def _offset(cluster: Cluster, topic: str, partition: int, *, committed: bool) -> int:
    found: list[int] = []

    def answered() -> bool:
        offset = list_offset(cluster, topic, partition, committed=committed)
        if offset is not None:
            found.append(offset)
        return offset is not None

    wait_until(answered, TIMEOUT_S, f"ListOffsets of {topic}-{partition}")
    return found[-1]


def assert_exactly(values: list[bytes], expected: set[bytes], what: str) -> None:
    counts = Counter(values)
    repeated = sorted((v, n) for v, n in counts.items() if n > 1)
    missing = sorted(expected - set(counts))
    unexpected = sorted(set(counts) - expected)
    assert not repeated, f"{what}: {len(repeated)} values read more than once, e.g. {repeated[:5]}"
    assert not missing, f"{what}: {len(missing)} values never read, e.g. {missing[:5]}"
    assert not unexpected, f"{what}: {len(unexpected)} values read that should not be, e.g. {unexpected[:5]}"


def wait_for_identical_replicas(cluster: Cluster, topic: str, partitions: int) -> None:
    """Every replica's log and .txnindex files are the same bytes (the leader's)."""

    def same() -> bool:
        states = partition_states(cluster, topic)
        for p in range(partitions):
            if p not in states:
                return False
            dirs = [cluster.partition_dir(node, topic, p) for node in states[p].replicas]
            if len({log_bytes(d) for d in dirs}) != 1 or len({txnindex_bytes(d) for d in dirs}) != 1:
                return False
        return True

    wait_until(same, TIMEOUT_S, f"every replica of {topic} to hold the leader's log and .txnindex")


# --------------------------------------------------------------------------------------------- tests


def test_read_committed_sees_exactly_the_committed_transactions_of_two_producers(cluster: Cluster) -> None:
    topic, partitions = "txn-checker", 3
    # each broker leads one partition: every transaction has markers written locally and remotely
    create_assigned_topic(cluster.bootstrap, topic, {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    wait_until(lambda: len(partition_states(cluster, topic)) == partitions, TIMEOUT_S, "the topic")
    ids = transactional_ids(cluster, "checker", 2)
    assert len(set(ids.values())) == 2, f"both transactional ids have the same coordinator: {ids}"
    plans = {  # interleaved outcomes, different for each producer
        tid: [(t * 7 + k * 3) % 5 not in (1, 3) for t in range(16)] for k, tid in enumerate(sorted(ids))
    }
    reader = CommittedReader(cluster.bootstrap, topic, partitions).start()
    writers = [
        TransactionalWriter(cluster.bootstrap, tid, topic, partitions, plans[tid]) for tid in sorted(ids)
    ]
    try:
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.wait(TIMEOUT_S * 2)
        ends = {p: _offset(cluster, topic, p, committed=False) for p in range(partitions)}
        for p, end in ends.items():  # nothing is left open: the LSO is the high watermark
            wait_until(
                lambda p=p, end=end: _offset(cluster, topic, p, committed=True) == end,  # type: ignore[misc]
                TIMEOUT_S,
                f"the LSO of partition {p} to reach its high watermark {end}",
            )
        wait_until(
            lambda: all(reader.snapshot()[1].get(p, -1) >= end for p, end in ends.items()),
            TIMEOUT_S,
            f"the read_committed reader to reach {ends}",
        )
    finally:
        records = reader.stop()
    committed = {v for w in writers for v in w.committed}
    aborted = {v for w in writers for v in w.aborted}
    assert committed and aborted and not committed & aborted
    assert_exactly([v for _, _, v in records], committed, "the reader that read along")

    # per partition: offsets increase, and each producer's values come in the order it wrote them
    for p in range(partitions):
        mine = [(offset, value) for partition, offset, value in records if partition == p]
        assert [o for o, _ in mine] == sorted({o for o, _ in mine}), f"partition {p}: offsets out of order"
        for tid in ids:
            order = [
                tuple(map(int, v.decode().split(":")[1:]))
                for _, v in mine
                if v.startswith(f"{tid}:".encode())
            ]
            assert order == sorted(order), f"partition {p}: {tid}'s values out of order"
            assert all(o[1] == p for o in order), f"partition {p} holds values written to another"

    # a reader that starts afterwards reads the same (aborted transactions from the .txnindex)
    again = read_committed(cluster, topic, partitions)
    assert_exactly([v for _, _, v in again], committed, "a reader that started at the end")

    wait_for_identical_replicas(cluster, topic, partitions)
    aborted_transactions = sum(not c for plan in plans.values() for c in plan)
    for p in range(partitions):
        entries = txnindex_entries(txnindex_bytes(cluster.partition_dir(1, topic, p)))
        assert len(entries) == aborted_transactions, f"partition {p}: {len(entries)} aborted entries"
        assert [e.last_offset for e in entries] == sorted(e.last_offset for e in entries)
        assert all(e.first_offset < e.last_offset for e in entries), entries
        assert len({e.producer_id for e in entries}) == len(ids)


class App:
    """The consume-transform-produce application of transactions_support, in its own process."""

    def __init__(self, cluster: Cluster, log: Path, **options: str | list[int]) -> None:
        args = [
            sys.executable,
            "-m",
            "tests.integration.transactions_support",
            "app",
            "--bootstrap",
            cluster.bootstrap,
        ]
        for name, value in options.items():
            args += [
                f"--{name.replace('_', '-')}",
                *(map(str, value) if isinstance(value, list) else [value]),
            ]
        self.lines: list[str] = []
        self.log = log
        self.process = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.log.open("a") as out:
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))
                out.write(line)

    def events(self, kind: str) -> list[str]:
        return [line for line in self.lines if line.split(" ", 1)[0] == kind]

    def check(self) -> None:
        code = self.process.poll()
        if code is not None and code != 0:
            raise AssertionError(f"the application exited with {code}: {self.lines[-20:]}")

    def wait_for_commits(self, count: int, what: str) -> None:
        target = len(self.events("committed")) + count

        def enough() -> bool:
            self.check()
            return len(self.events("committed")) >= target or self.process.poll() == 0

        wait_until(enough, TIMEOUT_S, f"{count} more committed transactions {what} ({self.lines[-5:]})")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


def test_a_consume_transform_produce_app_survives_a_kill_of_its_coordinator(
    cluster: Cluster, tmp_path: Path
) -> None:
    source, sink, partitions = "ctp-in", "ctp-out", 3
    create_topic(cluster.bootstrap, source, partitions, 3)
    create_topic(cluster.bootstrap, sink, partitions, 3)
    values = [f"in-{i}".encode() for i in range(600)]
    ends = produce(cluster.bootstrap, source, values, partitions)
    [(tid, coordinator)] = transactional_ids(cluster, "ctp", 1, avoid=frozenset({CONTROLLER})).items()
    assert coordinator != CONTROLLER, "every transactional id tried is coordinated by the controller"
    group = "ctp-group"
    victim = cluster.brokers[coordinator]
    app = App(
        cluster, tmp_path / "app.out", input=source, output=sink, group=group, transactional_id=tid,
        ends=[ends[p] for p in range(partitions)], batch="10", pause="0.05",
    )  # fmt: skip
    try:
        app.wait_for_commits(8, "before the coordinator is killed")
        victim.stop(signal.SIGKILL)
        new = wait_for_transaction_coordinator(cluster, tid, TIMEOUT_S, avoid=coordinator)
        app.wait_for_commits(8, f"after the coordinator moved to broker {new}")
        victim.start()
        wait_until(
            lambda: app.process.poll() is not None,
            TIMEOUT_S * 2,
            f"the application to finish ({app.lines[-5:]})",
        )
        app.check()
    finally:
        app.stop()
        if victim.process is None:
            victim.start()
    assert app.events("done"), app.lines[-20:]
    output = read_committed(cluster, sink, partitions)
    assert_exactly([v for _, _, v in output], {b"out:" + v for v in values}, "the output")
    for p in range(partitions):  # each output partition holds its input partition's values in order
        mine = [v for q, _, v in output if q == p]
        assert mine == sorted(mine, key=lambda v: int(v.split(b"-")[1]))
    assert committed_offsets(cluster.bootstrap, group, source) == ends
    wait_for_full_isr(cluster, [source, sink, TRANSACTION_STATE])


def test_markers_reach_the_new_leader_of_a_partition_whose_leader_was_killed_mid_transaction(
    cluster: Cluster,
) -> None:
    from confluent_kafka import Producer

    topic = "txn-leader-kill"
    [(tid, coordinator)] = transactional_ids(cluster, "leader-kill", 1).items()
    leader = next(n for n in (3, 2) if n != coordinator)  # never the controller's broker
    other = next(n for n in cluster.brokers if n not in (leader, coordinator))
    create_assigned_topic(
        cluster.bootstrap, topic, {0: [leader, other, coordinator], 1: [other, leader, coordinator]}
    )
    wait_until(lambda: len(partition_states(cluster, topic)) == 2, TIMEOUT_S, "the topic")
    victim = cluster.brokers[leader]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 1})
    expected: list[bytes] = []

    def write(stage: str) -> None:
        for i in range(5):
            for p in (0, 1):
                value = f"{stage}:{p}:{i}".encode()
                producer.produce(topic, value, partition=p)
                expected.append(value)
        assert producer.flush(TIMEOUT_S) == 0

    try:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        write("before")
        assert _offset(cluster, topic, 0, committed=False) == 5
        assert _offset(cluster, topic, 0, committed=True) == 0, "the LSO is not held by the open transaction"

        victim.stop(signal.SIGKILL)
        new_leader = wait_for_leader(cluster, topic, 0, avoid=leader)
        wait_until(lambda: _offset(cluster, topic, 0, committed=False) == 5, TIMEOUT_S, "the new leader's HW")
        # the new leader rebuilt the open transaction from the replicated batches
        assert _offset(cluster, topic, 0, committed=True) == 0, (
            f"broker {new_leader} lost the open transaction"
        )
        write("after")
        assert _offset(cluster, topic, 0, committed=True) == 0
        reader = CommittedReader(cluster.bootstrap, topic, 2).start()
        time.sleep(2)  # many fetches (fetch.wait.max.ms is 100): none returns the open transaction
        assert reader.stop() == [], "read_committed sees an open transaction"

        producer.commit_transaction(TIMEOUT_S)
        for p in (0, 1):
            wait_until(
                lambda p=p: _offset(cluster, topic, p, committed=True) == 11,  # type: ignore[misc]
                TIMEOUT_S,
                f"the LSO of partition {p} to pass the commit marker",
            )
        records = read_committed(cluster, topic, 2)
        assert_exactly([v for _, _, v in records], set(expected), "read_committed after the commit")
        assert find_transaction_coordinator(cluster, tid) == coordinator
    finally:
        if victim.process is None:
            victim.start()
    wait_for_full_isr(cluster, [topic])
    wait_for_identical_replicas(cluster, topic, 2)
    assert txnindex_bytes(cluster.partition_dir(leader, topic, 0)) == b""  # nothing was aborted


def test_a_new_coordinator_completes_a_commit_its_killed_predecessor_had_prepared(cluster: Cluster) -> None:
    """How the transaction is held in PrepareCommit without racing the marker writes: the data
    partition has two replicas, ``[D, 1]``, and min.insync.replicas=2; broker 1's follower processes
    are paused (SIGSTOP), so the partition's ISR shrinks to ``[D]`` and its leader refuses every
    acks=all write, markers included, with NOT_ENOUGH_REPLICAS. ``__transaction_state`` keeps an ISR
    of two (the coordinator C and D), so EndTxn is answered once PrepareCommit is written; C then
    retries its markers in vain. C is killed (SIGKILL); D becomes the leader of the transactional
    id's ``__transaction_state`` partition (the only other replica in its ISR), loads PrepareCommit
    and sends the markers itself; they are written once broker 1's followers resume (SIGCONT) and
    rejoin the ISR. The commit marker carries the new coordinator's epoch, and the transaction log
    holds CompleteCommit written in that epoch."""
    from confluent_kafka import Producer

    topic = "txn-prepared"
    [(tid, coordinator)] = transactional_ids(cluster, "prepared", 1, avoid=frozenset({CONTROLLER})).items()
    assert coordinator != CONTROLLER, "every transactional id tried is coordinated by the controller"
    leader = next(n for n in (2, 3) if n != coordinator)
    txn_partition = partition_for(tid, TXN_PARTITIONS)
    create_assigned_topic(cluster.bootstrap, topic, {0: [leader, CONTROLLER]}, **{"min.insync.replicas": "2"})
    wait_for_full_isr(cluster, [topic, TRANSACTION_STATE])
    victim = cluster.brokers[coordinator]
    controller_pid = cluster.brokers[CONTROLLER].pid
    assert controller_pid is not None
    followers = child_pids(controller_pid)
    assert followers, "broker 1 has no follower process"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 1})
    values = [f"prepared-{i}".encode() for i in range(5)]
    paused = False
    try:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value, partition=0)
        assert producer.flush(TIMEOUT_S) == 0

        for pid in followers:
            os.kill(pid, signal.SIGSTOP)
        paused = True
        # a record behind which the paused follower falls: the leader drops it from the ISR after
        # replica.lag.time.max.ms (acks=1: an acks=all write would fail below min.insync.replicas)
        plain = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1, "enable.idempotence": False})
        plain.produce(topic, b"not-transactional", partition=0)
        assert plain.flush(TIMEOUT_S) == 0
        wait_until(
            lambda: partition_states(cluster, topic)[0].isr == (leader,),
            TIMEOUT_S,
            f"{topic}'s ISR to shrink",
        )
        # answered once PrepareCommit is written, after broker 1 left that partition's ISR too
        producer.commit_transaction(TIMEOUT_S)
        wait_until(  # the metadata of the shrink reaches the brokers after the leader acted on it
            lambda: CONTROLLER not in partition_states(cluster, TRANSACTION_STATE)[txn_partition].isr,
            TIMEOUT_S,
            "broker 1 to leave the ISR of the transactional id's __transaction_state partition",
        )
        time.sleep(2)
        assert _offset(cluster, topic, 0, committed=True) == 0, "the commit marker was written"
        states = transaction_log_states(
            cluster.partition_dir(coordinator, TRANSACTION_STATE, txn_partition), tid
        )
        assert states[-1][1] == "PrepareCommit", states

        victim.stop(signal.SIGKILL)
        new = wait_for_transaction_coordinator(cluster, tid, TIMEOUT_S, avoid=coordinator)
        assert new == leader
        time.sleep(1)
        assert _offset(cluster, topic, 0, committed=True) == 0, "a marker was written without enough replicas"

        for pid in followers:
            os.kill(pid, signal.SIGCONT)
        paused = False

        def visible() -> bool:
            stable = _offset(cluster, topic, 0, committed=True)
            return stable > len(values) and stable == _offset(cluster, topic, 0, committed=False)

        try:
            wait_until(
                visible, TIMEOUT_S, "the new coordinator's commit marker to make the transaction visible"
            )
        except AssertionError as e:
            offsets = [_offset(cluster, topic, 0, committed=c) for c in (True, False)]
            markers = control_markers(cluster.partition_dir(leader, topic, 0))
            raise AssertionError(f"{e}: LSO and HW {offsets}, markers {markers}") from None
        records = read_committed(cluster, topic, 1)
        assert_exactly(
            [v for _, _, v in records], {*values, b"not-transactional"}, "read_committed after the failover"
        )
        epoch = partition_states(cluster, TRANSACTION_STATE)[txn_partition].leader_epoch
        assert control_markers(cluster.partition_dir(leader, topic, 0)) == [
            (len(values) + 1, "COMMIT", epoch)
        ]
        states = transaction_log_states(cluster.partition_dir(leader, TRANSACTION_STATE, txn_partition), tid)
        assert states[-1] == (epoch, "CompleteCommit"), states
        assert (epoch, "PrepareCommit") not in states and states[-2][1] == "PrepareCommit", states
    finally:
        if paused:
            for pid in followers:
                os.kill(pid, signal.SIGCONT)
        if victim.process is None:
            victim.start()
    wait_for_full_isr(cluster, [topic, TRANSACTION_STATE])
    wait_for_identical_replicas(cluster, topic, 1)
