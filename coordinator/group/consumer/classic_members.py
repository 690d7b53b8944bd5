"""Classic-protocol members of a consumer group (KIP-848's online migration, Kafka 4.0's
GroupMetadataManager ``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup`` and ``classicGroupLeaveToConsumerGroup``).

A consumer speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup (``group.protocol=classic``) may
join a consumer group that has members, whatever the migration policy (Kafka serves a JoinGroup to
a non-empty consumer group this way; the policy only governs converting a whole group). It is a
member like any other, with its ClassicMemberMetadata (session timeout, protocols):

* JoinGroup is one step of a ConsumerGroupHeartbeat: its subscription and owned partitions come
  from the embedded consumer protocol, the server-side assignor decides, and the answer carries
  the member epoch as generation; there is no leader and no waiting for the others;
* SyncGroup answers the member's current assignment (serialized with the consumer protocol);
* Heartbeat answers REBALANCE_IN_PROGRESS while the member is behind the group epoch, must revoke
  partitions, or may take partitions that were released: the member rejoins, bringing what it
  still owns, and so reconciles one JoinGroup at a time;
* LeaveGroup removes it and bumps the group epoch.

A classic static member whose JoinGroup replaces the static member that was the last one using
the consumer protocol turns the group into a classic group (Kafka's
``validateOnlineDowngradeWithReplacedMember``, :mod:`~coordinator.group.migration`): the join's
records and the conversion's are written as one batch, and the JoinGroup is answered once it is.

A member told to rejoin must do so within its rebalance timeout, and one that joined must sync
within it, else it is fenced; its session timeout is its own. Kipling answers a classic Heartbeat
and LeaveGroup at once (their API is synchronous here) where Kafka waits for earlier writes.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import structlog

from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from coordinator.group.consumer.records import (
    ConsumerGroupRecord,
    GroupEpochRecord,
    SubscriptionMetadataRecord,
    member_tombstones,
)
from coordinator.group.consumer.service import ConsumerGroupService
from coordinator.group.consumer.timers import JOIN, SYNC
from coordinator.group.consumer.writes import Conversion
from coordinator.group.member import JoinCallback, SyncCallback
from coordinator.group.migration import can_downgrade_with_replaced_member
from coordinator.group.requests import UNKNOWN_MEMBER_ID, JoinGroupRequest, MemberIdentity, SyncGroupRequest
from coordinator.group.results import JoinGroupResult, LeaveGroupResult, MemberLeaveResult, SyncGroupResult
from protocol import consumer_protocol
from protocol.error_codes import ErrorCode, KafkaError

_log = structlog.get_logger("kipling.groups.consumer")

CONSUMER_PROTOCOL_TYPE = "consumer"


def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, protocols: Sequence[str]) -> bool:
    """Kafka's ``ConsumerGroup.supportsClassicProtocols``: the consumer protocol type, and a protocol
    (assignor name) that every classic member of the group also offered."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    if group.is_empty:
        return bool(protocols)
    classic = [m.classic_member_metadata for m in group.members.values() if m.classic_member_metadata]
    offered = Counter(name for metadata in classic for name in {n for n, _ in metadata.supported_protocols})
    return any(offered[name] == len(classic) for name in protocols)


def waiting_on_unreleased_partition(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's ``waitingOnUnreleasedPartition``: a partition of its target is still owned by another."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    for topic_id, partitions in group.target_assignment_of(member.member_id).items():
        assigned = member.assigned_partitions.get(topic_id, frozenset())
        for partition in partitions:
            if partition not in assigned and group.current_partition_epoch(topic_id, partition) != -1:
                return True
    return False


class ClassicMembers:
    """Serves the classic group APIs of a consumer group with members."""

    def __init__(self, service: ConsumerGroupService) -> None:
        self._service = service

    # -- JoinGroup ----------------------------------------------------------------------------------

    def join(self, group: ConsumerGroup, request: JoinGroupRequest, callback: JoinCallback) -> None:
        member_id = request.member_id
        unknown = member_id == UNKNOWN_MEMBER_ID
        if unknown:
            member_id = self._service.new_member_id()
        try:
            self._service.check_not_full(group, member_id)
            if not supports_classic_protocols(
                group, request.protocol_type, [protocol.name for protocol in request.protocols]
            ):
                raise KafkaError(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"Member {member_id}'s protocols are not supported.",
                )
            if unknown and request.require_known_member_id:
                _log.info(
                    "classic member with unknown member id joins the consumer group",
                    group=group.group_id,
                    member=member_id,
                )
                callback(JoinGroupResult.failure(member_id, ErrorCode.MEMBER_ID_REQUIRED))
                return
            self._join(group, member_id, request, callback)
        except KafkaError as failure:
            callback(JoinGroupResult.failure(request.member_id, failure.code))

    def _join(
        self, group: ConsumerGroup, member_id: str, request: JoinGroupRequest, callback: JoinCallback
    ) -> None:
        service = self._service
        group_id = group.group_id
        try:
            subscription = consumer_protocol.decode_subscription(request.protocols[0].metadata)
        except consumer_protocol.ConsumerProtocolError as exc:
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, "Malformed embedded consumer protocol in subscription."
            ) from exc
        records: list[ConsumerGroupRecord] = []
        instance_id = request.group_instance_id
        # Kafka's validateOnlineDowngradeWithReplacedMember: the static member this join replaces
        # was the last one using the consumer protocol.
        replaced = None if instance_id is None else group.static_member(instance_id)
        downgrade = replaced is not None and can_downgrade_with_replaced_member(
            service.config, group, replaced.member_id
        )
        member: ConsumerGroupMember
        if instance_id is None:
            found = group.member(member_id)
            member = found if found is not None else ConsumerGroupMember(member_id)
        else:
            existing = group.static_member(instance_id)
            if existing is not None and existing.member_id == member_id:
                member = existing
            else:
                member = service.static_member(
                    group, member_id, JOIN_GROUP_MEMBER_EPOCH, instance_id, (), True, records, classic=True
                )
        updated = replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            subscribed_topic_names=frozenset(subscription.topics),
            client_id=request.client_id,
            client_host=request.client_host,
            classic_member_metadata=ClassicMemberMetadata(
                request.session_timeout_ms,
                tuple((protocol.name, bytes(protocol.metadata)) for protocol in request.protocols),
            ),
        )
        owned = self._owned(subscription)
        reconciled = service.advance_member(group, member, updated, owned, records)
        result = JoinGroupResult(
            ErrorCode.NONE,
            member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=request.protocols[0].name,
        )
        timers = service.timers

        def written(error: ErrorCode | None) -> None:
            if error is not None:
                callback(JoinGroupResult.failure(request.member_id, error))
                return
            timers.cancel(JOIN, group_id, member_id)
            if downgrade:
                callback(result)  # a member of the classic group now, whose session has started
                return
            service.schedule_session_timeout(group_id, member_id, request.session_timeout_ms)
            timers.schedule(
                SYNC,
                group_id,
                member_id,
                request.rebalance_timeout_ms,
                lambda: service.fence_member(group_id, member_id, "the classic member did not sync in time"),
            )
            callback(result)

        _log.info(
            "classic member joined the consumer group",
            group=group_id,
            member=member_id,
            epoch=reconciled.member_epoch,
            state=reconciled.state.name,
        )
        if not downgrade:
            service.write(group, records, written)
            return
        assert replaced is not None
        subscription_changed = updated.subscribed_topic_names != replaced.subscribed_topic_names
        generation = group.group_epoch

        def convert() -> Conversion:
            # The join's records are applied: the group holds the joining member in place of the
            # replaced one. The classic group is at the group epoch before the join (Kafka builds
            # it from the group as it was); a rebalance follows if the member brings another
            # subscription or is not at that epoch.
            rebalance = subscription_changed or reconciled.member_epoch != generation
            _log.info(
                "a classic static member replaced the last consumer-protocol member: downgrading",
                group=group_id,
                member=member_id,
                replaced=replaced.member_id,
                rebalance=rebalance,
            )
            return service.convert_replaced_to_classic_group(group, generation, rebalance)

        service.write(group, records, written, convert)

    def _owned(self, subscription: consumer_protocol.Subscription) -> list[tuple[uuid.UUID, tuple[int, ...]]]:
        """The owned partitions, by topic id (topics unknown to the broker are left out)."""
        owned = []
        for entry in subscription.owned_partitions:
            topic = self._service.topics.get(entry.topic)
            if topic is not None:
                owned.append((topic.topic_id, tuple(entry.partitions)))
        return owned

    # -- SyncGroup ----------------------------------------------------------------------------------

    def sync(self, group: ConsumerGroup, request: SyncGroupRequest, callback: SyncCallback) -> None:
        service = self._service
        group_id = group.group_id
        try:
            member = self._classic_member(group, request.member_id, request.group_instance_id)
            _check_generation(member, request.generation_id)
            _check_protocol(member, request.protocol_type, request.protocol_name)
            if (
                group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self._schedule_join_timeout(group_id, member)
                raise KafkaError(
                    ErrorCode.REBALANCE_IN_PROGRESS,
                    f"A new rebalance is triggered in group {group_id} and member {member.member_id} "
                    "should rejoin to catch up.",
                )
        except KafkaError as failure:
            callback(SyncGroupResult(failure.code))
            return
        assignment = self._assignment_bytes(member)
        session_timeout = _session_timeout_ms(member)

        def written(error: ErrorCode | None) -> None:
            if error is not None:
                callback(SyncGroupResult(error))
                return
            service.timers.cancel(SYNC, group_id, member.member_id)
            service.schedule_session_timeout(group_id, member.member_id, session_timeout)
            callback(
                SyncGroupResult(ErrorCode.NONE, request.protocol_type, request.protocol_name, assignment)
            )

        service.write(group, [], written)

    def _assignment_bytes(self, member: ConsumerGroupMember) -> bytes:
        """The member's assigned partitions in the consumer protocol, at the version of its
        subscription (Kafka's ``prepareAssignment``)."""
        metadata = member.classic_member_metadata
        version = 0
        if metadata is not None and metadata.supported_protocols:
            first = metadata.supported_protocols[0][1]
            if len(first) >= 2:
                version = max(0, min(int.from_bytes(first[:2], "big", signed=True), 3))
        partitions = []
        for topic_id, parts in member.assigned_partitions.items():
            topic = self._service.topics.get_by_id(topic_id)
            if topic is not None:
                partitions.append(consumer_protocol.TopicPartitions(topic.name, tuple(sorted(parts))))
        partitions.sort()
        return consumer_protocol.encode_assignment(consumer_protocol.Assignment(tuple(partitions)), version)

    # -- Heartbeat ----------------------------------------------------------------------------------

    def heartbeat(
        self, group: ConsumerGroup, member_id: str, generation_id: int, instance_id: str | None
    ) -> ErrorCode:
        try:
            member = self._classic_member(group, member_id, instance_id)
            _check_generation(member, generation_id)
        except KafkaError as failure:
            return failure.code
        self._service.schedule_session_timeout(group.group_id, member.member_id, _session_timeout_ms(member))
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not waiting_on_unreleased_partition(group, member)
            )
        ):
            self._schedule_join_timeout(group.group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _schedule_join_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        timers = self._service.timers
        if timers.is_scheduled(JOIN, group_id, member.member_id):
            return
        member_id = member.member_id
        timers.schedule(
            JOIN,
            group_id,
            member_id,
            member.rebalance_timeout_ms,
            lambda: self._service.fence_member(
                group_id, member_id, "the classic member did not rejoin in time"
            ),
        )

    # -- LeaveGroup ---------------------------------------------------------------------------------

    def leave(self, group: ConsumerGroup, members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        group_id = group.group_id
        records: list[ConsumerGroupRecord] = []
        results = []
        subscribed = Counter(group.subscribed_topic_names)
        for identity in members:
            member_id, instance_id = identity.member_id, identity.group_instance_id
            try:
                if instance_id is None:
                    member = self._classic_member(group, member_id, None)
                else:
                    found = group.static_member(instance_id)
                    if found is None:
                        raise KafkaError(
                            ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown."
                        )
                    if member_id != UNKNOWN_MEMBER_ID and found.member_id != member_id:
                        raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
                    _require_classic(found)
                    member = found
            except KafkaError as failure:
                results.append(MemberLeaveResult(member_id, instance_id, failure.code))
                continue
            _log.info(
                "classic member left the consumer group",
                group=group_id,
                member=member.member_id,
                reason=identity.reason or "not provided",
            )
            records += member_tombstones(group_id, member.member_id)
            self._service.timers.cancel_all(group_id, member.member_id)
            subscribed.subtract(group.subscribed_topics_of(member))
            results.append(MemberLeaveResult(member.member_id, instance_id, ErrorCode.NONE))
        if records:
            metadata = self._service.subscription_metadata(+subscribed)
            if metadata != group.subscription_metadata:
                records.append(SubscriptionMetadataRecord(group_id, metadata))
            records.append(GroupEpochRecord(group_id, group.group_epoch + 1))
            self._service.write(group, records, lambda _error: None)
        return LeaveGroupResult(ErrorCode.NONE, tuple(results))

    # -- checks -------------------------------------------------------------------------------------

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember:
        """Kafka's ``validateConsumerGroupMember`` and ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            member = group.member(member_id)
            if member is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
        else:
            found = group.static_member(instance_id)
            if found is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
                )
            if found.member_id != member_id:
                raise KafkaError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member "
                    f"{found.member_id}.",
                )
            member = found
        _require_classic(member)
        return member


def _require_classic(member: ConsumerGroupMember) -> None:
    if not member.uses_classic_protocol:
        raise KafkaError(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
        )


def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise KafkaError(
            ErrorCode.ILLEGAL_GENERATION,
            f"The request generation id {generation_id} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}.",
        )


def _check_protocol(
    member: ConsumerGroupMember, protocol_type: str | None, protocol_name: str | None
) -> None:
    metadata = member.classic_member_metadata
    name = metadata.supported_protocols[0][0] if metadata and metadata.supported_protocols else None
    if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if protocol_name is not None and protocol_name != name:
        raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)


def _session_timeout_ms(member: ConsumerGroupMember) -> int | None:
    metadata = member.classic_member_metadata
    return None if metadata is None else metadata.session_timeout_ms


__all__ = ["CONSUMER_PROTOCOL_TYPE", "ClassicMembers", "supports_classic_protocols"]
