"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (Kafka's GroupMetadataManager.consumerGroupHeartbeat,
consumerGroupLeave, consumerGroupFenceMember and consumerGroupDescribe, KIP-848).

A heartbeat runs in three steps, each computed from the group as it stands, whose records are then
applied to the group and written to ``__consumer_offsets`` together; the member is answered once
they are written:

1. the member joins or is updated; a change of its subscription, a new group or a change of a
   subscribed topic's metadata bumps the **group epoch**;
2. when the group epoch is ahead of the **assignment epoch**, the assignor computes a new target
   assignment for every member;
3. the member's current assignment moves one safe step towards its target
   (:mod:`~coordinator.group.consumer.reconciliation`).

Joining is epoch 0, leaving -1, and -2 for a static member that will come back (its instance id
and partitions stay reserved until its session expires or it rejoins under a new member id). A
member that misses its session (the group's ``consumer.session.timeout.ms`` group config, else
``group.consumer.session.timeout.ms``) is fenced: removed, which
bumps the group epoch; one that does not revoke its partitions within its rebalance timeout is
fenced too. A member answered FENCED_MEMBER_EPOCH rejoins with epoch 0 and may keep its member id
(as Kafka allows since KAFKA-19233).

Write failures. Kafka applies a write's records at once and reverts to its last committed state if
the write fails. Here the records are applied at once too; a write is answered once it and the
group's writes before it are written, and one that fails (but for a timeout waiting for replicas,
after which the records are in the log) puts the group back as it was before it and fails every
later write of the group, which was computed from it (:mod:`~coordinator.group.consumer.writes`).
The log refuses a batch before the append returns, so a refused write is taken back before the
next operation is applied. A heartbeat that converts the group (KIP-848's online upgrade or
downgrade, an empty classic group giving way) writes the conversion's records in its own batch,
and a failure puts the previous group back (:class:`~coordinator.group.consumer.writes.Conversion`).

Subscription metadata is recomputed on every heartbeat from the broker's topic metadata (Kafka
recomputes on a change notification or a refresh deadline; the outcome is the same, at the cost
of looking up the group's subscribed topics per heartbeat).

Regular-expression subscriptions (SubscribedTopicRegex, v1): an expression matches a topic name as
a whole (Kafka's ``Pattern.matcher(topic).matches()``), internal topics excepted. Kafka compiles
them with RE2/J; kipling uses Python's ``re``, which agrees on the usual patterns (``^orders-.*``,
``logs-[a-z]+``) but not on every one (RE2 has no backreferences or lookarounds, which ``re``
accepts; a few escapes and classes differ). The resolutions are refreshed when a member brings a
new expression and otherwise at most every :data:`REGEX_REFRESH_INTERVAL_MS` (Kafka's minimum
interval between its batched refreshes), on a heartbeat; a change bumps the group epoch. Kafka 4.0
also keeps, per expression, only the topics the member may DESCRIBE, and persists the resolutions;
kipling does neither (a resolution is recomputed after a load).
"""

from __future__ import annotations

import base64
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

import structlog

from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer.api import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
    DescribedConsumerGroup,
    DescribedMember,
    DescribedTopicPartitions,
)
from coordinator.group.consumer.assignors import PartitionAssignor, PartitionAssignorError, assignor_named
from coordinator.group.consumer.group import (
    ConsumerGroup,
    ConsumerGroupSnapshot,
    TopicMetadata,
    subscription_type,
)
from coordinator.group.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    is_subset,
)
from coordinator.group.consumer.reconciliation import reconcile
from coordinator.group.consumer.records import (
    ConsumerGroupRecord,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    SubscriptionMetadataRecord,
    TargetAssignmentMemberRecord,
    apply,
    member_tombstones,
)
from coordinator.group.consumer.target_assignment import build_target_assignment
from coordinator.group.consumer.timers import REBALANCE, SESSION, MemberTimers
from coordinator.group.consumer.writes import Conversion, PendingWrites, WriteDone, write_error
from metadata.topics import TopicLookup
from protocol.error_codes import ErrorCode, KafkaError
from server_common.config.group_config import GroupConfigBounds, GroupConsumerSettings, effective_group_config
from storage.clock import Clock

_log = structlog.get_logger("kipling.groups.consumer")

CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
"""From ConsumerGroupHeartbeat v1 the member generates its own member id (KIP-1082)."""

REGEX_REFRESH_INTERVAL_MS = 10_000
HeartbeatCallback = Callable[[ConsumerGroupHeartbeatResult], None]
MemberIdGenerator = Callable[[], str]
GroupConfigProvider = Callable[[str], Mapping[str, str]]
"""A group's group-config overrides (the GROUP config resource), by group id; empty when none."""


def no_group_configs(group_id: str) -> Mapping[str, str]:
    """The provider of a coordinator without metadata: no group has overrides."""
    return {}


def random_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes in URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerGroupHost(Protocol):
    """What the service needs from the coordinator around it: the catalog's checks and groups,
    the classic groups an empty one may replace, and the log."""

    @property
    def active(self) -> bool: ...

    def validate(self, group_id: str) -> ErrorCode | None:
        """The request check's error for ``group_id`` (not ours, loading, ...) or None."""
        ...

    def consumer_group(self, group_id: str) -> ConsumerGroup | None: ...

    def install_consumer_group(self, group: ConsumerGroup) -> None: ...

    def remove_consumer_group(self, group: ConsumerGroup) -> None: ...

    def replace_empty_classic_group(self, group_id: str) -> tuple[ConsumerGroup, Conversion] | None:
        """If ``group_id`` is an empty classic group, replace it by an empty consumer group with its
        offsets and return that with the conversion the heartbeat's write carries (the classic
        group's tombstone; undone if the write fails); None if there is no classic group of that
        id. A classic group with members raises KafkaError(GROUP_ID_NOT_FOUND)."""
        ...

    def upgrade_classic_group(
        self, group_id: str
    ) -> tuple[ConsumerGroup, list[ConsumerGroupRecord], Conversion] | None:
        """KIP-848's online upgrade: if ``group_id`` is a classic group with members that may
        become a consumer group, replace it by an empty consumer group (with its offsets) and return
        that with the records that make its members and the conversion the heartbeat's write
        carries; None if there is no such classic group. A classic group with members that may not
        be converted raises KafkaError(GROUP_ID_NOT_FOUND)."""
        ...

    def convert_to_classic_group(self, group: ConsumerGroup, leaving_member_id: str) -> Conversion | None:
        """KIP-848's online downgrade: if ``leaving_member_id`` is the last member not using the
        classic protocol and the policy allows it, put a classic group without it in the group's
        place and return the conversion to write (its ``finish`` starts the rebalance); else None,
        nothing done."""
        ...

    def convert_replaced_to_classic_group(
        self, group: ConsumerGroup, generation: int, rebalance: bool
    ) -> Conversion:
        """The online downgrade once a classic static member replaced the last member not using the
        classic protocol (the caller checked it may): a classic group of the group's members as they
        stand, at ``generation``, takes its place; the conversion's ``finish`` starts a rebalance
        if ``rebalance``."""
        ...

    def append(
        self,
        group_id: str,
        records: Sequence[ConsumerGroupRecord],
        done: Callable[[ErrorCode], None],
        conversion: Conversion | None = None,
    ) -> None:
        """Write the records (between the conversion's leading and trailing ones) as one batch;
        ``done`` gets the log's error (NONE once committed)."""
        ...


class ConsumerGroupService:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        clock: Clock,
        host: ConsumerGroupHost,
        topics: TopicLookup,
        timers: MemberTimers,
        member_id_generator: MemberIdGenerator = random_member_id,
        group_configs: GroupConfigProvider = no_group_configs,
    ) -> None:
        self._config = config
        self._group_configs = group_configs
        self._group_config_bounds = GroupConfigBounds.of(config)
        self._clock = clock
        self._host = host
        self._topics = topics
        self._timers = timers
        self._new_member_id = member_id_generator
        self._writes = PendingWrites(self._revert)
        self._assignors: dict[str, PartitionAssignor] = {}
        for name in config.group_consumer_assignors:
            assignor = assignor_named(name)
            self._assignors.setdefault(assignor.name, assignor)
        self._default_assignor = next(iter(self._assignors.values()))

    @property
    def default_assignor(self) -> str:
        return self._default_assignor.name

    def group_settings(self, group_id: str) -> GroupConsumerSettings:
        """The session timeout and heartbeat interval of ``group_id``: its group-config overrides,
        else the broker's (Kafka's consumerGroupSessionTimeoutMs / consumerGroupHeartbeatIntervalMs).
        Read on every use, so a changed override applies from the member's next heartbeat on."""
        return effective_group_config(self._group_configs(group_id), self._group_config_bounds)

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------------

    def heartbeat(self, request: ConsumerGroupHeartbeatRequest, callback: HeartbeatCallback) -> None:
        """Answer through ``callback`` exactly once: at once on an error, else once the records
        of the heartbeat are written."""
        if not self._host.active:
            callback(ConsumerGroupHeartbeatResult.failure(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        invalid = self._invalid(request)
        if invalid is not None:
            callback(invalid)
            return
        error = self._host.validate(request.group_id)
        if error is not None:
            callback(ConsumerGroupHeartbeatResult.failure(error))
            return
        conversion: Conversion | None = None
        try:
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                group, records, result = self._leave(request)
                if result.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                    conversion = self._host.convert_to_classic_group(group, request.member_id)
                    if conversion is not None:
                        records = []  # Kafka writes the conversion's records only
            else:
                group, records, result, conversion = self._heartbeat(request)
        except KafkaError as failure:
            callback(ConsumerGroupHeartbeatResult.failure(failure.code, failure.message))
            return
        self._write(
            group,
            records,
            lambda error: callback(result if error is None else _failed(error)),
            None if conversion is None else (lambda: conversion),
        )

    def _invalid(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResult | None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (INVALID_REQUEST,
        UNSUPPORTED_ASSIGNOR), after its ``isActive`` check."""

        def invalid(message: str) -> ConsumerGroupHeartbeatResult:
            return ConsumerGroupHeartbeatResult.failure(ErrorCode.INVALID_REQUEST, message)

        epoch = request.member_epoch
        if (
            request.api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
            or epoch > 0
            or epoch == LEAVE_GROUP_MEMBER_EPOCH
        ) and request.member_id == "":
            return invalid("MemberId can't be empty.")
        if request.group_id == "":
            return invalid("GroupId can't be empty.")
        if request.instance_id == "":
            return invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            return invalid("RackId can't be empty.")
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as exc:
                return ConsumerGroupHeartbeatResult.failure(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid regular "
                    f"expression: {exc}.",
                )
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if request.rebalance_timeout_ms == -1:
                return invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                return invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                return invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return invalid("MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self._assignors:
            return ConsumerGroupHeartbeatResult.failure(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self._assignors)}.",
            )
        return None

    def _heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> tuple[ConsumerGroup, list[ConsumerGroupRecord], ConsumerGroupHeartbeatResult, Conversion | None]:
        group_id = request.group_id
        records: list[ConsumerGroupRecord] = []
        create = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group, conversion = self._group_for_heartbeat(group_id, create, records)
        try:
            found, records, result = self._heartbeat_in(group, request, records)
            return found, records, result, conversion
        except KafkaError:
            if conversion is not None:
                conversion.undo()  # nothing is written: the group is as it was
            raise

    def _heartbeat_in(
        self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest, records: list[ConsumerGroupRecord]
    ) -> tuple[ConsumerGroup, list[ConsumerGroupRecord], ConsumerGroupHeartbeatResult]:
        group_id = request.group_id
        create = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        member_id = request.member_id
        self._check_not_full(group, member_id)
        if member_id == "":
            member_id = self._new_member_id()
        owned = request.topic_partitions
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, request.member_epoch, owned, create)
        else:
            member = self._static_member(
                group, member_id, request.member_epoch, request.instance_id, owned, create, records
            )

        # 1. The member and its subscription; the group epoch.
        updated = replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=request.server_assignor
            if request.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=(
                frozenset(request.subscribed_topic_names)
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (request.subscribed_topic_regex or None)
                if request.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=request.client_id,
            client_host=request.client_host,
            classic_member_metadata=None,  # a ConsumerGroupHeartbeat speaks the consumer protocol
        )
        reconciled = self.advance_member(group, member, updated, owned, records)
        self._schedule_session_timeout(group_id, member_id)

        full = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.topic_partitions is not None
        )
        changed = reconciled.assigned_partitions != member.assigned_partitions
        result = ConsumerGroupHeartbeatResult(
            ErrorCode.NONE,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.group_settings(group_id).heartbeat_interval_ms,
            assignment=reconciled.assigned_partitions if full or changed else None,
        )
        return group, records, result

    def advance_member(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        owned: Sequence[tuple[uuid.UUID, Iterable[int]]] | None,
        records: list[ConsumerGroupRecord],
    ) -> ConsumerGroupMember:
        """The three steps of a heartbeat once the member is known (``member`` as the group holds
        it, ``updated`` with what the request brought): the group epoch, the target assignment,
        the reconciliation. Adds the records to ``records``, schedules or cancels the member's
        rebalance timeout, and returns the member reconciled (Kafka's steps shared by
        consumerGroupHeartbeat and classicGroupJoinToConsumerGroup)."""
        group_id, member_id = group.group_id, updated.member_id
        bump = group.group_epoch == 0
        if not updated.same_subscription(member):
            records.append(MemberSubscriptionRecord(group_id, member_id, updated))
            if (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            ):
                bump = True
        if self._refresh_regexes(group, updated.subscribed_topic_regex):
            bump = True
        subscribed = group.computed_subscribed_topic_names(member, updated)
        metadata = self._subscription_metadata(subscribed)
        members = group.num_members
        if not group.has_member(member_id) and not group.has_static_member(updated.instance_id):
            members += 1
        kind = subscription_type(subscribed, members)
        if metadata != group.subscription_metadata:
            bump = True
            records.append(SubscriptionMetadataRecord(group_id, metadata))
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(GroupEpochRecord(group_id, group_epoch))
            _log.info("bumped consumer group epoch", group=group_id, epoch=group_epoch)

        # 2. The target assignment.
        if group_epoch > group.assignment_epoch:
            updates: dict[str, ConsumerGroupMember | None] = {member_id: updated}
            previous = group.static_member_id(updated.instance_id)
            if previous is not None and previous != member_id:
                updates[previous] = None
            assignor = self._assignor_for(group, member, updated)
            try:
                targets, target_records = build_target_assignment(
                    group, group_epoch, assignor, metadata, kind, updates
                )
            except PartitionAssignorError as exc:
                message = f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}"
                _log.error("assignor failed", group=group_id, error=message)
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, message) from exc
            records += target_records
            target: Assignment = targets.get(member_id, {})
            target_epoch = group_epoch
            _log.info(
                "computed a new target assignment",
                group=group_id,
                epoch=group_epoch,
                assignor=assignor.name,
                members=len(targets),
            )
        else:
            target_epoch = group.assignment_epoch
            target = group.target_assignment_for(member_id, updated.instance_id)

        # 3. Reconciliation.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
        if not reconciled.same_current_assignment(updated) or not group.has_member(member_id):
            records.append(CurrentAssignmentRecord(group_id, member_id, reconciled))
            self._schedule_rebalance_timeout(group_id, reconciled)
        return reconciled

    def _group_for_heartbeat(
        self, group_id: str, create: bool, records: list[ConsumerGroupRecord]
    ) -> tuple[ConsumerGroup, Conversion | None]:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: the consumer group, or a new one on a join
        (an empty classic group of that id gives way, keeping its offsets; one with members is
        converted, its conversion records added to ``records`` and applied, when the migration
        policy allows it: :mod:`~coordinator.group.migration`), with the conversion the
        heartbeat's write must carry if the group was a classic one."""
        group = self._host.consumer_group(group_id)
        if group is not None:
            return group, None
        if not create:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        upgraded = self._host.upgrade_classic_group(group_id)
        if upgraded is not None:
            group, converted_records, conversion = upgraded
            for record in converted_records:
                apply(record, _Groups(self._host, group))
                if isinstance(record, MemberSubscriptionRecord) and record.member is not None:
                    classic = record.member.classic_member_metadata
                    self._schedule_session_timeout(
                        group_id, record.member_id, None if classic is None else classic.session_timeout_ms
                    )
            records += converted_records
            return group, conversion
        replaced = self._host.replace_empty_classic_group(group_id)
        if replaced is not None:
            return replaced
        return ConsumerGroup(group_id), None

    def _check_not_full(self, group: ConsumerGroup, member_id: str) -> None:
        limit = self._config.group_consumer_max_size
        if group.num_members >= limit and (member_id == "" or not group.has_member(member_id)):
            raise KafkaError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {limit} members.",
            )

    def _dynamic_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None,
        create: bool,
    ) -> ConsumerGroupMember:
        member = group.member(member_id)
        if member is None:
            if not create:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            _log.info("member joins the consumer group", group=group.group_id, member=member_id)
            return ConsumerGroupMember(member_id)
        _check_epoch(member, epoch, owned)
        return member

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        instance_id: str,
        owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None,
        create: bool,
        records: list[ConsumerGroupRecord],
        *,
        classic: bool = False,
    ) -> ConsumerGroupMember:
        """The static member ``instance_id`` as this request sees it. Joining: a new member, or the
        one it replaces under the new member id. A ConsumerGroupHeartbeat may replace only a member
        that left with epoch -2 (UNRELEASED_INSTANCE_ID otherwise); a classic JoinGroup (``classic``)
        replaces it whatever its state, as classic static membership always has (Kafka's
        getOrMaybeSubscribeStaticConsumerGroupMember): the replaced member's next request is fenced."""
        existing = group.static_member(instance_id)
        if create:
            if existing is None:
                _log.info(
                    "static member joins the consumer group",
                    group=group.group_id,
                    member=member_id,
                    instance=instance_id,
                )
                found = group.member(member_id)
                return found if found is not None else ConsumerGroupMember(member_id)
            if not classic and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise KafkaError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group "
                    f"because the instance id is owned by {existing.member_id} member.",
                )
            new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            gid = group.group_id
            records += member_tombstones(gid, existing.member_id)
            records.append(MemberSubscriptionRecord(gid, member_id, new))
            records.append(
                TargetAssignmentMemberRecord(gid, member_id, group.target_assignment_of(existing.member_id))
            )
            records.append(CurrentAssignmentRecord(gid, member_id, new))
            _log.info(
                "static member rejoins the consumer group",
                group=gid,
                instance=instance_id,
                member=member_id,
                replaced=existing.member_id,
            )
            return new
        if existing is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise KafkaError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{existing.member_id}.",
            )
        _check_epoch(existing, epoch, owned)
        return existing

    def _refresh_regexes(self, group: ConsumerGroup, joining: str | None) -> bool:
        """Resolve the group's expressions (and ``joining``) again if one is new or the last
        resolution is older than REGEX_REFRESH_INTERVAL_MS; True if a resolution changed."""
        regexes = group.regexes | ({joining} if joining else set())
        if not regexes:
            return group.set_resolved_regexes({})
        now = self._clock.time_ms()
        fresh = 0 <= now - group.regexes_resolved_ms < REGEX_REFRESH_INTERVAL_MS
        if fresh and all(group.resolved_regex(regex) is not None for regex in regexes):
            return False
        names = [topic.name for topic in self._topics.all() if not topic.is_internal]
        resolved = {
            regex: frozenset(name for name in names if re.fullmatch(regex, name) is not None)
            for regex in regexes
        }
        group.regexes_resolved_ms = now
        changed = {r for r in regexes if group.resolved_regex(r) not in (None, resolved[r])}
        if changed:
            _log.info(
                "regular expressions resolve to other topics", group=group.group_id, regexes=sorted(changed)
            )
        group.set_resolved_regexes(resolved)
        return bool(changed)

    def _subscription_metadata(self, subscribed: Counter[str]) -> dict[str, TopicMetadata]:
        metadata = {}
        for name in subscribed:
            topic = self._topics.get(name)
            if topic is not None:
                metadata[name] = TopicMetadata(topic.topic_id, name, len(topic.partitions))
        return metadata

    def _assignor_for(
        self, group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember
    ) -> PartitionAssignor:
        preferred = group.preferred_server_assignor(old, new)
        if preferred is None:
            return self._default_assignor
        return self._assignors.get(preferred, self._default_assignor)

    # -- leaving and fencing ------------------------------------------------------------------------

    def _leave(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> tuple[ConsumerGroup, list[ConsumerGroupRecord], ConsumerGroupHeartbeatResult]:
        group = self._existing_group(request.group_id)
        member_id = request.member_id
        left = ConsumerGroupHeartbeatResult(
            ErrorCode.NONE, member_id=member_id, member_epoch=request.member_epoch
        )
        if request.instance_id is None:
            member = group.member(member_id)
            if member is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            _log.info("member left the consumer group", group=group.group_id, member=member_id)
            return group, self._fence(group, member), left
        static = group.static_member(request.instance_id)
        if static is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
        if static.member_id != member_id:
            raise KafkaError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {request.instance_id} was fenced by member "
                f"{static.member_id}.",
            )
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            _log.info(
                "static member temporarily left the consumer group",
                group=group.group_id,
                member=member_id,
                instance=request.instance_id,
            )
            leaving = replace(
                static, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={}
            )
            record = CurrentAssignmentRecord(group.group_id, member_id, leaving)
            result = ConsumerGroupHeartbeatResult(
                ErrorCode.NONE, member_id=member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
            )
            return group, [record], result
        _log.info("static member left the consumer group", group=group.group_id, member=member_id)
        return group, self._fence(group, static), left

    def _existing_group(self, group_id: str) -> ConsumerGroup:
        group = self._host.consumer_group(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> list[ConsumerGroupRecord]:
        """Kafka's ``consumerGroupFenceMember``: the member's records go, the group epoch moves on
        (so that the others are given its partitions), its timers stop."""
        group_id = group.group_id
        records = member_tombstones(group_id, member.member_id)
        metadata = self._subscription_metadata(group.computed_subscribed_topic_names(member, None))
        if metadata != group.subscription_metadata:
            records.append(SubscriptionMetadataRecord(group_id, metadata))
        records.append(GroupEpochRecord(group_id, group.group_epoch + 1))
        self._timers.cancel_all(group_id, member.member_id)
        return records

    def fence_member(self, group_id: str, member_id: str, reason: str, epoch: int | None = None) -> None:
        """Remove a member a timer gave up on (if it is still there, at ``epoch`` when given)."""
        group = self._host.consumer_group(group_id)
        member = None if group is None else group.member(member_id)
        if group is None or member is None:
            _log.debug("not fencing a member that is gone", group=group_id, member=member_id)
            return
        if epoch is not None and member.member_epoch != epoch:
            _log.debug(
                "not fencing a member that left the epoch", group=group_id, member=member_id, epoch=epoch
            )
            return
        _log.info("member fenced from the consumer group", group=group_id, member=member_id, reason=reason)
        conversion = self._host.convert_to_classic_group(group, member_id)
        if conversion is not None:
            self._timers.cancel_all(group_id, member_id)
            self._write(group, [], lambda _error: None, lambda: conversion)
            return
        self._write(group, self._fence(group, member), lambda _error: None)

    # -- timers -------------------------------------------------------------------------------------

    def _schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """The member is fenced if it is not heard from within ``timeout_ms``: a classic-protocol
        member's own session timeout, else the group's consumer.session.timeout.ms (its override,
        or group.consumer.session.timeout.ms)."""
        self._timers.schedule(
            SESSION,
            group_id,
            member_id,
            self.group_settings(group_id).session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self.fence_member(group_id, member_id, "the member session expired"),
        )

    schedule_session_timeout = _schedule_session_timeout

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._timers.cancel(REBALANCE, group_id, member.member_id)
            return
        epoch, timeout = member.member_epoch, member.rebalance_timeout_ms
        self._timers.schedule(
            REBALANCE,
            group_id,
            member.member_id,
            timeout,
            lambda: self.fence_member(
                group_id,
                member.member_id,
                f"it failed to transition from epoch {epoch} within {timeout}ms",
                epoch,
            ),
        )

    def on_group_loaded(self, group: ConsumerGroup) -> None:
        """Kafka's ``onLoaded``: every member's session starts again, and the rebalance timeout of
        each member that must revoke partitions; regular expressions are resolved again."""
        self._refresh_regexes(group, None)
        for member_id, member in group.members.items():
            classic = member.classic_member_metadata
            self._schedule_session_timeout(
                group.group_id, member_id, None if classic is None else classic.session_timeout_ms
            )
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group.group_id, member)

    def on_group_unloaded(self, group: ConsumerGroup) -> None:
        for member_id in group.members:
            self._timers.cancel_all(group.group_id, member_id)

    # -- writing ------------------------------------------------------------------------------------

    def _write(
        self,
        group: ConsumerGroup,
        records: list[ConsumerGroupRecord],
        done: WriteDone,
        convert: Callable[[], Conversion | None] | None = None,
    ) -> None:
        """Apply ``records`` now and write them; ``done`` gets None once they and the group's
        earlier writes are written (at once for no records and nothing in flight), else the error
        the member must see (:mod:`~coordinator.group.consumer.writes`). ``convert``, called once
        the records are applied, may change the group's kind: its conversion's records go into the
        same batch, and a failed batch undoes it."""
        if not records and convert is None:
            self._writes.read(group, done)
            return
        existed = self._host.consumer_group(group.group_id) is group
        snapshot = group.snapshot()
        for record in records:
            apply(record, _Groups(self._host, group))
        conversion = None if convert is None else convert()
        if not records and conversion is None:
            self._writes.read(group, done)
            return
        written = self._writes.track(group, snapshot, existed, done, conversion)
        self._host.append(group.group_id, records, written, conversion)

    def _revert(self, group: ConsumerGroup, snapshot: ConsumerGroupSnapshot, existed: bool) -> None:
        current = self._host.consumer_group(group.group_id)
        if current is not group:
            return
        group.restore(snapshot)
        if not existed and not group.offsets.has_offsets and group.is_empty:
            self._host.remove_consumer_group(group)

    write = _write
    """Shared with :mod:`~coordinator.group.consumer.classic_members`."""
    fence = _fence
    check_not_full = _check_not_full
    subscription_metadata = _subscription_metadata
    static_member = _static_member

    def new_member_id(self) -> str:
        return self._new_member_id()

    def convert_replaced_to_classic_group(
        self, group: ConsumerGroup, generation: int, rebalance: bool
    ) -> Conversion:
        """The online downgrade after a classic static member replaced the last consumer-protocol
        member (:meth:`ConsumerGroupHost.convert_replaced_to_classic_group`)."""
        return self._host.convert_replaced_to_classic_group(group, generation, rebalance)

    @property
    def timers(self) -> MemberTimers:
        return self._timers

    @property
    def topics(self) -> TopicLookup:
        return self._topics

    @property
    def config(self) -> GroupCoordinatorConfig:
        return self._config

    # -- ConsumerGroupDescribe ----------------------------------------------------------------------

    def describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return [self._describe(group_id) for group_id in group_ids]

    def _describe(self, group_id: str) -> DescribedConsumerGroup:
        error = self._host.validate(group_id)
        if error is not None:
            return DescribedConsumerGroup(group_id, error)
        group = self._host.consumer_group(group_id)
        if group is None:
            return DescribedConsumerGroup(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        members = tuple(
            DescribedMember(
                member_id=member.member_id,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
                subscribed_topic_regex=member.subscribed_topic_regex,
                assignment=self._described(member.assigned_partitions),
                target_assignment=self._described(group.target_assignment_of(member.member_id)),
                uses_classic_protocol=member.uses_classic_protocol,
            )
            for member in group.members.values()
        )
        return DescribedConsumerGroup(
            group_id,
            state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.preferred_server_assignor() or self._default_assignor.name,
            members=members,
        )

    def _described(self, assignment: Assignment) -> tuple[DescribedTopicPartitions, ...]:
        described = []
        for topic_id, partitions in assignment.items():
            topic = self._topics.get_by_id(topic_id)
            if topic is not None:
                described.append(DescribedTopicPartitions(topic_id, topic.name, tuple(sorted(partitions))))
        return tuple(sorted(described, key=lambda d: d.topic_name))


def _check_epoch(
    member: ConsumerGroupMember, received: int, owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None
) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``; epoch 0 is a rejoin after being fenced
    and always accepted (KAFKA-19233)."""
    if received == JOIN_GROUP_MEMBER_EPOCH:
        return
    if received > member.member_epoch:
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
            "and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not is_subset(owned, member.assigned_partitions)
    ):
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
            "and rejoin.",
        )


def _failed(error: ErrorCode) -> ConsumerGroupHeartbeatResult:
    return ConsumerGroupHeartbeatResult.failure(error)


class _Groups:
    """The catalog as records see it, creating ``group`` itself when a record creates its id."""

    def __init__(self, host: ConsumerGroupHost, group: ConsumerGroup) -> None:
        self._host = host
        self._group = group

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self._host.consumer_group(group_id)

    def create_consumer_group(self, group_id: str) -> ConsumerGroup:
        group = self._group if group_id == self._group.group_id else ConsumerGroup(group_id)
        self._host.install_consumer_group(group)
        return group

    def remove_consumer_group(self, group: ConsumerGroup) -> None:
        self._host.remove_consumer_group(group)


__all__ = [
    "ConsumerGroupHost",
    "ConsumerGroupService",
    "GroupConfigProvider",
    "no_group_configs",
    "random_member_id",
    "write_error",
]
