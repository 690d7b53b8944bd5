"""A leader's log fails while serving (a corrupt batch, an I/O error): the partition goes offline
once, every read path answers KAFKA_STORAGE_ERROR, and the leader resigns by proposing an ISR
without itself (unless it is the only in-sync replica); a refused resignation is proposed again by
the periodic ISR check. Real logs in tmp_path, a fake AlterPartition sender, a FakeClock.
"""

from __future__ import annotations

import errno
import pathlib
import uuid
from dataclasses import dataclass, field

import pytest

from broker.replication.partition import Partition, PartitionRead
from broker.replication.replica_state import IsrProposal
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import Record, build_batch
from protocol.sentinels import NO_LEADER_EPOCH, IsolationLevel
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.segment import walk_batches

pytestmark = pytest.mark.timeout(30)

LEADER = 1
NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID(int=21)
LAST_OFFSET_DELTA_AT = 23


@dataclass
class Sender:
    submitted: list[IsrProposal] = field(default_factory=list)

    def submit(self, partition: Partition, proposal: IsrProposal) -> None:
        self.submitted.append(proposal)


def batch(n: int, timestamp: int) -> bytes:
    return build_batch([Record(value=b"v%d" % i, timestamp=timestamp + i) for i in range(n)])


CONFIG = LogConfig(index_interval_bytes=1)
"""Every batch but the first gets an index entry: a clean load scans only the last batch."""


def lead(log: PartitionLog, clock: FakeClock, sender: Sender | None, isr: tuple[int, ...]) -> Partition:
    return Partition.open(
        log,
        node_id=LEADER,
        topic_id=TOPIC_ID,
        leader_epoch=0,
        partition_epoch=5,
        replicas=[1, 2, 3],
        isr=list(isr),
        min_insync_replicas=1,
        clock=clock,
        alter_partition=sender,
    )


def open_leader(
    directory: pathlib.Path, sender: Sender, *, isr: tuple[int, ...] = (1, 2, 3), damage: bool = True
) -> Partition:
    """A leader of [1, 2, 3] whose log holds three batches of two records; with ``damage`` the
    second batch's header was flipped after a clean close (the clean load does not look there)."""
    clock = FakeClock(NOW)
    log = PartitionLog.open(directory, CONFIG, clock, topic_id=TOPIC_ID)
    first = lead(log, clock, None, isr)
    for i in range(3):
        first.append_records(batch(2, NOW + 10 * i), required_acks=1, now_ms=NOW)
    first.close()  # a producer snapshot at the log end: the next leader replays nothing
    path = log.active_segment.log_path
    log.close()
    if damage:
        fd = path.open("r+b")
        with fd:
            second = list(walk_batches(fd.fileno(), 0, path.stat().st_size))[1]
            fd.seek(second.position + LAST_OFFSET_DELTA_AT)
            data = fd.read(16)
            fd.seek(second.position + LAST_OFFSET_DELTA_AT)
            fd.write(bytes(b ^ 0xFF for b in data))
    log = PartitionLog.open(directory, CONFIG, clock, topic_id=TOPIC_ID, clean_shutdown=True)
    assert log.log_end_offset == 6
    log.update_high_watermark(log.log_end_offset)
    return lead(log, clock, sender, isr)


def consumer_read(partition: Partition, offset: int) -> PartitionRead:
    return partition.read(
        offset,
        1,
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        is_follower=False,
        min_one_batch=True,
        current_leader_epoch=NO_LEADER_EPOCH,
        last_fetched_epoch=NO_LEADER_EPOCH,
    )


def test_a_corrupt_batch_met_by_a_fetch_takes_the_partition_offline_and_resigns(
    tmp_path: pathlib.Path,
) -> None:
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender)
    assert consumer_read(partition, 0).error_code is ErrorCode.NONE  # the first batch is intact
    assert not partition.is_offline
    read = consumer_read(partition, 2)
    assert read.error_code is ErrorCode.KAFKA_STORAGE_ERROR
    assert partition.is_offline
    assert partition.log.damaged_from == 0
    assert [p.new_isr for p in sender.submitted] == [(2, 3)]
    # every later request is answered at once, without touching the log or proposing again
    for offset in (0, 2, 4):
        assert consumer_read(partition, offset).error_code is ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaError) as caught:
        partition.offset_for_timestamp(NOW, isolation_level=None, current_leader_epoch=NO_LEADER_EPOCH)
    assert caught.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaError) as caught:
        partition.last_offset_for_leader_epoch(NO_LEADER_EPOCH, 0)
    assert caught.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaError) as caught:
        partition.append_records(batch(1, NOW), required_acks=1, now_ms=NOW)
    assert caught.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert len(sender.submitted) == 1


def test_list_offsets_meeting_a_corrupt_batch_answers_a_storage_error(tmp_path: pathlib.Path) -> None:
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender)
    with pytest.raises(KafkaError) as caught:
        partition.offset_for_timestamp(NOW + 10, isolation_level=None, current_leader_epoch=NO_LEADER_EPOCH)
    assert caught.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert partition.is_offline
    assert [p.new_isr for p in sender.submitted] == [(2, 3)]


def test_a_parked_fetch_meeting_a_corrupt_batch_sees_the_partition_offline(tmp_path: pathlib.Path) -> None:
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender)
    seen: list[bool] = []
    partition.add_listener(lambda p: seen.append(p.is_offline))
    assert partition.bytes_available(2, partition.log_end_offset) == 0
    assert partition.is_offline
    assert seen == [True]  # parked fetches hear of it and complete with the partition's error


def test_an_io_error_on_a_read_takes_the_partition_offline(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender, damage=False)

    def fail(*_: object, **__: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(partition.log, "read", fail)
    assert consumer_read(partition, 0).error_code is ErrorCode.KAFKA_STORAGE_ERROR
    assert partition.is_offline
    assert partition.log.damaged_from is None  # nothing to re-validate: the disk failed, not the bytes
    assert [p.new_isr for p in sender.submitted] == [(2, 3)]


def test_the_only_in_sync_replica_stays_offline_without_resigning(tmp_path: pathlib.Path) -> None:
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender, isr=(1,))
    assert consumer_read(partition, 2).error_code is ErrorCode.KAFKA_STORAGE_ERROR
    assert partition.is_offline
    assert sender.submitted == []
    assert not partition.maybe_shrink_isr()
    assert sender.submitted == []


def test_a_resignation_replaces_a_proposal_in_flight(tmp_path: pathlib.Path) -> None:
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender)
    assert partition.maybe_shrink_isr(NOW + 60_000)  # the followers never fetched: a shrink in flight
    shrink = sender.submitted[-1]
    assert shrink.new_isr == (1,)
    assert consumer_read(partition, 2).error_code is ErrorCode.KAFKA_STORAGE_ERROR
    resignation = sender.submitted[-1]
    assert resignation.new_isr == (2, 3)
    assert partition.replica_set.pending is resignation
    # the shrink's late answer is ignored
    assert not partition.on_alter_partition_result(shrink, ErrorCode.NONE, 0, (1,), 6)
    assert partition.isr == [1, 2, 3]


def test_a_refused_resignation_is_proposed_again_by_the_periodic_check(tmp_path: pathlib.Path) -> None:
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender)
    consumer_read(partition, 2)
    [resignation] = sender.submitted
    assert not partition.maybe_shrink_isr()  # one in flight: nothing more
    partition.on_alter_partition_result(resignation, ErrorCode.INELIGIBLE_REPLICA, -1, (), -1)
    assert partition.replica_set.pending is None
    assert not partition.maybe_expand_isr()  # an offline partition proposes no ISR change
    assert partition.maybe_shrink_isr()
    assert [p.new_isr for p in sender.submitted] == [(2, 3), (2, 3)]


def test_an_accepted_resignation_waits_for_the_metadata(tmp_path: pathlib.Path) -> None:
    """The controller's answer names a new leader epoch: the partition drops the proposal and stays
    offline until the metadata makes this broker a follower (which hands its log over for repair)."""
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender)
    consumer_read(partition, 2)
    [resignation] = sender.submitted
    assert not partition.on_alter_partition_result(resignation, ErrorCode.NONE, 1, (2, 3), 6)
    assert partition.replica_set.pending is None
    assert partition.is_offline
    assert partition.make_follower(leader_epoch=1, partition_epoch=6)
    assert not partition.is_leader


def test_a_follower_that_cut_committed_records_is_shrunk_out_of_the_isr_at_once(
    tmp_path: pathlib.Path,
) -> None:
    """A follower that repaired a damaged log by cutting it comes back below the high watermark:
    the leader proposes the ISR without it on that fetch, not replica.lag.time.max.ms later, so no
    election can pick a replica that lacks acknowledged records."""
    sender = Sender()
    partition = open_leader(tmp_path / "t-0", sender, damage=False)
    for follower in (2, 3):
        partition.update_follower_fetch(follower, 6, 0, NOW, leader_end_offset=6)
    assert partition.high_watermark == 6 and sender.submitted == []
    partition.update_follower_fetch(3, 2, 0, NOW + 1, leader_end_offset=6)
    assert [p.new_isr for p in sender.submitted] == [(1, 2)]


def test_damage_met_while_taking_the_lead_takes_the_partition_offline_and_resigns(
    tmp_path: pathlib.Path,
) -> None:
    """Taking the lead replays the producer state from the last snapshot; a batch damaged while
    the log was closed, met by that replay, takes the partition offline at once (it resigns, and
    the log is marked for recovery) instead of failing to open, which left it led by nobody."""
    directory = tmp_path / "t-0"
    clock = FakeClock(NOW)
    log = PartitionLog.open(directory, CONFIG, clock, topic_id=TOPIC_ID)
    first = lead(log, clock, None, (1, 2, 3))
    for i in range(3):
        first.append_records(batch(2, NOW + 10 * i), required_acks=1, now_ms=NOW)
    first.close()
    path = log.active_segment.log_path
    log.close()
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()  # as after a crash: the replay starts at the log start
    fd = path.open("r+b")
    with fd:
        second = list(walk_batches(fd.fileno(), 0, path.stat().st_size))[1]
        fd.seek(second.position + 8)  # BatchLength onwards: no batch starts where the next should
        data = fd.read(16)
        fd.seek(second.position + 8)
        fd.write(bytes(b ^ 0xFF for b in data))
    log = PartitionLog.open(directory, CONFIG, clock, topic_id=TOPIC_ID, clean_shutdown=True)
    sender = Sender()

    partition = lead(log, clock, sender, (1, 2, 3))

    assert partition.is_offline
    assert partition.log.damaged_from == 0
    assert [p.new_isr for p in sender.submitted] == [(2, 3)]
    assert consumer_read(partition, 0).error_code is ErrorCode.KAFKA_STORAGE_ERROR
