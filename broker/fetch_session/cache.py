"""The broker's fetch session cache: 8 shards with KIP-227 eviction, and the partition watch index.

Sharding and eviction are Kafka's (FetchSessionCacheShard, KAFKA-9401):

- ``max_slots`` (``max.incremental.fetch.session.cache.slots``, default 1000) is split evenly over the
  shards (integer division, so fewer slots than shards disables sessions); new sessions go to the
  shards in turn; shard k draws its ids at random from ``[max(1, k*R), (k+1)*R)`` with
  ``R = 2147483647 // shards``, so an id names its shard.
- a full shard makes room only through ``try_evict``: the least recently used session if it has sat
  unused for more than ``eviction_ms``; otherwise the smallest *evictable* session by (consumer before
  follower, size, id), if the new session's key is not smaller. A session is evictable by a follower
  if it is a consumer's or was older than ``eviction_ms`` at its last touch, and by a consumer only in
  the latter case. The new session's key uses id 0, so only strictly smaller sessions lose.

Kipling deliberately differs from Kafka in one place: an incremental or closing request whose id
lies outside every shard's range (negative, or >= shards*R) is simply an unknown session
(FETCH_SESSION_ID_NOT_FOUND, or nothing to close), where Kafka throws IndexOutOfBounds and answers
UNKNOWN_SERVER_ERROR.

Beyond Kafka, the cache keeps the watch index: for each partition, the sessions holding it, so that
``on_partition_changed`` marks it dirty in those sessions only.

Follower liveness without touching idle partitions. Kafka updates the follower's fetch state of
every partition of a follower session on every fetch. Here a partition that is clean (not dirty) in
a follower's session is not read, and the rule is: *it counts as fetched at each use of the session,
at its cached fetch offset, which was the leader's log end offset*. It is clean only while nothing
was readable past that offset and nothing changed since (an append, a high watermark, log start or
leadership change, the follower re-sending it, all make it dirty), so the follower was caught up at
each of those fetches. Kafka's bookkeeping for a run of such fetches ends in the state the *last* one
leaves, and while the partition stays clean the leader's rules cannot tell the difference (the
follower's recorded log end offset equals the leader's, so it is caught up and holds no high
watermark back). So the credit is given once, when the idle stretch ends: when the partition turns
dirty (before the change is applied to the session), when the follower re-sends or forgets it, or
when the session goes away. ``follower_idle_listener(session, cached)`` is then called with
``session.last_used_ms`` still the time of the follower's last fetch before the end of the stretch.
This costs O(1) per change, nothing per fetch, and nothing in the periodic ISR check.
"""

from __future__ import annotations

import heapq
import secrets
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

from broker.fetch_session.metrics import FetchSessionCacheMetrics
from broker.fetch_session.partition import CachedPartition, PartitionFetchParams, TopicPartitionKey
from broker.fetch_session.session import FetchSession, SessionId, SessionUpdate

IdleFollowerListener = Callable[[FetchSession, CachedPartition], None]
"""Credits the session's follower with fetches of ``cached`` up to ``session.last_used_ms``."""

DEFAULT_MAX_SLOTS = 1000
"""``max.incremental.fetch.session.cache.slots``."""
DEFAULT_EVICTION_MS = 120_000
"""Kafka's hard-coded MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS; a constructor argument here."""
NUM_SHARDS = 8
MAX_SESSION_ID = 2**31 - 1


class RandomSource(Protocol):
    """Where session ids come from: ``secrets.SystemRandom()`` in production, a seeded one in tests."""

    def randrange(self, start: int, stop: int) -> int: ...


class _IndexedMinHeap:
    """A min-heap of (key, item id) whose entries can be replaced or dropped by id.

    Stale entries are skipped lazily on peek and the heap is rebuilt when they outnumber the live
    ones, so every operation is O(log n) amortized and memory stays proportional to the live set.
    This plays the role of Kafka's TreeMaps, of which the shard only ever needs the first entry.
    """

    __slots__ = ("_current", "_heap")

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, ...], int]] = []
        self._current: dict[int, tuple[int, ...]] = {}

    def set(self, item_id: int, key: tuple[int, ...]) -> None:
        if self._current.get(item_id) == key:
            return
        self._current[item_id] = key
        heapq.heappush(self._heap, (key, item_id))
        self._maybe_compact()

    def discard(self, item_id: int) -> None:
        if self._current.pop(item_id, None) is not None:
            self._maybe_compact()

    def peek(self) -> tuple[tuple[int, ...], int] | None:
        heap = self._heap
        while heap:
            key, item_id = heap[0]
            if self._current.get(item_id) == key:
                return key, item_id
            heapq.heappop(heap)
        return None

    def __len__(self) -> int:
        return len(self._current)

    @property
    def footprint(self) -> int:
        """Entries held, stale ones included (bounded by about twice the live ones)."""
        return len(self._heap)

    def _maybe_compact(self) -> None:
        if len(self._heap) > 2 * len(self._current) + 32:
            self._heap = [(key, item_id) for item_id, key in self._current.items()]
            heapq.heapify(self._heap)


class FetchSessionCacheShard:
    """One shard: its sessions, its LRU and evictable orders, and its partition total."""

    def __init__(
        self,
        shard_num: int,
        max_entries: int,
        eviction_ms: int,
        id_range: range,
        metrics: FetchSessionCacheMetrics,
        random_source: RandomSource,
        on_removed: Callable[[FetchSession], None],
    ) -> None:
        self.shard_num = shard_num
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.id_range = id_range
        self.sessions: dict[SessionId, FetchSession] = {}
        self.num_partitions = 0
        """Sum of the sessions' cached sizes (Kafka's totalPartitions; refreshed on touch)."""
        self._metrics = metrics
        self._random = random_source
        self._on_removed = on_removed
        self._last_used = _IndexedMinHeap()
        self._evictable_by_all = _IndexedMinHeap()
        self._evictable_by_privileged = _IndexedMinHeap()

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(SessionId(session_id))

    def new_session_id(self) -> SessionId:
        """A random id of this shard's range that no live session uses (never 0)."""
        while True:
            candidate = SessionId(self._random.randrange(self.id_range.start, self.id_range.stop))
            if candidate != 0 and candidate not in self.sessions:
                return candidate

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        populate: Callable[[FetchSession], None],
        replica_id: int = -1,
    ) -> FetchSession | None:
        """Create and cache a session of ``size`` partitions if there is room or room can be made.

        ``populate`` fills the session's partitions; it runs only when creation succeeds, so that a
        refused creation allocates nothing. ``replica_id`` is the follower's id for a follower session.
        """
        if len(self.sessions) >= self.max_entries and not self.try_evict(privileged, size, now_ms):
            return None
        session = FetchSession(
            self.new_session_id(), privileged, uses_topic_ids, now_ms, replica_id=replica_id
        )
        populate(session)
        self.sessions[session.id] = session
        self._metrics.sessions_changed(1, session.privileged)
        self.touch(session, now_ms)
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record a use at ``now_ms``: re-key the LRU and evictable orders, refresh the cached size."""
        session.last_used_ms = now_ms
        self._last_used.set(session.id, (now_ms, session.id))
        old_size = max(session.cached_size, 0)
        session.cached_size = session.size
        key = session.eviction_key()
        aged = now_ms - session.creation_ms > self.eviction_ms
        self._set_membership(self._evictable_by_privileged, session, key, aged or not session.privileged)
        self._set_membership(self._evictable_by_all, session, key, aged)
        delta = session.cached_size - old_size
        if delta:
            self.num_partitions += delta
            self._metrics.partitions_changed(delta, session.privileged)

    def try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a new session of (``privileged``, ``size``), following Kafka's two rules."""
        oldest = self._last_used.peek()
        if oldest is None:
            return False
        (last_used_ms, victim_id), _ = oldest
        if now_ms - last_used_ms > self.eviction_ms:
            return self._evict(SessionId(victim_id))
        candidates = self._evictable_by_privileged if privileged else self._evictable_by_all
        smallest = candidates.peek()
        if smallest is None or (privileged, size, 0) < smallest[0]:
            return False
        return self._evict(SessionId(smallest[1]))

    def remove(self, session_id: int) -> FetchSession | None:
        """Drop a session from every structure; returns it, or None if it was not cached."""
        session = self.sessions.pop(SessionId(session_id), None)
        if session is None:
            return None
        self._last_used.discard(session.id)
        self._evictable_by_all.discard(session.id)
        self._evictable_by_privileged.discard(session.id)
        cached_size = max(session.cached_size, 0)
        self.num_partitions -= cached_size
        self._metrics.sessions_changed(-1, session.privileged)
        if cached_size:
            self._metrics.partitions_changed(-cached_size, session.privileged)
        self._on_removed(session)
        return session

    @property
    def footprint(self) -> int:
        """Entries in the shard's ordering structures, stale ones included."""
        orders = (self._last_used, self._evictable_by_all, self._evictable_by_privileged)
        return sum(order.footprint for order in orders)

    def _evict(self, session_id: SessionId) -> bool:
        self.remove(session_id)
        self._metrics.session_evicted()
        return True

    @staticmethod
    def _set_membership(
        order: _IndexedMinHeap, session: FetchSession, key: tuple[bool, int, int], member: bool
    ) -> None:
        if member:
            order.set(session.id, key)
        else:
            order.discard(session.id)


class FetchSessionCache:
    """The broker's sessions, over ``num_shards`` shards, plus the index of who watches what."""

    def __init__(
        self,
        metrics: FetchSessionCacheMetrics,
        *,
        max_slots: int = DEFAULT_MAX_SLOTS,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        random_source: RandomSource | None = None,
        num_shards: int = NUM_SHARDS,
    ) -> None:
        source = random_source if random_source is not None else secrets.SystemRandom()
        self.id_range_size = MAX_SESSION_ID // num_shards
        per_shard = max_slots // num_shards
        self.shards = [
            FetchSessionCacheShard(
                k, per_shard, eviction_ms, self._id_range(k), metrics, source, self._unwatch_session
            )
            for k in range(num_shards)
        ]
        self._next_shard = 0
        self._watchers: dict[Hashable, dict[FetchSession, CachedPartition]] = {}
        self.follower_idle_listener: IdleFollowerListener | None = None
        """Called when an idle stretch of a follower session's partition ends (module docstring)."""

    # -- sessions ---------------------------------------------------------------------------------

    def shard_for(self, session_id: int) -> FetchSessionCacheShard | None:
        """The shard whose id range holds ``session_id``; None outside every range (see module doc)."""
        if session_id <= 0:
            return None
        index = session_id // self.id_range_size
        return self.shards[index] if index < len(self.shards) else None

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_for(session_id)
        return shard.get(session_id) if shard is not None else None

    def remove(self, session_id: int) -> FetchSession | None:
        shard = self.shard_for(session_id)
        return shard.remove(session_id) if shard is not None else None

    def touch(self, session: FetchSession, now_ms: int) -> None:
        shard = self.shard_for(session.id)
        if shard is not None and shard.get(session.id) is session:
            shard.touch(session, now_ms)

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        uses_topic_ids: bool,
        size: int,
        populate: Callable[[FetchSession], None],
        replica_id: int = -1,
    ) -> FetchSession | None:
        """Create a session on the next shard in turn (see ``FetchSessionCacheShard``)."""
        shard = self.shards[self._next_shard]
        self._next_shard = (self._next_shard + 1) % len(self.shards)
        session = shard.maybe_create_session(now_ms, privileged, size, uses_topic_ids, populate, replica_id)
        if session is not None:
            for cached in session.partitions.values():
                self._watch(session, cached)
        return session

    def update_session(
        self,
        session: FetchSession,
        fetch_data: Iterable[tuple[TopicPartitionKey, PartitionFetchParams]],
        to_forget: Iterable[TopicPartitionKey],
    ) -> SessionUpdate:
        """``FetchSession.update``, keeping the watch index in step with the partitions.

        In a follower's session, the idle stretch of each clean partition the request sends or
        forgets ends first, with the parameters it was idle at (O(request)).
        """
        if self.follower_idle_listener is not None and session.replica_id >= 0:
            fetch_data, to_forget = list(fetch_data), list(to_forget)  # read twice
            self._end_idle_stretches(session, (key for key, _ in fetch_data))
            self._end_idle_stretches(session, to_forget)
        update = session.update(fetch_data, to_forget)
        for cached in update.added:
            self._watch(session, cached)
        for cached in update.removed:
            self._unwatch(session, cached)
        return update

    @property
    def size(self) -> int:
        return sum(len(shard.sessions) for shard in self.shards)

    @property
    def num_partitions(self) -> int:
        return sum(shard.num_partitions for shard in self.shards)

    # -- watch index ------------------------------------------------------------------------------

    def on_partition_changed(self, key: TopicPartitionKey) -> None:
        """Mark ``key`` dirty in every session holding it and wake their waiters: O(sessions watching).

        Call it when the partition's log end offset, high watermark, last stable offset, log start
        offset, leader epoch or leadership changes. Pass a key with both the topic id and the name
        the broker knows: sessions keyed by id (v13+) and by name (v12 and older) are both notified.
        """
        for watch_key in _notified_watch_keys(key):
            watching = self._watchers.get(watch_key)
            if watching:
                for session, cached in tuple(watching.items()):
                    idle = session.is_idle_follower_partition(cached)
                    session.partition_changed(cached)
                    if idle:
                        self._end_idle(session, cached)

    def sessions_watching(self, key: TopicPartitionKey) -> int:
        """How many sessions hold ``key`` (diagnostics and tests)."""
        return sum(len(self._watchers.get(wk, ())) for wk in _notified_watch_keys(key))

    @property
    def watched_keys(self) -> int:
        """Entries in the watch index (bounded by the partitions cached)."""
        return len(self._watchers)

    def _watch(self, session: FetchSession, cached: CachedPartition) -> None:
        self._watchers.setdefault(cached.key.watch_key, {})[session] = cached

    def _unwatch(self, session: FetchSession, cached: CachedPartition) -> None:
        watch_key = cached.key.watch_key
        watching = self._watchers.get(watch_key)
        if watching is not None and watching.get(session) is cached:
            del watching[session]
            if not watching:
                del self._watchers[watch_key]

    def _unwatch_session(self, session: FetchSession) -> None:
        """A session left the cache: end its idle stretches (O(size), as the unwatching), unwatch."""
        for cached in tuple(session.partitions.values()):
            if session.is_idle_follower_partition(cached):
                self._end_idle(session, cached)
            self._unwatch(session, cached)

    def _end_idle_stretches(self, session: FetchSession, keys: Iterable[TopicPartitionKey]) -> None:
        for key in keys:
            cached = session.get(key)
            if cached is not None and session.is_idle_follower_partition(cached):
                self._end_idle(session, cached)

    def _end_idle(self, session: FetchSession, cached: CachedPartition) -> None:
        """Marked dirty first (in ``on_partition_changed``), so a listener that reports a change of
        the same partition does not end the same stretch twice."""
        listener = self.follower_idle_listener
        if listener is not None:
            listener(session, cached)

    def _id_range(self, shard_num: int) -> range:
        start = shard_num * self.id_range_size
        return range(max(1, start), start + self.id_range_size)


def _notified_watch_keys(key: TopicPartitionKey) -> list[Hashable]:
    keys: list[Hashable] = []
    if key.has_topic_id:
        keys.append((key.topic_id, key.partition))
    if key.topic_name is not None:
        keys.append((key.topic_name, key.partition))
    return keys
