"""Version-prefixed structs: an int16 version, then the body in the classic (non-flexible) encoding.

Kafka stores ``__consumer_offsets`` keys and values this way, and consumers put their group
metadata (the consumer protocol's Subscription and Assignment) into JoinGroup and SyncGroup this
way too; both read the prefix first to know which layout follows.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from io import BytesIO
from typing import Any

from protocol.errors import DecodeError, EncodeError
from protocol.schema import MessageSpec

_INT16 = struct.Struct(">h")


def encode_versioned(spec: MessageSpec, version: int, data: Mapping[str, Any]) -> bytes:
    """``data`` as version ``version`` of ``spec``, behind its int16 version prefix."""
    if version not in spec.versions:
        raise EncodeError(f"{spec.name} has no version {version} (valid {spec.valid_versions})")
    io = BytesIO()
    io.write(_INT16.pack(version))
    spec.codec(version).write(data, io)
    return io.getvalue()


def read_version(io: BytesIO, what: str) -> int:
    """The int16 version prefix at ``io``'s position (DecodeError when fewer than 2 bytes are left)."""
    prefix = io.read(2)
    if len(prefix) != 2:
        raise DecodeError(f"{what} shorter than its int16 version")
    return int(_INT16.unpack(prefix)[0])


__all__ = ["encode_versioned", "read_version"]
