"""faust-streaming's table changelog is compacted, and a worker restores its table from it.

A faust app (faust-streaming, aiokafka underneath) counts records per key in a ``Table`` (in-memory
store: the state lives only in its changelog topic, ``<app>-counts-changelog``, which faust creates
with ``cleanup.policy=compact``) and writes each new count to an output topic. After a first run,
every key appears once below the changelog's active segment (which Kafka never cleans: how many
records it holds depends on how faust batched them, up to about 1,000 on a busy machine); a second
run, which starts with an empty table, restores the counts from the compacted changelog and carries
them on over a second batch of input.

Each run is given its input only once the worker says its table recovery is complete. faust
0.15.3 resumes its input partitions, then seeks them back to the committed offset, while its
fetcher already runs: input already in the topic is fetched twice, and on a busy machine the
agent then never sees some records of the first pass (traced in aiokafka's ``getmany``: it
yielded every record 3000..5999 twice, in order, while the agent skipped 20 of them and faust's
commit stuck at the first one skipped). With no input waiting at that moment, nothing is fetched
twice.

faust-streaming is the ``faust`` extra (``make install-test`` installs it; it installs cleanly beside
the pinned aiokafka 0.14.0 and the other clients); without it the module is skipped.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import defaultdict
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
            str(self.ready_marker),
        ]
        with (self.tmp_path / f"worker-{self.runs}.out").open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.test_faust_compaction", *args],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def ready_marker(self) -> Path:
        return self.tmp_path / f"ready-{self.runs}"

    def wait_ready(self) -> None:
        """Until the worker has finished its table recovery (it touches ``ready_marker``)."""
        deadline = time.monotonic() + TIMEOUT_S
        while not self.ready_marker.exists():
            assert self.process is not None and self.process.poll() is None, self.output_text()
            assert time.monotonic() < deadline, (
                f"no table recovery within {TIMEOUT_S} s\n{self.output_text()}"
            )
            time.sleep(0.2)

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


def active_segment_base(broker: BrokerProcess, topic: str) -> int:
    """The base offset of the partition's active segment: the newest ``.log`` file's name."""
    return max(int(path.stem) for path in (broker.data_dir / "logs" / f"{topic}-0").glob("*.log"))


def wait_compacted(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """The changelog once each key appears at most once below its active segment."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        records, active = read_all(broker.bootstrap, topic), active_segment_base(broker, topic)
        cleanable = [key for offset, key, _ in records if offset < active]
        if active > 0 and len(cleanable) == len(set(cleanable)) <= KEYS:
            return records
        assert time.monotonic() < deadline, f"{len(cleanable)} records below the active segment ({active})"
        time.sleep(0.5)


def test_table_changelog_is_compacted_and_restores_the_table(broker: BrokerProcess, tmp_path: Path) -> None:
    worker = Worker(broker, tmp_path)
    try:
        worker.start()
        worker.wait_ready()
        worker.produce(RECORDS)
        first = worker.wait_outputs(RECORDS)
        worker.stop()
        per_key = RECORDS // KEYS
        assert {key: max(n for k, n in first if k == key) for key, _ in first} == {
            b"k%d" % k: per_key for k in range(KEYS)
        }

        assert len(wait_compacted(broker, worker.changelog)) < RECORDS

        worker.start()  # an empty table: the counts come back from the compacted changelog
        worker.wait_ready()
        worker.produce(RECORDS)
        outputs = worker.wait_outputs(2 * RECORDS)
        worker.stop()
        second: dict[bytes, list[int]] = defaultdict(list)
        for key, n in outputs[len(first) :]:
            second[key].append(n)
        for k in range(KEYS):
            counts = second[b"k%d" % k]
            assert counts[0] == per_key + 1 and counts[-1] == 2 * per_key, (k, counts[:3], counts[-3:])
    finally:
        if worker.process is not None:
            worker.process.kill()
            worker.process.wait()


# -- the app: `python -m tests.integration.test_faust_compaction BOOTSTRAP APP_ID IN OUT DATADIR READY` --


def run_worker(
    bootstrap: str, app_id: str, input_topic: str, output_topic: str, datadir: str, ready_marker: str
) -> None:
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

    @app.task  # type: ignore[untyped-decorator]
    async def announce_ready() -> None:
        await app.tables.recovery.completed.wait()  # type: ignore[attr-defined]
        Path(ready_marker).touch()

    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn"]
    app.main()


if __name__ == "__main__":
    run_worker(*sys.argv[1:7])
