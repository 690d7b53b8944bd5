"""SegmentRaftLog: the Raft log on a real PartitionLog, one entry per record batch."""

from __future__ import annotations

import pathlib
import uuid

import pytest

from metadata.raft.log import INITIAL_EPOCH, Entry, InMemoryRaftLog, RaftLog
from metadata.raft.quorum import leader_change_payload
from metadata.raft.segment_log import SegmentRaftLog
from metadata.records import TopicRecord
from metadata.serde import decode_metadata_batches, encode_metadata_batch
from protocol.records import iter_records, read_header
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.metadata.raft.harness import Cluster

DIRECTORY = "__cluster_metadata-0"
NOW = 1_700_000_000_000


def open_log(root: pathlib.Path, clock: FakeClock, config: LogConfig | None = None) -> SegmentRaftLog:
    partition_log = PartitionLog.open(root / DIRECTORY, config or LogConfig(), clock)
    return SegmentRaftLog(partition_log, clock)


def on_disk(log: SegmentRaftLog) -> bytes:
    """Every byte of the partition log, read through the storage layer."""
    partition_log = log.partition_log
    out = bytearray()
    for segment in partition_log.segments():
        found = segment.read(segment.base_offset, segment.size + 1)
        if found is not None:
            out += found[0].read_bytes()
    return bytes(out)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def log(tmp_path: pathlib.Path, clock: FakeClock) -> SegmentRaftLog:
    return open_log(tmp_path, clock)


def test_it_is_a_raft_log(log: SegmentRaftLog) -> None:
    raft_log: RaftLog = log
    assert raft_log.end_offset == 0 and raft_log.last_fetched_epoch == INITIAL_EPOCH
    assert raft_log.end_offset_for_epoch(3) == (INITIAL_EPOCH, 0)
    assert raft_log.read(0, 10) == []


def test_a_leader_append_is_one_batch_read_back_byte_for_byte(log: SegmentRaftLog, clock: FakeClock) -> None:
    [first] = log.append_as_leader(1, [b"a", b"b", b"c"])
    assert (first.offset, first.epoch, first.record_count, first.next_offset) == (0, 1, 3, 3)
    assert log.partition_log.recovery_point == log.end_offset == 3  # fsynced before returning
    clock.advance(5)
    [second] = log.append_as_leader(1, [b"d"])
    assert (second.offset, second.epoch, second.record_count) == (3, 1, 1)
    assert log.end_offset == 4 and log.last_fetched_epoch == 1
    assert log.partition_log.recovery_point == 4

    assert log.read(0, 10) == [first, second]
    assert first.payload + second.payload == on_disk(log)
    header = read_header(first.payload)
    assert (header.base_offset, header.partition_leader_epoch, header.records_count) == (0, 1, 3)
    assert not header.is_control
    records = list(iter_records(first.payload))
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (0, None, b"a", NOW),
        (1, None, b"b", NOW),
        (2, None, b"c", NOW),
    ]
    assert [r.timestamp for r in iter_records(second.payload)] == [NOW + 5]

    assert log.read(3, 10) == [second]
    assert log.read(4, 10) == [] and log.read(99, 10) == []
    with pytest.raises(ValueError, match="inside the batch starting at 0"):
        log.read(1, 10)
    assert log.append_as_leader(1, []) == [] and log.end_offset == 4
    with pytest.raises(ValueError, match="epoch 0 after epoch 1"):
        log.append_as_leader(0, [b"late"])


def test_a_control_batch_is_skipped_by_the_metadata_replay(log: SegmentRaftLog) -> None:
    [control] = log.append_as_leader(1, [leader_change_payload(1, frozenset({1, 2, 3}))], control=True)
    assert read_header(control.payload).is_control
    record = TopicRecord(name="t", topic_id=uuid.UUID(int=7))
    entry = log.append_records(1, encode_metadata_batch([record, record], epoch=1, timestamp_ms=NOW))
    assert (entry.offset, entry.epoch, entry.record_count) == (1, 1, 2)

    batches = list(decode_metadata_batches(b"".join(e.payload for e in log.read(0, 100))))
    assert [(b.records, b.epoch, b.last_offset) for b in batches] == [
        ([], 1, 0),
        ([(1, record), (2, record)], 1, 2),
    ]


def test_append_records_takes_one_encoded_batch_and_assigns_offsets_and_epoch(log: SegmentRaftLog) -> None:
    log.append_as_leader(1, [b"x"])
    record = TopicRecord(name="t", topic_id=uuid.UUID(int=1))
    batch = encode_metadata_batch([record], epoch=1, timestamp_ms=NOW)
    entry = log.append_records(2, batch)
    assert (entry.offset, entry.epoch, entry.record_count, entry.next_offset) == (1, 2, 1, 2)
    assert read_header(entry.payload).base_offset == 1
    assert log.read(1, 1) == [entry] and log.partition_log.recovery_point == 2
    assert log.end_offset_for_epoch(1) == (1, 1)
    with pytest.raises(ValueError, match="exactly one record batch"):
        log.append_records(2, batch + batch)
    with pytest.raises(ValueError, match="epoch 1 after epoch 2"):
        log.append_records(1, batch)
    assert log.end_offset == 2


def test_a_follower_copy_is_identical_bytes_and_offsets(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    leader = open_log(tmp_path / "leader", clock)
    follower = open_log(tmp_path / "follower", clock)
    leader.append_as_leader(1, [b"a", b"b"], control=True)
    leader.append_as_leader(1, [b"c"])
    leader.append_as_leader(3, [b"d", b"e", b"f"])

    with pytest.raises(ValueError, match="entries start at 2, the log ends at 0"):
        follower.append_as_follower(leader.read(2, 10))
    follower.append_as_follower(leader.read(0, 1))
    follower.append_as_follower(leader.read(2, 10))
    follower.append_as_follower([])
    assert follower.read(0, 10) == leader.read(0, 10)
    assert on_disk(follower) == on_disk(leader)
    assert follower.partition_log.recovery_point == follower.end_offset == 6
    assert follower.last_fetched_epoch == 3
    for epoch in range(-1, 6):
        assert follower.end_offset_for_epoch(epoch) == leader.end_offset_for_epoch(epoch)

    with pytest.raises(ValueError, match="not a record batch"):
        follower.append_as_follower([Entry(6, 3, b"opaque")])
    [last] = leader.read(3, 1)
    with pytest.raises(ValueError, match="not the one record batch"):
        follower.append_as_follower([Entry(6, 3, last.payload, last.record_count)])
    assert follower.end_offset == 6


def test_epochs_answer_like_the_in_memory_log(log: SegmentRaftLog) -> None:
    reference = InMemoryRaftLog()
    assert log.end_offset_for_epoch(2) == reference.end_offset_for_epoch(2) == (INITIAL_EPOCH, 0)
    for epoch, payloads in [(1, [b"a", b"b"]), (1, [b"c"]), (3, [b"d", b"e", b"f"]), (5, [b"g"])]:
        log.append_as_leader(epoch, payloads)
        reference.append_as_leader(epoch, payloads)
        assert (log.end_offset, log.last_fetched_epoch) == (
            reference.end_offset,
            reference.last_fetched_epoch,
        )
        for asked in range(-1, 7):
            assert log.end_offset_for_epoch(asked) == reference.end_offset_for_epoch(asked), asked
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(4) == (3, 6)
    assert log.end_offset_for_epoch(5) == (5, 7)


def test_truncate_then_append_in_a_new_epoch(log: SegmentRaftLog) -> None:
    log.append_as_leader(1, [b"a", b"b"])
    log.append_as_leader(2, [b"c"])
    log.append_as_leader(2, [b"d", b"e"])
    log.truncate_to(9)  # past the end: nothing happens
    assert log.end_offset == 5
    log.truncate_to(2)
    assert (log.end_offset, log.last_fetched_epoch) == (2, 1)
    assert log.end_offset_for_epoch(2) == (-1, -1)  # above every epoch left, as the epoch cache says
    [entry] = log.append_as_leader(4, [b"x"])
    assert (entry.offset, entry.epoch) == (2, 4)
    assert [(e.offset, e.epoch, e.record_count) for e in log.read(0, 10)] == [(0, 1, 2), (2, 4, 1)]
    assert log.end_offset_for_epoch(2) == (1, 2) and log.end_offset_for_epoch(4) == (4, 3)
    with pytest.raises(ValueError, match="epoch 2 after epoch 4"):
        log.append_as_leader(2, [b"y"])
    # Raft truncates at epoch (batch) boundaries; inside a batch the whole batch goes.
    log.truncate_to(1)
    assert (log.end_offset, log.last_fetched_epoch, log.read(0, 10)) == (0, INITIAL_EPOCH, [])
    assert log.end_offset_for_epoch(4) == (INITIAL_EPOCH, 0)
    with pytest.raises(ValueError):
        log.truncate_to(-1)


def test_everything_survives_a_close_and_reopen(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    log.append_as_leader(1, [b"a"], control=True)
    log.append_as_leader(1, [b"b", b"c"])
    log.append_as_leader(2, [b"d"])
    log.truncate_to(3)
    log.append_as_leader(3, [b"e", b"f"])
    entries = log.read(0, 10)
    epochs = [log.end_offset_for_epoch(epoch) for epoch in range(-1, 5)]
    log.close()

    reopened = open_log(tmp_path, clock)
    assert reopened.read(0, 10) == entries
    assert (reopened.end_offset, reopened.last_fetched_epoch) == (5, 3)
    assert [reopened.end_offset_for_epoch(epoch) for epoch in range(-1, 5)] == epochs
    [entry] = reopened.append_as_leader(3, [b"g"])
    assert entry.offset == 5
    reopened.close()


def test_read_stops_after_max_entries_and_crosses_segments(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, LogConfig(segment_bytes=200))
    written = [log.append_as_leader(1, [bytes([i]) * 40, bytes([i])])[0] for i in range(6)]
    assert len(log.partition_log.segments()) > 2
    assert log.read(0, 100) == written
    assert log.read(0, 2) == written[:2]
    assert log.read(written[3].offset, 2) == written[3:5]
    assert log.read(written[5].offset, 2) == written[5:]
    assert log.read(0, 0) == []


def test_read_starts_at_a_batch_boundary_and_ends_at_the_log_end(log: SegmentRaftLog) -> None:
    a, b, c = (
        log.append_as_leader(1, payloads)[0] for payloads in ([b"a", b"b"], [b"c"], [b"d", b"e", b"f"])
    )
    assert (a.offset, b.offset, c.offset, c.last_offset) == (0, 2, 3, 5)
    assert log.read(2, 100) == [b, c]
    assert log.read(6, 100) == [] and log.read(60, 100) == []
    with pytest.raises(ValueError, match="inside the batch"):
        log.read(4, 100)


def test_a_quorum_elects_and_commits_on_segment_logs(tmp_path: pathlib.Path) -> None:
    cluster = Cluster(3, seed=1)
    segment_logs = {i: open_log(tmp_path / str(i), cluster.clock) for i in sorted(cluster.voter_ids)}
    cluster.logs = segment_logs  # type: ignore[assignment]
    for i in sorted(cluster.voter_ids):
        cluster.restart(i)
    cluster.run(5_000)
    leader = cluster.the_leader()
    offset = leader.append([b"one", b"two"])
    offset = leader.append([b"three"])
    cluster.run(1_000)
    assert all(node.high_watermark == offset for node in cluster.nodes.values())
    reference = segment_logs[leader.node_id]
    [leader_change, first, second] = reference.read(0, 10)
    assert read_header(leader_change.payload).is_control and leader_change.epoch == leader.epoch
    assert (first.record_count, second.record_count) == (2, 1)
    for log in segment_logs.values():
        assert on_disk(log) == on_disk(reference)

    # A follower restarts from its files (volatile state lost) and catches up on later appends.
    follower = next(i for i in sorted(cluster.voter_ids) if i != leader.node_id)
    segment_logs[follower].close()
    segment_logs[follower] = open_log(tmp_path / str(follower), cluster.clock)
    cluster.restart(follower)
    offset = cluster.the_leader().append([b"four"])
    cluster.run(2_000)
    assert all(node.high_watermark == offset for node in cluster.nodes.values())
    for log in segment_logs.values():
        assert on_disk(log) == on_disk(segment_logs[cluster.the_leader().node_id])
    for log in segment_logs.values():
        log.close()


def test_an_installed_snapshot_restarts_the_log_at_its_end(tmp_path: pathlib.Path) -> None:
    """A voter that lost its log loads the leader's snapshot in chunks: the log then starts at the
    snapshot's end, and its last fetched epoch is the snapshot's until an entry arrives."""
    from metadata.image import MetadataImage
    from metadata.snapshot import encode_snapshot

    clock = FakeClock(1_000)
    log = open_log(tmp_path, clock)
    log.append_as_leader(1, [b"stale"])  # whatever the log held is replaced
    image = MetadataImage()
    image.skip_to(9)
    data = encode_snapshot(image, epoch=3, timestamp_ms=1_000)
    for position in range(0, len(data), 50):
        log.write_snapshot_chunk((10, 3), position, data[position : position + 50])
    log.install_snapshot((10, 3))
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (10, 10, 3)
    assert log.latest_snapshot_id == (10, 3)
    [entry] = log.append_as_leader(4, [b"next"])
    assert entry.offset == 10 and log.last_fetched_epoch == 4
