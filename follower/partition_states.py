"""The partitions of one fetcher, indexed so that a round costs O(changed), not O(partitions).

Kafka's PartitionStates is an ordered map that every round walks whole: to find the truncating
partitions, to build the fetch request, to skip delayed ones. A follower with thousands of idle
partitions would spend its time re-reading them. Here the states live in a dict and three small
indexes follow every update: the partitions ready for fetch with their request parameters (in fetch
order, so fairness is Kafka's: a partition that got data or was delayed moves to the end), the
truncating ones, and the delayed ones (checked for expiry each round). A *changed* set records the
partitions whose request parameters changed, joined or left since the endpoint last built a
request, which is exactly what an incremental fetch session must send (DESIGN.md "The follower side
too").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import ItemsView, Mapping, Set
from types import MappingProxyType

from follower.fetch_state import PartitionFetchState, ReplicaState, TopicPartition
from follower.leader_endpoint import FetchPartitionParams


class PartitionStates:
    """Fetch states by partition plus the ready/truncating/delayed indexes and the changed set."""

    def __init__(self) -> None:
        self._states: dict[TopicPartition, PartitionFetchState] = {}
        self._ready: OrderedDict[TopicPartition, FetchPartitionParams] = OrderedDict()
        self._truncating: dict[TopicPartition, None] = {}
        self._delayed: dict[TopicPartition, None] = {}
        """Ordered sets (dicts), so rounds handle partitions in the order they were added."""
        self._changed: set[TopicPartition] = set()

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, tp: object) -> bool:
        return tp in self._states

    def get(self, tp: TopicPartition) -> PartitionFetchState | None:
        return self._states.get(tp)

    def items(self) -> ItemsView[TopicPartition, PartitionFetchState]:
        return self._states.items()

    def update(
        self,
        tp: TopicPartition,
        state: PartitionFetchState,
        params: FetchPartitionParams | None,
        move_to_end: bool = False,
    ) -> None:
        """Store ``state``; ``params`` are its request fields if it is ready for fetch, else None."""
        self._states[tp] = state
        _toggle(self._truncating, tp, state.state is ReplicaState.TRUNCATING)
        _toggle(self._delayed, tp, state.delayed_until_ms is not None)
        if params is None:
            if self._ready.pop(tp, None) is not None:
                self._changed.add(tp)
            return
        if self._ready.get(tp) != params:
            self._changed.add(tp)
        self._ready[tp] = params
        if move_to_end:
            self._ready.move_to_end(tp)

    def remove(self, tp: TopicPartition) -> PartitionFetchState | None:
        """Forget ``tp``; its state, or None if it was not here."""
        state = self._states.pop(tp, None)
        if state is None:
            return None
        self._truncating.pop(tp, None)
        self._delayed.pop(tp, None)
        if self._ready.pop(tp, None) is not None:
            self._changed.add(tp)
        return state

    def truncating(self, now_ms: int) -> list[TopicPartition]:
        """The partitions in state TRUNCATING whose delay (if any) is over."""
        return [tp for tp in self._truncating if self._states[tp].is_truncating(now_ms)]

    def expired_delays(self, now_ms: int) -> list[TopicPartition]:
        """The delayed partitions whose deadline has passed (the caller clears their delay)."""
        return [tp for tp in self._delayed if not self._states[tp].is_delayed(now_ms)]

    @property
    def ready(self) -> Mapping[TopicPartition, FetchPartitionParams]:
        """The partitions ready for fetch, in fetch order, with their request fields (read-only view)."""
        return MappingProxyType(self._ready)

    def take_changed(self) -> Set[TopicPartition]:
        """The partitions changed since the last call, and start a new change set."""
        changed, self._changed = frozenset(self._changed), set()
        return changed

    def mark_changed(self, tp: TopicPartition) -> None:
        """Offer ``tp`` to the next request again (the endpoint could not take the last change set)."""
        self._changed.add(tp)

    @property
    def changed(self) -> Set[TopicPartition]:
        return frozenset(self._changed)

    @property
    def delayed_count(self) -> int:
        return len(self._delayed)


def _toggle(members: dict[TopicPartition, None], tp: TopicPartition, present: bool) -> None:
    if present:
        members.setdefault(tp)
    else:
        members.pop(tp, None)
