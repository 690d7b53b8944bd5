"""Producer state snapshot files: ``<20-digit offset>.snapshot`` in the partition directory.

A snapshot holds the producer state of a partition as it was just before ``offset`` (every batch
below ``offset`` applied, none at or above it), so after a restart or a truncation the log only
replays the batch headers from the snapshot's offset to its end instead of the whole log.

The layout is Kafka's producer snapshot, version 1 (big-endian)::

    version int16 (1) | crc uint32 | count int32 | count x entry

    entry (46 bytes): producer_id int64 | epoch int16 | last_sequence int32 | last_offset int64 |
                      offset_delta int32 | timestamp int64 | coordinator_epoch int32 |
                      current_txn_first_offset int64

The CRC32C covers every byte after the CRC field (the count and the entries). This module only
knows rows and bytes; what the rows mean (several rows per producer, see
:mod:`storage.producer_state`) is decided there. Files are written to a ``.tmp`` sibling, fsynced
and renamed, so a reader sees a whole snapshot or none; a snapshot that still fails to parse (bad
version, length or CRC) raises :class:`CorruptSnapshotError` and is skipped by its caller.
"""

from __future__ import annotations

import os
import pathlib
import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from crc32c import crc32c

from storage.checkpoint import fsync_directory, write_atomically
from storage.errors import StorageError

SNAPSHOT_SUFFIX = ".snapshot"
TMP_SUFFIX = ".tmp"
PRODUCER_SNAPSHOT_VERSION = 1

_PREAMBLE = struct.Struct(">hI")
"""version, crc: the bytes before the CRC-covered part."""
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = _ENTRY.size
_CRC_START = _PREAMBLE.size


class CorruptSnapshotError(StorageError):
    """A snapshot file whose version, length or CRC32C is wrong; the log replays from an older one."""


class SnapshotEntry(NamedTuple):
    """One row of a snapshot, with Kafka's field names; -1 stands for "none" where Kafka uses it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def snapshot_file_name(offset: int) -> str:
    """Kafka's name: the offset zero-padded to 20 digits, then ``.snapshot``."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_path(directory: pathlib.Path, offset: int) -> pathlib.Path:
    return directory / snapshot_file_name(offset)


def parse_snapshot_offset(name: str) -> int | None:
    """The offset in a snapshot file name, or None if ``name`` is not one (temporary files are not)."""
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def list_snapshot_offsets(directory: pathlib.Path) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending (a missing directory has none)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(offset for offset in map(parse_snapshot_offset, names) if offset is not None)


def delete_snapshots_after(directory: pathlib.Path, offset: int) -> int:
    """Delete the snapshots taken above ``offset``; returns how many went.

    A truncated log no longer holds the batches such a snapshot summarises: loaded later (when
    this replica becomes leader) it would resurrect sequence numbers of records that are gone.
    Kafka's UnifiedLog.truncateTo drops them for the same reason.
    """
    removed = 0
    for snapshot_offset in list_snapshot_offsets(directory):
        if snapshot_offset > offset:
            snapshot_path(directory, snapshot_offset).unlink(missing_ok=True)
            removed += 1
    if removed:
        fsync_directory(directory)
    return removed


def remove_temporary_files(directory: pathlib.Path) -> None:
    """Delete ``*.snapshot.tmp`` leftovers: a crash interrupted their write before the rename."""
    for path in directory.glob("*" + SNAPSHOT_SUFFIX + TMP_SUFFIX):
        path.unlink(missing_ok=True)


def encode_snapshot(entries: Sequence[SnapshotEntry]) -> bytes:
    """The whole file: version, CRC32C, then the count and rows the CRC covers."""
    body = bytearray(_COUNT.pack(len(entries)))
    for entry in entries:
        body += _ENTRY.pack(*entry)
    return _PREAMBLE.pack(PRODUCER_SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes, name: str = "snapshot") -> list[SnapshotEntry]:
    """Rows of a snapshot file; :class:`CorruptSnapshotError` unless version, length and CRC all hold."""
    if len(data) < _CRC_START + _COUNT.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes is too short for a producer snapshot")
    version, crc = _PREAMBLE.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{name}: unknown producer snapshot version {version}")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"{name}: CRC32C mismatch (stored {crc}, computed {computed})")
    (count,) = _COUNT.unpack_from(data, _CRC_START)
    expected = _CRC_START + _COUNT.size + count * ENTRY_SIZE
    if count < 0 or len(data) != expected:
        raise CorruptSnapshotError(f"{name}: {count} entries do not fit its {len(data)} bytes")
    rows = memoryview(data)[_CRC_START + _COUNT.size :]
    return [SnapshotEntry._make(fields) for fields in _ENTRY.iter_unpack(rows)]


def write_snapshot(path: pathlib.Path, entries: Iterable[SnapshotEntry]) -> None:
    """Write ``path`` atomically: a ``.tmp`` sibling, fsync, rename over ``path``, fsync the directory.

    A full disk raises LogDirFullError (an OSError) and leaves no ``.tmp`` behind.
    """
    write_atomically(path, encode_snapshot(list(entries)))


def read_snapshot(path: pathlib.Path) -> list[SnapshotEntry]:
    """Rows of the snapshot at ``path``; raises CorruptSnapshotError or OSError (e.g. FileNotFoundError)."""
    return decode_snapshot(path.read_bytes(), str(path))
