"""Group configs (ConfigRecords of the GROUP resource, type 32) in the metadata image: kept apart
from broker configs, in the delta, the snapshot and the record codec."""

from __future__ import annotations

import pathlib

import pytest

from metadata.image import MetadataImage, MetadataReplayError
from metadata.records import ConfigRecord, ConfigResourceType
from metadata.serde import metadata_record_value, record_from_wire
from metadata.snapshot import image_records, load_image, read_snapshot, snapshot_path, write_snapshot

GROUP, BROKER = ConfigResourceType.GROUP, ConfigResourceType.BROKER
SESSION = "consumer.session.timeout.ms"


def test_group_is_kafkas_type_32_and_round_trips_the_codec() -> None:
    assert int(GROUP) == 32
    record = ConfigRecord(GROUP, "g", SESSION, "50000")
    decoded = record_from_wire(metadata_record_value(record))
    assert decoded == record
    assert decoded.resource_type == GROUP


def test_image_keeps_group_configs_apart_and_reports_them_in_the_delta() -> None:
    image = MetadataImage()
    delta = image.apply_batch(
        [(0, ConfigRecord(GROUP, "g", SESSION, "50000")), (1, ConfigRecord(BROKER, "1", "x.y", "1"))], epoch=1
    )
    assert image.group_configs("g") == {SESSION: "50000"}
    assert image.group_configs("missing") == {}
    assert image.group_config_resources() == ["g"]
    assert image.broker_configs("g") == {}
    assert delta.group_configs_changed == ("g",)
    assert delta.broker_configs_changed == ("1",)  # brokers only

    other = MetadataImage()
    other.apply_batch(
        [(0, ConfigRecord(GROUP, "g", SESSION, "50001")), (1, ConfigRecord(BROKER, "1", "x.y", "1"))], 1
    )
    assert other != image  # group configs are part of the image's state

    delta = image.apply_batch([(2, ConfigRecord(GROUP, "g", SESSION, "50000"))], epoch=1)
    assert delta.group_configs_changed == ()  # the same value: no change
    delta = image.apply_batch([(3, ConfigRecord(GROUP, "g", SESSION, None))], epoch=1)
    assert delta.group_configs_changed == ("g",)
    assert delta.broker_configs_changed == ()
    assert image.group_config_resources() == []


def test_a_group_config_without_a_group_cannot_be_replayed() -> None:
    with pytest.raises(MetadataReplayError, match="without a group"):
        MetadataImage().apply(ConfigRecord(GROUP, "", SESSION, "50000"), 0, 1)


def test_snapshots_carry_group_configs(tmp_path: pathlib.Path) -> None:
    image = MetadataImage()
    image.apply_batch(
        [(0, ConfigRecord(GROUP, "b", SESSION, "50000")), (1, ConfigRecord(GROUP, "a", SESSION, "46000"))], 1
    )
    assert [r for _, r in image_records(image) if isinstance(r, ConfigRecord)] == [
        ConfigRecord(GROUP, "a", SESSION, "46000"),
        ConfigRecord(GROUP, "b", SESSION, "50000"),
    ]
    snapshot_id = write_snapshot(
        tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=1
    )
    loaded = load_image(
        read_snapshot(snapshot_path(tmp_path, snapshot_id)), snapshot_id.end_offset, snapshot_id.epoch
    )
    assert loaded == image
    assert loaded.group_configs("b") == {SESSION: "50000"}
