"""Kafka's consumer embedded protocol: the bytes inside JoinGroup metadata and SyncGroup assignments.

A group coordinator treats a member's protocol metadata and assignment as opaque bytes; only the
consumers agree on what they mean, through the protocol type ``consumer``. Kipling needs to read and
write them anyway: the CLI shows which member owns which partition, and the client's group leader
runs an assignor over the members' subscriptions. The layout is Kafka's ``ConsumerProtocol``::

    int16 version, then the body in classic (non-flexible) encoding

    ConsumerProtocolSubscription  v0  topics [string], user_data nullable bytes
                                  v1  + owned_partitions [topic string, partitions [int32]]
                                  v2  + generation_id int32 (default -1)
                                  v3  + rack_id nullable string
    ConsumerProtocolAssignment    v0-3  assigned_partitions [topic, [int32]], user_data nullable bytes

Both are declared once as data (:data:`SUBSCRIPTION_SPEC`, :data:`ASSIGNMENT_SPEC`) and their codecs are
derived by :mod:`protocol.schema`, exactly as for the wire messages. Fields a version lacks are dropped on
encode (Kafka marks them ignorable) and read back at their defaults.

Forward compatibility is Kafka's: Kafka promises never to remove or reorder these fields, so a version
newer than the highest known one is read with the highest known layout and the bytes after it are
ignored. A negative version, or bytes that end early, raise :class:`ConsumerProtocolError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from io import BytesIO
from typing import Any, NamedTuple

from protocol.data import MessageData
from protocol.errors import DecodeError
from protocol.schema import Field, MessageSpec
from protocol.versioned import encode_versioned, read_version

CONSUMER_PROTOCOL_TYPE = "consumer"
"""The JoinGroup protocol type of Kafka consumers: the coordinator only compares it between members."""
NO_GENERATION = -1
"""The generation id of a subscription that carries none (versions 0-1, or a fresh member)."""


def _topic_partitions(name: str, versions: str) -> Field:
    """Both messages' ``[]TopicPartition``: a topic name and a list of partition ids."""
    return Field(
        name,
        "[]TopicPartition",
        versions,
        fields=(Field("topic", "string", versions), Field("partitions", "[]int32", versions)),
    )


SUBSCRIPTION_SPEC = MessageSpec(
    -1,
    "ConsumerProtocolSubscription",
    "data",
    "0-3",
    "none",
    (
        Field("topics", "[]string", "0+"),
        Field("user_data", "bytes", "0+", nullable_versions="0+", default=None),
        _topic_partitions("owned_partitions", "1+"),
        Field("generation_id", "int32", "2+", default=NO_GENERATION),
        Field("rack_id", "string", "3+", nullable_versions="3+", default=None),
    ),
)
ASSIGNMENT_SPEC = MessageSpec(
    -1,
    "ConsumerProtocolAssignment",
    "data",
    "0-3",
    "none",
    (
        _topic_partitions("assigned_partitions", "0+"),
        Field("user_data", "bytes", "0+", nullable_versions="0+", default=None),
    ),
)
HIGHEST_SUBSCRIPTION_VERSION = 3
HIGHEST_ASSIGNMENT_VERSION = 3


class ConsumerProtocolError(DecodeError):
    """Bytes that are not a consumer protocol Subscription or Assignment (Kafka's SchemaException)."""


class TopicPartitions(NamedTuple):
    """One topic and some of its partitions, in wire order: the element of both partition lists."""

    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a consumer tells the group leader when it joins: the topics it wants, and (v1+) what it owns.

    Tuples rather than lists keep it hashable and make a decoded value compare equal to the one encoded.
    ``owned_partitions`` and ``generation_id`` let cooperative assignors keep partitions in place;
    ``rack_id`` lets rack-aware ones prefer local replicas. Versions that lack a field drop it.
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartitions, ...] = ()
    generation_id: int = NO_GENERATION
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the group leader hands each member in SyncGroup: its partitions, grouped by topic.

    Kept as a tuple of :class:`TopicPartitions` because that is what the wire holds (order included, and
    in principle a topic twice); :meth:`from_mapping` and :meth:`as_dict` convert from and to the
    ``topic -> partitions`` view that callers usually want.
    """

    partitions: tuple[TopicPartitions, ...] = ()
    user_data: bytes | None = None

    @classmethod
    def from_mapping(
        cls, partitions: Mapping[str, Iterable[int]], user_data: bytes | None = None
    ) -> Assignment:
        """An assignment listing the topics in the mapping's order."""
        return cls(tuple(TopicPartitions(t, tuple(p)) for t, p in partitions.items()), user_data)

    def as_dict(self) -> dict[str, list[int]]:
        """``topic -> partitions``; a topic listed twice has its partitions joined, as Kafka's reader does."""
        out: dict[str, list[int]] = {}
        for topic, partitions in self.partitions:
            out.setdefault(topic, []).extend(partitions)
        return out


# -- encoding ----------------------------------------------------------------------------------------


def _wire_partitions(entries: Iterable[TopicPartitions]) -> list[dict[str, Any]]:
    return [{"topic": topic, "partitions": list(partitions)} for topic, partitions in entries]


def encode_subscription(sub: Subscription, version: int = HIGHEST_SUBSCRIPTION_VERSION) -> bytes:
    """JoinGroup protocol metadata. Kafka's Java consumer writes the highest version, hence the default."""
    data = {
        "topics": list(sub.topics),
        "user_data": sub.user_data,
        "owned_partitions": _wire_partitions(sub.owned_partitions),
        "generation_id": sub.generation_id,
        "rack_id": sub.rack_id,
    }
    return encode_versioned(SUBSCRIPTION_SPEC, version, data)


def encode_assignment(assignment: Assignment, version: int = 0) -> bytes:
    """A SyncGroup member assignment. Every version has the same fields; 0 is what any consumer reads."""
    data = {
        "assigned_partitions": _wire_partitions(assignment.partitions),
        "user_data": assignment.user_data,
    }
    return encode_versioned(ASSIGNMENT_SPEC, version, data)


# -- decoding ----------------------------------------------------------------------------------------


def _decode(spec: MessageSpec, highest: int, data: bytes | bytearray | memoryview) -> MessageData:
    """The body, read with the layout of its version, or of ``highest`` for a newer one (Kafka's rule)."""
    io = BytesIO(data)
    try:
        version = read_version(io, spec.name)
    except DecodeError as exc:
        raise ConsumerProtocolError(str(exc)) from None
    if version < 0:
        raise ConsumerProtocolError(f"unsupported {spec.name} version {version}")
    try:
        return spec.codec(min(version, highest)).read(io)
    except DecodeError as exc:
        raise ConsumerProtocolError(f"undecodable {spec.name} (version {version}): {exc}") from None


def _partitions(entries: Iterable[MessageData]) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(e.topic, tuple(e.partitions)) for e in entries)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """A member's JoinGroup metadata; fields its version lacks come back at their defaults."""
    body = _decode(SUBSCRIPTION_SPEC, HIGHEST_SUBSCRIPTION_VERSION, data)
    return Subscription(
        topics=tuple(body.topics),
        user_data=body.user_data,
        owned_partitions=_partitions(body.owned_partitions),
        generation_id=body.generation_id,
        rack_id=body.rack_id,
    )


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """A member's SyncGroup assignment."""
    body = _decode(ASSIGNMENT_SPEC, HIGHEST_ASSIGNMENT_VERSION, data)
    return Assignment(_partitions(body.assigned_partitions), body.user_data)


__all__ = [
    "ASSIGNMENT_SPEC",
    "CONSUMER_PROTOCOL_TYPE",
    "HIGHEST_ASSIGNMENT_VERSION",
    "HIGHEST_SUBSCRIPTION_VERSION",
    "NO_GENERATION",
    "SUBSCRIPTION_SPEC",
    "Assignment",
    "ConsumerProtocolError",
    "Subscription",
    "TopicPartitions",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]
