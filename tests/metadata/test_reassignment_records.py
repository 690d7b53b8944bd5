"""Reassignment state in the partition records: tagged on the wire (old logs still decode), replayed
into the image, checked on replay, and kept by snapshots."""

from __future__ import annotations

import pathlib
import uuid

import pytest

from metadata.image import MetadataImage, MetadataReplayError
from metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from metadata.serde import metadata_record_value, record_from_wire
from metadata.snapshot import load_image, read_snapshot, snapshot_path, write_snapshot
from protocol import wire
from protocol.metadata_records import PARTITION_CHANGE_RECORD, PARTITION_RECORD

T1 = uuid.UUID(int=7)


def _old_layout(record_type: int, record: PartitionRecord | PartitionChangeRecord) -> bytes:
    """The value as written before the reassignment fields existed: the seven fields, no tags."""
    import io

    out = io.BytesIO()
    for prefix in (1, record_type, 0):
        wire.write_uvarint(out, prefix)
    out.write(record.partition_id.to_bytes(4, "big", signed=True))
    out.write(record.topic_id.bytes)
    for array in (record.replicas, record.isr):
        wire.write_uvarint(out, len(array) + 1)
        for broker in array:
            out.write(broker.to_bytes(4, "big", signed=True))
    for value in (record.leader, record.leader_epoch, record.partition_epoch):
        out.write(value.to_bytes(4, "big", signed=True))
    wire.write_uvarint(out, 0)  # empty tag buffer
    return out.getvalue()


@pytest.mark.parametrize(
    ("record_type", "cls"),
    [(PARTITION_RECORD, PartitionRecord), (PARTITION_CHANGE_RECORD, PartitionChangeRecord)],
)
def test_without_a_reassignment_the_value_is_the_old_layout(
    record_type: int, cls: type[PartitionRecord | PartitionChangeRecord]
) -> None:
    record = cls(3, T1, (1, 2, 3), (1, 2), 1, 4, 5)
    old = _old_layout(record_type, record)
    assert metadata_record_value(record) == old
    assert record_from_wire(old) == record
    assert (record.removing_replicas, record.adding_replicas) == ((), ())


@pytest.mark.parametrize("cls", [PartitionRecord, PartitionChangeRecord])
def test_a_reassignment_round_trips_in_tagged_fields(
    cls: type[PartitionRecord | PartitionChangeRecord],
) -> None:
    record = cls(0, T1, (1, 2, 3, 4, 5), (1, 2, 3), 1, 0, 1, removing_replicas=(1, 2), adding_replicas=(4, 5))
    value = metadata_record_value(record)
    assert record_from_wire(value) == record
    assert len(value) > len(_old_layout(PARTITION_RECORD, record))


def _image_with(*records: PartitionRecord | PartitionChangeRecord) -> MetadataImage:
    image = MetadataImage()
    image.apply_batch([(0, TopicRecord("orders", T1)), *((i + 1, r) for i, r in enumerate(records))], 1)
    return image


def test_the_image_holds_the_reassignment() -> None:
    image = _image_with(
        PartitionRecord(0, T1, (1, 2), (1, 2), 1, 0, 0),
        PartitionChangeRecord(
            0, T1, (1, 2, 3, 4), (1, 2), 1, 0, 1, removing_replicas=(1, 2), adding_replicas=(3, 4)
        ),
    )
    state = image.partition(T1, 0)
    assert state is not None
    assert (state.removing_replicas, state.adding_replicas) == ([1, 2], [3, 4])
    assert state.is_reassigning and state.target_replicas == [3, 4]
    topic = image.get("orders")
    assert topic is not None and topic.replication_factor == 2


@pytest.mark.parametrize(
    ("removing", "adding"),
    [((9,), ()), ((), (9,)), ((3,), (3,)), ((1, 1), ()), ((), (3, 3))],
)
def test_impossible_reassignment_state_is_refused(removing: tuple[int, ...], adding: tuple[int, ...]) -> None:
    with pytest.raises(MetadataReplayError, match="disjoint sets of replicas"):
        _image_with(PartitionRecord(0, T1, (1, 2, 3), (1, 2), 1, 0, 0, removing, adding))


def test_a_snapshot_keeps_the_reassignment(tmp_path: pathlib.Path) -> None:
    image = _image_with(
        PartitionRecord(0, T1, (1, 2, 3), (1, 2), 1, 0, 0, removing_replicas=(1,), adding_replicas=(3,))
    )
    snapshot_id = write_snapshot(
        tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=0
    )
    loaded = load_image(
        read_snapshot(snapshot_path(tmp_path, snapshot_id)), snapshot_id.end_offset, snapshot_id.epoch
    )
    assert loaded == image
    state = loaded.partition(T1, 0)
    assert state is not None and (state.removing_replicas, state.adding_replicas) == ([1], [3])
