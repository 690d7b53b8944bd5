"""A classic-protocol member of a consumer group keeps its ClassicMemberMetadata through the log
(tag 0 of ConsumerGroupMemberMetadataValue, as Kafka 4.0 writes it for the online migration)."""

from __future__ import annotations

import pytest

from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.consumer.member import ClassicMemberMetadata, ConsumerGroupMember
from coordinator.group.consumer.records import (
    MemberSubscriptionRecord,
    apply,
    from_logged,
    to_offsets_record,
)
from protocol import consumer_group_records as cgr
from protocol.consumer_offsets import decode_key

pytestmark = pytest.mark.timeout(10)

CLASSIC = ClassicMemberMetadata(45_000, (("range", b"\x00\x01"), ("roundrobin", b"")))


class _Groups:
    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroup] = {}

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def create_consumer_group(self, group_id: str) -> ConsumerGroup:
        return self.groups.setdefault(group_id, ConsumerGroup(group_id))

    def remove_consumer_group(self, group: ConsumerGroup) -> None:
        self.groups.pop(group.group_id, None)


def _round_trip(member: ConsumerGroupMember) -> MemberSubscriptionRecord:
    written = to_offsets_record(MemberSubscriptionRecord("g", member.member_id, member))
    key = decode_key(written.key)
    assert isinstance(key, cgr.ConsumerGroupMemberMetadataKey)
    read = from_logged(key, written.value)
    assert isinstance(read, MemberSubscriptionRecord)
    return read


def test_a_classic_member_keeps_its_session_timeout_and_protocols_through_the_log() -> None:
    member = ConsumerGroupMember(
        "m", subscribed_topic_names=frozenset({"t"}), classic_member_metadata=CLASSIC
    )
    read = _round_trip(member)
    assert read.member is not None
    assert read.member.classic_member_metadata == CLASSIC
    assert read.member.uses_classic_protocol
    groups = _Groups()
    apply(read, groups)
    applied = groups.groups["g"].member("m")
    assert applied is not None and applied.classic_member_metadata == CLASSIC


def test_a_consumer_protocol_member_writes_no_classic_metadata() -> None:
    member = ConsumerGroupMember("m", subscribed_topic_names=frozenset({"t"}))
    read = _round_trip(member)
    assert read.member is not None
    assert read.member.classic_member_metadata is None
    assert not read.member.uses_classic_protocol


def test_a_change_of_classic_metadata_is_a_change_of_subscription() -> None:
    """A classic member that rejoins with another session timeout gets a new metadata record."""
    member = ConsumerGroupMember("m", classic_member_metadata=CLASSIC)
    other = ConsumerGroupMember(
        "m", classic_member_metadata=ClassicMemberMetadata(10_000, CLASSIC.supported_protocols)
    )
    assert not member.same_subscription(other)
    assert member.same_subscription(ConsumerGroupMember("m", classic_member_metadata=CLASSIC))
