"""The O(changed) fetch sessions against a naive model that works the way Apache Kafka does.

The model (``NaiveFetchManager``) keeps each session's partitions in a plain list, reads *every*
partition of a session on every incremental fetch, filters them with the inclusion rules, rotates
partitions with records to the tail, and evicts by scanning the shard linearly. A hypothesis state
machine sends the same random full, incremental, closing and bogus requests to both, changes
partitions behind their backs (appends, log start, errors, leader epochs, preferred replicas), moves
the clock and learns or forgets topic ids, and asserts after every step that both gave the same
contexts, the same responses (partitions, order, session ids, errors) and hold the same sessions.
It also checks the dirty-set invariant directly: a partition that is not dirty, read now, would
report nothing.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.fetch_session import (
    FetchContext,
    FetchResponseParts,
    FetchSession,
    FullFetchContext,
    IncrementalFetchContext,
    PartitionFetchParams,
    PartitionFetchResult,
    SessionErrorContext,
    TopicPartitionKey,
    next_epoch,
)
from broker.fetch_session.metrics import (
    EVICTIONS,
    NUM_PARTITIONS_CACHED,
    NUM_PRIVILEGED_PARTITIONS_CACHED,
    NUM_PRIVILEGED_SESSIONS,
    NUM_SESSIONS,
)
from protocol.error_codes import ErrorCode
from tests.broker.fetch_session_helpers import (
    PartitionState,
    erroneous,
    make_harness,
    read_partition_state,
    tid,
    tp,
)

MAX_ID = 2**31 - 1
TOPIC_IDS = {"a": uuid.UUID(int=0xA), "b": uuid.UUID(int=0xB)}
NUM_SHARDS, MAX_SLOTS, EVICTION_MS, SEED = 2, 4, 500, 11
Results = dict[TopicPartitionKey, PartitionFetchResult]
FetchData = list[tuple[TopicPartitionKey, PartitionFetchParams]]
Names = dict[uuid.UUID, str]
Normalized = list[tuple[uuid.UUID, str | None, int, PartitionFetchResult]]
Response = tuple[int, int, Normalized]
Ref = tuple[str, int]
Entries = list[tuple[Ref, PartitionFetchParams]]

# -- the naive model -----------------------------------------------------------------------------------


@dataclass
class NaivePartition:
    key: TopicPartitionKey
    params: PartitionFetchParams
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass
class NaiveSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int = 1
    cached_size: int = -1
    partitions: list[NaivePartition] = field(default_factory=list)
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def find(self, key: TopicPartitionKey) -> NaivePartition | None:
        return next((p for p in self.partitions if p.key == key), None)


class NaiveCache:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.range_size = MAX_ID // NUM_SHARDS
        self.shards: list[dict[int, NaiveSession]] = [{} for _ in range(NUM_SHARDS)]
        self.max_entries = MAX_SLOTS // NUM_SHARDS
        self.next_shard = 0
        self.evictions = 0

    def shard(self, session_id: int) -> dict[int, NaiveSession] | None:
        k = session_id // self.range_size
        return self.shards[k] if session_id > 0 and k < NUM_SHARDS else None

    def get(self, session_id: int) -> NaiveSession | None:
        shard = self.shard(session_id)
        return shard.get(session_id) if shard is not None else None

    def remove(self, session_id: int) -> None:
        shard = self.shard(session_id)
        if shard is not None:
            shard.pop(session_id, None)

    def touch(self, session: NaiveSession, now: int) -> None:
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        aged = now - session.creation_ms > EVICTION_MS
        session.evictable_by_all = aged
        session.evictable_by_privileged = aged or not session.privileged

    def try_evict(self, shard: dict[int, NaiveSession], privileged: bool, size: int, now: int) -> bool:
        if not shard:
            return False
        lru = min(shard.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - lru.last_used_ms > EVICTION_MS:
            return self._evict(shard, lru)
        candidates = [
            s for s in shard.values() if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
            return False
        return self._evict(shard, victim)

    def _evict(self, shard: dict[int, NaiveSession], victim: NaiveSession) -> bool:
        del shard[victim.id]
        self.evictions += 1
        return True

    def create(
        self, now: int, privileged: bool, uses_ids: bool, partitions: list[NaivePartition]
    ) -> NaiveSession | None:
        k = self.next_shard
        self.next_shard = (k + 1) % NUM_SHARDS
        shard = self.shards[k]
        if len(shard) >= self.max_entries and not self.try_evict(shard, privileged, len(partitions), now):
            return None
        start = k * self.range_size
        while True:
            candidate = self.rng.randrange(max(1, start), start + self.range_size)
            if candidate != 0 and candidate not in shard:
                break
        session = NaiveSession(candidate, privileged, uses_ids, now, now, partitions=partitions)
        shard[candidate] = session
        self.touch(session, now)
        return session

    def sessions(self) -> list[NaiveSession]:
        return [s for shard in self.shards for s in shard.values()]


def _must_respond(cached: NaivePartition, result: PartitionFetchResult) -> bool:
    """Kafka's CachedPartition.maybeUpdateResponseData, written out again, always updating."""
    respond = result.records_size > 0
    if cached.high_watermark != result.high_watermark:
        respond = True
        cached.high_watermark = result.high_watermark
    if cached.log_start_offset != result.log_start_offset:
        respond = True
        cached.log_start_offset = result.log_start_offset
    if result.preferred_read_replica != -1:
        respond = True
    if result.error_code != 0:
        cached.high_watermark = -1
        respond = True
    return respond or result.diverging_epoch >= 0


@dataclass
class NaiveContext:
    kind: str
    error: int = 0
    fetch_data: dict[TopicPartitionKey, PartitionFetchParams] = field(default_factory=dict)
    session: NaiveSession | None = None
    expected_epoch: int = 0
    privileged: bool = False
    uses_ids: bool = False


Pending = tuple[FetchContext, NaiveContext, Names]


class NaiveFetchManager:
    def __init__(self, cache: NaiveCache, clock: list[int]) -> None:
        self.cache = cache
        self.clock = clock

    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        data: list[tuple[TopicPartitionKey, PartitionFetchParams]],
        forget: list[TopicPartitionKey],
        follower: bool,
        names: dict[uuid.UUID, str],
    ) -> NaiveContext:
        data = [(k.resolved(names.get), p) for k, p in data]
        if epoch in (0, -1):
            if session_id != 0:
                self.cache.remove(session_id)
            kind = "sessionless" if epoch == -1 else "full"
            return NaiveContext(kind, fetch_data=dict(data), privileged=follower, uses_ids=version >= 13)
        session = self.cache.get(session_id)
        if session is None:
            return NaiveContext("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return NaiveContext("error", ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            return NaiveContext("error", ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for key, params in data:
            cached = session.find(key)
            if cached is None:
                session.partitions.append(NaivePartition(key, params))
            else:
                cached.params = params
        session.partitions = [p for p in session.partitions if p.key not in forget]
        if not session.partitions:
            self.cache.remove(session.id)
            return NaiveContext("sessionless", fetch_data=dict(data))
        self.cache.touch(session, self.clock[0])
        session.epoch = next_epoch(session.epoch)
        return NaiveContext("incremental", session=session, expected_epoch=session.epoch)

    def to_read(self, ctx: NaiveContext, names: Names) -> FetchData:
        if ctx.kind != "incremental":
            return list(ctx.fetch_data.items())
        assert ctx.session is not None
        for cached in ctx.session.partitions:  # every partition, every time: O(N)
            if ctx.session.uses_topic_ids:
                cached.key = cached.key.resolved(names.get)
        return [(cached.key, cached.params) for cached in ctx.session.partitions]

    def respond(self, ctx: NaiveContext, results: Results) -> Response:
        if ctx.kind == "error":
            return (ctx.error, 0, [])
        if ctx.kind in ("sessionless", "full"):
            ordered = _ordered([(k, results[k]) for k in ctx.fetch_data])
            session_id = 0
            if ctx.kind == "full":
                cached = [
                    NaivePartition(k, ctx.fetch_data[k], r.high_watermark, r.log_start_offset)
                    for k, r in ordered
                ]
                session = self.cache.create(self.clock[0], ctx.privileged, ctx.uses_ids, cached)
                session_id = session.id if session is not None else 0
            return (0, session_id, _normalized(ordered))
        session = ctx.session
        assert session is not None
        if session.epoch != ctx.expected_epoch:
            return (ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, [])
        found = [(c, results[c.key]) for c in session.partitions if _must_respond(c, results[c.key])]
        included = [x for x in found if not x[1].erroneous] + [x for x in found if x[1].erroneous]
        for moved, result in included:
            if result.records_size > 0:
                session.partitions.remove(moved)
                session.partitions.append(moved)
        return (0, session.id, _normalized([(c.key, r) for c, r in included]))


def _ordered(
    partitions: list[tuple[TopicPartitionKey, PartitionFetchResult]],
) -> list[tuple[TopicPartitionKey, PartitionFetchResult]]:
    return [x for x in partitions if not x[1].erroneous] + [x for x in partitions if x[1].erroneous]


def _normalized(partitions: list[tuple[TopicPartitionKey, PartitionFetchResult]]) -> Normalized:
    return [(k.topic_id, k.topic_name, k.partition, r) for k, r in partitions]


def _parts(response: FetchResponseParts) -> Response:
    return (response.error_code, response.session_id, _normalized(response.partitions))


def _kind(context: FetchContext) -> str:
    if isinstance(context, SessionErrorContext):
        return "error"
    if isinstance(context, IncrementalFetchContext):
        return "incremental"
    return "full" if isinstance(context, FullFetchContext) else "sessionless"


# -- the machine ---------------------------------------------------------------------------------------


@dataclass
class Client:
    session_id: int = 0
    epoch: int = 0
    version: int = 12
    follower: bool = False


partition_refs = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3))  # partition 3 does not exist
fetch_params = st.builds(
    PartitionFetchParams,
    fetch_offset=st.one_of(st.just(10), st.integers(0, 24)),  # 10: caught up with the initial HW
    max_bytes=st.sampled_from([0, 3, 100]),
    current_leader_epoch=st.sampled_from([-1, 1]),
    last_fetched_epoch=st.sampled_from([-1, -1, 0, 2]),
)
entries = st.lists(st.tuples(partition_refs, fetch_params), max_size=5)
budgets = st.sampled_from([5, 20, 1000])


class FetchSessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = make_harness(max_slots=MAX_SLOTS, num_shards=NUM_SHARDS, eviction_ms=EVICTION_MS, seed=SEED)
        self.now = [0]
        self.naive = NaiveFetchManager(NaiveCache(random.Random(SEED)), self.now)
        self.states = {(t, p): PartitionState(high_watermark=10) for t in "ab" for p in range(3)}
        self.known_ids = {TOPIC_IDS["a"]: "a"}
        self.clients = [Client() for _ in range(3)]

    # -- the fake broker --

    def _key(self, ref: tuple[str, int], version: int) -> TopicPartitionKey:
        name, p = ref
        return tid(TOPIC_IDS[name], None, p) if version >= 13 else tp(name, p)

    def _read(self, to_read: FetchData, budget: int) -> Results:
        results: Results = {}
        for key, fetch in to_read:
            if key.topic_name is None:
                results[key] = erroneous(ErrorCode.UNKNOWN_TOPIC_ID)
                continue
            state = self.states.get((key.topic_name, key.partition))
            if state is None:
                results[key] = erroneous(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                results[key] = read_partition_state(state, fetch, budget)
                budget -= results[key].records_size
        return results

    def _changed(self, ref: tuple[str, int]) -> None:
        self.h.cache.on_partition_changed(tid(TOPIC_IDS[ref[0]], ref[0], ref[1]))

    # -- requests --

    def _begin(
        self,
        version: int,
        session_id: int,
        epoch: int,
        data: FetchData,
        forget: list[TopicPartitionKey],
        follower: bool,
    ) -> Pending:
        names = dict(self.known_ids)
        fast = self.h.context(
            session_id, epoch, data, forget, version=version, follower=follower, names=names
        )
        naive = self.naive.new_context(version, session_id, epoch, data, forget, follower, names)
        assert (_kind(fast), fast.error_code) == (naive.kind, naive.error)
        event(f"context: {naive.kind} {naive.error or ''}".strip())
        return fast, naive, names

    def _read_both(self, pending: Pending, budget: int) -> tuple[Results, Results]:
        fast, naive, names = pending
        fast_results = self._read(fast.partitions_to_read(), budget)
        naive_results = self._read(self.naive.to_read(naive, names), budget)
        evaluated = set(fast_results)
        assert all(naive_results[k] == r for k, r in fast_results.items())
        assert all(not r.would_report_again() for k, r in naive_results.items() if k not in evaluated)
        return fast_results, naive_results

    def _respond_both(self, pending: Pending, results: tuple[Results, Results]) -> Response:
        fast, naive, _ = pending
        expected = self.naive.respond(naive, results[1])
        actual = _parts(fast.update_and_generate_response(results[0]))
        assert actual == expected
        if naive.kind == "incremental":
            event(f"incremental response with {min(len(actual[2]), 2)}+ partitions, error {actual[0]}")
        return actual

    def _request(
        self,
        client: Client,
        session_id: int,
        epoch: int,
        data: FetchData,
        forget: list[TopicPartitionKey],
        budget: int,
    ) -> Response:
        pending = self._begin(client.version, session_id, epoch, data, forget, client.follower)
        return self._respond_both(pending, self._read_both(pending, budget))

    def _active(self) -> list[Client]:
        return [client for client in self.clients if client.session_id != 0 and client.epoch > 0]

    def _after(self, client: Client, epoch: int, response: Response) -> None:
        error, session_id, _ = response
        if error == 0 and session_id != 0:
            client.session_id, client.epoch = session_id, (1 if epoch in (0, -1) else next_epoch(epoch))
        else:
            client.session_id, client.epoch = (session_id if error else 0), 0

    @rule(
        c=st.integers(0, 2),
        items=entries,
        version=st.sampled_from([12, 13]),
        epoch=st.sampled_from([0, 0, -1]),
        reuse=st.booleans(),
        follower=st.booleans(),
        budget=budgets,
    )
    def full(
        self, c: int, items: Entries, version: int, epoch: int, reuse: bool, follower: bool, budget: int
    ) -> None:
        client = self.clients[c]
        client.version, client.follower = version, follower
        data = [(self._key(ref, version), p) for ref, p in items]
        response = self._request(client, client.session_id if reuse else 0, epoch, data, [], budget)
        self._after(client, epoch, response)

    @rule(
        c=st.integers(0, 2),
        items=entries,
        forgets=st.lists(partition_refs, max_size=3),
        skew=st.sampled_from([0, 0, 0, 0, 1, -1]),
        switch=st.integers(0, 9),
        budget=budgets,
    )
    @precondition(lambda self: self._active())
    def incremental(
        self, c: int, items: Entries, forgets: list[Ref], skew: int, switch: int, budget: int
    ) -> None:
        active = self._active()
        client = active[c % len(active)]
        version = (25 - client.version) if switch == 0 else client.version  # rarely flip 12 <-> 13
        data = [(self._key(ref, version), p) for ref, p in items]
        forget = [self._key(ref, version) for ref in forgets]
        epoch = client.epoch + skew if client.epoch + skew not in (0, -1) else client.epoch
        epoch = epoch or 1
        pending = self._begin(version, client.session_id, epoch, data, forget, client.follower)
        response = self._respond_both(pending, self._read_both(pending, budget))
        self._after(client, epoch, response)

    @rule(
        c=st.integers(0, 2),
        change=st.one_of(st.none(), partition_refs),
        retry=st.booleans(),
        budget=budgets,
    )
    @precondition(lambda self: self._active())
    def interleaved(self, c: int, change: tuple[str, int] | None, retry: bool, budget: int) -> None:
        """A slow request, a change landing after its read, and maybe a retry overtaking it (3.5)."""
        active = self._active()
        client = active[c % len(active)]
        if change is not None and change in self.states:
            self._changed(change)  # dirty, with nothing new to report yet
        slow = self._begin(client.version, client.session_id, client.epoch, [], [], client.follower)
        slow_results = self._read_both(slow, budget)
        if change is not None and change in self.states:
            self.states[change].high_watermark += 1  # lands after the read
            self._changed(change)
        epoch = next_epoch(client.epoch)
        if retry and slow[1].kind == "incremental":
            fast = self._begin(client.version, client.session_id, epoch, [], [], client.follower)
            self._respond_both(fast, self._read_both(fast, budget))
            epoch = next_epoch(epoch)
        response = self._respond_both(slow, slow_results)
        if response[0] == 0 and response[1] != 0:
            client.epoch = epoch
        else:
            client.session_id, client.epoch = 0, 0

    @rule(session_id=st.one_of(st.integers(-(2**31), 2**31 - 1), st.just(MAX_ID)), epoch=st.integers(-3, 5))
    def bogus(self, session_id: int, epoch: int) -> None:
        self._request(Client(), session_id, epoch, [], [], 100)

    @rule(
        ref=st.sampled_from(sorted((t, p) for t in "ab" for p in range(3))),
        kind=st.sampled_from(["append", "log_start", "error", "epoch", "preferred", "noop"]),
        amount=st.integers(1, 6),
    )
    def change_partition(self, ref: tuple[str, int], kind: str, amount: int) -> None:
        state = self.states[ref]
        if kind == "append":
            state.high_watermark += amount
        elif kind == "log_start":
            state.log_start_offset = min(state.high_watermark, state.log_start_offset + amount)
        elif kind == "error":
            state.error_code = ErrorCode.NONE if state.error_code else ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif kind == "epoch":
            state.leader_epoch += 1
        elif kind == "preferred":
            state.preferred_read_replica = -1 if state.preferred_read_replica >= 0 else amount
        self._changed(ref)

    @rule(ms=st.sampled_from([1, 100, 400, 501, 2000]))
    def advance_clock(self, ms: int) -> None:
        self.h.clock.advance(ms)
        self.now[0] = self.h.clock.time_ms()

    @rule(known=st.booleans())
    def topic_b_metadata(self, known: bool) -> None:
        if known:
            self.known_ids[TOPIC_IDS["b"]] = "b"
        else:
            self.known_ids.pop(TOPIC_IDS["b"], None)

    # -- invariants --

    @invariant()
    def same_sessions(self) -> None:
        naive = {s.id: s for s in self.naive.cache.sessions()}
        fast: dict[int, FetchSession] = {
            s.id: s for shard in self.h.cache.shards for s in shard.sessions.values()
        }
        assert fast.keys() == naive.keys()
        for session_id, model in naive.items():
            session = fast[session_id]
            assert (session.epoch, session.privileged, session.uses_topic_ids) == (
                model.epoch,
                model.privileged,
                model.uses_topic_ids,
            )
            assert (session.creation_ms, session.last_used_ms, session.cached_size) == (
                model.creation_ms,
                model.last_used_ms,
                model.cached_size,
            )
            ours = [
                (c.key.topic_id, c.key.partition, c.params, c.high_watermark, c.log_start_offset)
                for c in session.partitions_in_order()
            ]
            theirs = [
                (p.key.topic_id, p.key.partition, p.params, p.high_watermark, p.log_start_offset)
                for p in model.partitions
            ]
            assert ours == theirs

    @invariant()
    def same_metrics(self) -> None:
        sessions = self.naive.cache.sessions()
        assert self.h.metric(NUM_SESSIONS) == len(sessions)
        assert self.h.metric(NUM_PARTITIONS_CACHED) == sum(max(s.cached_size, 0) for s in sessions)
        assert self.h.metric(EVICTIONS + "_total") == self.naive.cache.evictions
        privileged = [s for s in sessions if s.privileged]
        assert self.h.metric(NUM_PRIVILEGED_SESSIONS) == len(privileged)
        privileged_partitions = sum(max(s.cached_size, 0) for s in privileged)
        assert self.h.metric(NUM_PRIVILEGED_PARTITIONS_CACHED) == privileged_partitions
        event(f"evictions so far: {min(self.naive.cache.evictions, 3)}+")

    @invariant()
    def clean_partitions_have_nothing_to_report(self) -> None:
        for shard in self.h.cache.shards:
            for session in shard.sessions.values():
                clean = [c for c in session.partitions.values() if c not in session.dirty]
                results = self._read([(c.key, c.params) for c in clean], 1 << 30)
                for cached in clean:
                    result = results[cached.key]
                    assert not cached.must_respond(result, update=False), cached
                    assert not result.would_report_again(), cached

    @invariant()
    def every_cached_partition_is_watched_once(self) -> None:
        live = [s for shard in self.h.cache.shards for s in shard.sessions.values()]
        watching = self.h.cache._watchers
        assert sum(len(by_session) for by_session in watching.values()) == sum(s.size for s in live)
        for session in live:
            for cached in session.partitions.values():
                assert watching[cached.key.watch_key][session] is cached


TestFetchSessionMachine = FetchSessionMachine.TestCase
TestFetchSessionMachine.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
