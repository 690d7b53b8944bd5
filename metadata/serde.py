"""Metadata records ↔ record batches: the domain dataclasses on one side, wire frames on the other.

The controller's metadata log is an ordinary partition log of v2 record batches. Each batch
carries the controller epoch as its partition leader epoch (how a future quorum of controllers
fences a deposed one, as KRaft does) and each record's value is one framed metadata record
(``protocol.metadata_records``). The dataclasses of :mod:`metadata.records` and the wire
declarations use the same field names, so the mapping is mechanical: ``dataclasses.asdict`` one
way and the record class's constructor the other, with the nested broker endpoints converted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from metadata.records import RECORD_CLASSES, BrokerEndpointRecord, MetadataRecord
from protocol.errors import ProtocolError
from protocol.metadata_records import decode_metadata_record, encode_metadata_record
from protocol.records import Record, build_batch, iter_batches, iter_records

__all__ = [
    "MetadataBatch",
    "decode_metadata_batches",
    "encode_metadata_batch",
    "metadata_record_value",
    "record_from_wire",
]


class MetadataBatch(NamedTuple):
    """One batch of the metadata log: its records with their offsets, and its controller epoch."""

    records: list[tuple[int, MetadataRecord]]
    epoch: int
    last_offset: int


def encode_metadata_batch(records: Sequence[MetadataRecord], *, epoch: int, timestamp_ms: int) -> bytes:
    """One uncompressed batch holding ``records`` (offsets are stamped by the log's append)."""
    wire = [Record(key=None, value=metadata_record_value(r), timestamp=timestamp_ms) for r in records]
    return build_batch(wire, partition_leader_epoch=epoch)


def metadata_record_value(record: MetadataRecord) -> bytes:
    """The value of the log record that holds ``record`` (a framed metadata record, no key)."""
    return encode_metadata_record(type(record).RECORD_TYPE, _to_wire(record))


def decode_metadata_batches(buf: bytes | bytearray | memoryview) -> Iterator[MetadataBatch]:
    """Every complete batch of a fetched slice of the metadata log (a partial tail is skipped)."""
    view = memoryview(buf)
    for pos, header in iter_batches(view):
        batch = view[pos : pos + header.size]
        records = [
            (record.offset, record_from_wire(record.value))
            for record in iter_records(batch)
            if not record.is_control
        ]
        yield MetadataBatch(records, header.partition_leader_epoch, header.last_offset)


def record_from_wire(value: bytes | memoryview | None) -> MetadataRecord:
    """Decode one record value into its dataclass; raises ProtocolError for anything unknown."""
    if value is None:
        raise ProtocolError("metadata record without a value")
    frame = decode_metadata_record(value)
    cls = RECORD_CLASSES.get(frame.record_type)
    if cls is None:
        raise ProtocolError(f"metadata record type {frame.record_type} has no domain class")
    fields = {f.name: _from_wire(f.name, frame.data[f.name]) for f in dataclasses.fields(cls)}
    return cls(**fields)


def _to_wire(record: MetadataRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name == "endpoints":
            value = [dataclasses.asdict(e) for e in value]
        elif f.name == "entity":  # a ClientQuotaRecord's (type, name) pairs
            value = [{"entity_type": kind, "entity_name": name} for kind, name in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def _from_wire(name: str, value: Any) -> Any:
    if name == "endpoints":
        return tuple(BrokerEndpointRecord(e.name, e.host, e.port, e.security_protocol) for e in value)
    if name == "entity":
        return tuple((e.entity_type, e.entity_name) for e in value)
    if isinstance(value, list):
        return tuple(value)
    return value
