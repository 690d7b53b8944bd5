"""quixstreams with ``processing_guarantee="exactly-once"``: a stateful job, end to end, on a real broker.

The job keeps a running count and sum per key (``StreamingDataFrame.apply(..., stateful=True)``, state
in RocksDB with a changelog topic) and writes one record per input to an output topic. With
exactly-once, quixstreams' producer is transactional (a fresh ``transactional.id`` per process): each
checkpoint produces the outputs and the changelog records, commits the consumer offsets with
TxnOffsetCommit and ends the transaction with EndTxn, so the broker runs the whole of KIP-98: the
transaction coordinator, markers into three kinds of partitions (output, changelog,
``__consumer_offsets``), the LSO and read_committed fetches, transactional offset commits, and the
abort of a transaction whose producer died (its timeout, since the next process has another id).

The app runs in a child process (this module, run as ``python -m``); the test stops it with SIGTERM
once the group's committed offsets reach the end of the input, or kills it with SIGKILL half-way and
starts it again on an empty state directory, so its state comes back from the changelog topic alone.
Either way a read_committed consumer of the output must see, for every input record, exactly one
output whose count and sum are those of the inputs of its key up to it, in input order per key.

Before transactions worked this job exited after its first checkpoint (5-8 s) with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the broker refused the group coordinator's own transactional
offsets batch for lack of a transactional id (see test_offsets_topic_log.py).

quixstreams 3.28.1 declares ``confluent-kafka<2.13`` while the suite pins confluent-kafka 2.16.1 (no
quixstreams release allows 2.16): it is installed with ``pip install --no-deps`` beside its other
dependencies and ``confluent-kafka[avro,json,protobuf,schemaregistry]==2.16.1``, and works with it.
Without quixstreams the module is skipped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker_process import ROOT, BrokerProcess
from tests.integration.client_helpers import create_topic, unique_topic

RECORDS = 2_000
KEYS = 6
PARTITIONS = 3
TRANSACTION_TIMEOUT_MS = 6_000
"""The app's ``transaction.timeout.ms``: after a SIGKILL the broker aborts the dead producer's open
transaction when it times out (the restarted app has another transactional id), and until then
read_committed readers of its partitions wait at the LSO."""
SESSION_TIMEOUT_MS = 6_000
"""The app consumer's ``session.timeout.ms`` (the broker's minimum)."""
DONE_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0


def _expected(records: list[tuple[str, int, int]]) -> dict[str, list[dict[str, int]]]:
    """Per key, the outputs of the running count and sum, in input order."""
    count: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    out: dict[str, list[dict[str, int]]] = defaultdict(list)
    for key, seq, n in records:
        count[key] += 1
        total[key] += n
        out[key].append({"seq": seq, "count": count[key], "sum": total[key]})
    return dict(out)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that looks for timed-out transactions every 500 ms (Kafka's default is 10 s)."""
    pytest.importorskip(
        "quixstreams",
        reason="quixstreams not installed: pip install --no-deps quixstreams==3.28.1 (module doc)",
    )
    process = BrokerProcess(
        tmp_path_factory.mktemp("broker"),
        overrides=["transaction.abort.timed.out.transaction.cleanup.interval.ms=500"],
    ).start()
    yield process
    process.stop()


class Job:
    """Input and output topics, the app's group, and its child processes."""

    def __init__(self, broker: BrokerProcess, tmp_path: Path, name: str, per_record_s: float) -> None:
        self.broker = broker
        self.tmp_path = tmp_path
        self.input = unique_topic(f"qx-{name}-in")
        self.output = unique_topic(f"qx-{name}-out")
        self.group = unique_topic(f"qx-{name}-group")
        self.per_record_s = per_record_s
        self.runs = 0
        self.process: subprocess.Popen[bytes] | None = None
        create_topic(broker.bootstrap, self.input, PARTITIONS)
        create_topic(broker.bootstrap, self.output, PARTITIONS)

    def produce_input(self) -> list[tuple[str, int, int]]:
        from confluent_kafka import Producer

        # Small batches: a fetch returns at least one whole batch whatever its limits (KIP-74).
        producer = Producer({"bootstrap.servers": self.broker.bootstrap, "linger.ms": 5, "batch.size": 1024})
        records = [(f"key-{seq % KEYS}", seq, seq * 7 % 101) for seq in range(RECORDS)]
        for key, seq, n in records:
            producer.produce(self.input, key=key.encode(), value=json.dumps({"seq": seq, "n": n}).encode())
        assert producer.flush(30) == 0
        return records

    def start(self) -> None:
        """Start the app on a state directory of its own (a restart recovers from the changelog)."""
        self.runs += 1
        state_dir = self.tmp_path / f"state-{self.runs}"
        log = (self.tmp_path / f"app-{self.runs}.out").open("wb")
        args = [self.broker.bootstrap, self.group, str(state_dir), self.input, self.output]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.test_quixstreams_eos", *args, str(self.per_record_s)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        log.close()

    def stop(self, sig: int) -> int:
        """Signal the app and wait for its exit (bounded); returns the exit code."""
        assert self.process is not None
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the app did not exit within {EXIT_TIMEOUT_S}s of {sig!r}") from None
        self.process = None
        return code

    def kill_if_running(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def app_output(self) -> str:
        return "\n".join(
            f"--- app run {run}\n" + (self.tmp_path / f"app-{run}.out").read_text(errors="replace")[-6000:]
            for run in range(1, self.runs + 1)
        )

    def committed(self) -> int:
        return sum(self.committed_by_partition())

    def committed_by_partition(self) -> list[int]:
        """The group's committed input offsets (stable ones: pending transactional commits are
        retried by librdkafka, or count as not yet there)."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": self.group})
        try:
            offsets = consumer.committed(
                [TopicPartition(self.input, p) for p in range(PARTITIONS)], timeout=5
            )
        except KafkaException:
            return [0] * PARTITIONS
        finally:
            consumer.close()
        return [max(tp.offset, 0) for tp in offsets]

    def wait_committed(self, at_least: int, timeout_s: float = DONE_TIMEOUT_S) -> int:
        deadline = time.monotonic() + timeout_s
        while True:
            committed = self.committed()
            if committed >= at_least:
                return committed
            assert self.process is not None and self.process.poll() is None, (
                f"the app exited ({self.process and self.process.returncode}) with {committed} of "
                f"{at_least} input records committed\n{self.app_output()}"
            )
            assert time.monotonic() < deadline, (
                f"{committed} of {at_least} input records committed after {timeout_s}s\n{self.app_output()}"
            )
            time.sleep(0.1)

    def output_backlog(self) -> int:
        """Output records in open transactions now: high watermark minus LSO, over the partitions."""
        from confluent_kafka import Consumer, TopicPartition

        consumers = {
            level: Consumer(
                {"bootstrap.servers": self.broker.bootstrap, "group.id": "qx-probe", "isolation.level": level}
            )
            for level in ("read_uncommitted", "read_committed")
        }
        try:
            ends = {
                level: sum(
                    consumer.get_watermark_offsets(TopicPartition(self.output, p), timeout=5, cached=False)[1]
                    for p in range(PARTITIONS)
                )
                for level, consumer in consumers.items()
            }
        finally:
            for consumer in consumers.values():
                consumer.close()
        return ends["read_uncommitted"] - ends["read_committed"]

    def read_output(self, isolation: str) -> list[tuple[str, dict[str, int]]]:
        """Every output record up to the partitions' ends (the LSO under read_committed)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.broker.bootstrap,
                "group.id": "qx-reader",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        try:
            consumer.assign([TopicPartition(self.output, p, 0) for p in range(PARTITIONS)])
            records: list[tuple[str, dict[str, int]]] = []
            at_end: set[int] = set()
            deadline = time.monotonic() + 30
            while len(at_end) < PARTITIONS:
                assert time.monotonic() < deadline, (
                    f"output not read to its end in 30 s ({len(records)} read)"
                )
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().code() == -191:  # _PARTITION_EOF
                        at_end.add(message.partition())
                        continue
                    raise AssertionError(str(message.error()))
                at_end.discard(message.partition())
                records.append((message.key().decode(), json.loads(message.value())))
            return records
        finally:
            consumer.close()


def check_output(job: Job, records: list[tuple[str, int, int]]) -> list[tuple[str, dict[str, int]]]:
    committed = job.read_output("read_committed")
    by_key: dict[str, list[dict[str, int]]] = defaultdict(list)
    for key, value in committed:
        by_key[key].append(value)
    seqs = [value["seq"] for _, value in committed]
    duplicated = sorted({s for s in seqs if seqs.count(s) > 1})
    missing = sorted(set(range(RECORDS)) - set(seqs))
    assert (len(committed), duplicated[:10], missing[:10]) == (RECORDS, [], []), job.app_output()
    assert dict(by_key) == _expected(records)
    return committed


@pytest.fixture
def job_factory(broker: BrokerProcess, tmp_path: Path) -> Iterator[Any]:
    jobs: list[Job] = []

    def make(name: str, per_record_s: float = 0.0) -> Job:
        job = Job(broker, tmp_path, name, per_record_s)
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.kill_if_running()


def test_stateful_job_runs_to_the_end(job_factory: Any) -> None:
    job: Job = job_factory("clean")
    records = job.produce_input()
    job.start()
    assert job.wait_committed(RECORDS) == RECORDS
    assert job.stop(signal.SIGTERM) == 0, job.app_output()
    check_output(job, records)
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" not in job.app_output()


def test_killed_job_restarts_from_the_changelog_with_each_input_once(job_factory: Any) -> None:
    """SIGKILL half-way, while a transaction holds outputs; the restart on an empty state directory
    recovers the counts from the changelog (read_committed: the dead transaction's changelog records
    must not count) and goes on from the committed offsets; the dead producer's outputs are aborted."""
    job: Job = job_factory("killed", per_record_s=0.003)
    records = job.produce_input()
    job.start()
    job.wait_committed(RECORDS // 4)
    deadline = time.monotonic() + 10
    while job.output_backlog() == 0:  # kill it inside a transaction that has written outputs
        assert time.monotonic() < deadline, "no open transaction with outputs seen in 10 s"
        time.sleep(0.02)
    assert job.stop(signal.SIGKILL) == -signal.SIGKILL
    at_kill = job.committed_by_partition()
    ends = [
        sum(1 for key, _, _ in records if zlib.crc32(key.encode()) % PARTITIONS == p)
        for p in range(PARTITIONS)
    ]
    # Every partition half-done: each one's state must come back from the changelog.
    assert all(0 < done < end for done, end in zip(at_kill, ends)), (at_kill, ends)
    job.start()
    assert job.wait_committed(RECORDS) == RECORDS
    assert job.stop(signal.SIGTERM) == 0, job.app_output()
    check_output(job, records)
    uncommitted = job.read_output("read_uncommitted")
    assert len(uncommitted) > RECORDS, "the killed transaction's outputs should be in the log, aborted"


# -- the app, run as `python -m tests.integration.test_quixstreams_eos BOOTSTRAP GROUP STATE IN OUT S` --


def run_app(
    bootstrap: str, group: str, state_dir: str, input_topic: str, output_topic: str, sleep: float
) -> None:
    from quixstreams import Application, State

    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        processing_guarantee="exactly-once",
        state_dir=state_dir,
        auto_offset_reset="earliest",
        commit_interval=0.5,
        producer_extra_config={"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS},
        consumer_extra_config={
            # The killed member leaves the group when its session expires (librdkafka's default
            # is 45 s); the restarted one is assigned its partitions only then.
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 500,
            # Small fetches interleave the partitions, so a kill finds all of them half-done.
            "max.partition.fetch.bytes": 2048,
        },
    )
    source = app.topic(input_topic, value_deserializer="json")
    sink = app.topic(output_topic, value_serializer="json")

    def running_total(value: dict[str, int], state: State) -> dict[str, int]:
        count = state.get("count", 0) + 1
        total = state.get("sum", 0) + value["n"]
        state.set("count", count)
        state.set("sum", total)
        if sleep:
            time.sleep(sleep)
        return {"seq": value["seq"], "count": count, "sum": total}

    app.dataframe(source).apply(running_total, stateful=True).to_topic(sink)
    app.run()


if __name__ == "__main__":
    bootstrap, group, state_dir, input_topic, output_topic, sleep = sys.argv[1:7]
    run_app(bootstrap, group, state_dir, input_topic, output_topic, float(sleep))
