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

import time
from collections.abc import Callable, Sequence

import structlog

__all__ = ["ControllerLocator"]

_log = structlog.get_logger("kipling.controller_locator")

DEFAULT_FORGET_AFTER_S = 4.0
"""How long a voter that did not answer is skipped: two quorum request timeouts (2 s each)."""

VoterAddress = Callable[[int], tuple[str, int]]
"""A voter id's controller listener address (a node's own may only be known once it is bound)."""


class ControllerLocator:
    """The address of the voter believed to be the active controller."""

    def __init__(
        self,
        voter_ids: Sequence[int],
        address_of: VoterAddress,
        *,
        forget_after_s: float = DEFAULT_FORGET_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not voter_ids:
            raise ValueError("a controller locator needs at least one voter")
        self._voters = list(voter_ids)
        self._address_of = address_of
        self._current = self._voters[0]
        self._epoch = -1
        self._forget_after_s = forget_after_s
        self._clock = clock
        self._unreachable: dict[int, float] = {}
        """Voters found unreachable in ``_epoch``, with when: a hint naming one of them as that
        epoch's leader is stale news for ``forget_after_s`` (a voter that only answered slowly once
        is tried again after that; all are forgotten when a later epoch is heard of)."""
        self._listeners: list[Callable[[], None]] = []
        self._leader_listeners: list[Callable[[], None]] = []

    def on_move(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the target moves to another voter (a channel then drops its
        connection to the old one, which aborts a request stuck on a paused, deposed leader)."""
        self._listeners.append(listener)

    def on_new_leader(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when a hint moves the target to a newly named leader (not when a
        failure rotates it: a rotation is no news, and reacting to it at once would spin)."""
        self._leader_listeners.append(listener)

    def _move_to(self, voter_id: int, *, named: bool = False) -> None:
        self._current = voter_id
        for listener in list(self._listeners):
            listener()
        if named:
            for listener in list(self._leader_listeners):
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
        elif self._recently_unreachable(leader_id):
            return
        self._epoch = epoch
        if leader_id != self._current:
            _log.info("the active controller moved", leader_id=leader_id, epoch=epoch)
            self._move_to(leader_id, named=True)

    def unreachable(self, address: tuple[str, int], *, answered: bool = False) -> None:
        """A request to ``address`` failed (``answered``: it answered NOT_CONTROLLER, or too slowly,
        so it may well be alive): try the next voter. One that could not be reached at all is not
        taken back on another voter's word for ``forget_after_s``."""
        if address != self.address():
            return  # already moved on
        if not answered:
            self._unreachable[self._current] = self._clock()
        if all(self._recently_unreachable(voter) for voter in self._voters):
            self._unreachable.clear()  # none answers: try them all again
        index = self._voters.index(self._current)
        for step in range(1, len(self._voters) + 1):
            candidate = self._voters[(index + step) % len(self._voters)]
            if not self._recently_unreachable(candidate):
                self._move_to(candidate)
                return

    def _recently_unreachable(self, voter: int) -> bool:
        failed_at = self._unreachable.get(voter)
        return failed_at is not None and self._clock() - failed_at < self._forget_after_s
