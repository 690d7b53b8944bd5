"""Helpers for the transaction tests on a cluster (tests/integration/test_transactions_cluster.py).

- Wire look-ups: partition leaders and ISRs (Metadata), the coordinator of a transactional id
  (FindCoordinator), a partition's last stable offset and high watermark (ListOffsets at its leader).
- :class:`TransactionalWriter`: a confluent-kafka transactional producer in a thread, writing
  transactions over several partitions, each committed or aborted as a plan says.
- :class:`CommittedReader`: a confluent-kafka read_committed consumer in a thread, assigned every
  partition of a topic from offset 0, recording what it reads while the writers write.
- The ``.txnindex`` files of a partition directory, as bytes and as entries.
- A consume-transform-produce application, run as its own process with ``python -m
  tests.integration.transactions_support app ...``: a read_committed consumer in a group and a
  transactional producer that writes ``out:<value>`` for each input value and commits the consumer's
  positions in the same transaction (``send_offsets_to_transaction``). It handles errors the way an
  application built on librdkafka must: a retriable error is retried, an abortable one aborts and
  rewinds the consumer to the group's committed offsets, a fatal one closes the producer, creates
  and initialises a new one and rewinds. It prints one line per event and exits 0 once the group's
  committed offsets reach the input's end offsets (the input is written before it starts).
"""

from __future__ import annotations

import argparse
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.transaction.store import partition_for
from protocol.api_keys import ApiKey
from storage.txn_index import ENTRY_SIZE, AbortedTxn
from tests.integration.cluster import Cluster
from tests.integration.wire_client import WireClient

TRANSACTION_STATE = "__transaction_state"

# ------------------------------------------------------------------------------------- wire look-ups


def live_nodes(cluster: Cluster) -> dict[int, int]:
    """node id → port of every broker whose process runs (and is not known to be paused)."""
    return {
        node: b.port
        for node, b in cluster.brokers.items()
        if b.process is not None and b.process.poll() is None
    }


def ask(
    cluster: Cluster, api_key: ApiKey, version: int, body: dict[str, Any], node: int | None = None
) -> Any:
    """Send a request to ``node``, else to the first live broker that answers; None if none does."""
    ports = live_nodes(cluster)
    if node is None:
        targets = list(ports.values())
    else:
        targets = [ports[node]] if node in ports else []
    for port in targets:
        try:
            with WireClient(port, timeout_s=5) as client:
                return client.request(api_key, version, body).body
        except OSError:
            continue
    return None


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partition_states(cluster: Cluster, topic: str, node: int | None = None) -> dict[int, PartitionState]:
    """The partitions of ``topic`` as Metadata (v7) describes them now; empty while unknown."""
    body = ask(
        cluster, ApiKey.METADATA, 7, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}, node
    )
    if body is None:
        return {}
    [answer] = body.topics
    if answer.error_code != 0:
        return {}
    return {
        p.partition_index: PartitionState(
            p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes)
        )
        for p in answer.partitions
    }


def find_transaction_coordinator(cluster: Cluster, transactional_id: str) -> int | None:
    """The node FindCoordinator names for ``transactional_id`` now (None while there is none; the
    first call creates ``__transaction_state``)."""
    body = ask(cluster, ApiKey.FIND_COORDINATOR, 1, {"key": transactional_id, "key_type": 1})
    if body is None or body.error_code != 0:
        return None
    return int(body.node_id)


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def wait_for_transaction_coordinator(
    cluster: Cluster, transactional_id: str, timeout_s: float, avoid: int | None = None
) -> int:
    found: list[int] = []

    def located() -> bool:
        node = find_transaction_coordinator(cluster, transactional_id)
        if node is None or node == avoid:
            return False
        found.append(node)
        return True

    wait_until(located, timeout_s, f"a transaction coordinator for {transactional_id} (other than {avoid})")
    return found[-1]


def transaction_state_leader(cluster: Cluster, transactional_id: str, num_partitions: int) -> int | None:
    """The leader, per Metadata, of the ``__transaction_state`` partition holding ``transactional_id``."""
    state = partition_states(cluster, TRANSACTION_STATE).get(partition_for(transactional_id, num_partitions))
    return None if state is None or state.leader < 0 else state.leader


def list_offset(cluster: Cluster, topic: str, partition: int, *, committed: bool) -> int | None:
    """ListOffsets latest at the partition's leader: the last stable offset when ``committed``
    (read_committed), else the high watermark; None while there is no answer."""
    state = partition_states(cluster, topic).get(partition)
    if state is None or state.leader < 0:
        return None
    query = {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}
    body = {
        "replica_id": -1,
        "isolation_level": int(committed),
        "topics": [{"name": topic, "partitions": [query]}],
    }
    answer = ask(cluster, ApiKey.LIST_OFFSETS, 7, body, node=state.leader)
    if answer is None:
        return None
    result = answer.topics[0].partitions[0]
    return None if result.error_code != 0 else int(result.offset)


def create_assigned_topic(
    bootstrap: str, topic: str, assignments: dict[int, list[int]], **configs: str
) -> None:
    """Create ``topic`` with the given replica lists (the first replica of each is its leader)."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        admin.create_topics([NewTopic(topic, -1, -1, replica_assignments=assignments, topic_configs=configs)])
    finally:
        admin.close()


# ------------------------------------------------------------------------------------------ txnindex


def txnindex_bytes(directory: Path) -> bytes:
    """The concatenated ``.txnindex`` files of a partition directory, in segment order."""
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.txnindex")))


def txnindex_entries(data: bytes) -> list[AbortedTxn]:
    assert len(data) % ENTRY_SIZE == 0, f"{len(data)} bytes of .txnindex is not a whole number of entries"
    entries = []
    for at in range(0, len(data), ENTRY_SIZE):
        version, *fields = struct.unpack_from(">hqqqq", data, at)
        assert version == 0, f"entry {at // ENTRY_SIZE} has version {version}"
        entries.append(AbortedTxn(*fields))
    return entries


# ------------------------------------------------------------------------------- producer and reader


@dataclass
class TransactionalWriter:
    """Writes ``len(plan)`` transactions with one transactional id; transaction ``t`` writes
    ``per_partition`` values to each partition (``<id>:<t>:<partition>:<i>``, keyed by partition),
    interleaved over the partitions, then commits if ``plan[t]`` else aborts."""

    bootstrap: str
    transactional_id: str
    topic: str
    partitions: int
    plan: Sequence[bool]
    per_partition: int = 3
    pause_s: float = 0.02
    committed: list[bytes] = field(default_factory=list)
    aborted: list[bytes] = field(default_factory=list)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> TransactionalWriter:
        threading.Thread(target=self._main, name=f"writer-{self.transactional_id}", daemon=True).start()
        return self

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by check()
            self.error = e
        finally:
            self.done.set()

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.transactional_id,
                "linger.ms": 1,
                "transaction.timeout.ms": 60_000,
            }
        )
        producer.init_transactions(60)
        for t, commit in enumerate(self.plan):
            producer.begin_transaction()
            values = []
            for i in range(self.per_partition):
                for p in range(self.partitions):
                    value = f"{self.transactional_id}:{t}:{p}:{i}".encode()
                    producer.produce(self.topic, value, key=str(p).encode(), partition=p)
                    values.append(value)
                    producer.poll(0)
            producer.flush(60)  # the batches are acknowledged before the outcome is decided
            if commit:
                producer.commit_transaction(60)
                self.committed.extend(values)
            else:
                producer.abort_transaction(60)
                self.aborted.extend(values)
            time.sleep(self.pause_s)
        producer.flush(10)

    def wait(self, timeout_s: float) -> None:
        assert self.done.wait(timeout_s), f"{self.transactional_id} did not finish within {timeout_s}s"
        self.check()

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.transactional_id} failed: {self.error!r}") from self.error


@dataclass
class CommittedReader:
    """A read_committed confluent-kafka consumer of every partition of ``topic`` from offset 0."""

    bootstrap: str
    topic: str
    partitions: int
    records: list[tuple[int, int, bytes]] = field(default_factory=list)
    """(partition, offset, value) in the order read."""
    positions: dict[int, int] = field(default_factory=dict)
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> CommittedReader:
        self._thread = threading.Thread(target=self._main, name=f"reader-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as e:
            self.error = e

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"reader-{self.topic}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        try:
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            while not self._stop.is_set():
                for message in consumer.consume(100, 0.2):
                    if message.error() is not None:
                        continue  # transient (e.g. a partition's leader moved): librdkafka carries on
                    with self._lock:
                        record = (message.partition() or 0, message.offset() or 0, message.value() or b"")
                        self.records.append(record)
                positions = consumer.position([TopicPartition(self.topic, p) for p in range(self.partitions)])
                with self._lock:
                    self.positions = {tp.partition: tp.offset for tp in positions}
        finally:
            consumer.close()

    def snapshot(self) -> tuple[list[tuple[int, int, bytes]], dict[int, int]]:
        if self.error is not None:
            raise AssertionError(f"the read_committed reader failed: {self.error!r}") from self.error
        with self._lock:
            return list(self.records), dict(self.positions)

    def stop(self) -> list[tuple[int, int, bytes]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        return self.snapshot()[0]


# ------------------------------------------------------------------------ consume-transform-produce


def _app(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    def say(*words: object) -> None:
        print(*words, flush=True)

    def new_producer() -> Producer:
        while True:
            producer = Producer(
                {
                    "bootstrap.servers": args.bootstrap,
                    "transactional.id": args.transactional_id,
                    "linger.ms": 5,
                    "transaction.timeout.ms": 30_000,
                }
            )
            try:
                producer.init_transactions(30)
                say("initialised")
                return producer
            except KafkaException as e:
                say("init failed", e.args[0])
                if not e.args[0].retriable():
                    del producer
                    time.sleep(0.5)

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "session.timeout.ms": 20_000,
            "heartbeat.interval.ms": 1000,
        }
    )
    ends = {p: args.ends[p] for p in range(len(args.ends))}
    committed: dict[int, int] = {}

    def rewind() -> None:
        """Back to what the group has committed: what the aborted transaction read is read again."""
        while True:
            try:
                assignment = consumer.assignment()
                offsets = consumer.committed(assignment, 30)
                break
            except KafkaException as e:
                say("committed() failed", e.args[0])
                time.sleep(0.5)
        for tp in offsets:
            offset = tp.offset if tp.offset >= 0 else 0
            consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            committed[tp.partition] = offset
        say("rewound", sorted(committed.items()))

    def retrying(what: str, call: Callable[[], None]) -> None:
        while True:
            try:
                call()
                return
            except KafkaException as e:
                if not e.args[0].retriable():
                    raise
                say(what, "retriable", e.args[0])
                time.sleep(0.2)

    def transact(producer: Producer, messages: list[Any]) -> list[Any]:
        """One transaction: the outputs and the consumer's positions; returns the positions."""
        producer.begin_transaction()
        for m in messages:
            producer.produce(args.output, b"out:" + (m.value() or b""), key=m.key(), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        metadata = consumer.consumer_group_metadata()
        retrying("send_offsets", lambda: producer.send_offsets_to_transaction(positions, metadata, 30))
        retrying("commit", lambda: producer.commit_transaction(30))
        return positions  # type: ignore[no-any-return]

    def recover(producer: Producer, error: KafkaError) -> Producer:
        """After a failed transaction: the producer to go on with (a new one after a fatal error)."""
        if error.fatal():
            say("fatal", error)
            return new_producer()
        say("abort" if error.txn_requires_abort() else "error", error)
        try:
            retrying("abort", lambda: producer.abort_transaction(30))
        except KafkaException as again:
            say("abort failed, new producer", again.args[0])
            return new_producer()
        return producer

    producer = new_producer()
    consumer.subscribe([args.input])
    transactions = 0
    while not ends or any(committed.get(p, 0) < end for p, end in ends.items()):
        messages = [m for m in consumer.consume(args.batch, 1.0) if m.error() is None]
        if not messages:
            continue
        try:
            positions = transact(producer, messages)
        except KafkaException as e:
            producer = recover(producer, e.args[0])
            rewind()
            continue
        transactions += 1
        for tp in positions:
            if tp.offset >= 0:
                committed[tp.partition] = tp.offset
        say("committed", transactions, len(messages), sorted(committed.items()))
        time.sleep(args.pause)
    say("done", transactions)
    consumer.close()
    return 0


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="transactions_support")
    sub = parser.add_subparsers(dest="command", required=True)
    app = sub.add_parser("app", help="run the consume-transform-produce application")
    app.add_argument("--bootstrap", required=True)
    app.add_argument("--input", required=True)
    app.add_argument("--output", required=True)
    app.add_argument("--group", required=True)
    app.add_argument("--transactional-id", required=True)
    app.add_argument("--ends", type=int, nargs="+", required=True, help="the input's end offsets")
    app.add_argument("--batch", type=int, default=10)
    app.add_argument("--pause", type=float, default=0.05)
    args = parser.parse_args(argv)
    return _app(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# ------------------------------------------------------------------------------------ log contents

TRANSACTION_STATUS = {
    0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
    4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence",
}  # fmt: skip


def transaction_log_states(directory: Path, transactional_id: str) -> list[tuple[int, str]]:
    """The states ``__transaction_state`` records for ``transactional_id`` in a partition directory,
    in log order, each with the leader epoch of its batch (the epoch of the coordinator that wrote it)."""
    from protocol.records.reader import iter_all_records
    from protocol.transaction_log import TransactionLogKey, decode_key, decode_value
    from tests.integration.cluster import log_bytes

    states = []
    for record in iter_all_records(log_bytes(directory)):
        if record.key is None or decode_key(record.key) != TransactionLogKey(transactional_id):
            continue
        value = decode_value(record.value)
        status = "tombstone" if value is None else TRANSACTION_STATUS[value.transaction_status]
        states.append((record.batch.partition_leader_epoch, status))
    return states


def control_markers(directory: Path) -> list[tuple[int, str, int]]:
    """The control records of a partition directory: (offset, COMMIT or ABORT, coordinator epoch)."""
    from protocol.records.reader import iter_all_records
    from tests.integration.cluster import log_bytes

    markers = []
    for record in iter_all_records(log_bytes(directory)):
        if not record.batch.attributes & 0x20:  # the control bit
            continue
        assert record.key is not None and record.value is not None
        _, kind = struct.unpack_from(">hh", record.key)
        _, coordinator_epoch = struct.unpack_from(">hi", record.value)
        markers.append((record.offset, "COMMIT" if kind == 1 else "ABORT", coordinator_epoch))
    return markers


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a broker's follower processes)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children
