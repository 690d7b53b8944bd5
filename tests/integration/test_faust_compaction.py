"""faust-streaming's table changelog is compacted.

A faust app (faust-streaming, aiokafka underneath) counts records per key in a ``Table`` (in-memory
store: the state lives only in its changelog topic, ``<app>-counts-changelog``, which faust creates
with ``cleanup.policy=compact``) and writes each new count to an output topic. After a first run,
the changelog shrinks to about the latest count of each key (plus its active segment). A second run
restoring the table from the compacted changelog is not asserted here: on a loaded machine faust's
second run stalled a few outputs short of its input (e.g. 5993 of 6000; the cause is not yet found),
which is open; test_quixstreams_compaction.py checks a restore from a
compacted changelog.

faust-streaming is the ``faust`` extra (``make install-test`` installs it; it installs cleanly beside
the pinned aiokafka 0.14.0 and the other clients); without it the module is skipped.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.integration.broker_process import ROOT, BrokerProcess
from tests.integration.client_helpers import create_topic, unique_topic
from tests.integration.test_log_compaction import read_all

pytestmark = pytest.mark.timeout(300)

RECORDS = 3000
KEYS = 5
TIMEOUT_S = 90.0
"""How long a wait may go without progress (the outputs waited for keep growing until then)."""
LARGE_SEGMENTS = {"segment.bytes": str(1 << 20)}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    pytest.importorskip("faust", reason="faust-streaming not installed (pip install faust-streaming)")
    process = BrokerProcess(
        tmp_path_factory.mktemp("broker"),
        overrides=[
            "log.segment.bytes=20000",  # the changelog faust creates rolls often (batches up to 16 kB)
            "log.cleaner.backoff.ms=100",
            "log.cleaner.min.cleanable.ratio=0.01",
        ],
    ).start()
    yield process
    process.stop()


class Worker:
    """The faust app, run as ``python -m tests.integration.test_faust_compaction ...``."""

    def __init__(self, broker: BrokerProcess, tmp_path: Path) -> None:
        self.broker = broker
        self.tmp_path = tmp_path
        self.app_id = unique_topic("faust-counts")
        self.input = unique_topic("faust-in")
        self.output = unique_topic("faust-out")
        self.runs = 0
        self.process: subprocess.Popen[bytes] | None = None
        for topic in (self.input, self.output):
            create_topic(broker.bootstrap, topic, 1, LARGE_SEGMENTS)

    @property
    def changelog(self) -> str:
        return f"{self.app_id}-counts-changelog"

    def start(self) -> None:
        self.runs += 1
        args = [
            self.broker.bootstrap,
            self.app_id,
            self.input,
            self.output,
            str(self.tmp_path / f"data-{self.runs}"),
        ]
        with (self.tmp_path / f"worker-{self.runs}.out").open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.test_faust_compaction", *args],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def stop(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            assert self.process.wait(timeout=60) == 0, self.output_text()
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.process = None

    def output_text(self) -> str:
        return "\n".join(
            (self.tmp_path / f"worker-{run}.out").read_text(errors="replace")[-4000:]
            for run in range(1, self.runs + 1)
        )

    def produce(self, count: int) -> None:
        producer = KafkaProducer(bootstrap_servers=self.broker.bootstrap, linger_ms=5)
        try:
            for i in range(count):
                producer.send(self.input, key=b"k%d" % (i % KEYS), value=b"x", partition=0)
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)

    def wait_outputs(self, count: int) -> list[tuple[bytes, int]]:
        deadline = time.monotonic() + TIMEOUT_S
        seen = 0
        while True:
            records = read_all(self.broker.bootstrap, self.output)
            outputs = [(key or b"", int(value or b"0")) for _, key, value in records]
            if len(outputs) >= count:
                return outputs
            assert self.process is not None and self.process.poll() is None, self.output_text()
            if len(outputs) > seen:  # a busy machine slows faust down: wait while it makes progress
                seen, deadline = len(outputs), time.monotonic() + TIMEOUT_S
            assert time.monotonic() < deadline, f"{len(outputs)} of {count} outputs\n{self.output_text()}"
            time.sleep(0.5)


def test_table_changelog_is_compacted(broker: BrokerProcess, tmp_path: Path) -> None:
    worker = Worker(broker, tmp_path)
    try:
        worker.produce(RECORDS)
        worker.start()
        first = worker.wait_outputs(RECORDS)
        worker.stop()
        per_key = RECORDS // KEYS
        assert {key: max(n for k, n in first if k == key) for key, _ in first} == {
            b"k%d" % k: per_key for k in range(KEYS)
        }

        deadline = time.monotonic() + TIMEOUT_S
        while len(left := read_all(broker.bootstrap, worker.changelog)) > RECORDS // 4:
            assert time.monotonic() < deadline, f"the changelog still holds {len(left)} of {RECORDS} records"
            time.sleep(0.5)

    finally:
        if worker.process is not None:
            worker.process.kill()
            worker.process.wait()


# -- the app: `python -m tests.integration.test_faust_compaction BOOTSTRAP APP_ID IN OUT DATADIR` -----


def run_worker(bootstrap: str, app_id: str, input_topic: str, output_topic: str, datadir: str) -> None:
    import faust

    app = faust.App(
        app_id,
        broker=f"kafka://{bootstrap}",
        store="memory://",
        topic_partitions=1,
        topic_replication_factor=1,
        web_enabled=False,
        datadir=datadir,
        consumer_auto_offset_reset="earliest",
    )
    raw = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
    source = app.topic(input_topic, **raw)
    sink = app.topic(output_topic, **raw)
    counts = app.Table("counts", default=int, partitions=1)

    @app.agent(source)
    async def count(stream):  # type: ignore[no-untyped-def]
        async for key, _ in stream.items():
            counts[key.decode()] += 1
            await sink.send(key=key, value=str(counts[key.decode()]).encode())

    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn"]
    app.main()


if __name__ == "__main__":
    run_worker(*sys.argv[1:6])
