"""Bootstrap metadata: records a formatted node's controller writes as the first batch of a new
metadata log (Kafka's ``BootstrapDirectory`` and ``bootstrap.checkpoint``).

Some metadata must exist before any client can connect: a cluster whose brokers and clients log in
with SCRAM needs its first credentials in the log before a SASL listener can accept anyone.
``kipling storage format --add-scram ...`` (Kafka's ``kafka-storage.sh format``) writes them here,
and the controller that finds its metadata log empty, the first time it leads, appends them as the
log's first batch (broker/node.py, beside the import of legacy metadata). The file is kept
afterwards, as Kafka keeps it: it is read only while the log is empty, so a restart never writes it
twice. Every voter may hold one; the first leader's is written, the others' are never read.

**Where:** ``bootstrap.checkpoint`` in the metadata log dir (``metadata.log.dir``, by default the
first of ``log.dirs``), Kafka's name and place.

**Format** (kipling's own, not Kafka's snapshot file): v2 record batches exactly as they are in the
metadata log (:func:`metadata.serde.encode_metadata_batch`: no key, the value a framed metadata
record), epoch 0, offsets from 0, nothing else. A reader checks every batch's CRC and that the file
is whole batches only (:class:`BootstrapMetadataError` otherwise, which stops the node from
starting rather than start it without the users it was formatted with). ``kipling dump-log
--print-records`` cannot name it a segment, but the bytes are a segment's.

The records hold what the log would hold, UserScramCredentialRecords (salt, StoredKey, ServerKey,
iterations), never a password; the file is written with owner-only permissions all the same, since
StoredKey and a captured exchange are enough to log in.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from metadata.records import MetadataRecord
from metadata.serde import decode_metadata_batches, encode_metadata_batch
from protocol.errors import ProtocolError
from protocol.records import validate_message_set
from storage.checkpoint import fsync_directory

__all__ = [
    "BOOTSTRAP_FILE",
    "BootstrapMetadata",
    "BootstrapMetadataError",
    "read_bootstrap",
    "write_bootstrap",
]

BOOTSTRAP_FILE = "bootstrap.checkpoint"
_TMP_SUFFIX = ".tmp"
_FILE_MODE = 0o600


class BootstrapMetadataError(Exception):
    """A bootstrap file that cannot be read whole: the node must not start without it."""


@dataclass(frozen=True)
class BootstrapMetadata:
    """The records of a bootstrap file and where they came from."""

    records: list[MetadataRecord]
    path: Path


def write_bootstrap(directory: Path, records: Sequence[MetadataRecord], timestamp_ms: int) -> Path:
    """Write ``records`` as ``directory``'s bootstrap file (replacing any), durably; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / BOOTSTRAP_FILE
    tmp = path.with_name(path.name + _TMP_SUFFIX)
    data = encode_metadata_batch(records, epoch=0, timestamp_ms=timestamp_ms)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(directory)
    return path


def read_bootstrap(directory: Path) -> BootstrapMetadata | None:
    """The bootstrap metadata of ``directory``, or None when it has no bootstrap file.

    Raises :class:`BootstrapMetadataError` for a file that is not whole, CRC-valid metadata batches.
    """
    path = directory / BOOTSTRAP_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BootstrapMetadataError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    try:
        validate_message_set(data)
        records = [record for batch in decode_metadata_batches(data) for _, record in batch.records]
    except (ProtocolError, ValueError) as exc:
        raise BootstrapMetadataError(f"{path}: not bootstrap metadata: {exc}") from exc
    return BootstrapMetadata(records, path)
