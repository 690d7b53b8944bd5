"""Transactions (KIP-98) end to end: real clients' transactional producers against a single-node broker.

- The checker, per client (confluent-kafka, aiokafka, kafka-python): interleaved transactions of
  several transactional producers over three partitions, seeded commits and aborts; read_committed
  sees exactly the committed records, once each, in order and never torn; read_uncommitted sees the
  aborted ones too.
- Zombie fencing: a second producer with the same transactional id fences the first.
- Transaction timeout: the coordinator aborts a hung transaction, and the LSO holds read_committed
  consumers back until it does.
- Consume-transform-produce with TxnOffsetCommit (confluent-kafka in a subprocess killed with
  SIGKILL and restarted; aiokafka in process): one output per input, the group's offsets at the end.
- ListOffsets read_committed answers the LSO, read_uncommitted the HW.
- OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT while a TxnOffsetCommit is pending.

Every wait polls for a condition with a deadline; consumers read up to sentinel records written
after the workload (see ``txn_support``).
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from tests.integration.broker_process import ROOT, BrokerProcess
from tests.integration.client_helpers import Consumed, create_topic, unique_topic, wait_until
from tests.integration.txn_support import (
    DEFAULT_TIMEOUT_S,
    SENTINEL,
    Plan,
    check_consumed,
    consume_to_sentinels,
    output_value,
    plan_transactions,
    run_plan_aiokafka,
    run_plan_confluent,
    run_plan_kafka_python,
    write_sentinels,
)
from tests.integration.wire_client import WireClient

PARTITIONS = 3
PRODUCERS = 4
TXNS_PER_PRODUCER = 8

pytestmark = pytest.mark.timeout(120)


def _run_plan(client: str, bootstrap: str, topic: str, plan: Plan) -> None:
    if client == "confluent":
        run_plan_confluent(bootstrap, topic, plan)
    elif client == "kafka-python":
        run_plan_kafka_python(bootstrap, topic, plan)
    else:
        asyncio.run(run_plan_aiokafka(bootstrap, topic, plan))


# ---------------------------------------------------------------------------------------------- checker


@pytest.mark.parametrize(("client", "seed"), [("confluent", 11), ("aiokafka", 22), ("kafka-python", 33)])
def test_checker_interleaved_transactions(broker: BrokerProcess, client: str, seed: int) -> None:
    """Transactional producers of ``client`` run a seeded interleaving of transactions; read with the
    same client afterwards (whole fetches, then one-batch fetches) and by a read_committed confluent
    consumer tailing the topic while they run."""
    topic = unique_topic(f"txn-check-{client}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    plan = plan_transactions(
        topic, producers=PRODUCERS, txns=TXNS_PER_PRODUCER, partitions=PARTITIONS, seed=seed
    )
    live: list[list[Consumed]] = []
    failures: list[BaseException] = []

    def tail() -> None:
        try:
            live.append(
                consume_to_sentinels("confluent", broker.bootstrap, topic, PARTITIONS, "read_committed")
            )
        except BaseException as exc:
            failures.append(exc)

    tailer = threading.Thread(target=tail, daemon=True)
    tailer.start()
    _run_plan(client, broker.bootstrap, topic, plan)
    write_sentinels(broker.bootstrap, topic, PARTITIONS)

    committed = consume_to_sentinels(client, broker.bootstrap, topic, PARTITIONS, "read_committed")
    committed_counts = check_consumed(plan, committed, committed_only=True)
    small = consume_to_sentinels(
        client, broker.bootstrap, topic, PARTITIONS, "read_committed", small_fetches=True
    )
    assert check_consumed(plan, small, committed_only=True) == committed_counts
    uncommitted = consume_to_sentinels(client, broker.bootstrap, topic, PARTITIONS, "read_uncommitted")
    uncommitted_counts = check_consumed(plan, uncommitted, committed_only=False)
    tailer.join(DEFAULT_TIMEOUT_S)
    assert not tailer.is_alive() and not failures, failures
    assert check_consumed(plan, live[0], committed_only=True) == committed_counts

    summary = plan.summary()
    print(
        f"checker[{client}]: {summary}; read_committed saw {committed_counts['seen']} "
        f"(aborted {committed_counts['aborted_seen']}), also with one-batch fetches and live; "
        f"read_uncommitted saw {uncommitted_counts['seen']} (aborted {uncommitted_counts['aborted_seen']})"
    )
    assert summary["committed_txns"] > 0 and summary["aborted_txns"] > 0
    assert committed_counts == {"seen": summary["committed_records"], "aborted_seen": 0}
    assert uncommitted_counts == {
        "seen": summary["committed_records"] + summary["aborted_records"],
        "aborted_seen": summary["aborted_records"],
    }


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_checker_after_broker_restart(fresh_broker: BrokerProcess, sig: signal.Signals) -> None:
    """The checker's workload (confluent-kafka) and one transaction left open, then the broker is
    stopped with ``sig`` and restarted: the aborted transaction index, the open transaction and so
    the LSO come back from the log (SIGKILL: with recovery), both isolation levels read what they
    read before, and a new producer with the open transaction's id gets it aborted."""
    from confluent_kafka import Producer

    broker = fresh_broker.start()
    topic = unique_topic("txn-check-restart")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    plan = plan_transactions(
        topic, producers=PRODUCERS, txns=TXNS_PER_PRODUCER // 2, partitions=PARTITIONS, seed=44
    )
    run_plan_confluent(broker.bootstrap, topic, plan)
    write_sentinels(broker.bootstrap, topic, PARTITIONS)
    committed = consume_to_sentinels("confluent", broker.bootstrap, topic, PARTITIONS, "read_committed")
    before = check_consumed(plan, committed, committed_only=True)

    open_at = _end_offset(broker.bootstrap, topic, "read_uncommitted")
    hung_id = f"{topic}-open"
    hung = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": hung_id})
    hung.init_transactions(DEFAULT_TIMEOUT_S)
    hung.begin_transaction()
    for i in range(2):
        hung.produce(topic, value=f"open-{i}".encode(), partition=0)
    assert hung.flush(DEFAULT_TIMEOUT_S) == 0
    assert _end_offset(broker.bootstrap, topic, "read_committed") == open_at

    broker.restart(sig)
    assert _end_offset(broker.bootstrap, topic, "read_committed") == open_at, "the open transaction was lost"
    assert _end_offset(broker.bootstrap, topic, "read_uncommitted") == open_at + 2
    for small_fetches in (False, True):
        committed = consume_to_sentinels(
            "kafka-python", broker.bootstrap, topic, PARTITIONS, "read_committed", small_fetches=small_fetches
        )
        assert check_consumed(plan, committed, committed_only=True) == before

    successor = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": hung_id})
    successor.init_transactions(DEFAULT_TIMEOUT_S)  # aborts the open transaction
    assert wait_until(lambda: _end_offset(broker.bootstrap, topic, "read_committed") == open_at + 3, 15)
    write_sentinels(broker.bootstrap, topic, PARTITIONS)
    committed = consume_to_sentinels(
        "confluent", broker.bootstrap, topic, PARTITIONS, "read_committed", sentinels=2
    )
    assert check_consumed(plan, committed, committed_only=True) == before
    uncommitted = consume_to_sentinels(
        "confluent", broker.bootstrap, topic, PARTITIONS, "read_uncommitted", sentinels=2
    )
    assert {b"open-0", b"open-1"} <= _values(uncommitted)
    counts = check_consumed(
        plan, [r for r in uncommitted if not (r.value or b"").startswith(b"open-")], committed_only=False
    )
    summary = plan.summary()
    assert before == {"seen": summary["committed_records"], "aborted_seen": 0}
    assert counts["aborted_seen"] == summary["aborted_records"]
    print(
        f"checker after {sig.name} restart: {summary}; read_committed saw {before['seen']} before and after"
    )


# ---------------------------------------------------------------------------------------------- fencing


def _is_fenced(exc: BaseException) -> bool:
    """The client's fenced error: ProducerFenced or INVALID_PRODUCER_EPOCH in its own spelling."""
    from aiokafka.errors import InvalidProducerEpoch, ProducerFenced
    from confluent_kafka import KafkaError, KafkaException
    from kafka.errors import InvalidProducerEpochError, ProducerFencedError

    if isinstance(
        exc, ProducerFenced | InvalidProducerEpoch | ProducerFencedError | InvalidProducerEpochError
    ):
        return True
    if isinstance(exc, SystemError) and isinstance(exc.__context__, KafkaException):
        exc = exc.__context__
    if isinstance(exc, KafkaException):
        code = exc.args[0].code()
        return code in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    return False


def _values(records: list[Consumed]) -> set[bytes]:
    return {r.value for r in records if r.value is not None and r.value != SENTINEL}


def _fencing_confluent(bootstrap: str, topic: str, txn_id: str) -> list[BaseException]:
    """Returns the errors the zombie met after the second producer's init_transactions."""
    from confluent_kafka import KafkaException, Producer

    def make() -> Any:
        return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2})

    zombie = make()
    zombie.init_transactions(DEFAULT_TIMEOUT_S)
    zombie.begin_transaction()
    for p in (0, 1):
        zombie.produce(topic, value=f"before-{p}".encode(), partition=p)
    assert zombie.flush(DEFAULT_TIMEOUT_S) == 0
    successor = make()
    successor.init_transactions(DEFAULT_TIMEOUT_S)
    errors: list[BaseException] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(KafkaException(err))

    for p in (0, 2):  # one partition already in the transaction, one new to it
        try:
            zombie.produce(topic, value=f"after-{p}".encode(), partition=p, on_delivery=on_delivery)
        except KafkaException as exc:
            errors.append(exc)
    try:  # the fatal error may also surface here (as a SystemError around the KafkaException)
        zombie.flush(DEFAULT_TIMEOUT_S)
    except (KafkaException, SystemError) as exc:
        errors.append(exc)
    try:
        zombie.commit_transaction(DEFAULT_TIMEOUT_S)
    except KafkaException as exc:
        errors.append(exc)
    else:
        raise AssertionError("the zombie's commit succeeded after it was fenced")
    successor.begin_transaction()
    for p in range(PARTITIONS):
        successor.produce(topic, value=f"successor-{p}".encode(), partition=p)
    successor.commit_transaction(DEFAULT_TIMEOUT_S)
    return errors


def _clear_frames(error: BaseException | None) -> None:
    """Drop the locals of the frames ``error`` (and what it chains) holds, so that a client object
    in them is destroyed now, not when the test session ends (a librdkafka handle left alive keeps
    reconnecting to a stopped broker and logging it)."""
    while error is not None:
        traceback.clear_frames(error.__traceback__)
        error = error.__cause__ or error.__context__


def _fencing_kafka_python(bootstrap: str, topic: str, txn_id: str) -> list[BaseException]:
    from kafka import KafkaProducer

    def make() -> Any:
        return KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=2)

    zombie, successor = make(), make()
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        for p in (0, 1):
            zombie.send(topic, value=f"before-{p}".encode(), partition=p).get(timeout=DEFAULT_TIMEOUT_S)
        successor.init_transactions()
        errors: list[BaseException] = []
        for p in (0, 2):
            try:
                zombie.send(topic, value=f"after-{p}".encode(), partition=p).get(timeout=DEFAULT_TIMEOUT_S)
            except Exception as exc:  # whatever the client raises is checked below
                errors.append(exc)
        try:
            zombie.commit_transaction()
        except Exception as exc:
            errors.append(exc)
        else:
            raise AssertionError("the zombie's commit succeeded after it was fenced")
        successor.begin_transaction()
        for p in range(PARTITIONS):
            successor.send(topic, value=f"successor-{p}".encode(), partition=p)
        successor.commit_transaction()
        return errors
    finally:
        zombie.close(timeout=5)
        successor.close(timeout=5)


async def _fencing_aiokafka(bootstrap: str, topic: str, txn_id: str) -> list[BaseException]:
    from aiokafka import AIOKafkaProducer

    def make() -> Any:
        return AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=2)

    zombie, successor = make(), make()
    await zombie.start()
    try:
        await zombie.begin_transaction()
        for p in (0, 1):
            await zombie.send_and_wait(topic, value=f"before-{p}".encode(), partition=p)
        await successor.start()
        errors: list[BaseException] = []
        for p in (0, 2):
            try:
                await asyncio.wait_for(
                    zombie.send_and_wait(topic, value=f"after-{p}".encode(), partition=p), DEFAULT_TIMEOUT_S
                )
            except Exception as exc:
                errors.append(exc)
        try:
            await asyncio.wait_for(zombie.commit_transaction(), DEFAULT_TIMEOUT_S)
        except Exception as exc:
            errors.append(exc)
        else:
            raise AssertionError("the zombie's commit succeeded after it was fenced")
        await successor.begin_transaction()
        for p in range(PARTITIONS):
            await successor.send_and_wait(topic, value=f"successor-{p}".encode(), partition=p)
        await successor.commit_transaction()
        return errors
    finally:
        await zombie.stop()
        await successor.stop()


@pytest.mark.parametrize("client", ["confluent", "aiokafka", "kafka-python"])
def test_zombie_producer_is_fenced(broker: BrokerProcess, client: str) -> None:
    """After a second producer's init_transactions with the same id, the first one's produce and commit
    fail fenced; its open transaction is aborted, and nothing it sent afterwards reaches the log."""
    topic = unique_topic(f"txn-zombie-{client}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    txn_id = f"{topic}-shared"
    if client == "confluent":
        errors = _fencing_confluent(broker.bootstrap, topic, txn_id)
        for error in errors:  # their tracebacks hold its frame: the zombie would outlive the test
            _clear_frames(error)
    elif client == "kafka-python":
        errors = _fencing_kafka_python(broker.bootstrap, topic, txn_id)
    else:
        errors = asyncio.run(_fencing_aiokafka(broker.bootstrap, topic, txn_id))
    assert errors, "the zombie met no error"
    assert any(_is_fenced(e) for e in errors), f"no fenced error among {errors!r}"
    write_sentinels(broker.bootstrap, topic, PARTITIONS)

    successor = {f"successor-{p}".encode() for p in range(PARTITIONS)}
    before = {b"before-0", b"before-1"}
    committed = _values(
        consume_to_sentinels("confluent", broker.bootstrap, topic, PARTITIONS, "read_committed")
    )
    assert committed == successor
    uncommitted = _values(
        consume_to_sentinels("confluent", broker.bootstrap, topic, PARTITIONS, "read_uncommitted")
    )
    assert uncommitted == successor | before, "a fenced write reached the log"


# --------------------------------------------------------------------------------------------- timeouts

HUNG_TIMEOUT_MS = 6000


def test_hung_transaction_is_aborted_by_timeout_and_holds_the_lso(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """A transaction never ended is aborted by the coordinator after ``transaction.timeout.ms``; until
    then a read_committed consumer sees nothing past its first offset, afterwards everything but it."""
    from confluent_kafka import KafkaException, Producer
    from kafka import KafkaProducer

    broker = broker_factory(["transaction.abort.timed.out.transaction.cleanup.interval.ms=500"])
    topic = unique_topic("txn-hung")
    create_topic(broker.bootstrap, topic, 1)
    hung = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": f"{topic}-hung",
            "transaction.timeout.ms": HUNG_TIMEOUT_MS,
            "linger.ms": 2,
        }
    )
    hung.init_transactions(DEFAULT_TIMEOUT_S)
    began = time.monotonic()
    hung.begin_transaction()
    for i in range(3):
        hung.produce(topic, value=f"hung-{i}".encode(), partition=0)
    assert hung.flush(DEFAULT_TIMEOUT_S) == 0

    plain = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(3):
            plain.send(topic, value=f"plain-{i}".encode(), partition=0).get(timeout=DEFAULT_TIMEOUT_S)
    finally:
        plain.close(timeout=5)
    other = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic}-other"})
    other.init_transactions(DEFAULT_TIMEOUT_S)
    other.begin_transaction()
    for i in range(3):
        other.produce(topic, value=f"txn-{i}".encode(), partition=0)
    other.commit_transaction(DEFAULT_TIMEOUT_S)
    write_sentinels(broker.bootstrap, topic, 1)

    # still within the hung transaction's timeout: the LSO is its first offset, the HW past the sentinel
    assert time.monotonic() - began < HUNG_TIMEOUT_MS / 1000 - 0.5, (
        "the writes took too long to check the LSO"
    )
    assert _end_offset(broker.bootstrap, topic, "read_committed") == 0
    assert _end_offset(broker.bootstrap, topic, "read_uncommitted") == 3 + 3 + 3 + 1 + 1  # + commit marker

    records = consume_to_sentinels("confluent", broker.bootstrap, topic, 1, "read_committed", timeout_s=30)
    unblocked_after = time.monotonic() - began
    print(f"hung transaction: read_committed unblocked {unblocked_after:.2f}s after it began")
    assert unblocked_after >= HUNG_TIMEOUT_MS / 1000 - 0.2, "read_committed passed an open transaction"
    values = [r.value for r in records]
    assert values == [
        *(f"plain-{i}".encode() for i in range(3)),
        *(f"txn-{i}".encode() for i in range(3)),
        SENTINEL,
    ]
    assert [r.offset for r in records] == [3, 4, 5, 6, 7, 8, 10]
    # the hung producer was fenced by the timeout's epoch bump: its commit fails
    with pytest.raises(KafkaException):
        hung.commit_transaction(10)


def _end_offset(bootstrap: str, topic: str, isolation: str, partition: int = 0) -> int:
    """ListOffsets latest at ``isolation`` through kafka-python's consumer (LSO or HW)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, isolation_level=isolation)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------------ ListOffsets


def test_list_offsets_read_committed_answers_the_lso(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = unique_topic("txn-lso")
    create_topic(broker.bootstrap, topic, 1)
    plain = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    txn = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic}-txn")
    try:
        for i in range(3):
            plain.send(topic, value=f"plain-{i}".encode(), partition=0).get(timeout=DEFAULT_TIMEOUT_S)
        txn.init_transactions()
        txn.begin_transaction()
        for i in range(4):
            txn.send(topic, value=f"txn-{i}".encode(), partition=0).get(timeout=DEFAULT_TIMEOUT_S)
        plain.send(topic, value=b"plain-after", partition=0).get(timeout=DEFAULT_TIMEOUT_S)
        assert _end_offset(broker.bootstrap, topic, "read_committed") == 3  # the open transaction's first
        assert _end_offset(broker.bootstrap, topic, "read_uncommitted") == 8  # the HW
        txn.commit_transaction()
        # the COMMIT marker (offset 8) is written after EndTxn answers: wait for it
        assert wait_until(lambda: _end_offset(broker.bootstrap, topic, "read_committed") == 9, 15), (
            _end_offset(broker.bootstrap, topic, "read_committed")
        )
        assert _end_offset(broker.bootstrap, topic, "read_uncommitted") == 9
    finally:
        plain.close(timeout=5)
        txn.close(timeout=5)


# ------------------------------------------------------------------------------ OffsetFetch require_stable


def _fetch_offset(port: int, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    """OffsetFetch v7 (one group) for partition 0: (error code, committed offset)."""
    with WireClient(port) as client:
        body = client.request(
            ApiKey.OFFSET_FETCH,
            7,
            {
                "group_id": group,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "require_stable": require_stable,
            },
        ).body
    assert body.error_code == ErrorCode.NONE, body
    [partition] = body.topics[0].partitions
    return partition.error_code, partition.committed_offset


def test_offset_fetch_require_stable_while_txn_offset_commit_pending(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic = unique_topic("txn-stable")
    create_topic(broker.bootstrap, topic, 1)
    group = f"{topic}-group"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic}-txn")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(5, "", -1)}, group)
        assert _fetch_offset(broker.port, group, topic, True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert _fetch_offset(broker.port, group, topic, False) == (ErrorCode.NONE, -1)
        producer.commit_transaction()
        assert wait_until(lambda: _fetch_offset(broker.port, group, topic, True) == (ErrorCode.NONE, 5), 15)

        producer.begin_transaction()
        producer.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(9, "", -1)}, group)
        assert _fetch_offset(broker.port, group, topic, True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert _fetch_offset(broker.port, group, topic, False) == (ErrorCode.NONE, 5)
        producer.abort_transaction()
        assert wait_until(lambda: _fetch_offset(broker.port, group, topic, True) == (ErrorCode.NONE, 5), 15)
    finally:
        producer.close(timeout=5)


# ---------------------------------------------------------------------------- consume-transform-produce

CTP_INPUTS = 300
CTP_BATCH = 10


def _ctp_input(bootstrap: str, source: str) -> dict[int, int]:
    """``CTP_INPUTS`` committed (non-transactional) inputs over the partitions; returns their end offsets."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        futures = [
            producer.send(source, key=f"in-{i}".encode(), value=f"in-{i}".encode(), partition=i % PARTITIONS)
            for i in range(CTP_INPUTS)
        ]
        metadata = [f.get(timeout=DEFAULT_TIMEOUT_S) for f in futures]
    finally:
        producer.close(timeout=5)
    ends = {p: 0 for p in range(PARTITIONS)}
    for m in metadata:
        ends[m.partition] = max(ends[m.partition], m.offset + 1)
    return ends


def _check_ctp_output(broker: BrokerProcess, sink: str, group: str, source: str, ends: dict[int, int]) -> int:
    """Exactly one read_committed output per input, and the group's committed offsets at the input end."""
    from kafka import KafkaConsumer, TopicPartition

    write_sentinels(broker.bootstrap, sink, PARTITIONS)
    records = consume_to_sentinels("confluent", broker.bootstrap, sink, PARTITIONS, "read_committed")
    outputs = [r for r in records if r.value != SENTINEL]
    expected = {output_value(p, o) for p, end in ends.items() for o in range(end)}
    values = [r.value for r in outputs]
    duplicates = len(values) - len(set(values))
    missing = expected - set(values)
    assert duplicates == 0 and not missing and set(values) == expected, (
        f"{len(values)} outputs for {len(expected)} inputs: {duplicates} duplicates, {len(missing)} missing"
    )
    for r in outputs:
        assert r.value is not None and r.value.startswith(f"out|{r.partition}|".encode())

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        for p, end in ends.items():
            assert consumer.committed(TopicPartition(source, p)) == end
    finally:
        consumer.close()
    for p, end in ends.items():
        with WireClient(broker.port) as client:
            body = client.request(
                ApiKey.OFFSET_FETCH,
                7,
                {
                    "group_id": group,
                    "topics": [{"name": source, "partition_indexes": [p]}],
                    "require_stable": True,
                },
            ).body
        [partition] = body.topics[0].partitions
        assert (partition.error_code, partition.committed_offset) == (ErrorCode.NONE, end)
    return len(outputs)


class _App:
    """The consume-transform-produce app of ``txn_support`` in its own process, its output read
    line by line (with a deadline) by a reader thread."""

    def __init__(
        self,
        broker: BrokerProcess,
        source: str,
        sink: str,
        group: str,
        txn_id: str,
        pause_at: int | None = None,
    ) -> None:
        import threading

        args = [
            sys.executable, "-m", "tests.integration.txn_support", "ctp",
            "--bootstrap", broker.bootstrap, "--source", source, "--sink", sink, "--group", group,
            "--txn-id", txn_id, "--partitions", str(PARTITIONS), "--batch", str(CTP_BATCH),
        ]  # fmt: skip
        if pause_at is not None:
            args += ["--pause-after-produce", str(pause_at)]
        self.process = subprocess.Popen(
            args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, line: str, timeout_s: float) -> bool:
        return wait_until(lambda: line in self.lines, timeout_s)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()  # SIGKILL
        self.process.wait(timeout=10)
        self._reader.join(timeout=10)

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the app did not finish in {timeout_s}s: {self.lines[-20:]}") from None
        self._reader.join(timeout=10)
        return code


@pytest.mark.timeout(150)
def test_consume_transform_produce_killed_and_restarted(broker: BrokerProcess) -> None:
    """The app is SIGKILLed after a seeded batch's outputs were delivered, its transaction (outputs and
    offsets) still open, and restarted: the restart fences and aborts the dead instance's transaction,
    resumes from the group's stable offsets, and the output holds each input's output exactly once."""
    source, sink = unique_topic("txn-ctp-in"), unique_topic("txn-ctp-out")
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, sink, PARTITIONS)
    group, txn_id = f"{source}-group", f"{source}-app"
    ends = _ctp_input(broker.bootstrap, source)
    kill_at = random.Random(4).randint(3, CTP_INPUTS // CTP_BATCH // 2)

    first = _App(broker, source, sink, group, txn_id, pause_at=kill_at)
    try:
        assert first.wait_for_line(f"produced {kill_at}", DEFAULT_TIMEOUT_S), first.lines[-20:]
    finally:
        first.kill()
    killed_after = [line for line in first.lines if line.startswith("committed")]
    assert len(killed_after) == kill_at - 1, first.lines[-20:]

    second = _App(broker, source, sink, group, txn_id)
    assert second.wait(90) == 0, second.lines[-20:]
    assert second.lines[-1] == "done"
    outputs = _check_ctp_output(broker, sink, group, source, ends)
    # the killed batch's outputs were written (then aborted by the restart's init_transactions)
    uncommitted = consume_to_sentinels("confluent", broker.bootstrap, sink, PARTITIONS, "read_uncommitted")
    aborted = len(uncommitted) - PARTITIONS - outputs  # the same values again: outputs are deterministic
    assert len(_values(uncommitted)) == outputs and 0 < aborted <= CTP_BATCH, (len(uncommitted), outputs)
    print(
        f"consume-transform-produce: killed at batch {kill_at} after {len(killed_after)} commits; "
        f"restart ran {sum(1 for line in second.lines if line.startswith('committed'))} batches; "
        f"{outputs} outputs for {CTP_INPUTS} inputs, {aborted} aborted outputs of the killed batch"
    )


def test_consume_transform_produce_aiokafka(broker: BrokerProcess) -> None:
    """The same flow in aiokafka: read_committed consumer of a group, transactional producer,
    send_offsets_to_transaction per batch."""
    source, sink = unique_topic("txn-ctp-aio-in"), unique_topic("txn-ctp-aio-out")
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, sink, PARTITIONS)
    group = f"{source}-group"
    ends = _ctp_input(broker.bootstrap, source)

    async def app() -> int:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{source}-app")
        await consumer.start()
        await producer.start()
        batches = 0
        try:
            consumer.assign([TopicPartition(source, p) for p in range(PARTITIONS)])
            done = dict.fromkeys(range(PARTITIONS), 0)
            deadline = time.monotonic() + DEFAULT_TIMEOUT_S
            while any(done[p] < ends[p] for p in done):
                assert time.monotonic() < deadline, f"aiokafka app stuck at {done} of {ends}"
                fetched = await consumer.getmany(timeout_ms=500, max_records=CTP_BATCH)
                if not fetched:
                    continue
                async with producer.transaction():
                    offsets = {}
                    for tp, messages in fetched.items():
                        for m in messages:
                            await producer.send(
                                sink,
                                key=m.key,
                                value=output_value(tp.partition, m.offset),
                                partition=tp.partition,
                            )
                        offsets[tp] = messages[-1].offset + 1
                    await producer.send_offsets_to_transaction(offsets, group)
                for tp, offset in offsets.items():
                    done[tp.partition] = offset
                batches += 1
            return batches
        finally:
            await producer.stop()
            await consumer.stop()

    batches = asyncio.run(app())
    outputs = _check_ctp_output(broker, sink, group, source, ends)
    print(
        f"consume-transform-produce (aiokafka): {batches} transactions, "
        f"{outputs} outputs for {CTP_INPUTS} inputs"
    )
