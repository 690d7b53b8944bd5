"""InMemoryMetadataLog's invariants and the MetadataWriter's commit rules (log first, then image)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from metadata.controller.controller import QuorumController
from metadata.controller.metadata_log import (
    MAX_RECORDS_PER_BATCH,
    ControllerFailedError,
    InMemoryMetadataLog,
    MetadataWriter,
)
from metadata.image import MetadataImage
from metadata.records import MetadataRecord, RegisterBrokerRecord, TopicRecord
from protocol.error_codes import ErrorCode, KafkaError
from tests.metadata.controller.helpers import CLUSTER_ID, Cluster, endpoints, incarnation

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def test_append_returns_the_first_offset_of_consecutive_offsets() -> None:
    log = InMemoryMetadataLog()
    assert log.end_offset == 0
    assert log.append([TopicRecord("a", T1), TopicRecord("b", T2)], 1) == 0
    assert log.append([TopicRecord("c", uuid.UUID(int=3))], 2) == 2
    assert log.end_offset == 3 and log.last_epoch == 2
    assert [(o, e) for o, e, _ in log.read()] == [(0, 1), (1, 1), (2, 2)]
    assert [o for o, _, _ in log.read(2)] == [2]


def test_empty_batches_and_older_epochs_are_refused() -> None:
    log = InMemoryMetadataLog()
    with pytest.raises(ValueError, match="at least one record"):
        log.append([], 1)
    log.append([TopicRecord("a", T1)], 5)
    with pytest.raises(ValueError, match="older than the log's last epoch 5"):
        log.append([TopicRecord("b", T2)], 4)


def test_a_log_is_rebuilt_from_its_entries() -> None:
    log = InMemoryMetadataLog()
    log.append([TopicRecord("a", T1)], 1)
    assert InMemoryMetadataLog(log.entries).read() == log.read()
    with pytest.raises(ValueError, match="consecutive offsets"):
        InMemoryMetadataLog([(1, 1, TopicRecord("a", T1))])


class BrokenLog(InMemoryMetadataLog):
    def append(self, records: Sequence[MetadataRecord], epoch: int) -> int:
        raise OSError("disk full")


def test_a_failed_append_changes_nothing_and_stops_the_writer() -> None:
    image = MetadataImage()
    writer = MetadataWriter(BrokenLog(), image, 1)
    failures: list[str] = []
    writer.on_failure(failures.append)
    with pytest.raises(KafkaError, match="disk full") as failed:
        writer.commit([TopicRecord("a", T1)])
    assert failed.value.code == ErrorCode.NOT_CONTROLLER  # the caller goes to the next controller
    assert failures == ["metadata append failed: OSError('disk full')"]
    assert image.get("a") is None and image.offset == -1
    with pytest.raises(ControllerFailedError, match="disk full"):
        writer.commit([TopicRecord("a", T1)])


def test_the_writer_refuses_a_log_the_image_has_not_replayed() -> None:
    log = InMemoryMetadataLog()
    log.append([TopicRecord("a", T1)], 1)
    with pytest.raises(ControllerFailedError, match="replay the whole log"):
        MetadataWriter(log, MetadataImage(), 1).commit([TopicRecord("b", T2)])


def test_a_controller_that_did_not_replay_its_log_cannot_write() -> None:
    cluster = Cluster()
    cluster.join(1)
    blind = QuorumController(cluster.log, cluster.clock, 2, CLUSTER_ID)
    with pytest.raises(ControllerFailedError):
        blind.register_broker(2, incarnation(2), CLUSTER_ID, endpoints(2))


def test_a_controller_older_than_its_log_refuses_to_start() -> None:
    cluster = Cluster()
    cluster.join(1)
    with pytest.raises(ControllerFailedError, match="another controller has taken over"):
        cluster.restart(epoch=0)


def test_listeners_hear_the_last_offset_of_each_batch_and_may_fail() -> None:
    cluster = Cluster()
    heard: list[int] = []

    def broken(offset: int) -> None:
        raise RuntimeError("boom")

    cluster.controller.on_append(broken)
    cluster.controller.on_append(heard.append)
    cluster.register(1)
    cluster.heartbeat(1)
    cluster.create("t", 2)
    assert heard == [0, 1, 4]
    assert cluster.image.offset == 4
    # a request that changes nothing appends nothing and tells nobody
    assert cluster.controller.create_topics([]) == []
    assert heard == [0, 1, 4]


def test_register_record_carries_its_own_offset_as_broker_epoch() -> None:
    cluster = Cluster()
    cluster.join(1)
    epoch = cluster.register(2)
    offset, _, record = cluster.log.read()[-1]
    assert isinstance(record, RegisterBrokerRecord)
    assert record.broker_epoch == offset == epoch
    assert cluster.heartbeat(2).error is ErrorCode.NONE


class BatchRecordingLog(InMemoryMetadataLog):
    """Remembers the size of every batch appended."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def append(self, records: Sequence[MetadataRecord], epoch: int) -> int:
        self.batches.append(len(records))
        return super().append(records, epoch)


def test_a_non_atomic_commit_is_written_in_batches_of_at_most_ten_thousand_records() -> None:
    """Fencing the leader of 100,000 partitions is 100,000 changes: one batch of them would be
    larger than a metadata batch may be, so independent changes go in batches, as Kafka writes them."""
    image = MetadataImage()
    log = BatchRecordingLog()
    writer = MetadataWriter(log, image, 1)
    topics = [TopicRecord(f"t{i}", uuid.UUID(int=i + 1)) for i in range(MAX_RECORDS_PER_BATCH * 2 + 5)]
    commit = writer.commit(topics[:3])
    assert log.batches == [3]
    commit = writer.commit(topics[3:], atomic=False)
    assert log.batches == [3, MAX_RECORDS_PER_BATCH, MAX_RECORDS_PER_BATCH, 2]
    assert (commit.first_offset, commit.last_offset) == (3, len(topics) - 1)
    assert len(commit.delta.topics_created) == len(topics) - 3
    assert image.offset == len(topics) - 1 and len(image.all()) == len(topics)
