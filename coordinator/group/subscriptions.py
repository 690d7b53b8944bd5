"""The topics a consumer subscribes to, read from its JoinGroup protocol metadata.

For groups of protocol type "consumer" Kafka reads each member's subscription (ConsumerProtocol) to
know which topics the group consumes, so that offsets of topics it no longer consumes can expire
while the group is alive (KIP-496). Like Kafka it reads only the version-0 prefix that every version
starts with (int16 version, then topics as an int32-counted array of int16-sized strings, then
nullable user data), so a newer client's subscription parses too. Metadata that does not parse
makes the group's topics unknown (None), which keeps all its offsets: the safe side.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from io import BytesIO

from protocol import wire
from protocol.errors import DecodeError

CONSUMER_PROTOCOL_TYPE = "consumer"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """The topics of one consumer subscription; raises DecodeError if it is not one."""
    io = BytesIO(metadata)
    version = _INT16.unpack(wire.read_exact(io, 2))[0]
    if version < 0:
        raise DecodeError(f"unsupported subscription version {version}")
    count = _INT32.unpack(wire.read_exact(io, 4))[0]
    if count < 0:
        raise DecodeError("null topic array in a subscription")
    topics = frozenset(wire.read_string(io) for _ in range(count))
    wire.read_nullable_bytes(io)  # user data: must be there, like in Kafka's v0 schema
    return topics


def union_of_subscriptions(metadata: Iterable[bytes]) -> frozenset[str] | None:
    """Every topic any member subscribes to, or None if one subscription does not parse."""
    topics: set[str] = set()
    try:
        for one in metadata:
            topics.update(subscribed_topics(one))
    except (DecodeError, struct.error):
        return None
    return frozenset(topics)


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None, version: int = 0) -> bytes:
    """A version-0-shaped subscription (tests and tools build member metadata with it)."""
    io = BytesIO()
    io.write(_INT16.pack(version))
    names = list(topics)
    io.write(_INT32.pack(len(names)))
    for name in names:
        wire.write_string(io, name)
    wire.write_nullable_bytes(io, user_data)
    return io.getvalue()
