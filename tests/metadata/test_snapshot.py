"""Metadata snapshots (KIP-630): the image as records, the checkpoint files, FetchSnapshot chunks."""

from __future__ import annotations

import contextlib
import pathlib
import struct
import tempfile
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata.controller.metadata_log import LogEntry
from metadata.image import MetadataImage, MetadataReplayError
from metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC
from metadata.records import ConfigRecord, ConfigResourceType, RegisterBrokerRecord
from metadata.serde import encode_metadata_batch, record_from_wire
from metadata.snapshot import (
    MAX_BATCH_BYTES,
    REGISTRATION_OFFSET_HEADER,
    CorruptSnapshotError,
    SnapshotId,
    SnapshotPositionError,
    delete_snapshots_before,
    encode_snapshot,
    finish_fetched_snapshot,
    image_records,
    last_contained_timestamp,
    latest_snapshot,
    list_snapshots,
    load_image,
    load_snapshot,
    partial_snapshot_size,
    read_snapshot,
    read_snapshot_chunk,
    remove_partial_snapshots,
    snapshot_path,
    snapshot_size,
    write_snapshot,
    write_snapshot_chunk,
)
from protocol.error_codes import KafkaError
from protocol.records import (
    Record,
    build_batch,
    iter_batches,
    iter_records,
    parse_control_record_key,
    stamp_base_offset,
)
from protocol.records.control import ControlRecordType, encode_control_record_key
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.metadata.controller.helpers import Cluster, replayed
from tests.metadata.controller.test_replay_determinism import OPERATIONS, run

TIMESTAMP = 1_700_000_000_000

BROKER_CONFIGS = st.lists(
    st.tuples(
        st.sampled_from(["", "1", "2"]),
        st.sampled_from(["log.retention.ms", "num.io.threads"]),
        st.one_of(st.none(), st.sampled_from(["1", "2"])),
    ),
    max_size=6,
)
SNAPSHOT_OPERATIONS = st.one_of(OPERATIONS, st.tuples(st.just("producer_ids"), st.integers(1, 4)))


def build_log(
    operations: list[tuple[Any, ...]], broker_configs: list[tuple[str, str, str | None]]
) -> Cluster:
    """A controller driven by random operations, then broker config changes appended to its log."""
    cluster = Cluster()
    cluster.join(1, 2)
    for operation in operations:
        if operation[0] == "producer_ids":
            broker_id = operation[1]
            if broker_id in cluster.epochs:
                with contextlib.suppress(KafkaError):
                    cluster.controller.allocate_producer_ids(broker_id, cluster.epochs[broker_id])
        else:
            cluster = run(cluster, operation)
    if broker_configs:
        records = [ConfigRecord(ConfigResourceType.BROKER, *change) for change in broker_configs]
        cluster.log.append(records, cluster.controller.controller_epoch)
    return cluster


def image_of(entries: list[LogEntry]) -> MetadataImage:
    image = MetadataImage()
    for offset, epoch, record in entries:
        image.apply(record, offset, epoch)
    return image


def round_trip(directory: pathlib.Path, image: MetadataImage, **kwargs: Any) -> MetadataImage:
    snapshot_id = write_snapshot(
        directory, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=TIMESTAMP, **kwargs
    )
    return load_image(
        read_snapshot(snapshot_path(directory, snapshot_id)), snapshot_id.end_offset, snapshot_id.epoch
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(SNAPSHOT_OPERATIONS, max_size=40),
    BROKER_CONFIGS,
    st.sampled_from([150, 1000, MAX_BATCH_BYTES]),
    st.floats(0, 1),
)
def test_a_snapshot_loads_as_the_image_it_was_written_from(
    operations: list[tuple[Any, ...]],
    broker_configs: list[tuple[str, str, str | None]],
    max_batch_bytes: int,
    cut: float,
) -> None:
    with structlog.testing.capture_logs(), tempfile.TemporaryDirectory() as tmp:
        cluster = build_log(operations, broker_configs)
        entries = cluster.log.read()
        whole = replayed(cluster.log)
        directory = pathlib.Path(tmp)

        assert (
            MetadataImage.from_snapshot(image_records(whole), offset=whole.offset, epoch=whole.epoch) == whole
        )
        loaded = round_trip(directory, whole, max_batch_bytes=max_batch_bytes)
        assert loaded == whole
        assert loaded.offset == whole.offset
        for broker_id in whole.broker_ids():
            assert loaded.registration_offset(broker_id) == whole.registration_offset(broker_id)
        assert encode_snapshot(loaded, epoch=whole.epoch, timestamp_ms=TIMESTAMP) == encode_snapshot(
            whole, epoch=whole.epoch, timestamp_ms=TIMESTAMP
        )

        # a snapshot of a prefix, then the rest of the log, is the whole log
        k = max(1, round(cut * len(entries)))
        prefix = image_of(entries[:k])
        resumed = round_trip(directory, prefix, max_batch_bytes=max_batch_bytes)
        assert resumed == prefix
        for offset, epoch, record in entries[k:]:
            resumed.apply(record, offset, epoch)
        assert resumed == whole


def small_cluster() -> Cluster:
    with structlog.testing.capture_logs():
        cluster = Cluster()
        cluster.join(1, 2, 3)
        cluster.create("orders", 3, 2, {"retention.ms": "1000"})
        cluster.create("payments", 2, 3)
        cluster.register(2)  # the same incarnation again: amended, registration offset != broker epoch
        cluster.controller.allocate_producer_ids(1, cluster.epochs[1])
        cluster.log.append([ConfigRecord(ConfigResourceType.BROKER, "1", "num.io.threads", "4")], 1)
    return cluster


def test_the_registration_offset_of_an_amended_registration_survives(tmp_path: pathlib.Path) -> None:
    image = replayed(small_cluster().log)
    registration = image.broker(2)
    assert registration is not None and image.registration_offset(2) != registration.broker_epoch
    assert image.next_producer_id > 0 and image.broker_configs("1")
    loaded = round_trip(tmp_path, image)
    assert loaded == image
    assert loaded.registration_offset(2) == image.registration_offset(2)


def test_the_file_has_kafkas_layout(tmp_path: pathlib.Path) -> None:
    image = replayed(small_cluster().log)
    snapshot_id = write_snapshot(
        tmp_path,
        image,
        end_offset=image.offset + 1,
        epoch=image.epoch + 2,
        timestamp_ms=TIMESTAMP,
        max_batch_bytes=300,
    )
    data = snapshot_path(tmp_path, snapshot_id).read_bytes()
    batches = [(header, data[pos : pos + header.size]) for pos, header in iter_batches(data)]
    assert sum(header.size for header, _ in batches) == len(data)
    assert len(batches) > 3  # several batches of metadata records between header and footer

    next_offset = 0
    for header, _ in batches:
        assert header.base_offset == next_offset
        assert header.partition_leader_epoch == image.epoch + 2
        next_offset = header.last_offset + 1
    for header, _ in batches[1:-1]:
        assert not header.is_control and header.size <= 300

    first_header, first = batches[0]
    [record] = list(iter_records(first))
    assert first_header.is_control and record.offset == 0
    assert parse_control_record_key(record.key).type == 3  # Kafka's SNAPSHOT_HEADER
    assert record.value == struct.pack(">hq", 0, TIMESTAMP) + b"\x00"
    last_header, last = batches[-1]
    [record] = list(iter_records(last))
    assert last_header.is_control and record.offset == next_offset - 1
    assert parse_control_record_key(record.key).type == 4  # Kafka's SNAPSHOT_FOOTER
    assert record.value == b"\x00\x00\x00"

    registrations = [
        record
        for _, batch in batches[1:-1]
        for record in iter_records(batch)
        if isinstance(record_from_wire(record.value), RegisterBrokerRecord)
    ]
    assert len(registrations) == 3
    for record in registrations:
        assert [name for name, _ in record.headers] == [REGISTRATION_OFFSET_HEADER]
    assert last_contained_timestamp(tmp_path, snapshot_id) == TIMESTAMP

    loaded = load_snapshot(tmp_path, snapshot_id)
    assert loaded.offset == image.offset and loaded.epoch == image.epoch + 2  # the id's epoch


def test_an_image_caught_up_past_its_last_record_is_snapshotted_at_its_offset(tmp_path: pathlib.Path) -> None:
    image = replayed(small_cluster().log)
    image.skip_to(image.offset + 3)  # a LeaderChange control batch after the last record
    snapshot_id = write_snapshot(
        tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=TIMESTAMP
    )
    assert load_snapshot(tmp_path, snapshot_id) == image


def test_write_snapshot_checks_the_id_against_the_image(tmp_path: pathlib.Path) -> None:
    image = replayed(small_cluster().log)
    with pytest.raises(ValueError, match="ends at"):
        write_snapshot(tmp_path, image, end_offset=image.offset, epoch=image.epoch, timestamp_ms=0)
    with pytest.raises(ValueError, match="older"):
        write_snapshot(tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch - 1, timestamp_ms=0)
    assert list(tmp_path.iterdir()) == []


def test_a_snapshot_written_without_registration_offsets_loads_kafkas_way(tmp_path: pathlib.Path) -> None:
    """Kafka's own header batch may hold KRaftVersion after the header; records carry no headers."""
    image = replayed(small_cluster().log)
    snapshot_id = SnapshotId(image.offset + 1, image.epoch)
    control = [
        Record(
            key=encode_control_record_key(ControlRecordType.SNAPSHOT_HEADER),
            value=struct.pack(">hq", 0, 7) + b"\0",
        ),
        Record(key=encode_control_record_key(ControlRecordType.KRAFT_VERSION), value=b"\0\0\0\1\0"),
    ]
    records = [record for _, record in image_records(image)]
    body = bytearray(encode_metadata_batch(records, epoch=image.epoch, timestamp_ms=7))
    stamp_base_offset(body, 0, 2)  # outside the CRC
    data = bytearray(build_batch(control, base_offset=0, partition_leader_epoch=image.epoch, is_control=True))
    data += body
    footer = Record(key=encode_control_record_key(ControlRecordType.SNAPSHOT_FOOTER), value=b"\0\0\0")
    data += build_batch(
        [footer], base_offset=2 + len(records), partition_leader_epoch=image.epoch, is_control=True
    )
    snapshot_path(tmp_path, snapshot_id).write_bytes(bytes(data))

    loaded = load_snapshot(tmp_path, snapshot_id)
    for broker_id in image.broker_ids():
        assert loaded.registration_offset(broker_id) == image.offset
    assert loaded.brokers() == image.brokers() and loaded.all() == image.all()
    assert last_contained_timestamp(tmp_path, snapshot_id) == 7


# -- naming and the directory --------------------------------------------------------------------


def test_snapshot_ids_name_files_as_kafka_does() -> None:
    snapshot_id = SnapshotId(11, 3)
    assert snapshot_id.file_name == "00000000000000000011-0000000003.checkpoint"
    assert snapshot_id.partial_file_name == "00000000000000000011-0000000003.checkpoint.part"
    assert snapshot_id.last_contained_offset == 10
    assert SnapshotId.parse(snapshot_id.file_name) == snapshot_id
    assert SnapshotId.parse("12345678901234567890-2147483647.checkpoint") == SnapshotId(
        12345678901234567890, 2147483647
    )
    for other in (
        snapshot_id.partial_file_name,
        "00000000000000000011-0000000003-123.checkpoint.part",
        "00000000000000000011.log",
        "00000000000000000011.snapshot",
        "0000000000000000011-0000000003.checkpoint",
        "00000000000000000011-000000003.checkpoint",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ):
        assert SnapshotId.parse(other) is None, other
    with pytest.raises(ValueError):
        _ = SnapshotId(-1, 0).file_name
    with pytest.raises(ValueError):
        _ = SnapshotId(0, -1).file_name


def test_listing_latest_and_deleting_before(tmp_path: pathlib.Path) -> None:
    assert list_snapshots(tmp_path / "missing") == [] and latest_snapshot(tmp_path) is None
    for snapshot_id in (SnapshotId(100, 2), SnapshotId(9, 1), SnapshotId(100, 1), SnapshotId(2000, 3)):
        (tmp_path / snapshot_id.file_name).write_bytes(b"")
    (tmp_path / SnapshotId(3000, 3).partial_file_name).write_bytes(b"")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert list_snapshots(tmp_path) == [
        SnapshotId(9, 1),
        SnapshotId(100, 1),
        SnapshotId(100, 2),
        SnapshotId(2000, 3),
    ]
    assert latest_snapshot(tmp_path) == SnapshotId(2000, 3)

    assert delete_snapshots_before(tmp_path, 100) == 1
    assert delete_snapshots_before(tmp_path, 100) == 0
    assert list_snapshots(tmp_path) == [SnapshotId(100, 1), SnapshotId(100, 2), SnapshotId(2000, 3)]
    assert delete_snapshots_before(tmp_path, 2000) == 2
    assert list_snapshots(tmp_path) == [SnapshotId(2000, 3)]
    assert (tmp_path / "00000000000000000000.log").exists()


def test_partial_snapshots_left_by_a_crash_are_removed(tmp_path: pathlib.Path) -> None:
    image = replayed(small_cluster().log)
    kept = write_snapshot(tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=0)
    (tmp_path / SnapshotId(50, 1).partial_file_name).write_bytes(b"torn")
    (tmp_path / "00000000000000000050-0000000001-4242.checkpoint.part").write_bytes(b"kafka's temp")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert remove_partial_snapshots(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000000.log", kept.file_name]
    assert remove_partial_snapshots(tmp_path) == 0
    assert remove_partial_snapshots(tmp_path / "missing") == 0


def test_the_storage_layer_leaves_snapshot_files_alone(tmp_path: pathlib.Path) -> None:
    directory = tmp_path / f"{METADATA_TOPIC}-{METADATA_PARTITION}"
    clock = FakeClock(TIMESTAMP)
    config = LogConfig(segment_bytes=2000, file_delete_delay_ms=0)
    log = PartitionLog.open(directory, config, clock)
    image = replayed(small_cluster().log)
    records = [record for _, record in image_records(image)][:2]
    for _ in range(30):
        log.append_as_leader(encode_metadata_batch(records, epoch=1, timestamp_ms=0), 1)
    written = write_snapshot(directory, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=0)
    partial = directory / SnapshotId(99, 1).partial_file_name
    partial.write_bytes(b"torn")
    log.close()

    log = PartitionLog.open(directory, config, clock, clean_shutdown=False)  # recovery
    log.truncate_to(5)
    log.truncate_fully_and_start_at(image.offset + 1)
    log.close()
    log = PartitionLog.open(directory, config, clock, clean_shutdown=True)
    log.close()
    assert list_snapshots(directory) == [written] and partial.exists()
    assert load_snapshot(directory, written) == image


# -- corruption ---------------------------------------------------------------------------------


@pytest.fixture
def written(tmp_path: pathlib.Path) -> tuple[pathlib.Path, SnapshotId, bytes]:
    image = replayed(small_cluster().log)
    snapshot_id = write_snapshot(
        tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=0
    )
    return tmp_path, snapshot_id, snapshot_path(tmp_path, snapshot_id).read_bytes()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:-1], "remain"),
        (lambda data: data[: len(data) // 2], r"remain|footer"),
        (lambda data: b"", "footer"),
        (lambda data: data[:100] + bytes([data[100] ^ 1]) + data[101:], "CRC"),
        (lambda data: data + data[-80:], "after the snapshot footer"),
    ],
)
def test_a_damaged_snapshot_does_not_load(
    written: tuple[pathlib.Path, SnapshotId, bytes], damage: Any, message: str
) -> None:
    directory, snapshot_id, data = written
    snapshot_path(directory, snapshot_id).write_bytes(damage(data))
    with pytest.raises(CorruptSnapshotError, match=message):
        load_snapshot(directory, snapshot_id)


def test_a_snapshot_without_its_header_does_not_load(written: tuple[pathlib.Path, SnapshotId, bytes]) -> None:
    directory, snapshot_id, data = written
    [(_, first), *_] = list(iter_batches(data))
    snapshot_path(directory, snapshot_id).write_bytes(data[first.size :])
    with pytest.raises(CorruptSnapshotError, match=r"offset|header"):
        load_snapshot(directory, snapshot_id)


def test_records_beyond_the_snapshot_do_not_load() -> None:
    image = replayed(small_cluster().log)
    records = image_records(image)
    with pytest.raises(MetadataReplayError, match="beyond"):
        MetadataImage.from_snapshot(records, offset=records[0][0] - 1, epoch=image.epoch)


def test_read_snapshot_wants_a_snapshot_name(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="not named"):
        list(read_snapshot(tmp_path / "x.checkpoint"))


# -- FetchSnapshot chunks -----------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 97, 4096, 1 << 20])
def test_a_snapshot_fetched_in_chunks_is_the_same_file(
    tmp_path: pathlib.Path, written: tuple[pathlib.Path, SnapshotId, bytes], chunk: int
) -> None:
    directory, snapshot_id, data = written
    size = snapshot_size(directory, snapshot_id)
    assert size == len(data)
    target = tmp_path / "follower"
    target.mkdir()
    position = 0
    while position < size:
        assert partial_snapshot_size(target, snapshot_id) == position
        piece = read_snapshot_chunk(directory, snapshot_id, position, chunk)
        assert piece == data[position : position + chunk]
        position = write_snapshot_chunk(target, snapshot_id, position, piece)
    path = finish_fetched_snapshot(target, snapshot_id)
    assert path == snapshot_path(target, snapshot_id)
    assert path.read_bytes() == data
    assert not (target / snapshot_id.partial_file_name).exists()
    assert partial_snapshot_size(target, snapshot_id) == 0
    assert load_snapshot(target, snapshot_id) == load_snapshot(directory, snapshot_id)


def test_chunk_positions(tmp_path: pathlib.Path, written: tuple[pathlib.Path, SnapshotId, bytes]) -> None:
    directory, snapshot_id, data = written
    for position in (-1, len(data), len(data) + 5):
        with pytest.raises(SnapshotPositionError):
            read_snapshot_chunk(directory, snapshot_id, position, 10)
    with pytest.raises(ValueError):
        read_snapshot_chunk(directory, snapshot_id, 0, 0)
    assert read_snapshot_chunk(directory, snapshot_id, len(data) - 3, 100) == data[-3:]
    with pytest.raises(FileNotFoundError):
        read_snapshot_chunk(directory, SnapshotId(1, 1), 0, 10)
    with pytest.raises(FileNotFoundError):
        snapshot_size(directory, SnapshotId(1, 1))

    target = tmp_path / "follower"
    target.mkdir()
    with pytest.raises(SnapshotPositionError):
        write_snapshot_chunk(target, snapshot_id, 5, data[5:10])
    assert write_snapshot_chunk(target, snapshot_id, 0, b"garbage-garbage") == 15
    with pytest.raises(SnapshotPositionError):
        write_snapshot_chunk(target, snapshot_id, 16, data[16:20])
    assert write_snapshot_chunk(target, snapshot_id, 0, data[:40]) == 40  # a retry from 0 replaces it
    assert write_snapshot_chunk(target, snapshot_id, 20, data[20:]) == len(data)  # a retried chunk
    finish_fetched_snapshot(target, snapshot_id)
    assert snapshot_path(target, snapshot_id).read_bytes() == data


def test_an_incomplete_fetched_snapshot_is_not_kept(
    tmp_path: pathlib.Path, written: tuple[pathlib.Path, SnapshotId, bytes]
) -> None:
    _, snapshot_id, data = written
    target = tmp_path / "follower"
    target.mkdir()
    write_snapshot_chunk(target, snapshot_id, 0, data[:-10])
    with pytest.raises(CorruptSnapshotError):
        finish_fetched_snapshot(target, snapshot_id)
    assert list(target.iterdir()) == []
