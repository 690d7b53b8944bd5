"""Where the active controller is: the voter that leads the metadata quorum, as last heard.

A broker knows the voters (``controller.quorum.voters``) but not which one leads. It starts with
the first, and moves when told: a metadata fetch response names the leader and its epoch
(CurrentLeader), and a voter that fails a request or answers NOT_CONTROLLER sends the broker to
the next voter in turn, so a broker finds a new leader even when the old one died without a word.
A hint from an older epoch than one already heard is ignored (a deposed leader's late answer), and
so is one naming, in the same epoch, the leader this broker just found unreachable: a voter that
has not yet noticed the leader's death would otherwise send the broker straight back to it.
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
        self._unreachable: set[int] = set()
        """Voters found unreachable in ``_epoch``: a hint naming one of them as that epoch's leader
        is stale news (cleared when a later epoch is heard of)."""
        self._listeners: list[Callable[[], None]] = []

    def on_move(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the target moves to another voter (a channel then drops its
        connection to the old one, which aborts a request stuck on a paused, deposed leader)."""
        self._listeners.append(listener)

    def _move_to(self, voter_id: int) -> None:
        self._current = voter_id
        for listener in list(self._listeners):
            listener()

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
        if epoch > self._epoch:
            self._unreachable.clear()
        elif leader_id in self._unreachable:
            return
        self._epoch = epoch
        if leader_id != self._current:
            _log.info("the active controller moved", leader_id=leader_id, epoch=epoch)
            self._move_to(leader_id)

    def unreachable(self, address: tuple[str, int], *, answered: bool = False) -> None:
        """A request to ``address`` failed (``answered``: it answered NOT_CONTROLLER): try the
        next voter. One that did not answer is not taken back on another voter's word in this epoch."""
        if address != self.address():
            return  # already moved on
        if not answered:
            self._unreachable.add(self._current)
        if self._unreachable >= set(self._voters):
            self._unreachable.clear()  # none answers: try them all again
        index = self._voters.index(self._current)
        for step in range(1, len(self._voters) + 1):
            candidate = self._voters[(index + step) % len(self._voters)]
            if candidate not in self._unreachable:
                self._move_to(candidate)
                return
