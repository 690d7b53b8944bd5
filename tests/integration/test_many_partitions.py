"""20,000 partitions on one broker whose open-files limit is 8,192.

Each partition has a .log, an .index and a .timeindex: 60,000 segment files, seven times what the
process may open. The broker keeps at most half its limit open for them (storage/file_pool.py) and
reopens the others when used. This is the scale test of ``make test`` (the same run at 100,000
partitions is ``python -m bench.partitions``); it checks, from outside the process:

* every partition takes one record (librdkafka producer, one message per partition);
* a consumer assigned to all of them (librdkafka: sessionless fetches of every partition) reads
  each record exactly once;
* one incremental fetch session (KIP-227) over all of them: the full fetch returns every record,
  an incremental fetch after a produce to a few partitions returns exactly those, and the session
  cache gauge counts all 20,000;
* the broker never holds more segment descriptors than its pool allows.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from tests.integration.broker_process import BrokerProcess
from tests.integration.wire_client import WireClient

PARTITIONS = 20_000
TOPICS = 20
PER_TOPIC = PARTITIONS // TOPICS
FILE_LIMIT = 8_192
POOL = FILE_LIMIT // 2
"""kipling.log.open.files.max left at 0: half the open-files limit."""
OUTSIDE_POOL = 4
"""Log dir descriptors that are not segment files: the dir's lock, a checkpoint being written."""
FETCH_VERSION = 12
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit"),
]


def topic(t: int) -> str:
    return f"many-{t:02d}"


def segment_descriptors(pid: int, log_dir: Path) -> int:
    """Descriptors of process ``pid`` that point into ``log_dir``."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(str(log_dir)):
                count += 1
        except OSError:
            continue
    return count


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path / "broker",
        overrides=["broker.session.timeout.ms=60000"],
        command_prefix=["prlimit", f"--nofile={FILE_LIMIT}:{FILE_LIMIT}"],
    ).start(timeout_s=60)
    yield process
    process.stop(timeout_s=300)


def create_all(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for t in range(TOPICS):  # one request per 1,000 partitions: each is one metadata delta
        futures = admin.create_topics(
            [NewTopic(topic(t), num_partitions=PER_TOPIC, replication_factor=1)], request_timeout=300
        )
        futures[topic(t)].result(timeout=300)


def produce_one_each(broker: BrokerProcess, value: bytes) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "acks": "1"})
    failures: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for t in range(TOPICS):
        for p in range(PER_TOPIC):
            producer.produce(topic(t), value + b"%d-%d" % (t, p), partition=p, on_delivery=delivered)
            producer.poll(0)
    assert producer.flush(300) == 0
    assert not failures, failures[:5]


def consume_all(broker: BrokerProcess) -> dict[tuple[str, int], bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "many-partitions", "enable.auto.commit": False}
    )
    # offset 0, the log start: from OFFSET_BEGINNING librdkafka sends one ListOffsets per partition
    consumer.assign([TopicPartition(topic(t), p, 0) for t in range(TOPICS) for p in range(PER_TOPIC)])
    seen: dict[tuple[str, int], bytes] = {}
    deadline = time.monotonic() + 300
    try:
        while len(seen) < PARTITIONS and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=1.0):
                assert message.error() is None, message.error()
                key = (message.topic(), message.partition())
                assert key not in seen, f"{key} delivered twice"
                seen[key] = message.value()
    finally:
        consumer.close()
    return seen


def fetch_body(offsets: dict[tuple[str, int], int], session_id: int, epoch: int) -> dict[str, object]:
    topics: dict[str, list[dict[str, int]]] = {}
    for (name, partition), offset in sorted(offsets.items()):
        topics.setdefault(name, []).append(
            {
                "partition": partition,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": 1 << 20,
            }
        )
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 64 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def with_records(body: object) -> dict[tuple[str, int], int]:
    """(topic, partition) → high watermark of each partition the response carries records for."""
    out = {}
    for t in body.responses:  # type: ignore[attr-defined]
        for p in t.partitions:
            assert p.error_code == 0, (t.topic, p.partition_index, p.error_code)
            if p.records:
                out[(t.topic, p.partition_index)] = p.high_watermark
    return out


def test_twenty_thousand_partitions_with_an_eighth_of_the_descriptors(broker: BrokerProcess) -> None:
    log_dir = broker.data_dir / "logs"
    create_all(broker)
    produce_one_each(broker, b"first-")
    assert segment_descriptors(broker.pid, log_dir) <= POOL + OUTSIDE_POOL

    seen = consume_all(broker)
    assert len(seen) == PARTITIONS
    assert all(value == b"first-%d-%d" % (int(name[-2:]), p) for (name, p), value in seen.items())
    assert segment_descriptors(broker.pid, log_dir) <= POOL + OUTSIDE_POOL

    with WireClient(broker.port, timeout_s=300) as client:
        everything = {(topic(t), p): 0 for t in range(TOPICS) for p in range(PER_TOPIC)}
        full = client.request(ApiKey.FETCH, FETCH_VERSION, fetch_body(everything, 0, 0)).body
        assert full.error_code == 0 and full.session_id != 0
        assert with_records(full) == dict.fromkeys(everything, 1)
        assert broker.metric(CACHED) == PARTITIONS

        session = full.session_id
        moved = dict.fromkeys(everything, 1)  # every fetch offset moved: the client lists them all once
        caught_up = client.request(ApiKey.FETCH, FETCH_VERSION, fetch_body(moved, session, 1)).body
        assert caught_up.error_code == 0 and caught_up.session_id == session
        assert with_records(caught_up) == {}

        changed = [(topic(t), 7 * t) for t in range(TOPICS)]
        produce_some(broker, changed)
        incremental = client.request(ApiKey.FETCH, FETCH_VERSION, fetch_body({}, session, 2)).body
        assert incremental.error_code == 0 and incremental.session_id == session
        assert with_records(incremental) == dict.fromkeys(changed, 2)  # only these, out of 20,000
        listed = dict.fromkeys(changed, 2)
        idle = client.request(ApiKey.FETCH, FETCH_VERSION, fetch_body(listed, session, 3)).body
        assert idle.error_code == 0 and with_records(idle) == {}
        assert broker.metric(CACHED) == PARTITIONS
    assert segment_descriptors(broker.pid, log_dir) <= POOL + OUTSIDE_POOL


def produce_some(broker: BrokerProcess, partitions: list[tuple[str, int]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1"})
    for name, partition in partitions:
        producer.produce(name, b"second", partition=partition)
    assert producer.flush(120) == 0
