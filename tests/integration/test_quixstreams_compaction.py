"""quixstreams' changelog topics are compacted, and a stateful app restores its state from them.

The exactly-once job of ``test_quixstreams_eos.py`` (a running count and sum per key, state in
RocksDB with a changelog topic that quixstreams creates with ``cleanup.policy=compact``) runs on a
broker whose topics roll small segments and whose cleaner runs every 100 ms. Once the job is done,
its changelog topic, which received two records per input (count and sum), shrinks to about the
latest record of each state key (plus its active segment and the transaction markers' remains),
read_committed. Then a second run on an empty state directory restores the counts from the
compacted changelog alone and carries them on over a second batch of input.
"""

from __future__ import annotations

import json
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import create_topic, unique_topic
from tests.integration.test_quixstreams_eos import KEYS, PARTITIONS, RECORDS, Job, _expected

pytestmark = pytest.mark.timeout(300)

CHANGELOG_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    pytest.importorskip("quixstreams", reason="quixstreams not installed (see test_quixstreams_eos.py)")
    process = BrokerProcess(
        tmp_path_factory.mktemp("broker"),
        overrides=[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
            "log.segment.bytes=16384",
            "log.cleaner.backoff.ms=100",
            "log.cleaner.min.cleanable.ratio=0.01",
        ],
    ).start()
    yield process
    process.stop()


class LargeSegmentsJob(Job):
    """The eos job, its input and output topics with 1 MB segments: the broker's 16 kB default (for
    the changelog that quixstreams creates) is smaller than the transactional output batches."""

    def __init__(self, broker: BrokerProcess, tmp_path: Path, name: str) -> None:
        self.broker = broker
        self.tmp_path = tmp_path
        self.input = unique_topic(f"qx-{name}-in")
        self.output = unique_topic(f"qx-{name}-out")
        self.group = unique_topic(f"qx-{name}-group")
        self.per_record_s = 0.0
        self.runs = 0
        self.process = None
        for topic in (self.input, self.output):
            create_topic(broker.bootstrap, topic, PARTITIONS, {"segment.bytes": str(1 << 20)})


def produce(job: Job, seqs: range) -> list[tuple[str, int, int]]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": job.broker.bootstrap, "linger.ms": 5, "batch.size": 1024})
    records = [(f"key-{seq % KEYS}", seq, seq * 7 % 101) for seq in seqs]
    for key, seq, n in records:
        producer.produce(job.input, key=key.encode(), value=json.dumps({"seq": seq, "n": n}).encode())
    assert producer.flush(30) == 0
    return records


def changelog_records(broker: BrokerProcess, group: str) -> int:
    """Records readable read_committed from the start of the job's changelog topic(s)."""
    from confluent_kafka import Consumer, TopicPartition

    topics = {
        path.name.rsplit("-", 1)[0]
        for path in (broker.data_dir / "logs").iterdir()
        if path.name.startswith("changelog__") and group in path.name
    }
    assert topics, "no changelog topic"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "qx-changelog-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        parts = [(t, p) for t in topics for p in range(PARTITIONS)]
        consumer.assign([TopicPartition(t, p, 0) for t, p in parts])
        count = 0
        at_end: set[tuple[str, int]] = set()
        deadline = time.monotonic() + 30
        while len(at_end) < len(parts):
            assert time.monotonic() < deadline, f"changelog not read to its end in 30 s ({count} read)"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == -191:  # _PARTITION_EOF
                    at_end.add((message.topic(), message.partition()))
                continue
            at_end.discard((message.topic(), message.partition()))
            count += 1
        return count
    finally:
        consumer.close()


def test_changelog_is_compacted_and_restores_the_state(broker: BrokerProcess, tmp_path: Path) -> None:
    job = LargeSegmentsJob(broker, tmp_path, "compacted")
    try:
        first = produce(job, range(RECORDS))
        job.start()
        assert job.wait_committed(RECORDS) == RECORDS
        assert job.stop(signal.SIGTERM) == 0, job.app_output()

        written = 2 * RECORDS  # a count and a sum per input record
        deadline = time.monotonic() + CHANGELOG_TIMEOUT_S
        while (left := changelog_records(broker, job.group)) > written // 4:
            assert time.monotonic() < deadline, f"changelog still holds {left} of {written} records"
            time.sleep(0.5)

        second = produce(job, range(RECORDS, 2 * RECORDS))
        job.start()  # an empty state directory: the state comes from the compacted changelog
        assert job.wait_committed(2 * RECORDS) == 2 * RECORDS
        assert job.stop(signal.SIGTERM) == 0, job.app_output()
        by_key: dict[str, list[dict[str, int]]] = defaultdict(list)
        for key, value in job.read_output("read_committed"):
            by_key[key].append(value)
        assert dict(by_key) == _expected(first + second), job.app_output()
    finally:
        job.kill_if_running()
