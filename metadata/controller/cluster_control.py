"""Brokers on the controller: registration, heartbeats, sessions, fencing, controlled shutdown.

Kafka's ClusterControlManager and BrokerHeartbeatManager. A broker registers (getting a broker
epoch: the offset of its RegisterBrokerRecord) and starts fenced; it heartbeats every
broker.heartbeat.interval.ms with the metadata offset it has replayed; once that offset reaches its
registration record it is unfenced, and may lead and join ISRs. A broker that stops heartbeating for
longer than broker.session.timeout.ms is fenced by :meth:`ClusterControl.fence_stale_brokers`: it
leaves every ISR (never emptying one) and its partitions elect other leaders.

Per heartbeat the broker is in one of Kafka's BrokerControlStates and moves as Kafka moves it:

* FENCED: ``want_shutdown`` → SHUTDOWN_NOW; not ``want_fence`` and caught up → UNFENCED; else FENCED.
* UNFENCED: ``want_fence`` → FENCED (SHUTDOWN_NOW with ``want_shutdown``); ``want_shutdown`` →
  CONTROLLED_SHUTDOWN if it leads a partition, else SHUTDOWN_NOW; else UNFENCED.
* CONTROLLED_SHUTDOWN (entering it moves its leaderships away and takes it out of the ISRs; it stays
  unfenced but is no longer eligible to lead, join an ISR or get new replicas) → SHUTDOWN_NOW once it
  leads nothing and every other active broker has replayed the batch that moved them, so the new
  leaders know they lead before the old one goes.
* SHUTDOWN_NOW fences the broker and answers ``should_shutdown``.

Sessions (last contact, last replayed offset, controlled shutdown) are the controller's soft state,
never logged, as in Kafka: a new controller starts a fresh session for every registered broker at
start-up, so each has a full session timeout to heartbeat to it before being fenced. Controlled
shutdown is soft state too (no record type here carries it, as Kafka's BrokerRegistrationChangeRecord
does): a broker that is shutting down keeps asking in its heartbeats, so after a controller restart
it re-enters controlled shutdown, or, if its leaderships were already moved, is let go at once
without waiting for the other brokers to replay that move.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import structlog

from metadata.controller.metadata_log import MetadataWriter
from metadata.controller.replication_control import ReplicationControl
from metadata.image import NO_OFFSET, BrokerRegistration, MetadataImage
from metadata.producer_id_block import BLOCK_SIZE, MAX_PRODUCER_ID, ProducerIdBlock
from metadata.records import (
    BrokerEndpointRecord,
    FenceBrokerRecord,
    MetadataRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from protocol.error_codes import ErrorCode, KafkaError

_log = structlog.get_logger("kipling.controller.cluster")


class BrokerControlState(enum.Enum):
    """Kafka's BrokerControlState: where a heartbeat leaves a broker."""

    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The BrokerHeartbeat answer; with an error the other fields keep Kafka's response defaults."""

    error: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shutdown: bool = False
    in_controlled_shutdown: bool = False


@dataclass(slots=True)
class BrokerSession:
    """What the controller knows of a broker incarnation between heartbeats."""

    broker_epoch: int
    last_contact_ms: int
    metadata_offset: int = NO_OFFSET
    controlled_shutdown_offset: int | None = None
    connection_lost: bool = False
    """Its heartbeat connection closed and it has not heartbeaten since (see expire_within)."""
    """Set while in controlled shutdown: the last offset of the batch that moved its leaderships."""


class BrokerSessions:
    """Heartbeat sessions by broker id (Kafka's BrokerHeartbeatManager); never logged."""

    def __init__(self, session_timeout_ms: int) -> None:
        self._timeout_ms = session_timeout_ms
        self._sessions: dict[int, BrokerSession] = {}

    def start(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A fresh session for a new incarnation (or for every broker at controller start-up)."""
        self._sessions[broker_id] = BrokerSession(broker_epoch, now_ms)

    def touch(
        self, broker_id: int, broker_epoch: int, now_ms: int, metadata_offset: int | None = None
    ) -> None:
        session = self._sessions.get(broker_id)
        if session is None or session.broker_epoch != broker_epoch:
            self.start(broker_id, broker_epoch, now_ms)
            session = self._sessions[broker_id]
        session.last_contact_ms = max(session.last_contact_ms, now_ms)
        session.connection_lost = False
        if metadata_offset is not None:
            session.metadata_offset = metadata_offset

    def get(self, broker_id: int) -> BrokerSession | None:
        return self._sessions.get(broker_id)

    def expire_within(self, broker_id: int, broker_epoch: int, now_ms: int, grace_ms: int) -> bool:
        """Let the session of this incarnation expire ``grace_ms`` from now unless a heartbeat comes
        first (it restores the session); never later than it would anyway. False if unknown."""
        session = self._sessions.get(broker_id)
        if session is None or session.broker_epoch != broker_epoch:
            return False
        session.last_contact_ms = min(session.last_contact_ms, now_ms + grace_ms - self._timeout_ms)
        session.connection_lost = True
        return True

    def extend(self, by_ms: int) -> None:
        """Move every session's last contact ``by_ms`` later (see QuorumController.forgive_stall)."""
        for session in self._sessions.values():
            if not session.connection_lost:  # no heartbeat of a broker whose connection closed waits
                session.last_contact_ms += by_ms

    def remove(self, broker_id: int) -> None:
        self._sessions.pop(broker_id, None)

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        """Heard from within the session timeout (a session is valid up to and including it)."""
        session = self._sessions.get(broker_id)
        return session is not None and now_ms - session.last_contact_ms <= self._timeout_ms

    def expired(self, now_ms: int) -> list[int]:
        """The broker ids whose session has expired, ascending."""
        return sorted(b for b in self._sessions if not self.has_valid_session(b, now_ms))

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        session = self._sessions.get(broker_id)
        return session is not None and session.controlled_shutdown_offset is not None

    def begin_controlled_shutdown(self, broker_id: int, offset: int) -> None:
        session = self._sessions.get(broker_id)
        if session is not None:
            session.controlled_shutdown_offset = offset

    def end_controlled_shutdown(self, broker_id: int) -> None:
        session = self._sessions.get(broker_id)
        if session is not None:
            session.controlled_shutdown_offset = None

    def broker_ids(self) -> list[int]:
        return sorted(self._sessions)


class ClusterControl:
    """Broker registrations, heartbeats and fencing, committed through ``writer``."""

    def __init__(
        self,
        image: MetadataImage,
        writer: MetadataWriter,
        replication: ReplicationControl,
        sessions: BrokerSessions,
        cluster_id: str,
    ) -> None:
        self._image = image
        self._writer = writer
        self._replication = replication
        self._sessions = sessions
        self._cluster_id = cluster_id

    def start_sessions(self, now_ms: int) -> None:
        """Give every registered broker without a current session one starting now."""
        for registration in self._image.brokers():
            session = self._sessions.get(registration.broker_id)
            if session is None or session.broker_epoch != registration.broker_epoch:
                self._sessions.start(registration.broker_id, registration.broker_epoch, now_ms)

    # -- registration ----------------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        cluster_id: str,
        endpoints: Sequence[BrokerEndpointRecord],
        rack: str | None,
        now_ms: int,
    ) -> int:
        """Register a broker incarnation (fenced) and return its broker epoch.

        A retry of the same incarnation amends the registration and keeps its epoch and fencing (as
        Kafka does). A new incarnation first removes the old one from ISRs and leaderships, then gets
        the offset of its RegisterBrokerRecord as broker epoch. Raises KafkaError with
        INCONSISTENT_CLUSTER_ID, or DUPLICATE_BROKER_REGISTRATION while another incarnation's
        session is still valid. A fenced incarnation has no valid session (Kafka's
        BrokerHeartbeatManager.hasValidSession), so a broker that stopped after a controlled
        shutdown, or was fenced, re-registers at once instead of waiting out its old session.
        """
        if cluster_id != self._cluster_id:
            raise KafkaError(
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"Expected cluster ID {self._cluster_id}, but got cluster ID {cluster_id}",
            )
        existing = self._image.broker(broker_id)
        if existing is not None and existing.incarnation_id == incarnation_id:
            return self._amend(existing, endpoints, rack, now_ms)
        if (
            existing is not None
            and not existing.fenced
            and self._sessions.has_valid_session(broker_id, now_ms)
        ):
            raise KafkaError(
                ErrorCode.DUPLICATE_BROKER_REGISTRATION, "Another broker is registered with that broker id."
            )
        records: list[MetadataRecord] = []
        if existing is not None:
            records.extend(self._replication.changes_for_removed_broker(broker_id))
        broker_epoch = self._writer.next_offset + len(records)
        records.append(
            RegisterBrokerRecord(broker_id, incarnation_id, broker_epoch, tuple(endpoints), rack, fenced=True)
        )
        self._writer.commit(records, atomic=False)  # the old incarnation's partitions move first
        self._sessions.start(broker_id, broker_epoch, now_ms)
        _log.info(
            "broker registered",
            broker=broker_id,
            broker_epoch=broker_epoch,
            incarnation=str(incarnation_id),
            replaced=existing is not None,
        )
        return broker_epoch

    def _amend(
        self,
        existing: BrokerRegistration,
        endpoints: Sequence[BrokerEndpointRecord],
        rack: str | None,
        now_ms: int,
    ) -> int:
        record = RegisterBrokerRecord(
            existing.broker_id,
            existing.incarnation_id,
            existing.broker_epoch,
            tuple(endpoints),
            rack,
            fenced=existing.fenced,
        )
        self._writer.commit([record])
        self._sessions.touch(existing.broker_id, existing.broker_epoch, now_ms)
        _log.info(
            "broker registration amended", broker=existing.broker_id, broker_epoch=existing.broker_epoch
        )
        return existing.broker_epoch

    def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker (an operator removing a broker for good): out of every ISR and leadership,
        then an UnregisterBrokerRecord. Raises BROKER_ID_NOT_REGISTERED for an unknown broker."""
        registration = self._image.broker(broker_id)
        if registration is None:
            raise KafkaError(
                ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered"
            )
        records: list[MetadataRecord] = list(self._replication.changes_for_removed_broker(broker_id))
        records.append(UnregisterBrokerRecord(broker_id, registration.broker_epoch))
        self._writer.commit(records, atomic=False)
        self._sessions.remove(broker_id)
        _log.info("broker unregistered", broker=broker_id, broker_epoch=registration.broker_epoch)

    # -- heartbeats ------------------------------------------------------------------------------

    def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shutdown: bool,
        now_ms: int,
    ) -> HeartbeatResult:
        """Process one BrokerHeartbeat: refresh the session, move the broker's state, answer it."""
        registration = self._image.broker(broker_id)
        if registration is None:
            return HeartbeatResult(ErrorCode.BROKER_ID_NOT_REGISTERED)
        if registration.broker_epoch != broker_epoch:
            return HeartbeatResult(ErrorCode.STALE_BROKER_EPOCH)
        current = self._state(registration)
        target = self._next_state(current, registration, current_metadata_offset, want_fence, want_shutdown)
        if target is not current:
            self._enter(target, registration)
        self._sessions.touch(broker_id, broker_epoch, now_ms, current_metadata_offset)
        registered_at = self._image.registration_offset(broker_id)
        return HeartbeatResult(
            ErrorCode.NONE,
            is_caught_up=registered_at is not None and current_metadata_offset >= registered_at,
            is_fenced=target in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW),
            should_shutdown=target is BrokerControlState.SHUTDOWN_NOW,
            in_controlled_shutdown=target is BrokerControlState.CONTROLLED_SHUTDOWN,
        )

    def _state(self, registration: BrokerRegistration) -> BrokerControlState:
        if registration.fenced:
            return BrokerControlState.FENCED
        if self._sessions.in_controlled_shutdown(registration.broker_id):
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.UNFENCED

    def _next_state(
        self,
        current: BrokerControlState,
        registration: BrokerRegistration,
        metadata_offset: int,
        want_fence: bool,
        want_shutdown: bool,
    ) -> BrokerControlState:
        """Kafka's BrokerHeartbeatManager.calculateNextBrokerState (see the module docstring)."""
        broker_id = registration.broker_id
        if current is BrokerControlState.FENCED:
            if want_shutdown:
                return BrokerControlState.SHUTDOWN_NOW
            registered_at = self._image.registration_offset(broker_id)
            if not want_fence and registered_at is not None and metadata_offset >= registered_at:
                return BrokerControlState.UNFENCED
            return BrokerControlState.FENCED
        if current is BrokerControlState.UNFENCED:
            if want_fence:
                return BrokerControlState.SHUTDOWN_NOW if want_shutdown else BrokerControlState.FENCED
            if want_shutdown:
                if self._replication.leads_any(broker_id):
                    return BrokerControlState.CONTROLLED_SHUTDOWN
                return BrokerControlState.SHUTDOWN_NOW
            return BrokerControlState.UNFENCED
        if self._replication.leads_any(broker_id) or not self._others_caught_up(broker_id):
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.SHUTDOWN_NOW

    def _others_caught_up(self, broker_id: int) -> bool:
        """Every other active broker has replayed the batch that started ``broker_id``'s shutdown."""
        session = self._sessions.get(broker_id)
        if session is None or session.controlled_shutdown_offset is None:
            return True
        for other in self._sessions.broker_ids():
            other_session = self._sessions.get(other)
            if other == broker_id or other_session is None or not self._replication.is_active(other):
                continue
            if other_session.metadata_offset < session.controlled_shutdown_offset:
                return False
        return True

    def _enter(self, target: BrokerControlState, registration: BrokerRegistration) -> None:
        broker_id, broker_epoch = registration.broker_id, registration.broker_epoch
        if target is BrokerControlState.UNFENCED:
            self._unfence(broker_id, broker_epoch)
        elif target is BrokerControlState.CONTROLLED_SHUTDOWN:
            self._begin_controlled_shutdown(broker_id)
        elif not registration.fenced:
            self._fence(broker_id, broker_epoch, reason=target.value)

    def _unfence(self, broker_id: int, broker_epoch: int) -> None:
        records: list[MetadataRecord] = [UnfenceBrokerRecord(broker_id, broker_epoch)]
        records.extend(self._replication.changes_for_unfenced_broker(broker_id))
        self._writer.commit(records, atomic=False)  # one change per partition it may lead: maybe 100,000
        _log.info("broker unfenced", broker=broker_id, broker_epoch=broker_epoch, elections=len(records) - 1)

    def _fence(
        self, broker_id: int, broker_epoch: int, *, reason: str, also_leaving: Collection[int] = ()
    ) -> None:
        records: list[MetadataRecord] = list(
            self._replication.changes_for_removed_broker(broker_id, also_leaving)
        )
        records.append(FenceBrokerRecord(broker_id, broker_epoch))
        self._writer.commit(records, atomic=False)  # each of its partitions moves: the fence comes last
        self._sessions.end_controlled_shutdown(broker_id)
        _log.info(
            "broker fenced",
            broker=broker_id,
            broker_epoch=broker_epoch,
            reason=reason,
            changes=len(records) - 1,
        )

    def _begin_controlled_shutdown(self, broker_id: int) -> None:
        records = self._replication.changes_for_removed_broker(broker_id)
        commit = self._writer.commit(records, atomic=False)
        self._sessions.begin_controlled_shutdown(broker_id, commit.last_offset)
        _log.info("broker in controlled shutdown", broker=broker_id, changes=len(records))

    # -- session expiry --------------------------------------------------------------------------

    def fence_stale_brokers(self, now_ms: int) -> list[int]:
        """Fence every unfenced broker whose session expired, one batch each; returns their ids.

        One batch per broker, as Kafka fences one at a time. Unlike Kafka, the elections of each
        batch already treat every broker expiring in this tick as gone, so a partition never moves
        to a broker that is fenced a moment later (one leader change instead of two).
        """
        stale = []
        for broker_id in self._sessions.expired(now_ms):
            registration = self._image.broker(broker_id)
            if registration is None:
                self._sessions.remove(broker_id)
            elif not registration.fenced:
                stale.append(registration)
        leaving = {registration.broker_id for registration in stale}
        for registration in stale:
            leaving.discard(registration.broker_id)
            self._fence(
                registration.broker_id,
                registration.broker_epoch,
                reason="session expired",
                also_leaving=leaving,
            )
        return [registration.broker_id for registration in stale]

    # -- producer ids (Kafka's ProducerIdControlManager) -----------------------------------------

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdBlock:
        """Hand the broker the next block of BLOCK_SIZE producer ids, logged before it is returned."""
        registration = self._image.broker(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH)
        first = self._image.next_producer_id
        if first > MAX_PRODUCER_ID - BLOCK_SIZE:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds.")
        self._writer.commit([ProducerIdsRecord(broker_id, broker_epoch, first + BLOCK_SIZE)])
        return ProducerIdBlock(first, BLOCK_SIZE)
