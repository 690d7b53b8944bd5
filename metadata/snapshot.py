"""Snapshots of the metadata log (KIP-630): the image as records, in checkpoint files beside the log.

A snapshot stands for the whole log below its **end offset** and lets that prefix be deleted: a node
loads the latest snapshot, then replays the log from the snapshot's end offset on. A node that is too
far behind the leader (the log it needs was cleaned) fetches the snapshot itself with FetchSnapshot,
in chunks: :func:`read_snapshot_chunk` on the serving side, :func:`write_snapshot_chunk` and
:func:`finish_fetched_snapshot` on the fetching side. Everything here is pure file work: no
network, no event loop.

**Files** (Kafka's layout, ``raft/.../snapshot/Snapshots.java``). A snapshot lives in the metadata
partition's directory (``__cluster_metadata-0/``) as ``<end offset:020d>-<epoch:010d>.checkpoint``:
the end offset is the offset after the last record the snapshot contains, the epoch that record's
epoch (:class:`SnapshotId`). One is written as ``<name>.checkpoint.part``, fsynced, renamed and the
directory fsynced, so a ``.checkpoint`` file is always whole; a ``.part`` left by a crash is
garbage (:func:`remove_partial_snapshots`). The storage layer leaves both alone: it loads and
cleans only segment files (``.log``, ``.index``, ``.timeindex`` and their ``.deleted`` /
``.cleaned`` / ``.swap`` forms), producer-state ``.snapshot`` files and its own checkpoints.

**Content** (as Kafka's RecordsSnapshotWriter writes it, kraft.version 0): v2 record batches with
offsets counted from 0 inside the file, every batch stamped with the snapshot's epoch as partition
leader epoch and ``timestamp_ms`` as record timestamp:

* offset 0: a control batch holding one SnapshotHeader control record (key ``int16 version 0,
  int16 type 3``; value the flexible SnapshotHeaderRecord v0: ``int16 version 0, int64
  LastContainedLogTimestamp``, an empty tag buffer);
* the image as metadata records (:func:`image_records`), framed as in the log
  (:func:`metadata.serde.metadata_record_value`), in uncompressed batches of at most
  ``max_batch_bytes`` (1 MiB; a single larger record gets a batch of its own);
* last: a control batch holding one SnapshotFooter control record (type 4; value the flexible
  SnapshotFooterRecord v0: ``int16 version 0``, an empty tag buffer).

A reader checks every batch's CRC, that offsets follow on from 0, that the header comes first and
the footer last with nothing after it; other control records (Kafka's KRaftVersion and Voters, in
the header batch of a kraft.version 1 snapshot) are skipped.

**Registration offsets.** A broker's :meth:`~metadata.image.MetadataImage.registration_offset` is
the offset of its latest RegisterBrokerRecord in the log (a broker is unfenced once caught up to
it); the record itself carries only the broker epoch, which an amended registration keeps. So that
a loaded image equals the one written, each RegisterBrokerRecord of a snapshot carries that offset
in a record header, :data:`REGISTRATION_OFFSET_HEADER` (``int64`` big-endian). Kafka's readers
ignore record headers; a RegisterBrokerRecord without the header (a snapshot written elsewhere)
stands for the snapshot's last contained offset, as Kafka replays every snapshot record.
"""

from __future__ import annotations

import os
import pathlib
import re
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from metadata.authorizer.acl_cache import acl_record
from metadata.image import MetadataImage
from metadata.records import (
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from metadata.serde import MetadataBatch, metadata_record_value, record_from_wire
from protocol.errors import ProtocolError
from protocol.records import HEADER_SIZE, LOG_OVERHEAD, Record, build_batch, iter_records, verify_batch
from protocol.records.control import ControlRecordType, encode_control_record_key, parse_control_record_key
from storage.checkpoint import fsync_directory

__all__ = [
    "MAX_BATCH_BYTES",
    "PARTIAL_SUFFIX",
    "REGISTRATION_OFFSET_HEADER",
    "SNAPSHOT_SUFFIX",
    "CorruptSnapshotError",
    "SnapshotId",
    "SnapshotPositionError",
    "delete_snapshots_before",
    "encode_snapshot",
    "finish_fetched_snapshot",
    "image_records",
    "last_contained_timestamp",
    "latest_snapshot",
    "list_snapshots",
    "load_image",
    "load_snapshot",
    "partial_snapshot_size",
    "read_snapshot",
    "read_snapshot_chunk",
    "remove_partial_snapshots",
    "snapshot_path",
    "snapshot_size",
    "write_snapshot",
    "write_snapshot_chunk",
]

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SNAPSHOT_SUFFIX + ".part"
MAX_BATCH_BYTES = 1 << 20
"""The largest batch of metadata records written to a snapshot (a larger single record is alone)."""
REGISTRATION_OFFSET_HEADER = "kipling.registration.offset"
"""The record header of a RegisterBrokerRecord in a snapshot: the offset of the registration."""
SNAPSHOT_HEADER_VERSION = 0
SNAPSHOT_FOOTER_VERSION = 0

_OFFSET_WIDTH = 20
_EPOCH_WIDTH = 10
_NAME = re.compile(rf"(\d{{{_OFFSET_WIDTH}}})-(\d{{{_EPOCH_WIDTH}}})")
_INT64 = struct.Struct(">q")
_BATCH_LENGTH = struct.Struct(">i")
_HEADER_VALUE = struct.Struct(">hq")
_FOOTER_VALUE = struct.Struct(">h")
_EMPTY_TAGS = b"\x00"
_RECORD_OVERHEAD = 32
"""An upper bound of a record's framing in a batch (length, attributes, deltas, key, header count)."""


class CorruptSnapshotError(Exception):
    """A snapshot file that is not a whole, well-formed snapshot: it must not be loaded."""


class SnapshotPositionError(ValueError):
    """A chunk position outside the snapshot (FetchSnapshot's POSITION_OUT_OF_RANGE)."""


class SnapshotId(NamedTuple):
    """A snapshot's name (Kafka's OffsetAndEpoch): it holds the log below ``end_offset``, and
    ``epoch`` is the epoch of the last record it contains."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        """``<end offset:020d>-<epoch:010d>.checkpoint``."""
        return self._stem() + SNAPSHOT_SUFFIX

    @property
    def partial_file_name(self) -> str:
        """The file the snapshot is written to before its rename: ``<file_name>.part``."""
        return self._stem() + PARTIAL_SUFFIX

    @property
    def last_contained_offset(self) -> int:
        return self.end_offset - 1

    @classmethod
    def parse(cls, name: str) -> SnapshotId | None:
        """The id a snapshot file name carries; None for any other name (``.part`` files included)."""
        if not name.endswith(SNAPSHOT_SUFFIX):
            return None
        match = _NAME.fullmatch(name[: -len(SNAPSHOT_SUFFIX)])
        return None if match is None else cls(int(match[1]), int(match[2]))

    def _stem(self) -> str:
        if not (0 <= self.end_offset < 10**_OFFSET_WIDTH and 0 <= self.epoch < 10**_EPOCH_WIDTH):
            raise ValueError(f"not a snapshot id: {self!r}")
        return f"{self.end_offset:0{_OFFSET_WIDTH}d}-{self.epoch:0{_EPOCH_WIDTH}d}"


def snapshot_path(directory: pathlib.Path, snapshot_id: SnapshotId) -> pathlib.Path:
    return pathlib.Path(directory) / snapshot_id.file_name


# -- the image as records --------------------------------------------------------------------------


def image_records(image: MetadataImage) -> list[tuple[int, MetadataRecord]]:
    """The records that rebuild ``image`` (:meth:`MetadataImage.from_snapshot`), each with the offset
    it stands for: a RegisterBrokerRecord the broker's registration offset, every other record the
    image's offset.

    Order, every group sorted so that equal images give equal bytes: the brokers by id (with their
    fencing and epochs); each topic by name with its partitions by index (leader, ISR and epochs as
    they are) and then its config overrides by key; broker config overrides by resource and key;
    client quotas by entity and key; SCRAM credentials by user and mechanism type; ACLs by id; the
    producer id block's next id (as a ProducerIdsRecord of broker -1, epoch -1: the image does not
    keep who took the last block), unless no block was ever handed out.
    """
    at = image.offset
    records: list[tuple[int, MetadataRecord]] = []
    for broker in image.brokers():
        registered_at = image.registration_offset(broker.broker_id)
        record = RegisterBrokerRecord(
            broker.broker_id,
            broker.incarnation_id,
            broker.broker_epoch,
            broker.endpoints,
            broker.rack,
            broker.fenced,
        )
        records.append((at if registered_at is None else registered_at, record))
    for topic in image.all():
        records.append((at, TopicRecord(topic.name, topic.topic_id)))
        for partition in topic.sorted_partitions():
            records.append(
                (
                    at,
                    PartitionRecord(
                        partition.partition,
                        topic.topic_id,
                        tuple(partition.replicas),
                        tuple(partition.isr),
                        partition.leader_id,
                        partition.leader_epoch,
                        partition.partition_epoch,
                        tuple(partition.removing_replicas),
                        tuple(partition.adding_replicas),
                    ),
                )
            )
        for name, value in sorted(topic.configs.items()):
            records.append((at, ConfigRecord(ConfigResourceType.TOPIC, topic.name, name, value)))
    for resource in image.broker_config_resources():
        for name, value in sorted(image.broker_configs(resource).items()):
            records.append((at, ConfigRecord(ConfigResourceType.BROKER, resource, name, value)))
    for group in image.group_config_resources():
        for name, value in sorted(image.group_configs(group).items()):
            records.append((at, ConfigRecord(ConfigResourceType.GROUP, group, name, value)))
    for entity, quotas in sorted(image.client_quotas().items(), key=lambda item: repr(item[0])):
        for key, quota in sorted(quotas.items()):
            records.append((at, ClientQuotaRecord(entity, key, quota, False)))
    scram = image.scram_credentials
    for user in scram.users():
        for mechanism, credential in scram.of_user(user).items():
            records.append(
                (
                    at,
                    UserScramCredentialRecord(
                        user,
                        mechanism.type_id,
                        credential.salt,
                        credential.stored_key,
                        credential.server_key,
                        credential.iterations,
                    ),
                )
            )
    for acl_id, binding in image.acls.items():
        records.append((at, acl_record(acl_id, binding)))
    if image.next_producer_id != MetadataImage().next_producer_id:
        records.append((at, ProducerIdsRecord(-1, -1, image.next_producer_id)))
    return records


def load_image(batches: Iterable[MetadataBatch], snapshot_end_offset: int, epoch: int) -> MetadataImage:
    """The image a snapshot's batches (:func:`read_snapshot`) describe, standing at
    ``snapshot_end_offset - 1`` and controller ``epoch`` (the snapshot id's).

    Equal to the image written when the snapshot's epoch is that image's epoch (it is whenever the
    last record below the end offset is a metadata record, not a Raft control batch of a later
    epoch). Raises :class:`~metadata.image.MetadataReplayError` for records that do not apply.
    """
    return MetadataImage.from_snapshot(
        (pair for batch in batches for pair in batch.records), offset=snapshot_end_offset - 1, epoch=epoch
    )


def load_snapshot(directory: pathlib.Path, snapshot_id: SnapshotId) -> MetadataImage:
    """Read and load one snapshot of ``directory``."""
    batches = read_snapshot(snapshot_path(directory, snapshot_id))
    return load_image(batches, snapshot_id.end_offset, snapshot_id.epoch)


# -- encoding --------------------------------------------------------------------------------------


def encode_snapshot(
    image: MetadataImage, *, epoch: int, timestamp_ms: int, max_batch_bytes: int = MAX_BATCH_BYTES
) -> bytes:
    """The bytes of a snapshot of ``image`` (see the module docstring for the layout)."""
    out = [
        _control_batch(ControlRecordType.SNAPSHOT_HEADER, _header_value(timestamp_ms), 0, epoch, timestamp_ms)
    ]
    next_offset = 1
    for group in _batches(image_records(image), max_batch_bytes - HEADER_SIZE):
        wire = [
            Record(
                value=metadata_record_value(record),
                headers=_headers(offset, record),
                timestamp=timestamp_ms,
            )
            for offset, record in group
        ]
        out.append(build_batch(wire, base_offset=next_offset, partition_leader_epoch=epoch))
        next_offset += len(wire)
    footer = _FOOTER_VALUE.pack(SNAPSHOT_FOOTER_VERSION) + _EMPTY_TAGS
    out.append(_control_batch(ControlRecordType.SNAPSHOT_FOOTER, footer, next_offset, epoch, timestamp_ms))
    return b"".join(out)


def _batches(
    records: list[tuple[int, MetadataRecord]], budget: int
) -> Iterator[list[tuple[int, MetadataRecord]]]:
    group: list[tuple[int, MetadataRecord]] = []
    used = 0
    for pair in records:
        size = _record_size(*pair)
        if group and used + size > budget:
            yield group
            group, used = [], 0
        group.append(pair)
        used += size
    if group:
        yield group


def _record_size(offset: int, record: MetadataRecord) -> int:
    headers = sum(len(name) + len(value or b"") + 10 for name, value in _headers(offset, record))
    return len(metadata_record_value(record)) + headers + _RECORD_OVERHEAD


def _headers(offset: int, record: MetadataRecord) -> tuple[tuple[str, bytes], ...]:
    if isinstance(record, RegisterBrokerRecord):
        return ((REGISTRATION_OFFSET_HEADER, _INT64.pack(offset)),)
    return ()


def _header_value(timestamp_ms: int) -> bytes:
    return _HEADER_VALUE.pack(SNAPSHOT_HEADER_VERSION, timestamp_ms) + _EMPTY_TAGS


def _control_batch(
    kind: ControlRecordType, value: bytes, offset: int, epoch: int, timestamp_ms: int
) -> bytes:
    record = Record(key=encode_control_record_key(kind), value=value, timestamp=timestamp_ms)
    return build_batch([record], base_offset=offset, partition_leader_epoch=epoch, is_control=True)


# -- writing and reading files ----------------------------------------------------------------------


def write_snapshot(
    directory: pathlib.Path,
    image: MetadataImage,
    *,
    end_offset: int,
    epoch: int,
    timestamp_ms: int,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> SnapshotId:
    """Write a snapshot of ``image`` into ``directory`` durably; returns its id.

    ``end_offset`` must be ``image.offset + 1`` and ``epoch`` the epoch of the log's record at
    ``image.offset`` (never older than the image's epoch). ``timestamp_ms`` is the append time of
    that record (the header's LastContainedLogTimestamp), also every record's timestamp. An existing
    snapshot of the same id is replaced.
    """
    if end_offset != image.offset + 1:
        raise ValueError(
            f"a snapshot of an image at offset {image.offset} ends at {image.offset + 1}, not {end_offset}"
        )
    if epoch < image.epoch:
        raise ValueError(f"snapshot epoch {epoch} is older than the image's epoch {image.epoch}")
    snapshot_id = SnapshotId(end_offset, epoch)
    data = encode_snapshot(image, epoch=epoch, timestamp_ms=timestamp_ms, max_batch_bytes=max_batch_bytes)
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    part = directory / snapshot_id.partial_file_name
    with open(part, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(part, directory / snapshot_id.file_name)
    fsync_directory(directory)
    return snapshot_id


def read_snapshot(path: pathlib.Path) -> Iterator[MetadataBatch]:
    """The metadata batches of the snapshot file at ``path`` (named as :class:`SnapshotId` says).

    Each record is paired with the log offset it stands for (see :func:`image_records`: a
    RegisterBrokerRecord's registration offset, the snapshot's last contained offset for the
    others); each batch's ``last_offset`` is the last contained offset and its ``epoch`` the
    batch's partition leader epoch. Control records are not yielded. Raises
    :class:`CorruptSnapshotError` (possibly after some batches) for a file that is not a whole
    snapshot, ValueError for a path not named as a snapshot.
    """
    path = pathlib.Path(path)
    snapshot_id = SnapshotId.parse(path.name)
    if snapshot_id is None:
        raise ValueError(f"{path} is not named as a snapshot")
    yield from _decode(path.read_bytes(), snapshot_id, str(path))


def last_contained_timestamp(directory: pathlib.Path, snapshot_id: SnapshotId) -> int:
    """The LastContainedLogTimestamp of a snapshot's header (for time-based snapshot retention)."""
    path = snapshot_path(directory, snapshot_id)
    with open(path, "rb") as src:
        first = src.read(LOG_OVERHEAD)
        if len(first) == LOG_OVERHEAD:
            first += src.read(max(0, _BATCH_LENGTH.unpack_from(first, 8)[0]))
    return _first_header_timestamp(first, str(path))


def _first_header_timestamp(data: bytes, where: str) -> int:
    view = memoryview(data)
    try:
        header = verify_batch(view, 0)
        record = next(iter_records(view[: header.size]))
    except (ProtocolError, StopIteration) as exc:
        raise CorruptSnapshotError(f"{where}: no snapshot header") from exc
    key = parse_control_record_key(record.key)
    if not header.is_control or key.type != ControlRecordType.SNAPSHOT_HEADER:
        raise CorruptSnapshotError(f"{where}: the first record is not a snapshot header")
    return _parse_header_value(record.value, where)


def _parse_header_value(value: bytes | None, where: str) -> int:
    if value is None or len(value) < _HEADER_VALUE.size:
        raise CorruptSnapshotError(f"{where}: snapshot header value too short")
    version, timestamp = _HEADER_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptSnapshotError(f"{where}: snapshot header version {version}")
    return int(timestamp)


def _decode(data: bytes, snapshot_id: SnapshotId, where: str) -> Iterator[MetadataBatch]:
    """Check and decode a whole snapshot; metadata batches as :func:`read_snapshot` yields them."""
    last = snapshot_id.last_contained_offset
    view = memoryview(data)
    pos = 0
    next_offset = 0
    seen_header = seen_footer = False
    while pos < len(view):
        if seen_footer:
            raise CorruptSnapshotError(f"{where}: bytes after the snapshot footer at position {pos}")
        try:
            header = verify_batch(view, pos)
            if header.base_offset != next_offset:
                raise CorruptSnapshotError(
                    f"{where}: batch at position {pos} starts at offset {header.base_offset}, "
                    f"expected {next_offset}"
                )
            batch = view[pos : pos + header.size]
            records: list[tuple[int, MetadataRecord]] = []
            for record in iter_records(batch):
                if seen_footer:
                    raise CorruptSnapshotError(f"{where}: a record follows the snapshot footer")
                if header.is_control:
                    kind = parse_control_record_key(record.key).type
                    if kind == ControlRecordType.SNAPSHOT_HEADER:
                        if record.offset != 0:
                            raise CorruptSnapshotError(
                                f"{where}: a second snapshot header at offset {record.offset}"
                            )
                        _parse_header_value(record.value, where)
                        seen_header = True
                    elif not seen_header:
                        raise CorruptSnapshotError(f"{where}: the snapshot does not begin with its header")
                    elif kind == ControlRecordType.SNAPSHOT_FOOTER:
                        seen_footer = True
                    continue  # other control records (KRaftVersion, Voters) are not the image's
                if not seen_header:
                    raise CorruptSnapshotError(f"{where}: the snapshot does not begin with its header")
                metadata = record_from_wire(record.value)
                records.append((_stands_for(record.headers, metadata, last, where), metadata))
        except ProtocolError as exc:
            raise CorruptSnapshotError(f"{where}: {exc}") from exc
        pos += header.size
        next_offset = header.last_offset + 1
        if not header.is_control:
            yield MetadataBatch(records, header.partition_leader_epoch, last)
    if not seen_footer:
        raise CorruptSnapshotError(f"{where}: no snapshot footer (the snapshot is incomplete)")


def _stands_for(
    headers: list[tuple[str, bytes | None]], record: MetadataRecord, last: int, where: str
) -> int:
    if isinstance(record, RegisterBrokerRecord):
        for name, value in headers:
            if name == REGISTRATION_OFFSET_HEADER:
                if value is None or len(value) != _INT64.size:
                    raise CorruptSnapshotError(f"{where}: malformed {REGISTRATION_OFFSET_HEADER} header")
                return int(_INT64.unpack(value)[0])
    return last


# -- the snapshots of a directory ------------------------------------------------------------------


def list_snapshots(directory: pathlib.Path) -> list[SnapshotId]:
    """The snapshots in ``directory``, oldest first (a missing directory has none)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(snapshot_id for snapshot_id in map(SnapshotId.parse, names) if snapshot_id is not None)


def latest_snapshot(directory: pathlib.Path) -> SnapshotId | None:
    snapshots = list_snapshots(directory)
    return snapshots[-1] if snapshots else None


def delete_snapshots_before(directory: pathlib.Path, end_offset: int) -> int:
    """Delete the snapshots that end below ``end_offset``; returns how many went."""
    directory = pathlib.Path(directory)
    removed = 0
    for snapshot_id in list_snapshots(directory):
        if snapshot_id.end_offset < end_offset:
            (directory / snapshot_id.file_name).unlink(missing_ok=True)
            removed += 1
    if removed:
        fsync_directory(directory)
    return removed


def remove_partial_snapshots(directory: pathlib.Path) -> int:
    """Delete every ``*.checkpoint.part`` file: writes or fetches a crash interrupted. Returns how many."""
    directory = pathlib.Path(directory)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    removed = 0
    for name in names:
        if name.endswith(PARTIAL_SUFFIX):
            (directory / name).unlink(missing_ok=True)
            removed += 1
    if removed:
        fsync_directory(directory)
    return removed


# -- FetchSnapshot: serving and receiving chunks -----------------------------------------------------


def snapshot_size(directory: pathlib.Path, snapshot_id: SnapshotId) -> int:
    """The size of a snapshot file in bytes; FileNotFoundError if there is none (SNAPSHOT_NOT_FOUND)."""
    return snapshot_path(directory, snapshot_id).stat().st_size


def read_snapshot_chunk(
    directory: pathlib.Path, snapshot_id: SnapshotId, position: int, max_bytes: int
) -> bytes:
    """Up to ``max_bytes`` of a snapshot file from byte ``position`` (not aligned to batches, as
    FetchSnapshot sends them). SnapshotPositionError unless ``0 <= position < size`` (Kafka's
    POSITION_OUT_OF_RANGE); FileNotFoundError for a snapshot that is not there."""
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be positive, not {max_bytes}")
    fd = os.open(snapshot_path(directory, snapshot_id), os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if not 0 <= position < size:
            raise SnapshotPositionError(
                f"position {position} is outside snapshot {snapshot_id} of {size} bytes"
            )
        chunks = []
        end = min(size, position + max_bytes)
        while position < end:
            chunk = os.pread(fd, end - position, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def partial_snapshot_size(directory: pathlib.Path, snapshot_id: SnapshotId) -> int:
    """How many bytes of a fetched snapshot have been received (0 when none)."""
    try:
        return (pathlib.Path(directory) / snapshot_id.partial_file_name).stat().st_size
    except FileNotFoundError:
        return 0


def write_snapshot_chunk(directory: pathlib.Path, snapshot_id: SnapshotId, position: int, data: bytes) -> int:
    """Put a fetched chunk at byte ``position`` of the snapshot's ``.part`` file; returns its new size.

    ``position`` may not lie beyond what was received (SnapshotPositionError); a chunk at an
    earlier position (a retry) replaces everything from there on. Nothing is fsynced until
    :func:`finish_fetched_snapshot`.
    """
    directory = pathlib.Path(directory)
    if position < 0:
        raise SnapshotPositionError(f"negative position {position}")
    fd = os.open(directory / snapshot_id.partial_file_name, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if position > size:
            raise SnapshotPositionError(
                f"position {position} is beyond the {size} bytes received of snapshot {snapshot_id}"
            )
        if size > position:
            os.ftruncate(fd, position)
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written
        return position
    finally:
        os.close(fd)


def finish_fetched_snapshot(directory: pathlib.Path, snapshot_id: SnapshotId) -> pathlib.Path:
    """Check the received ``.part`` file is a whole snapshot, then fsync it and rename it into place.

    A file that is not (CorruptSnapshotError) is deleted, so the fetch starts again from 0.
    Returns the snapshot's path.
    """
    directory = pathlib.Path(directory)
    part = directory / snapshot_id.partial_file_name
    try:
        for _ in _decode(part.read_bytes(), snapshot_id, str(part)):
            pass
    except CorruptSnapshotError:
        part.unlink(missing_ok=True)
        raise
    fd = os.open(part, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    final = directory / snapshot_id.file_name
    os.replace(part, final)
    fsync_directory(directory)
    return final
