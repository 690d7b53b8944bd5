"""CommittedMetadataImage: a voter's committed metadata log on disk, replayed when read.

The log here is a real ``__cluster_metadata-0`` partition log written through SegmentRaftLog, as a
voter's Raft writes it, with the high watermark the voter records on it.
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator, Sequence

import pytest
from structlog.testing import capture_logs

from metadata.committed_image import CommittedMetadataImage
from metadata.image import MetadataImage
from metadata.local_copy import LocalMetadataCopy, ReplayPosition, replay_committed
from metadata.raft.segment_log import SegmentRaftLog
from metadata.records import AccessControlEntryRecord, MetadataRecord, UserScramCredentialRecord
from metadata.serde import metadata_record_value
from metadata.snapshot import write_snapshot
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from security.scram import ScramMechanism
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog

pytestmark = [pytest.mark.timeout(30)]

NOW = 1_700_000_000_000


def acl(n: int, principal: str = "User:alice") -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        uuid.UUID(int=n),
        ResourceType.TOPIC,
        f"topic-{n}",
        PatternType.LITERAL,
        principal,
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


def scram(user: str, iterations: int = 4096) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        user, ScramMechanism.SCRAM_SHA_512.type_id, b"salt", b"s" * 64, b"k" * 64, iterations
    )


class VoterLog:
    """A voter's metadata log: batches appended as Raft appends them, committed as its HW moves."""

    def __init__(self, root: pathlib.Path) -> None:
        self.partition_log = PartitionLog.open(root / "__cluster_metadata-0", LogConfig(), FakeClock(NOW))
        self.raft = SegmentRaftLog(self.partition_log, FakeClock(NOW))

    def append(self, epoch: int, *records: MetadataRecord) -> int:
        """Append one batch; returns the offset after it."""
        [entry] = self.raft.append_as_leader(epoch, [metadata_record_value(r) for r in records])
        return entry.next_offset

    def commit(self, offset: int) -> None:
        self.raft.note_committed(offset)

    def append_committed(self, epoch: int, *records: MetadataRecord) -> int:
        end = self.append(epoch, *records)
        self.commit(end)
        return end

    @property
    def directory(self) -> pathlib.Path:
        return self.partition_log.directory

    def close(self) -> None:
        self.partition_log.close()


@pytest.fixture
def log(tmp_path: pathlib.Path) -> Iterator[VoterLog]:
    voter = VoterLog(tmp_path)
    yield voter
    voter.close()


def committed_over(log: VoterLog) -> CommittedMetadataImage:
    return CommittedMetadataImage(LocalMetadataCopy(log.partition_log, writable=False))


def users(image: MetadataImage) -> set[str]:
    return {
        user
        for user in ("alice", "bob", "carol")
        if image.scram_credential(ScramMechanism.SCRAM_SHA_512, user)
    }


def test_an_empty_log_is_an_empty_image(log: VoterLog) -> None:
    image = committed_over(log).current()
    assert len(image.acls) == 0 and users(image) == set() and image.offset == -1


def test_the_image_catches_up_with_each_committed_batch(log: VoterLog) -> None:
    committed = committed_over(log)
    assert len(committed.current().acls) == 0
    end = log.append_committed(1, acl(1), scram("alice"))
    image = committed.current()
    assert committed.next_offset == end == 2
    assert image.acls.get(uuid.UUID(int=1)) is not None and users(image) == {"alice"}
    log.append_committed(1, scram("bob"))
    log.append_committed(2, acl(2, "User:bob"))
    image = committed.current()
    assert users(image) == {"alice", "bob"} and len(image.acls) == 2
    assert committed.next_offset == 4 and image.epoch == 2


def test_batches_above_the_high_watermark_are_not_applied(log: VoterLog) -> None:
    committed = committed_over(log)
    first = log.append_committed(1, acl(1))
    log.append(1, scram("alice"))  # on this voter's log, not yet on a majority's
    assert users(committed.current()) == set()
    assert committed.next_offset == first
    log.commit(first + 1)
    assert users(committed.current()) == {"alice"}


def test_a_read_with_nothing_newly_committed_does_not_touch_the_log(
    log: VoterLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = committed_over(log)
    log.append_committed(1, acl(1))
    committed.current()
    replays: list[int] = []

    def counted(local: LocalMetadataCopy, image: MetadataImage, position: ReplayPosition) -> None:
        replays.append(position.next_offset)
        replay_committed(local, image, position)

    monkeypatch.setattr("metadata.committed_image.replay_committed", counted)
    for _ in range(3):
        committed.current()
    log.append(1, acl(2))  # uncommitted: still nothing to replay
    committed.current()
    assert replays == []
    log.commit(2)
    committed.current()
    assert replays == [1]  # from the offset after the first batch


def snapshot_of(*batches: tuple[int, Sequence[MetadataRecord]]) -> MetadataImage:
    """The image of a log holding ``batches`` (epoch, records) from offset 0."""
    image = MetadataImage()
    offset = 0
    for epoch, records in batches:
        for record in records:
            image.apply(record, offset, epoch)
            offset += 1
    return image


def test_a_fresh_image_starts_from_the_newest_snapshot(log: VoterLog) -> None:
    """A voter took a snapshot and its log start moved past the batches it holds."""
    log.append_committed(1, acl(1))
    end = log.append_committed(1, scram("alice"))
    write_snapshot(
        log.directory,
        snapshot_of((1, [acl(1)]), (1, [scram("alice")])),
        end_offset=end,
        epoch=1,
        timestamp_ms=NOW,
    )
    assert log.raft.advance_start(end)
    log.append_committed(2, scram("bob"))
    image = committed_over(log).current()
    assert users(image) == {"alice", "bob"} and len(image.acls) == 1


def test_a_log_replaced_by_the_leaders_snapshot_is_picked_up_from_that_snapshot(log: VoterLog) -> None:
    """The voter fell behind and installed the leader's snapshot: every entry of its log is gone,
    the log starts at the snapshot's end, and the image starts again from the snapshot."""
    committed = committed_over(log)
    log.append_committed(1, acl(1))
    assert len(committed.current().acls) == 1
    leaders = snapshot_of((1, [acl(1)]), (1, [scram("alice")]), (2, [acl(2)]), (2, [scram("carol")]))
    write_snapshot(log.directory, leaders, end_offset=4, epoch=2, timestamp_ms=NOW)
    log.partition_log.truncate_fully_and_start_at(4)
    log.raft.note_snapshot(4, 2)
    log.append_committed(3, scram("bob"))
    image = committed.current()
    assert users(image) == {"alice", "bob", "carol"} and len(image.acls) == 2
    assert committed.next_offset == 5 and image.epoch == 3


def test_a_log_start_past_the_image_with_no_snapshot_yet_leaves_the_image_as_it_is(log: VoterLog) -> None:
    committed = committed_over(log)
    log.append_committed(1, acl(1))
    committed.current()
    log.append_committed(1, scram("alice"))
    log.partition_log.truncate_fully_and_start_at(2)  # the snapshot of [0, 2) is not there (yet)
    log.append_committed(1, scram("bob"))
    image = committed.current()
    assert users(image) == set() and len(image.acls) == 1  # nothing skipped over the gap
    write_snapshot(
        log.directory,
        snapshot_of((1, [acl(1)]), (1, [scram("alice")])),
        end_offset=2,
        epoch=1,
        timestamp_ms=NOW,
    )
    log.append_committed(1, scram("carol"))
    assert users(committed.current()) == {"alice", "bob", "carol"}


def test_a_batch_the_image_refuses_is_logged_once_and_the_image_kept(log: VoterLog) -> None:
    committed = committed_over(log)
    log.append_committed(1, acl(1), scram("alice"))
    committed.current()
    with capture_logs() as logs:
        log.append_committed(1, acl(1, "User:bob"))  # the same ACL id twice: refused by the replay
        image = committed.current()
        log.append_committed(1, scram("bob"))
        again = committed.current()
    assert users(image) == {"alice"} and len(image.acls) == 1
    assert again is image and users(again) == {"alice"}  # stuck behind the refused batch
    errors = [entry for entry in logs if entry["log_level"] == "error"]
    assert len(errors) == 1 and "keeping the image" in errors[0]["event"]
    assert committed.next_offset == 2
