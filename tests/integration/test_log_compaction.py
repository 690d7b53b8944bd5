"""Log compaction end to end on a real broker (issue 17): a ``cleanup.policy=compact`` topic of small
segments shrinks while it is written, a consumer from the start sees the latest value of every key at
its original offset, a tombstone goes once delete.retention.ms passed, DeleteRecords is refused with
POLICY_VIOLATION, and the group coordinator loads committed offsets from a compacted
``__consumer_offsets`` after a restart."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import CoordinatorNotAvailableError, PolicyViolationError
from kafka.structs import OffsetAndMetadata

from storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from tests.integration.broker_process import BrokerProcess
from tests.integration.client_helpers import create_topic, unique_topic
from tests.integration.group_members import wait_for

pytestmark = pytest.mark.timeout(240)

TIMEOUT_S = 90.0
CLEANER_OVERRIDES = ["log.cleaner.backoff.ms=100", "offsets.topic.num.partitions=1"]
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}
KEYS = 10

Latest = dict[bytes, tuple[int, bytes | None]]


def produce(producer: KafkaProducer, topic: str, items: Sequence[tuple[bytes, bytes | None]]) -> Latest:
    """Send one record at a time (one batch each); key -> (offset, value) of the last write."""
    written: Latest = {}
    for key, value in items:
        metadata = producer.send(topic, key=key, value=value, partition=0).get(timeout=10)
        written[key] = (metadata.offset, value)
    return written


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the start up to the end offset now."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        out: list[tuple[int, bytes | None, bytes | None]] = []
        while consumer.position(tp) < end:
            for record in consumer.poll(timeout_ms=2000).get(tp, []):
                out.append((record.offset, record.key, record.value))
        return out
    finally:
        consumer.close()


def latest_of(records: list[tuple[int, bytes | None, bytes | None]]) -> Latest:
    latest: Latest = {}
    for offset, key, value in records:
        assert key is not None
        latest[key] = (offset, value)
    return latest


def log_bytes(broker: BrokerProcess, topic: str) -> int:
    return sum(p.stat().st_size for p in (broker.data_dir / "logs" / f"{topic}-0").glob("*.log"))


def value(key: int, version: int) -> bytes:
    return b"%d-%d-" % (key, version) + b"x" * 200


@pytest.fixture
def compacting_broker(broker_factory: Callable[[Sequence[str]], BrokerProcess]) -> BrokerProcess:
    return broker_factory(CLEANER_OVERRIDES)


def test_a_compacted_topic_keeps_the_latest_value_of_every_key(compacting_broker: BrokerProcess) -> None:
    broker = compacting_broker
    topic = unique_topic("compacted")
    create_topic(broker.bootstrap, topic, 1, COMPACTED)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, acks=1)
    try:
        written = produce(producer, topic, [(b"k%d" % (i % KEYS), value(i % KEYS, i)) for i in range(600)])
        produced_bytes = 600 * len(value(0, 0))  # the values alone; the log cleans while it is written
        wait_for(lambda: log_bytes(broker, topic) < produced_bytes / 4, TIMEOUT_S, "the log to shrink")
        records = read_all(broker.bootstrap, topic)
        # Kafka's LogCleaner / LogCleanerManager gauges, Prometheus style
        assert broker.metric("kafka_log_logcleaner_max_clean_time_secs") > 0
        assert 0 < broker.metric("kafka_log_logcleaner_cleaner_recopy_percent") < 100
        assert broker.metric("kafka_log_logcleaner_max_buffer_utilization_percent") > 0
        assert broker.metric("kafka_log_logcleaner_deadthreadcount") == 0
        assert broker.metric("kafka_log_logcleanermanager_uncleanable_partitions_count") == 0
        metrics = broker.metrics()
        for name in (
            "kafka_log_logcleanermanager_max_dirty_percent",
            "kafka_log_logcleanermanager_time_since_last_run_ms",
        ):
            assert f"\n{name} " in metrics
        offsets = [r[0] for r in records]
        assert offsets == sorted(set(offsets)) and len(records) < 600 / 3
        assert latest_of(records) == written  # every key's last value, at its own offset

        # a tombstone: kept while delete.retention.ms runs, then gone; the other keys stay
        written.update(produce(producer, topic, [(b"k0", None)]))
        version = [1000]

        def tombstone_gone() -> bool:
            version[0] += 1  # more dirty segments so that the cleaner runs again after the horizon
            updates = [(b"k%d" % k, value(k, version[0])) for k in range(1, KEYS)]
            written.update(produce(producer, topic, updates))
            return b"k0" not in latest_of(read_all(broker.bootstrap, topic))

        wait_for(tombstone_gone, TIMEOUT_S, "the tombstone of k0 to go", interval_s=0.3)
        del written[b"k0"]
        assert latest_of(read_all(broker.bootstrap, topic)) == written
    finally:
        producer.close(timeout=10)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="compaction-admin")
    try:  # Kafka's Partition.deleteRecordsOnLeader: not without delete in cleanup.policy
        with pytest.raises(PolicyViolationError):
            admin.delete_records({TopicPartition(topic, 0): 1}, timeout_ms=10_000)
    finally:
        admin.close()


def test_the_group_coordinator_loads_from_a_compacted_offsets_topic(
    broker_factory: Callable[[Sequence[str]], BrokerProcess],
) -> None:
    broker = broker_factory([*CLEANER_OVERRIDES, "offsets.topic.segment.bytes=4096"])
    topic = unique_topic("committed")
    create_topic(broker.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)

    def commit(group: str, offset: int) -> bool:
        try:  # the first lookup creates __consumer_offsets and is answered "not available"
            admin.alter_group_offsets(group, {tp: OffsetAndMetadata(offset, "", -1)})
        except CoordinatorNotAvailableError:
            return False
        return True

    try:
        wait_for(lambda: commit("g0", 0), TIMEOUT_S, "the first commit", interval_s=0.2)
        for offset in range(1, 400):
            assert commit(f"g{offset % 3}", offset)
        checkpoint = broker.data_dir / "logs" / CLEANER_OFFSET_CHECKPOINT
        offsets_dir = broker.data_dir / "logs" / "__consumer_offsets-0"

        def compacted() -> bool:  # far less than 400 commits' worth of records
            if not checkpoint.exists() or "__consumer_offsets 0 " not in checkpoint.read_text():
                return False
            total = 0
            for path in offsets_dir.glob("*.log"):
                with contextlib.suppress(FileNotFoundError):  # replaced by the cleaner meanwhile
                    total += path.stat().st_size
            return total < 400 * 60

        wait_for(compacted, TIMEOUT_S, "__consumer_offsets to be compacted")
    finally:
        admin.close()
    broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
    try:
        committed: dict[str, int] = {}

        def loaded() -> bool:
            try:
                for group in ("g0", "g1", "g2"):
                    committed[group] = admin.list_group_offsets({group: None})[group][tp].offset
            except (CoordinatorNotAvailableError, KeyError):
                return False
            return True

        wait_for(loaded, TIMEOUT_S, "the coordinator to load the offsets", interval_s=0.2)
        assert committed == {"g0": 399, "g1": 397, "g2": 398}
    finally:
        admin.close()
