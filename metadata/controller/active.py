"""Which QuorumController is active on this node, if any: the Raft leader's.

A controller-role node is one of the quorum's voters; only the voter that leads the metadata log's
current epoch runs a :class:`~metadata.controller.controller.QuorumController`, built from the
committed log when it is elected and dropped the moment it stops leading (a new leader replays the
log, so nothing but the log carries over). The controller APIs' handlers hold an
:class:`ActiveController` and ask it for the controller on every request: between leaders the
answer is NOT_CONTROLLER, which tells the broker to find the new leader.
"""

from __future__ import annotations

import structlog

from metadata.controller.controller import QuorumController
from protocol.error_codes import ErrorCode, KafkaError

__all__ = ["ActiveController", "ControllerRef", "resolve_controller"]

_log = structlog.get_logger("kipling.controller.active")


class ActiveController:
    """The controller this node runs while it leads the quorum; None in between."""

    def __init__(self, node_id: int) -> None:
        self._node_id = node_id
        self._controller: QuorumController | None = None

    @property
    def current(self) -> QuorumController | None:
        return self._controller

    def get(self) -> QuorumController:
        """The active controller, or KafkaError(NOT_CONTROLLER) when this node does not lead."""
        if self._controller is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"node {self._node_id} is not the active controller")
        return self._controller

    def activate(self, controller: QuorumController) -> None:
        self._controller = controller
        _log.info("active controller", node_id=self._node_id, epoch=controller.controller_epoch)

    def deactivate(self) -> None:
        if self._controller is not None:
            _log.info(
                "no longer the active controller",
                node_id=self._node_id,
                epoch=self._controller.controller_epoch,
            )
        self._controller = None


ControllerRef = QuorumController | ActiveController
"""What a controller API handler is given: a fixed controller (tests) or this node's active one."""


def resolve_controller(ref: ControllerRef) -> QuorumController:
    """The controller to serve a request with; NOT_CONTROLLER when none is active."""
    return ref.get() if isinstance(ref, ActiveController) else ref
