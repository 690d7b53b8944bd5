"""Control records: transaction markers and the KRaft control types.

A control batch (attribute bit 5) holds a single record whose key is ``int16 version, int16
type``. Transaction markers (ABORT, COMMIT) carry ``int16 version, int32 coordinator epoch`` as
their value. Parsing follows Kafka's leniency: a newer version is read as far as the fields we
know, a negative version or a short buffer is corrupt, and an unknown type is returned as its id.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from protocol.errors import CorruptRecordError
from protocol.records.batch import NO_SEQUENCE
from protocol.records.builder import Record, build_batch
from protocol.sentinels import NO_LEADER_EPOCH

_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")
CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    """Type ids of control record keys."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecordKey(NamedTuple):
    version: int
    type: int
    """A :class:`ControlRecordType` id; unknown ids are passed through for the caller to judge."""


class EndTxnMarker(NamedTuple):
    version: int
    coordinator_epoch: int


def parse_control_record_key(key: bytes | bytearray | memoryview | None) -> ControlRecordKey:
    """Decode a control record's key; raises :class:`CorruptRecordError` if it cannot be one."""
    if key is None or len(key) < _KEY.size:
        size = "null" if key is None else f"{len(key)} bytes"
        raise CorruptRecordError(f"control record key must have at least {_KEY.size} bytes, found {size}")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key has a negative version {version}")
    return ControlRecordKey(version, type_id)


def encode_control_record_key(
    type_id: ControlRecordType | int, version: int = CURRENT_CONTROL_KEY_VERSION
) -> bytes:
    return _KEY.pack(version, type_id)


def parse_end_txn_marker(value: bytes | bytearray | memoryview | None) -> EndTxnMarker:
    """Decode the value of an ABORT/COMMIT control record."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        size = "null" if value is None else f"{len(value)} bytes"
        raise CorruptRecordError(
            f"end transaction marker must have at least {_END_TXN_MARKER.size} bytes, found {size}"
        )
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"end transaction marker has a negative version {version}")
    return EndTxnMarker(version, coordinator_epoch)


def encode_end_txn_marker(coordinator_epoch: int, version: int = CURRENT_END_TXN_MARKER_VERSION) -> bytes:
    return _END_TXN_MARKER.pack(version, coordinator_epoch)


def build_end_txn_marker_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_LEADER_EPOCH,
) -> bytes:
    """The one-record transactional control batch a partition leader appends for WriteTxnMarkers."""
    marker = Record(
        key=encode_control_record_key(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT),
        value=encode_end_txn_marker(coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch(
        [marker],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
    )
