"""JoinGroup (Kafka's handleJoinGroup, doNewMemberJoinGroup and doCurrentMemberJoinGroup).

After the coordinator checks and the session timeout bounds (group.min/max.session.timeout.ms), a
member without an id may create the group; group.max.size is enforced; then:

* a new dynamic member gets an id and, from JoinGroup v4, must come back with it
  (MEMBER_ID_REQUIRED, KIP-394) before it is added and a rebalance starts;
* a new static member either joins or takes over its instance's member (KIP-345,
  :mod:`~coordinator.group.static_members`);
* a known member rejoins, which may or may not start a rebalance depending on the state.

A consumer-protocol group (KIP-848) of the same id with members takes the join itself: the
member becomes a classic-protocol member of the consumer group
(:mod:`~coordinator.group.consumer.classic_members`), as in Kafka whatever the migration policy;
an empty one gives way to a classic group, which keeps its offsets, as Kafka converts empty groups
whatever the policy.

The answer comes through the callback, usually when the join phase completes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import structlog

from coordinator.group.catalog import GroupApi, GroupCatalog
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.group import GroupMetadata
from coordinator.group.member import JoinCallback, MemberMetadata
from coordinator.group.rebalance import Rebalancer
from coordinator.group.requests import UNKNOWN_MEMBER_ID, JoinGroupRequest
from coordinator.group.results import JoinGroupResult
from coordinator.group.state import GroupState
from coordinator.group.static_members import StaticMemberRejoin
from coordinator.group.validation import validate_current_member
from protocol.error_codes import ErrorCode
from storage.clock import Clock

_log = structlog.get_logger("kipling.groups.join")

MemberIdSuffix = Callable[[], str]
YieldConsumerGroup = Callable[[JoinGroupRequest, JoinCallback], bool]
"""Given a checked JoinGroup: True if a consumer-protocol group with members took it (and answers
it); False once no consumer-protocol group holds the id (an empty one gives way to a classic group
with its offsets)."""


def _no_consumer_groups(_request: JoinGroupRequest, _callback: JoinCallback) -> bool:
    return False


def random_member_id_suffix() -> str:
    """Kafka's member ids end with a random UUID: ``<client id or instance id>-<uuid>``."""
    return str(uuid.uuid4())


class JoinService:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        clock: Clock,
        catalog: GroupCatalog,
        rebalancer: Rebalancer,
        static: StaticMemberRejoin,
        member_id_suffix: MemberIdSuffix = random_member_id_suffix,
        yield_consumer_group: YieldConsumerGroup = _no_consumer_groups,
    ) -> None:
        self._config = config
        self._yield_consumer_group = yield_consumer_group
        self._clock = clock
        self._catalog = catalog
        self._rebalancer = rebalancer
        self._static = static
        self._member_id_suffix = member_id_suffix

    def join_group(self, request: JoinGroupRequest, callback: JoinCallback) -> None:
        error = self._catalog.validate(request.group_id, GroupApi.JOIN_GROUP)
        if error is None and not self._session_timeout_allowed(request.session_timeout_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error is not None:
            callback(JoinGroupResult.failure(request.member_id, error))
            return
        if self._yield_consumer_group(request, callback):
            return
        is_unknown_member = request.member_id == UNKNOWN_MEMBER_ID
        group = self._catalog.get(request.group_id)
        if group is None:
            # Only a member without an id may create a group; an id for a missing group is stale.
            if not is_unknown_member:
                callback(JoinGroupResult.failure(request.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            group = self._catalog.add(GroupMetadata(request.group_id, GroupState.EMPTY, self._clock))
        if not self._accept_joining_member(group, request.member_id):
            group.remove(request.member_id)
            callback(JoinGroupResult.failure(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._join_new_member(group, request, callback)
        else:
            self._join_current_member(group, request, callback)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._rebalancer.check_join(group)

    def _session_timeout_allowed(self, session_timeout_ms: int) -> bool:
        config = self._config
        return (
            config.group_min_session_timeout_ms <= session_timeout_ms <= config.group_max_session_timeout_ms
        )

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size: while preparing a rebalance, count the members that already rejoined (the
        size may exceed a lowered maximum, and counting rejoins cuts the last ones to rejoin);
        otherwise existing members are always accepted and new ones up to the maximum."""
        limit = self._config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            rejoined = group.has(member_id) and group.get(member_id).is_awaiting_join
            return rejoined or group.num_awaiting_join < limit
        return group.has(member_id) or group.size < limit

    def _join_new_member(
        self, group: GroupMetadata, request: JoinGroupRequest, callback: JoinCallback
    ) -> None:
        if group.is_in(GroupState.DEAD):
            # Removed meanwhile (deleted, or moving to another coordinator): find the coordinator again.
            callback(JoinGroupResult.failure(UNKNOWN_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(request.protocol_type, (p.name for p in request.protocols)):
            callback(JoinGroupResult.failure(UNKNOWN_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_member_id = f"{request.group_instance_id or request.client_id}-{self._member_id_suffix()}"
            if request.group_instance_id is not None:
                self._join_new_static_member(
                    group, request, request.group_instance_id, new_member_id, callback
                )
            else:
                self._join_new_dynamic_member(group, request, new_member_id, callback)

    def _join_new_static_member(
        self,
        group: GroupMetadata,
        request: JoinGroupRequest,
        instance_id: str,
        new_member_id: str,
        callback: JoinCallback,
    ) -> None:
        """KIP-345: a known instance id takes over its member under a new member id."""
        old_member_id = group.current_static_member_id(instance_id)
        if old_member_id is None:
            self._rebalancer.add_member_and_rebalance(group, request, new_member_id, callback)
        else:
            self._static.rejoin(group, instance_id, old_member_id, new_member_id, request, callback)

    def _join_new_dynamic_member(
        self, group: GroupMetadata, request: JoinGroupRequest, new_member_id: str, callback: JoinCallback
    ) -> None:
        """KIP-394 (JoinGroup v4+): hand out the member id and make the member come back with it,
        so that a client retrying a timed-out join does not leave a defunct member behind."""
        if request.require_known_member_id:
            group.add_pending_member(new_member_id)
            self._rebalancer.add_pending_member_expiration(group, new_member_id, request.session_timeout_ms)
            callback(JoinGroupResult.failure(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._rebalancer.add_member_and_rebalance(group, request, new_member_id, callback)

    def _join_current_member(
        self, group: GroupMetadata, request: JoinGroupRequest, callback: JoinCallback
    ) -> None:
        member_id = request.member_id
        if group.is_in(GroupState.DEAD):
            callback(JoinGroupResult.failure(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(request.protocol_type, (p.name for p in request.protocols)):
            callback(JoinGroupResult.failure(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_pending_member(member_id):
            self._join_pending_member(group, request, callback)
        else:
            error = validate_current_member(group, member_id, request.group_instance_id)
            if error is not None:
                callback(JoinGroupResult.failure(member_id, error))
            else:
                self._rejoin(group, group.get(member_id), request, callback)

    def _join_pending_member(
        self, group: GroupMetadata, request: JoinGroupRequest, callback: JoinCallback
    ) -> None:
        """The second step of the two-step join. Pending ids are only ever given to dynamic members;
        Kafka fails such a request with an internal error (UNKNOWN_SERVER_ERROR)."""
        if request.group_instance_id is not None:
            _log.error(
                "pending member id sent with a group instance id",
                group=group.group_id,
                member=request.member_id,
            )
            callback(JoinGroupResult.failure(request.member_id, ErrorCode.UNKNOWN_SERVER_ERROR))
            return
        self._rebalancer.add_member_and_rebalance(group, request, request.member_id, callback)

    def _rejoin(
        self, group: GroupMetadata, member: MemberMetadata, request: JoinGroupRequest, callback: JoinCallback
    ) -> None:
        """A known member joins again; whether that starts a rebalance depends on the state:

        * PreparingRebalance: it is one of the rejoins the join phase waits for.
        * CompletingRebalance: unchanged metadata means it missed its JoinGroup answer: answer again
          (the leader with the members); changed metadata starts a new rebalance.
        * Stable: the leader rejoining always rebalances (it may have seen topic metadata change);
          a follower rebalances only if its metadata changed, else it gets the current generation.
        * Empty (or Dead): the member cannot be there; UNKNOWN_MEMBER_ID makes it start over.
        """
        state = group.state
        reason = f"member {member.member_id} rejoined during {state.value} ({request.reason or 'no reason'})"
        if state is GroupState.PREPARING_REBALANCE:
            self._rebalancer.update_member_and_rebalance(group, member, request, callback, reason)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                callback(group.join_result(member.member_id, with_members=group.is_leader(member.member_id)))
            else:
                self._rebalancer.update_member_and_rebalance(group, member, request, callback, reason)
        elif state is GroupState.STABLE:
            if group.is_leader(member.member_id) or not member.matches(request.protocols):
                self._rebalancer.update_member_and_rebalance(group, member, request, callback, reason)
            else:
                callback(group.join_result(member.member_id, with_members=False))
        else:
            _log.warning(
                "member rejoined a group in an unexpected state", group=group.group_id, state=state.value
            )
            callback(JoinGroupResult.failure(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
