"""KIP-392 on the leader: which replica a consumer should fetch a partition from.

``replica.selector.class`` names the selector; unset, the leader serves every consumer and no
fetch response carries a PreferredReadReplica. :class:`RackAwareReplicaSelector` is Kafka's
``org.apache.kafka.common.replica.RackAwareReplicaSelector``:

- a client without a rack (``client.rack`` unset or empty) gets the leader;
- otherwise the replicas in the client's rack are considered; none: the leader; the leader among
  them: the leader; else the "most caught-up" of them, Kafka's ``ReplicaView.comparator()``:
  the largest log end offset, then the shortest time since it last caught up, then the largest
  broker id.

:func:`find_preferred_read_replica` is Kafka's ``ReplicaManager.findPreferredReadReplica``: only
for a consumer's fetch (never a follower's), the candidates are the leader plus the followers in
the committed ISR whose log holds the fetch offset (log start offset <= fetch offset <= log end
offset). A replica is placed by its broker's rack only when that broker is registered, unfenced and
has an endpoint on the listener the request came in on (Kafka's ``getPartitionReplicaEndpoints``);
any other is "no node" (no rack, never chosen). The answer is None when the selector picks the
leader: the leader then reads as usual, and the response names no preferred replica.

Deliberate difference: the followers' "time since last caught up" comes from their fetch states as
the leader keeps them; a follower of an idle partition in an incremental fetch session has its
state settled only when the idle stretch ends (broker/fetch_session/cache.py), so this tie-break
between two equally caught-up followers of one rack may see an older time than Kafka would.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from server_common.config.definitions import RACK_AWARE_REPLICA_SELECTOR

__all__ = [
    "ClientMetadata",
    "FollowerOffsets",
    "RackAwareReplicaSelector",
    "ReplicaSelector",
    "ReplicaView",
    "find_preferred_read_replica",
    "replica_selector",
]


class ClientMetadata(NamedTuple):
    """What a Fetch (v11+) tells about its client: Kafka's ``DefaultClientMetadata``, reduced."""

    rack_id: str
    """The client's ``client.rack``; empty when it sent none."""
    listener: str
    """The listener the request came in on: replicas are placed by their endpoints there."""


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica: Kafka's ``DefaultReplicaView`` (its node, log end offset, lag time)."""

    broker_id: int | None
    """None for Kafka's ``Node.noNode()``: the broker is unknown, fenced or not on the listener."""
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int

    def sort_key(self) -> tuple[int, int, int]:
        """Kafka's ``ReplicaView.comparator()``: the maximum is the most caught-up replica."""
        return (self.log_end_offset, -self.time_since_last_caught_up_ms, _node_id(self.broker_id))


def _node_id(broker_id: int | None) -> int:
    return -1 if broker_id is None else broker_id


class ReplicaSelector(Protocol):
    """Kafka's ``ReplicaSelector.select``: the replica the client should read from, or None."""

    def select(
        self, client: ClientMetadata, leader: ReplicaView, replicas: Collection[ReplicaView]
    ) -> ReplicaView | None: ...


class RackAwareReplicaSelector:
    """The replica in the client's rack (the leader if it is there); the leader otherwise."""

    def select(
        self, client: ClientMetadata, leader: ReplicaView, replicas: Collection[ReplicaView]
    ) -> ReplicaView | None:
        rack = client.rack_id
        if not rack:
            return leader
        same_rack = [replica for replica in replicas if replica.rack == rack]
        if not same_rack or leader in same_rack:
            return leader
        return max(same_rack, key=ReplicaView.sort_key)


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names; None when unset (the config refuses others)."""
    if class_name is None:
        return None
    if class_name == RACK_AWARE_REPLICA_SELECTOR:
        return RackAwareReplicaSelector()
    raise ValueError(f"replica.selector.class {class_name!r} is not implemented")


class FollowerOffsets(Protocol):
    """A follower's state as the leader keeps it (``replica_state.ReplicaState`` is one)."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def last_caught_up_time_ms(self) -> int: ...


def find_preferred_read_replica(
    selector: ReplicaSelector,
    client: ClientMetadata,
    *,
    leader_id: int,
    leader_log_end_offset: int,
    followers: Mapping[int, FollowerOffsets],
    isr: Iterable[int],
    racks: Mapping[int, str | None],
    fetch_offset: int,
    now_ms: int,
) -> int | None:
    """The broker id a consumer should fetch from instead of this leader, or None (read here).

    ``followers`` are the leader's fetch states of its followers; ``racks`` maps each replica's
    broker to its rack when it is reachable on the client's listener (unfenced, with an endpoint
    there); a broker missing from it is Kafka's ``Node.noNode()``.
    """
    in_sync = set(isr)
    candidates: list[ReplicaView] = []
    for replica_id, state in followers.items():
        if (
            replica_id in in_sync
            and state.log_end_offset >= fetch_offset
            and state.log_start_offset <= fetch_offset
        ):
            lag_ms = now_ms - state.last_caught_up_time_ms
            candidates.append(_view(replica_id, racks, state.log_end_offset, lag_ms))
    leader = _view(leader_id, racks, leader_log_end_offset, 0)
    candidates.append(leader)
    selected = selector.select(client, leader, candidates)
    if selected is None or selected.broker_id is None or selected == leader:
        return None
    return selected.broker_id


def _view(broker_id: int, racks: Mapping[int, str | None], log_end_offset: int, lag_ms: int) -> ReplicaView:
    if broker_id not in racks:
        return ReplicaView(None, None, log_end_offset, lag_ms)
    return ReplicaView(broker_id, racks[broker_id], log_end_offset, lag_ms)
