"""The epoch states of one quorum member and the one table of their legal transitions.

A node is always in exactly one of these states (Kafka's ``EpochState`` subclasses). Each is a frozen
value holding what identifies it: the epoch, whom this node voted for in it, who leads it. What is
persisted (:class:`ElectionState`, Kafka's ``quorum-state`` file) is derived from the state, so a
transition and the record of it can never disagree. Timers and replication progress are volatile and
live in the node, not here.

Every transition goes through :func:`check_transition`, which raises on anything the table does not
allow: one place to read (and to audit) the protocol's state machine.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class IllegalStateTransition(RuntimeError):
    """A transition the quorum protocol does not allow: always a bug, never a network condition."""


@dataclass(frozen=True)
class ElectionState:
    """What survives a restart: the epoch, this node's vote in it, and its leader if known."""

    epoch: int
    voted_id: int | None
    leader_id: int | None


class Kind(enum.Enum):
    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


@dataclass(frozen=True)
class EpochState:
    """Base of the states: ``epoch`` plus the persisted election record."""

    epoch: int

    @property
    def kind(self) -> Kind:
        raise NotImplementedError

    @property
    def election(self) -> ElectionState:
        raise NotImplementedError


@dataclass(frozen=True)
class Unattached(EpochState):
    """No leader known for ``epoch``; possibly voted in it (then votes for nobody else)."""

    voted_id: int | None = None

    @property
    def kind(self) -> Kind:
        return Kind.UNATTACHED

    @property
    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.voted_id, None)


@dataclass(frozen=True)
class Prospective(EpochState):
    """Asking for pre-votes (KIP-996) without bumping the epoch; keeps the vote and leader it had."""

    voted_id: int | None = None
    leader_id: int | None = None

    @property
    def kind(self) -> Kind:
        return Kind.PROSPECTIVE

    @property
    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.voted_id, self.leader_id)


@dataclass(frozen=True)
class Candidate(EpochState):
    """Asking for votes in ``epoch``, having voted for itself."""

    local_id: int

    @property
    def kind(self) -> Kind:
        return Kind.CANDIDATE

    @property
    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, None)


@dataclass(frozen=True)
class Leader(EpochState):
    """Won ``epoch``."""

    local_id: int

    @property
    def kind(self) -> Kind:
        return Kind.LEADER

    @property
    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, self.local_id)


@dataclass(frozen=True)
class Follower(EpochState):
    """Knows ``leader_id`` leads ``epoch`` and fetches from it."""

    leader_id: int
    voted_id: int | None = None

    @property
    def kind(self) -> Kind:
        return Kind.FOLLOWER

    @property
    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.voted_id, self.leader_id)


@dataclass(frozen=True)
class Resigned(EpochState):
    """Led ``epoch`` and gave it up (shutdown, lost quorum, or restarted as leader); waits for a successor."""

    local_id: int

    @property
    def kind(self) -> Kind:
        return Kind.RESIGNED

    @property
    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, self.local_id)


class EpochRule(enum.Enum):
    SAME = "same epoch"
    HIGHER = "higher epoch"
    SAME_OR_HIGHER = "same or higher epoch"
    NEXT = "epoch + 1"

    def allows(self, old: int, new: int) -> bool:
        if self is EpochRule.SAME:
            return new == old
        if self is EpochRule.HIGHER:
            return new > old
        if self is EpochRule.SAME_OR_HIGHER:
            return new >= old
        return new == old + 1


_U, _P, _C, _L, _F, _R = Kind
TRANSITIONS: dict[tuple[Kind, Kind], EpochRule] = {
    # Unattached: to itself only to record a vote (or on a higher epoch); to Prospective on timeout.
    (_U, _U): EpochRule.SAME_OR_HIGHER,
    (_U, _P): EpochRule.SAME,
    (_U, _F): EpochRule.SAME_OR_HIGHER,
    # Prospective: a pre-vote majority makes it a Candidate of the next epoch.
    (_P, _U): EpochRule.SAME_OR_HIGHER,
    (_P, _C): EpochRule.NEXT,
    (_P, _F): EpochRule.SAME_OR_HIGHER,
    # Candidate: wins, or after a lost election backs off into Prospective.
    (_C, _L): EpochRule.SAME,
    (_C, _P): EpochRule.SAME,
    (_C, _U): EpochRule.HIGHER,
    (_C, _F): EpochRule.SAME_OR_HIGHER,
    # Leader: resigns in its epoch, or steps down on a higher one.
    (_L, _R): EpochRule.SAME,
    (_L, _U): EpochRule.HIGHER,
    (_L, _F): EpochRule.HIGHER,
    # Follower: fetch timeout -> Prospective; one leader per epoch, so another leader means a higher epoch.
    (_F, _P): EpochRule.SAME,
    (_F, _U): EpochRule.HIGHER,
    (_F, _F): EpochRule.HIGHER,
    # Resigned: waits for a successor, or competes again after its election timeout.
    (_R, _P): EpochRule.SAME,
    (_R, _U): EpochRule.HIGHER,
    (_R, _F): EpochRule.HIGHER,
}


def check_transition(old: EpochState, new: EpochState) -> None:
    """Raise :class:`IllegalStateTransition` unless the table allows ``old`` -> ``new``."""
    rule = TRANSITIONS.get((old.kind, new.kind))
    if rule is None:
        raise IllegalStateTransition(
            f"{old.kind.value} -> {new.kind.value} is not a transition: {old} -> {new}"
        )
    if not rule.allows(old.epoch, new.epoch):
        raise IllegalStateTransition(
            f"{old.kind.value} -> {new.kind.value} needs the {rule.value}: {old} -> {new}"
        )
    if old.kind is Kind.UNATTACHED and new.kind is Kind.UNATTACHED and new.epoch == old.epoch:
        if not (isinstance(old, Unattached) and isinstance(new, Unattached)) or old.voted_id is not None:
            raise IllegalStateTransition(
                f"Unattached in epoch {old.epoch} may only record a first vote: {old} -> {new}"
            )
        if new.voted_id is None:
            raise IllegalStateTransition(
                f"Unattached -> Unattached in the same epoch records no vote: {old} -> {new}"
            )
    if (
        isinstance(old, Prospective)
        and isinstance(new, Unattached)
        and new.epoch == old.epoch
        and (old.leader_id is not None or old.voted_id not in (None, new.voted_id))
    ):
        raise IllegalStateTransition(f"a Prospective cannot forget its leader or vote: {old} -> {new}")
    if isinstance(new, Follower) and new.epoch == old.epoch:
        known = old.election.leader_id
        if known is not None and known != new.leader_id:
            raise IllegalStateTransition(f"epoch {old.epoch} already has leader {known}: {old} -> {new}")
