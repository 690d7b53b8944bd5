"""Support for the transaction end-to-end tests: a seeded transaction workload per client, consumers that
read up to end sentinels, the checker, and a consume-transform-produce app run as its own process.

The workload (:func:`plan_transactions`) gives several transactional producers interleaved
transactions over the partitions of one topic; each record's key and value name its producer,
transaction and record number (``<run>|p<producer>|t<txn>|r<record>``), so that the checker can
tell a committed record from an aborted one and a whole transaction from a torn one. After the
workload a non-transactional producer writes one *sentinel* per partition: a consumer that has
seen every partition's sentinel has seen everything before it (a read_committed one only once the
LSO passed every transaction before it), so reading ends on an event, not on a quiet period.

Run as ``python -m tests.integration.txn_support ctp ...`` it is the consume-transform-produce app
of the TxnOffsetCommit test (see :func:`run_ctp_app`).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.integration.client_helpers import Consumed

DEFAULT_TIMEOUT_S = 60.0
SENTINEL = b"sentinel"


# -------------------------------------------------------------------------------------------- workload


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One record of a transaction: where it goes and what it says."""

    producer: int
    txn: int
    record: int
    partition: int
    value: bytes


@dataclass(slots=True)
class Txn:
    producer: int
    txn: int
    commit: bool
    records: list[TxnRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Send:
    record: TxnRecord


@dataclass(frozen=True, slots=True)
class End:
    """Commit or abort: the producer flushes its records first, then ends the transaction."""

    txn: Txn


@dataclass(slots=True)
class Plan:
    """Each producer's transactions, and one seeded schedule merging their steps (each producer's
    sends and ends in its own order, the producers' steps shuffled together): a transaction begins
    at its first send, so one producer's transaction begins, runs and ends while others are open."""

    run: str
    partitions: int
    producers: int
    transactions: list[Txn]
    schedule: list[Send | End]

    def committed_records(self) -> list[TxnRecord]:
        return [rec for t in self.transactions if t.commit for rec in t.records]

    def all_records(self) -> list[TxnRecord]:
        return [rec for t in self.transactions for rec in t.records]

    def summary(self) -> dict[str, int]:
        txns = self.transactions
        return {
            "transactions": len(txns),
            "committed_txns": sum(t.commit for t in txns),
            "aborted_txns": sum(not t.commit for t in txns),
            "committed_records": len(self.committed_records()),
            "aborted_records": len(self.all_records()) - len(self.committed_records()),
        }


def plan_transactions(
    run: str, *, producers: int, txns: int, partitions: int, seed: int, commit_ratio: float = 0.6
) -> Plan:
    """A seeded plan: ``txns`` transactions per producer, each 3-9 records over at least two
    partitions, committed with probability ``commit_ratio``; at least one commit and one abort."""
    rng = random.Random(seed)
    steps: list[list[Send | End]] = []
    transactions: list[Txn] = []
    for p in range(producers):
        own: list[Send | End] = []
        for t in range(txns):
            txn = Txn(p, t, rng.random() < commit_ratio)
            count = rng.randint(3, 9)
            targets = [rng.randrange(partitions) for _ in range(count)]
            if len(set(targets)) < 2:
                targets[0] = (targets[1] + 1) % partitions
            for i, partition in enumerate(targets):
                rec = TxnRecord(p, t, i, partition, f"{run}|p{p}|t{t}|r{i}".encode())
                txn.records.append(rec)
                own.append(Send(rec))
            own.append(End(txn))
            transactions.append(txn)
        steps.append(own)
    transactions[0].commit = True
    transactions[-1].commit = False
    schedule: list[Send | End] = []
    cursors = [0] * producers
    while live := [p for p in range(producers) if cursors[p] < len(steps[p])]:
        p = rng.choice(live)
        schedule.append(steps[p][cursors[p]])
        cursors[p] += 1
    return Plan(run, partitions, producers, transactions, schedule)


def transactional_id(run: str, producer: int) -> str:
    return f"{run}-txn-{producer}"


def run_plan_confluent(bootstrap: str, topic: str, plan: Plan) -> None:
    """The schedule through confluent-kafka: a producer's records are flushed before its commit or
    abort (librdkafka purges unsent messages on abort, and the read_uncommitted check wants the
    aborted ones written)."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    clients = [
        Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": transactional_id(plan.run, p),
                "linger.ms": 5,
                "client.id": f"kipling-it-txn-cf-{p}",
            }
        )
        for p in range(plan.producers)
    ]
    for client in clients:
        client.init_transactions(DEFAULT_TIMEOUT_S)
    open_txn = [False] * plan.producers
    for step in plan.schedule:
        if isinstance(step, Send):
            rec = step.record
            client = clients[rec.producer]
            if not open_txn[rec.producer]:
                client.begin_transaction()
                open_txn[rec.producer] = True
            client.produce(
                topic, key=rec.value, value=rec.value, partition=rec.partition, on_delivery=on_delivery
            )
            client.poll(0)
        else:
            client = clients[step.txn.producer]
            assert client.flush(DEFAULT_TIMEOUT_S) == 0
            assert errors == [], errors
            if step.txn.commit:
                client.commit_transaction(DEFAULT_TIMEOUT_S)
            else:
                client.abort_transaction(DEFAULT_TIMEOUT_S)
            open_txn[step.txn.producer] = False
    for client in clients:
        assert client.flush(DEFAULT_TIMEOUT_S) == 0


def run_plan_kafka_python(bootstrap: str, topic: str, plan: Plan) -> None:
    from kafka import KafkaProducer

    clients = [
        KafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=transactional_id(plan.run, p),
            linger_ms=5,
            client_id=f"kipling-it-txn-kp-{p}",
        )
        for p in range(plan.producers)
    ]
    try:
        for client in clients:
            client.init_transactions()
        pending: list[list[Any]] = [[] for _ in clients]
        for step in plan.schedule:
            if isinstance(step, Send):
                rec = step.record
                if not pending[rec.producer]:
                    clients[rec.producer].begin_transaction()
                future = clients[rec.producer].send(
                    topic, key=rec.value, value=rec.value, partition=rec.partition
                )
                pending[rec.producer].append(future)
            else:
                p = step.txn.producer
                clients[p].flush(timeout=DEFAULT_TIMEOUT_S)
                for future in pending[p]:
                    future.get(timeout=DEFAULT_TIMEOUT_S)
                pending[p] = []
                if step.txn.commit:
                    clients[p].commit_transaction()
                else:
                    clients[p].abort_transaction()
    finally:
        for client in clients:
            client.close(timeout=10)


async def run_plan_aiokafka(bootstrap: str, topic: str, plan: Plan) -> None:
    from aiokafka import AIOKafkaProducer

    clients = [
        AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=transactional_id(plan.run, p),
            linger_ms=5,
            client_id=f"kipling-it-txn-aio-{p}",
        )
        for p in range(plan.producers)
    ]
    for client in clients:
        await client.start()  # InitProducerId with the transactional id
    try:
        pending: list[list[Any]] = [[] for _ in clients]
        for step in plan.schedule:
            if isinstance(step, Send):
                rec = step.record
                if not pending[rec.producer]:
                    await clients[rec.producer].begin_transaction()
                future = await clients[rec.producer].send(
                    topic, key=rec.value, value=rec.value, partition=rec.partition
                )
                pending[rec.producer].append(future)
            else:
                p = step.txn.producer
                await asyncio.wait_for(asyncio.gather(*pending[p]), DEFAULT_TIMEOUT_S)
                pending[p] = []
                if step.txn.commit:
                    await clients[p].commit_transaction()
                else:
                    await clients[p].abort_transaction()
    finally:
        for client in clients:
            await client.stop()


def write_sentinels(bootstrap: str, topic: str, partitions: int) -> None:
    """One non-transactional record per partition, after everything else (kafka-python, acks=all)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", client_id="kipling-it-sentinel")
    try:
        futures = [producer.send(topic, key=SENTINEL, value=SENTINEL, partition=p) for p in range(partitions)]
        for future in futures:
            future.get(timeout=DEFAULT_TIMEOUT_S)
    finally:
        producer.close(timeout=10)


# ------------------------------------------------------------------------------------------- consumers


def _done(records: Sequence[Consumed], partitions: int, sentinels: int) -> bool:
    seen: defaultdict[int, int] = defaultdict(int)
    for r in records:
        if r.value == SENTINEL:
            seen[r.partition] += 1
    return all(seen[p] >= sentinels for p in range(partitions))


def consume_to_sentinels(
    client: str,
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    *,
    sentinels: int = 1,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    small_fetches: bool = False,
) -> list[Consumed]:
    """Read every partition from offset 0 with ``client``'s consumer at ``isolation`` until each
    partition's ``sentinels``-th sentinel arrived; fails after ``timeout_s``.

    ``small_fetches`` sets the fetch limits to a byte, so that each fetch answers about one batch per
    partition and most fetches start inside a transaction: each needs the aborted transactions that
    began before its fetch offset.
    """
    args = (bootstrap, topic, partitions, isolation, sentinels, timeout_s)
    if client == "confluent":
        small = {"max.partition.fetch.bytes": 1, "fetch.max.bytes": 16_384, "message.max.bytes": 16_384}
        return _consume_confluent(*args, small if small_fetches else {})
    small = {"max_partition_fetch_bytes": 1, "fetch_max_bytes": 1}
    if client == "kafka-python":
        return _consume_kafka_python(*args, small if small_fetches else {})
    if client == "aiokafka":
        return asyncio.run(_consume_aiokafka(*args, small if small_fetches else {}))
    raise ValueError(client)


def _fail(client: str, records: Sequence[Consumed], timeout_s: float, extra: str = "") -> None:
    per: defaultdict[int, int] = defaultdict(int)
    for r in records:
        per[r.partition] += 1
    raise AssertionError(
        f"{client} did not reach the sentinels in {timeout_s}s: {len(records)} records {dict(per)} {extra}"
    )


def _consume_confluent(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    sentinels: int,
    timeout_s: float,
    config: dict[str, Any],
) -> list[Consumed]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    errors: list[str] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kipling-it-unused-{topic}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "error_cb": lambda err: errors.append(str(err)),
            **config,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        records: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while not _done(records, partitions, sentinels):
            if time.monotonic() > deadline:
                _fail("confluent", records, timeout_s, f"errors {errors[-5:]}")
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                if msg.error() is not None:
                    errors.append(str(msg.error()))
                    continue
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                records.append(Consumed(partition, offset, msg.key(), msg.value(), ()))
        return records
    finally:
        consumer.close()


def _consume_kafka_python(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    sentinels: int,
    timeout_s: float,
    config: dict[str, Any],
) -> list[Consumed]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level=isolation,
        client_id="kipling-it-txn-kp-consumer",
        **config,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while not _done(records, partitions, sentinels):
            if time.monotonic() > deadline:
                _fail("kafka-python", records, timeout_s)
            for tp, batch in consumer.poll(timeout_ms=200).items():
                records.extend(Consumed(tp.partition, m.offset, m.key, m.value, ()) for m in batch)
        return records
    finally:
        consumer.close()


async def _consume_aiokafka(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    sentinels: int,
    timeout_s: float,
    config: dict[str, Any],
) -> list[Consumed]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        **config,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        records: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while not _done(records, partitions, sentinels):
            if time.monotonic() > deadline:
                _fail("aiokafka", records, timeout_s)
            for tp, batch in (await consumer.getmany(timeout_ms=200)).items():
                records.extend(Consumed(tp.partition, m.offset, m.key, m.value, ()) for m in batch)
        return records
    finally:
        await consumer.stop()


# -------------------------------------------------------------------------------------------- checking


def _parse(value: bytes) -> tuple[int, int, int]:
    _, p, t, r = value.decode().split("|")
    return int(p[1:]), int(t[1:]), int(r[1:])


def check_consumed(plan: Plan, consumed: Sequence[Consumed], *, committed_only: bool) -> dict[str, int]:
    """Assert that ``consumed`` (sentinels included) is exactly what the isolation level allows.

    read_committed (``committed_only``): every record of every committed transaction once, at the
    partition it was sent to, nothing of an aborted transaction, no committed transaction torn.
    read_uncommitted: every record sent, aborted ones included. Both: each producer's records in a
    partition in send order, offsets rising within each partition. Returns the counts.
    """
    wanted = plan.committed_records() if committed_only else plan.all_records()
    by_value = {rec.value: rec for rec in plan.all_records()}
    expected = {rec.value: rec for rec in wanted}
    problems: list[str] = []

    def problem(text: str) -> None:
        if len(problems) < 20:
            problems.append(text)

    data = [r for r in consumed if r.value != SENTINEL]
    seen: defaultdict[bytes, int] = defaultdict(int)
    for r in data:
        assert r.value is not None
        seen[r.value] += 1
        rec = by_value.get(r.value)
        if rec is None:
            problem(f"p{r.partition}@{r.offset}: unknown record {r.value!r}")
            continue
        if r.value not in expected:
            problem(f"p{r.partition}@{r.offset}: record of an aborted transaction {r.value!r}")
        if r.partition != rec.partition:
            problem(f"{r.value!r} read from partition {r.partition}, sent to {rec.partition}")
        if r.key != r.value:
            problem(f"p{r.partition}@{r.offset}: key {r.key!r} != value {r.value!r}")
    for value, count in seen.items():
        if count > 1:
            problem(f"{value!r} read {count} times")
    missing = [v for v in expected if v not in seen]
    if missing:
        problem(f"{len(missing)} expected records never read, first {missing[:3]!r}")
    # torn transactions: a committed transaction read in part
    by_txn: defaultdict[tuple[int, int], int] = defaultdict(int)
    for value in seen:
        rec = by_value.get(value)
        if rec is not None:
            by_txn[(rec.producer, rec.txn)] += 1
    for txn in plan.transactions:
        got = by_txn.get((txn.producer, txn.txn), 0)
        if txn.commit and got != len(txn.records):
            problem(f"committed transaction p{txn.producer} t{txn.txn}: {got} of {len(txn.records)} read")
    # order within each partition
    by_partition: defaultdict[int, list[Consumed]] = defaultdict(list)
    for r in consumed:
        by_partition[r.partition].append(r)
    for partition, records in by_partition.items():
        offsets = [r.offset for r in records]
        if offsets != sorted(set(offsets)):
            problem(f"partition {partition}: offsets not strictly rising")
        last: dict[int, tuple[int, int]] = {}
        for r in records:
            if r.value == SENTINEL or r.value not in by_value:
                continue
            p, t, i = _parse(r.value)
            if p in last and last[p] >= (t, i):
                problem(
                    f"partition {partition}: producer {p}'s t{t} r{i} read after t{last[p][0]} r{last[p][1]}"
                )
            last[p] = (t, i)
    assert not problems, "transaction check failed:\n  " + "\n  ".join(problems)
    aborted_seen = sum(1 for v in seen if v in by_value and v not in plan_committed_values(plan))
    return {"seen": len(data), "aborted_seen": aborted_seen}


def plan_committed_values(plan: Plan) -> set[bytes]:
    return {rec.value for rec in plan.committed_records()}


# ------------------------------------------------------------------------------ consume-transform-produce


def output_value(partition: int, offset: int) -> bytes:
    return f"out|{partition}|{offset}".encode()


def run_ctp_app(
    bootstrap: str,
    source: str,
    sink: str,
    group: str,
    txn_id: str,
    partitions: int,
    batch: int,
    pause_after_produce: int | None = None,
) -> int:
    """Read ``source`` read_committed from the group's committed offsets and, per batch of up to
    ``batch`` records, write one output per input to ``sink`` and the next offsets to the group in
    one transaction. Exits 0 when the group's position reached the end of every input partition.

    Prints ``produced <n>`` once a batch's outputs are delivered (before its commit) and ``committed
    <n>`` after the commit. With ``pause_after_produce`` it stops after that batch's ``produced`` line
    (its transaction open, its outputs written) until stdin closes, so that a test can kill it there.
    """
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2, "client.id": "ctp-app"}
    )
    producer.init_transactions(DEFAULT_TIMEOUT_S)  # fences a previous instance, aborts its transaction
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "client.id": "ctp-app-consumer",
        }
    )
    tps = [TopicPartition(source, p) for p in range(partitions)]
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(source, p), timeout=10)[1] for p in range(partitions)
    }
    consumer.assign(tps)  # from the committed offsets (fetched require_stable by librdkafka)
    batches = 0
    deadline = time.monotonic() + 2 * DEFAULT_TIMEOUT_S
    while time.monotonic() < deadline:
        messages = [m for m in consumer.consume(num_messages=batch, timeout=0.5) if m.error() is None]
        if not messages:
            committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
            if all(committed[p] >= ends[p] for p in range(partitions)):
                consumer.close()
                print("done", flush=True)
                return 0
            continue
        producer.begin_transaction()
        for m in messages:
            partition, offset = m.partition(), m.offset()
            assert partition is not None and offset is not None
            producer.produce(sink, key=m.key(), value=output_value(partition, offset), partition=partition)
        assert producer.flush(DEFAULT_TIMEOUT_S) == 0
        batches += 1
        print(f"produced {batches}", flush=True)
        if batches == pause_after_produce:
            sys.stdin.read()  # until the test kills the process
        producer.send_offsets_to_transaction(
            consumer.position(tps), consumer.consumer_group_metadata(), DEFAULT_TIMEOUT_S
        )
        producer.commit_transaction(DEFAULT_TIMEOUT_S)
        print(f"committed {batches}", flush=True)
    print("timed out", flush=True)
    return 1


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["ctp"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--txn-id", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--pause-after-produce", type=int, default=None)
    args = parser.parse_args(argv)
    return run_ctp_app(
        args.bootstrap,
        args.source,
        args.sink,
        args.group,
        args.txn_id,
        args.partitions,
        args.batch,
        args.pause_after_produce,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
