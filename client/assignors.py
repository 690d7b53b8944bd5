"""Kafka's ``range`` and ``roundrobin`` partition assignors, run by a consumer group's leader.

In the classic group protocol the coordinator does not assign partitions: it picks one protocol (assignor
name) that every member listed in JoinGroup, and the leader member runs that assignor over all members'
subscriptions and sends the result in SyncGroup. Members of one group may be Java, librdkafka, Python or
kipling consumers, and the leader may be any of them, so an assignor must give *exactly* the assignment
Kafka's own would: the same name must mean the same algorithm everywhere.

Member order is the subtle part, and is Kafka's ``AbstractPartitionAssignor.MemberInfo`` order:

* static members (those with a ``group.instance.id``) come first, ordered by instance id, so an
  assignment survives the new member ids a rolling restart brings; dynamic members follow, by member id;
* strings compare as Java's ``String.compareTo`` does, by UTF-16 code unit, which differs from Python's
  code-point order only between characters above U+FFFF and those in U+E000-U+FFFF.

Topic names are compared the same way (round robin walks topics in that order). Rack-aware range
assignment (KIP-881) is not done here: without rack ids, which kipling's consumers do not send, Kafka's
range assignor gives the result below. Topics missing from the partition counts are skipped, as Kafka
skips topics without metadata, and every member appears in the result, possibly with no partitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from client.errors import ClientError
from protocol.consumer_protocol import Assignment, decode_subscription, encode_assignment

GroupAssignment = dict[str, dict[str, list[int]]]
"""member id -> topic -> partitions (ascending), topics in Kafka's order; no empty partition lists."""


class UnknownAssignorError(ClientError):
    """The group chose a protocol (assignor name) that this client does not implement."""


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What an assignor needs of one member: who it is and which topics it subscribed to.

    ``topics`` is a set because a subscription is one (a topic listed twice must not count twice);
    any iterable given is turned into a frozenset.
    """

    member_id: str
    topics: frozenset[str]
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.topics, frozenset):
            object.__setattr__(self, "topics", frozenset(self.topics))

    @classmethod
    def from_metadata(
        cls, member_id: str, group_instance_id: str | None, metadata: bytes
    ) -> MemberSubscription:
        """From a JoinGroup response member (its protocol metadata is a consumer Subscription)."""
        return cls(member_id, frozenset(decode_subscription(metadata).topics), group_instance_id)


class PartitionAssignor(Protocol):
    """An assignor: a protocol name announced in JoinGroup and the algorithm the leader runs."""

    @property
    def name(self) -> str: ...

    def assign(
        self, members: Mapping[str, MemberSubscription], partitions_per_topic: Mapping[str, int]
    ) -> GroupAssignment: ...


def java_string_key(text: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` (UTF-16 code units, big-endian bytes
    compare the same way)."""
    return text.encode("utf-16-be", "surrogatepass")


def _member_key(member_id: str, group_instance_id: str | None) -> tuple[int, bytes, bytes]:
    """Kafka's MemberInfo order: static members by instance id first, then dynamic ones by member id.

    Kafka leaves two static members with the same instance id in no particular order (the coordinator
    never lets that happen); the member id decides here, so the result stays deterministic.
    """
    if group_instance_id is not None:
        return (0, java_string_key(group_instance_id), java_string_key(member_id))
    return (1, java_string_key(member_id), b"")


def sorted_members(members: Mapping[str, MemberSubscription]) -> list[str]:
    """The member ids (the mapping's keys) in Kafka's order."""
    return sorted(members, key=lambda m: _member_key(m, members[m].group_instance_id))


def _subscribed_topics(members: Mapping[str, MemberSubscription]) -> list[str]:
    """Every topic someone subscribed to, in Java string order."""
    topics: set[str] = set().union(*(m.topics for m in members.values()))
    return sorted(topics, key=java_string_key)


def _partition_count(partitions_per_topic: Mapping[str, int], topic: str) -> int:
    """Partitions of ``topic``; 0 (skip it) when there is no metadata, as Kafka's assignors do."""
    return max(partitions_per_topic.get(topic, 0), 0)


def _ranges(count: int, consumers: int) -> list[range]:
    """``count`` partitions cut into ``consumers`` contiguous ranges; the first ``count % consumers``
    ranges hold one extra partition."""
    per_consumer, extra = divmod(count, consumers)
    out: list[range] = []
    start = 0
    for i in range(consumers):
        length = per_consumer + (1 if i < extra else 0)
        out.append(range(start, start + length))
        start += length
    return out


class RangeAssignor:
    """Per topic: its partitions in order, cut into contiguous ranges over its subscribers in member order.

    Topics are independent, so co-partitioned topics (same partition count, same subscribers) land on the
    same members — what joins across topics need — at the price of imbalance over many topics.
    """

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSubscription], partitions_per_topic: Mapping[str, int]
    ) -> GroupAssignment:
        result: GroupAssignment = {member: {} for member in members}
        order = sorted_members(members)
        for topic in _subscribed_topics(members):
            consumers = [member for member in order if topic in members[member].topics]
            for member, partitions in zip(
                consumers, _ranges(_partition_count(partitions_per_topic, topic), len(consumers))
            ):
                if partitions:
                    result[member][topic] = list(partitions)
        return result


class RoundRobinAssignor:
    """All partitions of all subscribed topics (topic order, then partition order) dealt one at a time to
    the members in a cycle, skipping a member not subscribed to the partition's topic.

    When every member subscribes to the same topics the totals differ by at most one.
    """

    name = "roundrobin"

    def assign(
        self, members: Mapping[str, MemberSubscription], partitions_per_topic: Mapping[str, int]
    ) -> GroupAssignment:
        result: GroupAssignment = {member: {} for member in members}
        order = sorted_members(members)
        position = 0
        for topic in _subscribed_topics(members):
            for partition in range(_partition_count(partitions_per_topic, topic)):
                while topic not in members[order[position]].topics:
                    position = (position + 1) % len(order)
                result[order[position]].setdefault(topic, []).append(partition)
                position = (position + 1) % len(order)
        return result


ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor())}
"""The assignors this client can run, by protocol name (the order a consumer announces them in)."""


def assignor_for(protocol_name: str) -> PartitionAssignor:
    """The assignor of the protocol the coordinator chose for the group (JoinGroup's ``protocol_name``)."""
    try:
        return ASSIGNORS[protocol_name]
    except KeyError:
        known = ", ".join(ASSIGNORS)
        raise UnknownAssignorError(f"unknown assignor {protocol_name!r} (known: {known})") from None


def leader_assignments(
    protocol_name: str,
    members: Iterable[tuple[str, str | None, bytes]],
    partitions_per_topic: Mapping[str, int],
) -> dict[str, bytes]:
    """The leader's SyncGroup payload: ``(member id, group instance id, metadata)`` of every JoinGroup
    member in, each member's encoded consumer protocol Assignment out. Metadata that is no consumer
    Subscription raises :class:`~protocol.consumer_protocol.ConsumerProtocolError`, as Kafka's leader does."""
    subscriptions = {m: MemberSubscription.from_metadata(m, gid, meta) for m, gid, meta in members}
    result = assignor_for(protocol_name).assign(subscriptions, partitions_per_topic)
    return {member: encode_assignment(Assignment.from_mapping(topics)) for member, topics in result.items()}


__all__ = [
    "ASSIGNORS",
    "GroupAssignment",
    "MemberSubscription",
    "PartitionAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "UnknownAssignorError",
    "assignor_for",
    "java_string_key",
    "leader_assignments",
    "sorted_members",
]
