"""The five states of a classic group and the transitions Kafka allows between them.

=====================  ==========================================  ================================
state                  what the coordinator does                   entered from
=====================  ==========================================  ================================
Empty                  no members; offsets only; a join starts a   PreparingRebalance
                       rebalance
PreparingRebalance     parks JoinGroups until every known member   Stable, CompletingRebalance,
                       rejoined or the rebalance timeout passed;   Empty
                       heartbeats answer REBALANCE_IN_PROGRESS
CompletingRebalance    waits for the leader's SyncGroup; commits   PreparingRebalance
                       answer REBALANCE_IN_PROGRESS
Stable                 normal operation                            CompletingRebalance
Dead                   removed (deleted, expired or unloaded)      any state
=====================  ==========================================  ================================

The values are Kafka's state names, as ListGroups and DescribeGroups report them.
"""

from __future__ import annotations

from enum import StrEnum


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def may_follow(self, current: GroupState) -> bool:
        """True if a group in ``current`` may move to this state (GroupMetadata.assertValidTransition)."""
        return current in _VALID_PREVIOUS[self]


_S = GroupState
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}
