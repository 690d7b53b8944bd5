"""Human-readable (JSON-ready) views of decoded messages, for tools and logs.

Record payloads are summarized batch by batch instead of dumped, and bytes become hex, so a
decoded Fetch or Produce prints in a few lines.
"""

from __future__ import annotations

import uuid
from typing import Any

from protocol.errors import ProtocolError
from protocol.records.batch import is_crc_valid, iter_batches
from protocol.schema import Field, MessageSpec

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def summarize_records(data: bytes | bytearray | memoryview | None) -> Any:
    """Per batch: offsets, epoch, count, compression, CRC validity; plus any partial tail."""
    if data is None:
        return None
    batches: list[dict[str, Any]] = []
    end = 0
    try:
        for pos, header in iter_batches(data):
            batches.append(
                {
                    "position": pos,
                    "base_offset": header.base_offset,
                    "last_offset": header.last_offset,
                    "count": header.records_count,
                    "partition_leader_epoch": header.partition_leader_epoch,
                    "compression": COMPRESSION_NAMES.get(header.compression, str(header.compression)),
                    "producer_id": header.producer_id,
                    "base_sequence": header.base_sequence,
                    "size": header.size,
                    "crc_valid": is_crc_valid(data, pos, header),
                }
            )
            end = pos + header.size
    except ProtocolError as exc:
        return {"bytes": len(data), "batches": batches, "error": str(exc)}
    summary: dict[str, Any] = {"bytes": len(data), "batches": batches}
    if end < len(data):
        summary["partial_tail_bytes"] = len(data) - end
    return summary


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _describe_struct(fields: tuple[Field, ...], data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        value = data.get(f.name)
        if f.element_type == "records" and not f.is_array:
            out[f.name] = summarize_records(value)
        elif f.is_struct and value is not None:
            if f.is_array:
                out[f.name] = [_describe_struct(f.fields, item) for item in value]
            else:
                out[f.name] = _describe_struct(f.fields, value)
        else:
            out[f.name] = _plain(value)
    return out


def describe(spec: MessageSpec, body: dict[str, Any]) -> dict[str, Any]:
    """A JSON-serializable view of a decoded body."""
    return _describe_struct(spec.fields, body)
