"""The controller on top of the quorum: active on the Raft leader only, answering once committed.

* :class:`RaftMetadataLog` is the :class:`~metadata.controller.metadata_log.MetadataLog` a
  :class:`~metadata.controller.controller.QuorumController` writes through: each batch goes to the
  Raft log in the leader's epoch, as one record batch (so a multi-record change is replicated
  whole). The controller applies it to its image at once, as Kafka's controller does.
* :class:`CommitGate` holds every controller response until the log end it saw is committed (a
  majority of voters has it): nothing is answered that a failover could undo. If this node loses
  the leadership first, the request is answered NOT_CONTROLLER and the broker asks the new leader.
* :class:`ControllerRole` builds the controller when this node's epoch is committed (its
  LeaderChange entry reached a majority, so the log below it is final) by replaying the log, and
  drops it the moment the node stops leading. Building it starts every broker's session afresh, so
  no broker is fenced for the time the quorum had no leader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from broker.quorum.raft_manager import LeadershipLostError, QuorumSnapshot, RaftManager
from metadata.controller.active import ActiveController
from metadata.controller.controller import QuorumController
from metadata.records import MetadataRecord
from metadata.serde import metadata_record_value
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError

__all__ = ["CommitGate", "ControllerRole", "RaftMetadataLog"]

_log = structlog.get_logger("kipling.controller_role")

GATED_APIS = frozenset(
    {
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALTER_PARTITION,
        ApiKey.ALLOCATE_PRODUCER_IDS,
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
        ApiKey.ELECT_LEADERS,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.ALTER_CONFIGS,
        ApiKey.ALTER_CLIENT_QUOTAS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        ApiKey.CREATE_ACLS,
        ApiKey.DELETE_ACLS,
    }
)
"""The controller APIs that write metadata: their answers wait for the commit of what they wrote,
so a change acknowledged to a client survives the loss of the controller that made it."""

BUILD_RETRY_S = 1.0
"""A single voter whose controller could not be built tries again this much later."""

ControllerFactory = Callable[[int], QuorumController]
"""Builds the controller for a leader epoch from the committed log."""


class RaftMetadataLog:
    """The controller's metadata log: appends go to the quorum as the leader's batches."""

    def __init__(self, raft: RaftManager) -> None:
        self._raft = raft

    @property
    def end_offset(self) -> int:
        return self._raft.log.end_offset

    def append(self, records: Sequence[MetadataRecord], epoch: int) -> int:
        """Append in the leader's epoch; NOT_CONTROLLER once this node no longer leads it (the
        controller's writer then refuses every later write, and a new leader rebuilds from the log)."""
        if not self._raft.is_leader or self._raft.epoch != epoch:
            raise KafkaError(
                ErrorCode.NOT_CONTROLLER, f"node {self._raft.node_id} does not lead epoch {epoch}"
            )
        first, _ = self._raft.append([metadata_record_value(record) for record in records])
        return first


class CommitGate:
    """Holds a controller API's response until what the log held when it was made is committed."""

    apis = GATED_APIS

    def __init__(self, raft: RaftManager, active: ActiveController, max_wait_s: float) -> None:
        self._raft = raft
        self._active = active
        self._max_wait_s = max_wait_s

    async def wait(self) -> None:
        controller = self._active.get()  # NOT_CONTROLLER when this node does not lead
        try:
            async with asyncio.timeout(self._max_wait_s):
                await self._raft.wait_committed(self._raft.log.end_offset, controller.controller_epoch)
        except LeadershipLostError as exc:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, str(exc)) from exc
        except TimeoutError as exc:  # a leader that no majority follows resigns sooner than this
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT, f"not committed by a majority of voters in {self._max_wait_s} s"
            ) from exc


class ControllerRole:
    """Activates the controller while this node leads the quorum with its epoch committed."""

    def __init__(self, raft: RaftManager, active: ActiveController, build: ControllerFactory) -> None:
        self._raft = raft
        self._active = active
        self._build = build
        self._building = False
        raft.on_change(self._on_change)

    def _on_change(self, snapshot: QuorumSnapshot) -> None:
        if self._building:
            return  # the build's own appends (a legacy import) come back here: nothing to decide
        current = self._active.current
        if current is not None and (not self._raft.is_leader or current.controller_epoch != snapshot.epoch):
            self._active.deactivate()
            current = None
        if current is None and self._raft.own_epoch_committed:
            self._building = True
            try:
                controller = self._build(snapshot.epoch)
                controller.on_failure(lambda reason: self._on_controller_failed(controller))
                self._active.activate(controller)
            except Exception:
                _log.exception("could not build the controller from the metadata log", epoch=snapshot.epoch)
                self._hand_over()
            finally:
                self._building = False

    def _on_controller_failed(self, controller: QuorumController) -> None:
        """The active controller's write failed (its metadata log dir is full or failed): it can
        never write again. Stop serving with it and give the quorum to a voter that can write; a
        single voter rebuilds from the log later (the failed append left the log as it was)."""
        if self._active.current is not controller:
            return
        self._active.deactivate()
        self._hand_over()

    def _hand_over(self) -> None:
        if len(self._raft.voters) > 1:
            self._raft.resign()  # another voter may do better than a leader without a controller
        else:  # nobody to hand over to: try again later
            asyncio.get_running_loop().call_later(
                BUILD_RETRY_S, lambda: self._on_change(self._raft.snapshot())
            )
