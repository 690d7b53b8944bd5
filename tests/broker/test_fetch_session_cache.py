"""The session cache: ids and shards, Kafka's eviction rules (3.6), metrics, the watch index, churn."""

from __future__ import annotations

import random
import secrets
import tracemalloc
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from broker.fetch_session import (
    FetchSession,
    FetchSessionCacheMetrics,
    FetchSessionCacheShard,
    PartitionFetchParams,
    TopicPartitionKey,
)
from broker.fetch_session.metrics import EVICTIONS, NUM_PARTITIONS_CACHED, NUM_SESSIONS
from protocol.error_codes import ErrorCode
from tests.broker.fetch_session_helpers import (
    FOO_ID,
    Harness,
    make_harness,
    params,
    tid,
    tp,
)

R = 2147483647 // 8
EVICTIONS_TOTAL = EVICTIONS + "_total"


def _populate(size: int) -> object:
    def populate(session: FetchSession) -> None:
        for p in range(size):
            session.append(tp("t", p), PartitionFetchParams(fetch_offset=0, max_bytes=100))

    return populate


def _shard(max_entries: int = 3, eviction_ms: int = 100) -> tuple[FetchSessionCacheShard, CollectorRegistry]:
    registry = CollectorRegistry()
    shard = FetchSessionCacheShard(
        0,
        max_entries,
        eviction_ms,
        range(1, R),
        FetchSessionCacheMetrics(registry),
        random.Random(7),
        lambda _session: None,
    )
    return shard, registry


def _create(
    shard: FetchSessionCacheShard, now: int, size: int, privileged: bool = False
) -> FetchSession | None:
    return shard.maybe_create_session(now, privileged, size, False, _populate(size))  # type: ignore[arg-type]


# -- ids and shards ----------------------------------------------------------------------------------


def test_new_session_ids_are_positive_with_the_real_csprng() -> None:
    shard = FetchSessionCacheShard(
        0,
        20000,
        100,
        range(1, R),
        FetchSessionCacheMetrics(CollectorRegistry()),
        secrets.SystemRandom(),
        print,
    )
    ids = set()
    for _ in range(10001):
        session_id = shard.new_session_id()
        assert 0 < session_id < R
        ids.add(session_id)
    assert len(ids) > 9990  # collisions in a range of 2**28 are rare; the live-set check covers them


class _Scripted:
    """A random source that returns a fixed sequence, to force collisions and the zero case."""

    def __init__(self, values: list[int]) -> None:
        self._values: Iterator[int] = iter(values)

    def randrange(self, start: int, stop: int) -> int:
        return next(self._values)


def test_ids_are_unique_within_a_shard_and_never_zero() -> None:
    shard, _ = _shard()
    shard._random = _Scripted([0, 5, 5, 0, 9])
    first = _create(shard, 0, 1)
    second = _create(shard, 0, 1)
    assert first is not None and second is not None
    assert (first.id, second.id) == (5, 9)


def test_each_shard_draws_ids_from_its_own_range() -> None:
    h = make_harness()
    assert h.cache.id_range_size == R == 268435455
    for k, shard in enumerate(h.cache.shards):
        assert shard.id_range == range(max(1, k * R), (k + 1) * R)
        for session_id in (shard.id_range.start, shard.id_range.stop - 1):
            assert h.cache.shard_for(session_id) is shard


@pytest.mark.parametrize("session_id", [8 * R, 2147483647, -1, -R, -R - 1, -(2**31)])
def test_ids_outside_every_shard_are_unknown_sessions_not_crashes(session_id: int) -> None:
    """Kipling deliberately answers 70 where Kafka throws IndexOutOfBounds (ids >= 8R, <= -R)."""
    h = make_harness()
    assert h.cache.shard_for(session_id) is None
    assert h.cache.get(session_id) is None and h.cache.remove(session_id) is None
    assert h.context(session_id, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    closing = h.context(session_id, 0, [(tp("foo", 0), params(0))])
    assert h.respond(closing).session_id != 0


def test_new_sessions_go_round_robin_over_the_shards() -> None:
    h = make_harness()
    shards = []
    for _ in range(20):
        response = h.respond(h.context(0, 0, [(tp("foo", 0), params(0))]))
        shards.append(response.session_id // R)
    assert shards == [k % 8 for k in range(20)]


def test_sessions_are_disabled_when_there_are_fewer_slots_than_shards() -> None:
    h = make_harness(max_slots=7)
    response = h.respond(h.context(0, 0, [(tp("foo", 0), params(0))]))
    assert response.session_id == 0 and h.cache.size == 0
    assert all(shard.max_entries == 0 for shard in h.cache.shards)


# -- eviction (3.6) ----------------------------------------------------------------------------------


def test_session_cache_worked_example() -> None:
    """FetchSessionTest.testSessionCache, step by step: shard max 3, eviction 100 ms."""
    shard, registry = _shard(max_entries=3, eviction_ms=100)
    s1 = _create(shard, 0, 10)
    s2 = _create(shard, 10, 20)
    s3 = _create(shard, 20, 30)
    assert s1 and s2 and s3 and len(shard.sessions) == 3
    assert _create(shard, 30, 40) is None  # nothing stale, nothing evictable
    assert _create(shard, 40, 5) is None
    shard.touch(s1, 200)
    s4 = _create(shard, 210, 11)  # s2 is stale: last used at 10
    assert s4 is not None and set(shard.sessions.values()) == {s1, s3, s4}
    shard.touch(s1, 400)
    shard.touch(s3, 390)
    shard.touch(s4, 400)
    s5 = _create(shard, 410, 50)  # s1 is the smallest session evictable by all (10 < 50)
    assert s5 is not None and set(shard.sessions.values()) == {s3, s4, s5}
    assert _create(shard, 410, 5) is None  # s4 (11) is bigger than 5
    s6 = _create(shard, 410, 5, privileged=True)  # a follower evicts s4, the smallest consumer session
    assert s6 is not None and set(shard.sessions.values()) == {s3, s5, s6}
    assert registry.get_sample_value(EVICTIONS_TOTAL) == 3
    assert shard.num_partitions == 30 + 50 + 5


def test_a_follower_evicts_the_smallest_consumer_session_even_a_brand_new_one() -> None:
    shard, _ = _shard(max_entries=2, eviction_ms=100)
    big = _create(shard, 0, 9)
    small = _create(shard, 0, 3)
    follower = _create(shard, 1, 50, privileged=True)
    assert follower is not None and set(shard.sessions.values()) == {big, follower}
    assert small is not None and small.id not in shard.sessions


def test_a_consumer_evicts_only_aged_and_strictly_smaller_sessions() -> None:
    shard, _ = _shard(max_entries=1, eviction_ms=100)
    old = _create(shard, 0, 5)
    assert old is not None
    assert _create(shard, 50, 6) is None  # not aged at its last touch
    shard.touch(old, 101)
    assert _create(shard, 150, 5) is None  # equal size never wins: the new key's id is 0
    assert _create(shard, 150, 4) is None  # smaller never wins
    assert _create(shard, 150, 6) is not None


def test_newly_created_sessions_become_evictable_by_all_only_when_touched_after_the_eviction_time() -> None:
    shard, _ = _shard(max_entries=1, eviction_ms=100)
    session = _create(shard, 0, 1)
    assert session is not None
    shard.touch(session, 100)  # 100 - 0 is not > 100
    assert _create(shard, 150, 99) is None
    shard.touch(session, 150)
    assert _create(shard, 160, 99) is not None


def test_a_consumer_never_evicts_a_follower_except_when_it_is_stale() -> None:
    shard, _ = _shard(max_entries=1, eviction_ms=100)
    follower = _create(shard, 0, 1, privileged=True)
    assert follower is not None
    shard.touch(follower, 200)
    assert _create(shard, 250, 1000) is None  # aged and tiny, but privileged
    assert _create(shard, 301, 1000) is not None  # unused for more than 100 ms


def test_a_follower_evicts_a_follower_only_without_consumers_and_if_aged_and_smaller() -> None:
    shard, _ = _shard(max_entries=2, eviction_ms=100)
    f1 = _create(shard, 0, 5, privileged=True)
    consumer = _create(shard, 0, 50)
    assert f1 and consumer
    shard.touch(f1, 150)
    shard.touch(consumer, 150)
    f2 = _create(shard, 160, 6, privileged=True)
    assert f2 is not None and consumer.id not in shard.sessions  # consumers go first, whatever their size
    assert _create(shard, 170, 5, privileged=True) is None  # equal size loses (the new key's id is 0)
    assert _create(shard, 170, 4, privileged=True) is None
    f3 = _create(shard, 170, 6, privileged=True)
    assert f3 is not None and f1.id not in shard.sessions  # f1: aged at its last touch, 5 < 6
    assert _create(shard, 180, 1000, privileged=True) is None  # f2 and f3 are not aged yet


def test_a_session_is_stale_only_when_unused_for_strictly_more_than_the_eviction_time() -> None:
    shard, _ = _shard(max_entries=1, eviction_ms=100)
    session = _create(shard, 0, 1, privileged=True)
    assert session is not None
    assert _create(shard, 100, 1000) is None
    assert _create(shard, 101, 1000) is not None


def test_stale_lru_session_is_evicted_whatever_its_size_or_privilege() -> None:
    shard, _ = _shard(max_entries=1, eviction_ms=100)
    assert _create(shard, 0, 10_000, privileged=True) is not None
    assert _create(shard, 101, 1) is not None


def test_session_expiration_evicts_the_least_recently_used() -> None:
    """FetchSessionTest.testFetchSessionExpiration: the session used at t=1000 survives."""
    h = make_harness(max_slots=2, num_shards=1, eviction_ms=1000)
    first = h.respond(h.context(0, 0, [(tp("foo", 0), params(0))]))
    second = h.respond(h.context(0, 0, [(tp("foo", 1), params(0))]))
    h.clock.set(1000)
    assert h.context(first.session_id, 1).error_code == ErrorCode.NONE
    h.clock.set(1501)
    third = h.respond(h.context(0, 0, [(tp("bar", 0), params(0))]))
    assert third.session_id != 0
    assert h.cache.get(first.session_id) is not None and h.cache.get(second.session_id) is None


def test_privileged_session_handling() -> None:
    """FetchSessionTest.testPrivilegedSessionHandling."""
    h = make_harness(max_slots=2, num_shards=1, eviction_ms=1000)
    data = [(tp("foo", 0), params(0))]
    follower = h.respond(h.context(0, 0, data, follower=True))
    consumer = h.respond(h.context(0, 0, data))
    h.clock.set(10)
    follower2 = h.respond(h.context(0, 0, data, follower=True))
    assert follower2.session_id != 0 and h.cache.get(consumer.session_id) is None
    assert h.cache.get(follower.session_id) is not None
    h.clock.set(20)
    assert h.respond(h.context(0, 0, data)).session_id == 0
    h.clock.set(1001)
    late = h.respond(h.context(0, 0, data))
    assert late.session_id != 0 and h.cache.get(follower.session_id) is None


def test_cached_size_and_totals_update_only_on_touch() -> None:
    """FetchSessionTest.testResizeCachedSessions."""
    shard, registry = _shard(max_entries=2, eviction_ms=100)
    session = _create(shard, 0, 3)
    assert session is not None
    assert shard.num_partitions == 3 and registry.get_sample_value(NUM_PARTITIONS_CACHED) == 3
    del session.partitions[tp("t", 0)]
    assert session.size == 2 and session.cached_size == 3 and shard.num_partitions == 3
    shard.touch(session, 1)
    assert session.cached_size == 2 and shard.num_partitions == 2
    assert registry.get_sample_value(NUM_PARTITIONS_CACHED) == 2
    assert registry.get_sample_value(NUM_SESSIONS) == 1
    shard.remove(session.id)
    assert shard.num_partitions == 0 and registry.get_sample_value(NUM_PARTITIONS_CACHED) == 0
    assert registry.get_sample_value(NUM_SESSIONS) == 0 and registry.get_sample_value(EVICTIONS_TOTAL) == 0


def test_metrics_sum_over_shards() -> None:
    h = make_harness()
    for n in range(1, 5):
        data = [(tp("foo", p), params(0)) for p in range(n)]
        h.respond(h.context(0, 0, data))
    assert h.metric(NUM_SESSIONS) == 4 == h.cache.size
    assert h.metric(NUM_PARTITIONS_CACHED) == 10 == h.cache.num_partitions
    assert h.metric(EVICTIONS_TOTAL) == 0


# -- watch index -------------------------------------------------------------------------------------


def _session(
    h: Harness, data: list[tuple[TopicPartitionKey, PartitionFetchParams]], *, version: int = 12
) -> FetchSession:
    response = h.respond(h.context(0, 0, data, version=version))
    session = h.cache.get(response.session_id)
    assert session is not None
    return session


def test_a_change_marks_the_partition_dirty_in_every_session_holding_it_and_wakes_waiters() -> None:
    h = make_harness()
    a = _session(h, [(tp("foo", 0), params(10)), (tp("foo", 1), params(10))])
    b = _session(h, [(tp("foo", 0), params(10))])
    c = _session(h, [(tp("bar", 0), params(10))])
    assert not (a.dirty or b.dirty or c.dirty)
    woken: list[str] = []
    a.waiter = lambda: woken.append("a")
    c.waiter = lambda: woken.append("c")
    h.cache.on_partition_changed(tid(FOO_ID, "foo", 0))
    assert [x.key for x in a.dirty] == [tp("foo", 0)] and [x.key for x in b.dirty] == [tp("foo", 0)]
    assert not c.dirty and woken == ["a"]
    h.cache.on_partition_changed(tp("foo", 0))  # already dirty: still wakes (a parked fetch may want bytes)
    assert woken == ["a", "a"]


def test_sessions_keyed_by_id_and_by_name_are_both_notified() -> None:
    h = make_harness()
    by_name = _session(h, [(tp("foo", 0), params(10))])
    by_id = _session(h, [(tid(FOO_ID, "foo", 0), params(10))], version=13)
    unresolved = _session(h, [(tid(FOO_ID, None, 1), params(10))], version=13)
    unresolved.dirty.clear()
    h.cache.on_partition_changed(tid(FOO_ID, "foo", 0))
    assert len(by_name.dirty) == 1 and len(by_id.dirty) == 1
    h.cache.on_partition_changed(tid(FOO_ID, "foo", 1))
    assert len(unresolved.dirty) == 1
    assert h.cache.sessions_watching(tid(FOO_ID, "foo", 0)) == 2


def test_watchers_follow_forgets_closes_and_evictions() -> None:
    h = make_harness(max_slots=1, num_shards=1, eviction_ms=100)
    session = _session(h, [(tp("foo", 0), params(0)), (tp("foo", 1), params(0))])
    assert h.cache.watched_keys == 2
    h.context(session.id, 1, [(tp("bar", 0), params(0))], [tp("foo", 0)])
    assert h.cache.sessions_watching(tp("foo", 0)) == 0 and h.cache.sessions_watching(tp("bar", 0)) == 1
    h.clock.set(1000)  # stale: the next creation evicts it
    replacement = _session(h, [(tp("baz", 0), params(0))])
    assert h.cache.get(session.id) is None and h.cache.watched_keys == 1
    h.context(replacement.id, -1)  # close
    assert h.cache.watched_keys == 0 and h.cache.size == 0


def test_a_partition_both_sent_and_forgotten_is_not_watched() -> None:
    h = make_harness()
    session = _session(h, [(tp("foo", 0), params(0))])
    h.context(session.id, 1, [(tp("bar", 0), params(0))], [tp("bar", 0)])
    assert h.cache.sessions_watching(tp("bar", 0)) == 0 and session.get(tp("bar", 0)) is None


# -- churn (@platformatic/kafka asks for a new session on every fetch) ------------------------------


@pytest.mark.slow
def test_a_client_that_creates_a_session_on_every_fetch_does_not_degrade_the_cache() -> None:
    h = make_harness()
    data = [(tp("churn", p), params(0)) for p in range(3)]
    created = 0
    footprints, memory = [], []
    tracemalloc.start()
    try:
        for n in range(100_000):
            response = h.respond(h.context(0, 0, data))
            created += response.session_id != 0
            h.clock.advance(5)
            if n % 20_000 == 19_999:
                footprints.append(sum(shard.footprint for shard in h.cache.shards))
                memory.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert h.cache.size <= 1000 and h.metric(NUM_SESSIONS) == h.cache.size
    evictions = h.metric(EVICTIONS_TOTAL)
    assert evictions > 0 and evictions == created - h.cache.size
    assert h.metric(NUM_PARTITIONS_CACHED) == 3 * h.cache.size
    assert h.cache.watched_keys == 3
    assert all(h.cache.sessions_watching(key) == h.cache.size for key, _ in data)
    # Bounded state: the ordering structures and the heap of live objects stop growing once full.
    assert max(footprints) <= 3 * 2 * 1000 + 8 * 3 * 32
    assert max(memory[1:]) - min(memory[1:]) < 512 * 1024, memory


def test_dirty_set_is_rebuilt_after_a_burst() -> None:
    """After every partition was dirty once, later fetches must not pay for the burst's table."""
    from broker.fetch_session.partition import PartitionFetchParams, TopicPartitionKey
    from broker.fetch_session.session import FetchSession
    from protocol.sentinels import ZERO_UUID

    session = FetchSession(7, privileged=False, uses_topic_ids=False, now_ms=0)
    params = PartitionFetchParams(fetch_offset=0, max_bytes=1)
    cached = [session.append(TopicPartitionKey(ZERO_UUID, "t", i), params) for i in range(10_000)]
    for c in cached:
        session.mark_dirty(c)
    assert len(session.dirty_in_order()) == 10_000
    for c in cached[10:]:
        session.mark_clean(c, c.change_count)
    before = session.dirty
    assert [c.key.partition for c in session.dirty_in_order()] == list(range(10))
    assert session.dirty is not before  # rebuilt: its table fits 10 entries again
