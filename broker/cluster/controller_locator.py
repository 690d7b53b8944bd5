"""Where the active controller is: the voter that leads the metadata quorum, as last heard.

A broker knows the voters (``controller.quorum.voters``) but not which one leads. It starts with
the first, and moves when told: a metadata fetch response names the leader and its epoch
(CurrentLeader), and a voter that fails a request or answers NOT_CONTROLLER sends the broker to
the next voter in turn, so a broker finds a new leader even when the old one died without a word.
A hint from an older epoch than one already heard is ignored (a deposed leader's late answer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

__all__ = ["ControllerLocator"]

_log = structlog.get_logger("kipling.controller_locator")

VoterAddress = Callable[[int], tuple[str, int]]
"""A voter id's controller listener address (a node's own may only be known once it is bound)."""


class ControllerLocator:
    """The address of the voter believed to be the active controller."""

    def __init__(self, voter_ids: Sequence[int], address_of: VoterAddress) -> None:
        if not voter_ids:
            raise ValueError("a controller locator needs at least one voter")
        self._voters = list(voter_ids)
        self._address_of = address_of
        self._current = self._voters[0]
        self._epoch = -1

    @property
    def leader_id(self) -> int:
        """The voter requests go to now."""
        return self._current

    def address(self) -> tuple[str, int]:
        return self._address_of(self._current)

    def leader_is(self, leader_id: int, epoch: int) -> None:
        """A fetch response named ``leader_id`` as the leader of ``epoch`` (-1: none known)."""
        if epoch < self._epoch or leader_id not in self._voters:
            return
        self._epoch = epoch
        if leader_id != self._current:
            _log.info("the active controller moved", leader_id=leader_id, epoch=epoch)
            self._current = leader_id

    def unreachable(self, address: tuple[str, int]) -> None:
        """A request to ``address`` failed or found no active controller: try the next voter."""
        if address != self.address():
            return  # already moved on
        index = self._voters.index(self._current)
        self._current = self._voters[(index + 1) % len(self._voters)]
