"""Helpers shared by the record batch tests: hand-built batches and the kafka-python oracle.

The hand-built batches use struct and crc32c directly, not kipling's builder, so that they check
the builder and the header view against the layout in reference/kafka-behaviour.md section 8.7.
"""

from __future__ import annotations

import struct
import types
from collections.abc import Iterator

import cramjam
import kafka.codec
import pytest
from crc32c import crc32c

HEADER_LAYOUT = struct.Struct(">qiibIhiqqqhii")


def zigzag(value: int) -> bytes:
    """Independent zigzag varint encoder for hand-built records."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def nullable(data: bytes | None) -> bytes:
    return zigzag(-1) if data is None else zigzag(len(data)) + data


def raw_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[bytes | None, bytes | None]] = [],  # noqa: B006 - never mutated
) -> bytes:
    body = b"\x00" + zigzag(timestamp_delta) + zigzag(offset_delta) + nullable(key) + nullable(value)
    body += zigzag(len(headers)) + b"".join(nullable(k) + nullable(v) for k, v in headers)
    return zigzag(len(body)) + body


def raw_batch(
    records: bytes,
    *,
    count: int,
    base_offset: int = 0,
    leader_epoch: int = -1,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
) -> bytes:
    """A batch around an arbitrary (possibly malformed) record stream, with a correct CRC."""
    delta = max(count - 1, 0) if last_offset_delta is None else last_offset_delta
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + records
    )
    head = struct.pack(">qiib", base_offset, len(after_crc) + 9, leader_epoch, magic)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def with_new_crc(batch: bytes | bytearray) -> bytes:
    """Recompute length and CRC after a test edited a batch (so the reader reaches the records)."""
    out = bytearray(batch)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


class _CramjamSnappy:
    """python-snappy's two calls, over cramjam: kafka-python then does its own xerial framing."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.fixture(scope="module", autouse=False)
def kafka_python_snappy() -> Iterator[types.ModuleType]:
    """kafka-python needs python-snappy for codec 2; give it a stand-in for the module's tests."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kafka.codec, "snappy", _CramjamSnappy)
        yield kafka.codec
