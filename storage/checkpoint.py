"""Checkpoint files: small text files that carry offsets and epochs across restarts (kafka-behaviour.md 7.6).

Format (UTF-8): line 1 the version (0), line 2 the entry count, then one space-separated entry per line.
Every write goes to ``<file>.tmp``, is flushed and fsynced, renamed over the target, and the directory
is fsynced, so a reader sees either the old or the new file, never a torn one. Reading a file that does
not follow the format raises :class:`CheckpointError` naming the file and line: the log directory is
then treated as failed rather than trusting wrong offsets.
"""

from __future__ import annotations

import base64
import contextlib
import os
import pathlib
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from storage.epoch import EpochEntry
from storage.errors import CheckpointError, raise_log_dir_full

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"

CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0
_TMP_SUFFIX = ".tmp"
_INT = re.compile(r"-?\d+")

T = TypeVar("T")


def write_atomically(path: pathlib.Path, content: str | bytes) -> None:
    """Replace ``path`` with ``content``: write a .tmp sibling, flush, fsync, rename, fsync the directory.

    Text is written as UTF-8. When any step before the rename fails the .tmp is removed and ``path``
    keeps its old content; a full disk raises :class:`~storage.errors.LogDirFullError`, so that a
    checkpoint that cannot be written never leaves half a file, nor fills what little space is left.
    """
    tmp = path.with_name(path.name + _TMP_SUFFIX)
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise_log_dir_full(path, exc)
    fsync_directory(path.parent)


def fsync_directory(directory: pathlib.Path) -> None:
    """Make a rename or creation inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_int(text: str, path: pathlib.Path, line_number: int, line: str) -> int:
    if not _INT.fullmatch(text):
        raise CheckpointError(f"{path}: line {line_number}: malformed line {line!r}")
    return int(text)


class _CheckpointFile(Generic[T]):
    """Version/count/entries file whose entries are parsed and formatted by the given functions."""

    def __init__(
        self,
        path: pathlib.Path,
        fields: int,
        parse: Callable[[list[str]], T],
        format_entry: Callable[[T], str],
    ) -> None:
        self.path = pathlib.Path(path)
        self._fields = fields
        self._parse = parse
        self._format = format_entry
        self._lock = threading.Lock()

    def write(self, entries: Sequence[T]) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(entries)), *(self._format(entry) for entry in entries)]
        with self._lock:
            write_atomically(self.path, "\n".join(lines) + "\n")

    def read(self) -> list[T]:
        """Entries of the file; a missing or empty file has none."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = text.splitlines()
        if not lines:
            return []
        version = self._header_int(lines, 0)
        if version != CHECKPOINT_VERSION:
            raise CheckpointError(f"{self.path}: line 1: unsupported checkpoint version {version}")
        count = self._header_int(lines, 1)
        if count < 0 or len(lines) - 2 != count:
            raise CheckpointError(f"{self.path}: expected {count} entries, found {len(lines) - 2}")
        return [self._parse_line(number, line) for number, line in enumerate(lines[2:], start=3)]

    def _header_int(self, lines: list[str], index: int) -> int:
        if index >= len(lines):
            raise CheckpointError(f"{self.path}: line {index + 1}: missing")
        return _parse_int(lines[index].strip(), self.path, index + 1, lines[index])

    def _parse_line(self, number: int, line: str) -> T:
        fields = line.split()
        if len(fields) != self._fields:
            raise CheckpointError(f"{self.path}: line {number}: malformed line {line!r}")
        try:
            return self._parse(fields)
        except ValueError as exc:
            raise CheckpointError(f"{self.path}: line {number}: malformed line {line!r}: {exc}") from exc


def _parse_offset_entry(fields: list[str]) -> tuple[tuple[str, int], int]:
    topic, partition, offset = fields
    if not _INT.fullmatch(partition) or not _INT.fullmatch(offset) or int(partition) < 0:
        raise ValueError("partition and offset must be integers")
    return (topic, int(partition)), int(offset)


def _format_offset_entry(entry: tuple[tuple[str, int], int]) -> str:
    (topic, partition), offset = entry
    if not topic or any(char.isspace() for char in topic):
        raise ValueError(f"topic name {topic!r} cannot be written to a checkpoint")
    return f"{topic} {partition} {offset}"


def _parse_epoch_entry(fields: list[str]) -> EpochEntry:
    if not all(_INT.fullmatch(field) for field in fields):
        raise ValueError("epoch and start offset must be integers")
    return EpochEntry(int(fields[0]), int(fields[1]))


class OffsetCheckpointFile:
    """One offset per partition of a log dir: recovery points, high watermarks or log start offsets."""

    def __init__(self, path: pathlib.Path) -> None:
        self._file = _CheckpointFile(path, 3, _parse_offset_entry, _format_offset_entry)

    @property
    def path(self) -> pathlib.Path:
        return self._file.path

    def read(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> offset; a missing file reads as no entries."""
        return dict(self._file.read())

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self._file.write(sorted(offsets.items()))


class LeaderEpochCheckpointFile:
    """The leader-epoch-checkpoint of one partition: "<epoch> <start offset>" lines."""

    def __init__(self, path: pathlib.Path) -> None:
        self._file = _CheckpointFile(path, 2, _parse_epoch_entry, lambda e: f"{e.epoch} {e.start_offset}")

    @property
    def path(self) -> pathlib.Path:
        return self._file.path

    def read(self) -> list[EpochEntry]:
        return self._file.read()

    def write(self, entries: Iterable[EpochEntry]) -> None:
        self._file.write(list(entries))


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    """Inverse of :func:`topic_id_to_str`; raises ValueError for anything that is not 16 bytes."""
    raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    return uuid.UUID(bytes=raw)


class PartitionMetadataFile:
    """partition.metadata: "version: 0" then "topic_id: <id>", written before the partition's first data."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = pathlib.Path(path)

    def write(self, topic_id: uuid.UUID) -> None:
        text = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id_to_str(topic_id)}\n"
        write_atomically(self.path, text)

    def read(self) -> uuid.UUID | None:
        """The topic id, or None if the file does not exist."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return None
        version = self._field(lines, 0, "version")
        if version != str(PARTITION_METADATA_VERSION):
            raise CheckpointError(f"{self.path}: line 1: unsupported version {version!r}")
        text = self._field(lines, 1, "topic_id")
        try:
            return topic_id_from_str(text)
        except ValueError as exc:
            raise CheckpointError(f"{self.path}: line 2: malformed topic id {text!r}") from exc

    def _field(self, lines: list[str], index: int, name: str) -> str:
        line = lines[index] if index < len(lines) else ""
        key, sep, value = line.partition(":")
        if not sep or key.strip() != name:
            raise CheckpointError(f"{self.path}: line {index + 1}: expected '{name}: ...', got {line!r}")
        return value.strip()
