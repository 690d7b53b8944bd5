"""A KIP-227 fetch session: the partitions a client fetches, remembered between its requests.

Besides Kafka's fields (id, epoch, privileged, creation and last-used times, ordered partitions),
a kipling session keeps what makes an incremental fetch cost O(changed):

- every ``CachedPartition`` has a sequence number, renewed when it is added or moved to the tail,
  so sorting any subset by it gives the session order restricted to that subset;
- a *dirty* set: the partitions an incremental fetch must evaluate. A partition is dirty when
  something it reports may have changed since it was last evaluated (the cache marks it on log and
  leadership changes; a request marks the partitions it sends). Every other partition would be read
  by Kafka, found unchanged and left out, so skipping it changes nothing in the response;
- an optional ``waiter``, called whenever a watched partition changes, so that a parked long poll
  for an idle incremental fetch wakes in O(1) without watching every partition itself;
- for a follower's (privileged) session, the follower's broker id (``replica_id``), so that the
  leader can credit the follower with fetches of the partitions the session holds idle: a clean
  partition of a follower session is one the follower fetched at each use of the session, at its
  cached offset, which was the leader's log end offset (see ``FetchSessionCache``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import NewType

from broker.fetch_session.partition import (
    CachedPartition,
    PartitionFetchParams,
    TopicPartitionKey,
)
from protocol.sentinels import UNKNOWN_OFFSET

SessionId = NewType("SessionId", int)
Epoch = NewType("Epoch", int)

INVALID_SESSION_ID = SessionId(0)
"""No session: sessionless requests, refused creations and error responses carry it."""
INITIAL_EPOCH = Epoch(0)
"""A full request that asks for a new session."""
FINAL_EPOCH = Epoch(-1)
"""A full request that wants no session (and closes the one it names)."""
MAX_EPOCH = Epoch(2**31 - 1)

_BY_SEQ = attrgetter("seq")
_SHRINK_FACTOR = 8
"""Rebuild the dirty set once it holds fewer than 1/8 of the entries its table was sized for."""


def next_epoch(epoch: int) -> Epoch:
    """The epoch after ``epoch``: +1, wrapping from the int32 maximum to 1 (0 means "full").

    Any negative epoch is followed by FINAL_EPOCH, as in Kafka's FetchMetadata.nextEpoch.
    """
    if epoch < 0:
        return FINAL_EPOCH
    if epoch >= MAX_EPOCH:
        return Epoch(1)
    return Epoch(epoch + 1)


def is_full_request(epoch: int) -> bool:
    """Epoch 0 or -1 asks for a full fetch; any other value (even -2) is incremental."""
    return epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    """What ``FetchSession.update`` changed, so the cache can maintain its watch index."""

    added: list[CachedPartition]
    removed: list[CachedPartition]


class FetchSession:
    """A cached session. Identity-hashed: the cache's watch index keys on the object."""

    __slots__ = (
        "_dirty_peak",
        "_next_seq",
        "cached_size",
        "creation_ms",
        "dirty",
        "epoch",
        "id",
        "last_used_ms",
        "partitions",
        "privileged",
        "replica_id",
        "uses_topic_ids",
        "waiter",
    )

    def __init__(
        self,
        session_id: SessionId,
        privileged: bool,
        uses_topic_ids: bool,
        now_ms: int,
        *,
        replica_id: int = -1,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        """True for follower sessions, which eviction protects over consumer sessions."""
        self.replica_id = replica_id
        """The follower's broker id for a follower session (the request's ReplicaId), else -1."""
        self.uses_topic_ids = uses_topic_ids
        """Fixed at creation (request v13+); a request of the other kind gets 106."""
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch: Epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1
        """The size the cache last accounted for (eviction key, metrics); refreshed on touch."""
        self.partitions: dict[TopicPartitionKey, CachedPartition] = {}
        self.dirty: set[CachedPartition] = set()
        self._dirty_peak = 0
        """The largest dirty set seen since the set was last rebuilt (its table size)."""
        self.waiter: Callable[[], None] | None = None
        """Called (by the cache) on every change of one of this session's partitions."""
        self._next_seq = 0

    @property
    def size(self) -> int:
        return len(self.partitions)

    def get(self, key: TopicPartitionKey) -> CachedPartition | None:
        return self.partitions.get(key)

    def eviction_key(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: consumers before followers, then smaller, then lower id."""
        return (self.privileged, self.cached_size, self.id)

    def append(
        self,
        key: TopicPartitionKey,
        params: PartitionFetchParams,
        high_watermark: int = UNKNOWN_OFFSET,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> CachedPartition:
        """Add a partition at the tail of the session order (the caller has checked it is new)."""
        cached = CachedPartition(key, params, self._take_seq(), high_watermark, log_start_offset)
        self.partitions[key] = cached
        return cached

    def update(
        self,
        fetch_data: Iterable[tuple[TopicPartitionKey, PartitionFetchParams]],
        to_forget: Iterable[TopicPartitionKey],
    ) -> SessionUpdate:
        """Apply an incremental request: adds and parameter updates first, then the forgets.

        A cached partition keeps its place and gets the new parameters; a new one joins the tail with
        an invalid baseline (so it is reported next). Every sent partition becomes dirty. Forgets
        come last, so a partition both sent and forgotten ends up removed, as in Kafka.
        """
        added: list[CachedPartition] = []
        for key, params in fetch_data:
            cached = self.partitions.get(key)
            if cached is None:
                cached = self.append(key, params)
                added.append(cached)
            else:
                cached.update_request_params(params)
            self.mark_dirty(cached)
        removed: list[CachedPartition] = []
        for key in to_forget:
            cached = self.partitions.pop(key, None)
            if cached is not None:
                self.dirty.discard(cached)
                removed.append(cached)
        return SessionUpdate(added, removed)

    def mark_dirty(self, cached: CachedPartition) -> None:
        cached.change_count += 1
        self.dirty.add(cached)

    def partition_changed(self, cached: CachedPartition) -> None:
        """Something the client may see changed: mark dirty and wake a parked fetch, if any.

        The waiter runs even if the partition was already dirty: a parked fetch may be waiting
        for more bytes on a partition that already had some.
        """
        self.mark_dirty(cached)
        if self.waiter is not None:
            self.waiter()

    def is_idle_follower_partition(self, cached: CachedPartition) -> bool:
        """True when ``cached`` sits clean in a follower's session: each use of the session counts as
        a fetch of it at its cached offset, which equals the leader's log end offset."""
        return self.replica_id >= 0 and cached not in self.dirty

    def mark_clean(self, cached: CachedPartition, seen_change_count: int) -> None:
        """Leave the dirty set, unless the partition changed again after it was read."""
        if cached.change_count == seen_change_count:
            self.dirty.discard(cached)

    def move_to_tail(self, cached: CachedPartition) -> None:
        """Kafka's rotation: a partition that returned records goes to the end of the order."""
        cached.seq = self._take_seq()

    def dirty_in_order(self) -> list[CachedPartition]:
        """The dirty partitions in session order: O(Δ log Δ).

        A Python set never shrinks its table, and iterating it walks the whole table: after a
        burst that made every partition dirty (a consumer catching up), each later fetch would
        pay for the burst's size. Rebuilding the set once it is far below its table keeps the
        cost proportional to what is dirty now.
        """
        dirty = self.dirty
        if len(dirty) * _SHRINK_FACTOR < self._dirty_peak:
            self.dirty = dirty = set(dirty)
            self._dirty_peak = len(dirty)
        elif len(dirty) > self._dirty_peak:
            self._dirty_peak = len(dirty)
        return sorted(dirty, key=_BY_SEQ)

    def partitions_in_order(self) -> list[CachedPartition]:
        """Every partition in session order: O(N log N), for diagnostics and tests only."""
        return sorted(self.partitions.values(), key=_BY_SEQ)

    def _take_seq(self) -> int:
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, epoch={self.epoch}, privileged={self.privileged}, "
            f"replica_id={self.replica_id}, "
            f"size={self.size}, dirty={len(self.dirty)}, last_used={self.last_used_ms})"
        )
