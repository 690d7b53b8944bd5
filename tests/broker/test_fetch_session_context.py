"""FetchManager.new_context and the four contexts: kafka-behaviour.md 3.1-3.5 and FetchSessionTest."""

from __future__ import annotations

import pytest

from broker.fetch_session import (
    FetchSession,
    FullFetchContext,
    IncrementalFetchContext,
    PartitionFetchParams,
    SessionErrorContext,
    SessionlessFetchContext,
    TopicPartitionKey,
)
from protocol.error_codes import ErrorCode
from tests.broker.fetch_session_helpers import (
    Harness,
    World,
    keys_of,
    make_harness,
    params,
    tp,
)

FOO0, FOO1, BAR0 = tp("foo", 0), tp("foo", 1), tp("bar", 0)


def _world(h: Harness, *keys: object, hw: int = 10) -> World:
    world = World(h.cache)
    for key in keys or (FOO0, FOO1, BAR0):
        world.add(key, high_watermark=hw)  # type: ignore[arg-type]
    return world


def _open(
    h: Harness,
    world: World,
    data: list[tuple[TopicPartitionKey, PartitionFetchParams]],
    *,
    follower: bool = False,
    version: int = 12,
) -> FetchSession:
    response = h.respond(h.context(0, 0, data, follower=follower, version=version), world.reader())
    assert response.session_id != 0
    session = h.cache.get(response.session_id)
    assert session is not None
    return session


def _order(session: FetchSession) -> list[object]:
    return [cached.key for cached in session.partitions_in_order()]


# -- 3.1 the request metadata table ----------------------------------------------------------------


def test_legacy_zero_minus_one_is_sessionless_and_creates_nothing() -> None:
    h = make_harness()
    context = h.context(0, -1, [(FOO0, params(0))])
    assert isinstance(context, SessionlessFetchContext) and not isinstance(context, FullFetchContext)
    response = h.respond(context)
    assert (response.error_code, response.session_id, keys_of(response)) == (0, 0, [FOO0])
    assert h.cache.size == 0


def test_zero_zero_is_a_full_fetch_that_creates_a_session_at_epoch_one() -> None:
    h = make_harness()
    context = h.context(0, 0, [(FOO0, params(0)), (FOO1, params(0))])
    assert isinstance(context, FullFetchContext)
    response = h.respond(context)
    session = h.cache.get(response.session_id)
    assert session is not None and session.epoch == 1 and keys_of(response) == [FOO0, FOO1]
    assert response.error_code == 0


def test_a_full_request_with_an_id_closes_that_session_whoever_owns_it() -> None:
    h = make_harness()
    victim = h.respond(h.context(0, 0, [(FOO0, params(0))])).session_id
    response = h.respond(h.context(victim, 0, [(BAR0, params(0))]))  # another client, same id
    assert h.cache.get(victim) is None
    assert response.session_id not in (0, victim) and h.cache.size == 1


def test_a_full_request_naming_an_unknown_session_is_not_an_error() -> None:
    h = make_harness()
    response = h.respond(h.context(12345, 0, [(FOO0, params(0))]))
    assert response.error_code == 0 and response.session_id != 0


def test_x_minus_one_closes_the_session_and_fetches_sessionless() -> None:
    h = make_harness()
    session_id = h.respond(h.context(0, 0, [(FOO0, params(0))])).session_id
    context = h.context(session_id, -1, [(FOO0, params(0))])
    assert isinstance(context, SessionlessFetchContext)
    response = h.respond(context)
    assert response.session_id == 0 and keys_of(response) == [FOO0] and h.cache.size == 0


@pytest.mark.parametrize("epoch", [1, 2, 7, -2, -99])
def test_session_zero_with_an_incremental_epoch_is_not_found(epoch: int) -> None:
    h = make_harness()
    context = h.context(0, epoch)
    assert isinstance(context, SessionErrorContext)
    assert context.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        ("wrong epoch", ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        ("negative epoch", ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        ("ids switched on", ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR),
    ],
)
def test_failed_incremental_requests_answer_top_level_errors_with_session_zero(
    case: str, expected: int
) -> None:
    h = make_harness()
    session_id = h.respond(h.context(0, 0, [(FOO0, params(0))])).session_id
    session = h.cache.get(session_id)
    assert session is not None
    h.clock.advance(50)
    request = {
        "missing": (session_id + 1, 1, 12),
        "wrong epoch": (session_id, 2, 12),
        "negative epoch": (session_id, -2, 12),
        "ids switched on": (session_id, 1, 13),
    }[case]
    context = h.context(request[0], request[1], [(BAR0, params(0))], version=request[2])
    assert context.error_code == expected and context.partitions_to_read() == []
    response = h.respond(context)
    assert (response.error_code, response.session_id, response.partitions) == (expected, 0, [])
    # the session is kept as it was: same epoch, not touched, request not applied
    assert h.cache.get(session_id) is session and session.epoch == 1
    assert session.last_used_ms == 0 and session.get(BAR0) is None


def test_the_epoch_advances_when_the_context_is_created_before_any_read() -> None:
    h = make_harness()
    session_id = h.respond(h.context(0, 0, [(FOO0, params(0))])).session_id
    context = h.context(session_id, 1)
    session = h.cache.get(session_id)
    assert isinstance(context, IncrementalFetchContext) and session is not None and session.epoch == 2
    assert h.context(session_id, 1).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_epochs_wrap_to_one_inside_a_session() -> None:
    h = make_harness()
    session_id = h.respond(h.context(0, 0, [(FOO0, params(0))])).session_id
    session = h.cache.get(session_id)
    assert session is not None
    session.epoch = 2**31 - 1  # type: ignore[assignment]
    h.respond(h.context(session_id, 2**31 - 1))
    assert session.epoch == 1
    assert h.respond(h.context(session_id, 1)).error_code == 0


# -- 3.2 update: positions, adds before removes, empty sessions, touch --------------------------------


def test_update_keeps_positions_appends_new_partitions_and_removes_forgotten_ones() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(0)), (FOO1, params(0))])
    h.respond(h.context(session.id, 1, [(BAR0, params(3)), (FOO0, params(5))], [FOO1]), world.reader())
    assert _order(session) == [FOO0, BAR0]
    foo0 = session.get(FOO0)
    assert foo0 is not None and foo0.params.fetch_offset == 5


def test_a_partition_both_sent_and_forgotten_ends_up_removed() -> None:
    h = make_harness()
    session = _open(h, _world(h), [(FOO0, params(0)), (FOO1, params(0))])
    h.context(session.id, 1, [(FOO1, params(4)), (BAR0, params(0))], [FOO1, BAR0])
    assert _order(session) == [FOO0]


def test_zero_size_session_is_removed_and_served_sessionless() -> None:
    """FetchSessionTest.testZeroSizeFetchSession and testToForgetPartitions' last step."""
    h = make_harness()
    session = _open(h, _world(h), [(FOO0, params(0)), (FOO1, params(0))])
    context = h.context(session.id, 1, [], [FOO0, FOO1])
    assert isinstance(context, SessionlessFetchContext)
    response = h.respond(context)
    assert (response.error_code, response.session_id, response.partitions) == (0, 0, [])
    assert h.cache.size == 0 and h.cache.watched_keys == 0


def test_sent_and_forgotten_in_an_emptied_session_is_read_sessionless() -> None:
    h = make_harness()
    session = _open(h, _world(h), [(FOO0, params(0))])
    response = h.respond(h.context(session.id, 1, [(FOO0, params(3))], [FOO0]))
    assert response.session_id == 0 and keys_of(response) == [FOO0]


def test_every_successful_incremental_request_touches_the_session() -> None:
    h = make_harness()
    session = _open(h, _world(h), [(FOO0, params(0))])
    for epoch, now in ((1, 100), (2, 5000), (3, 90_000)):
        h.clock.set(now)
        h.respond(h.context(session.id, epoch))
        assert session.last_used_ms == now


# -- 3.3 full responses and session creation ----------------------------------------------------------


def test_full_response_lists_readable_partitions_then_erroneous_ones_and_caches_that_order() -> None:
    h = make_harness()
    world = _world(h, FOO0, BAR0)
    unknown = tp("gone", 0)
    response = h.respond(
        h.context(0, 0, [(unknown, params(0)), (FOO0, params(0)), (BAR0, params(0))]), world.reader()
    )
    assert keys_of(response) == [FOO0, BAR0, unknown]
    assert response.partitions[2][1].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    session = h.cache.get(response.session_id)
    assert session is not None and _order(session) == [FOO0, BAR0, unknown]


def test_a_new_session_caches_request_params_and_the_response_baseline() -> None:
    h = make_harness()
    world = _world(h, FOO0)
    world.change(FOO0, high_watermark=42, log_start_offset=7)
    fetch = params(40, max_bytes=77, current_leader_epoch=3, last_fetched_epoch=-1, log_start_offset=2)
    session = _open(h, world, [(FOO0, fetch)], follower=True)
    cached = session.get(FOO0)
    assert cached is not None and cached.params == fetch
    assert (cached.high_watermark, cached.log_start_offset) == (42, 7)
    assert session.privileged and not session.uses_topic_ids


def test_repeated_partitions_keep_their_first_place_and_their_last_params() -> None:
    h = make_harness()
    response = h.respond(h.context(0, 0, [(FOO0, params(1)), (FOO1, params(1)), (FOO0, params(9))]))
    session = h.cache.get(response.session_id)
    assert session is not None and keys_of(response) == [FOO0, FOO1]
    cached = session.get(FOO0)
    assert cached is not None and cached.params.fetch_offset == 9


def test_creation_refused_when_the_shard_is_full_answers_session_zero() -> None:
    h = make_harness(max_slots=1, num_shards=1)
    assert h.respond(h.context(0, 0, [(FOO0, params(0))])).session_id != 0
    refused = h.respond(h.context(0, 0, [(FOO1, params(0))]))
    assert refused.session_id == 0 and keys_of(refused) == [FOO1] and h.cache.size == 1


def test_a_zero_partition_full_fetch_creates_a_session_that_the_next_request_closes() -> None:
    h = make_harness()
    response = h.respond(h.context(0, 0, []))
    assert response.session_id != 0 and h.cache.size == 1
    follow_up = h.context(response.session_id, 1)
    assert isinstance(follow_up, SessionlessFetchContext)
    assert h.respond(follow_up).session_id == 0 and h.cache.size == 0


def test_throttled_full_and_sessionless_responses_are_empty_and_create_nothing() -> None:
    h = make_harness()
    for epoch in (0, -1):
        throttled = h.context(0, epoch, [(FOO0, params(0))]).throttled_response()
        assert (throttled.error_code, throttled.session_id, throttled.partitions) == (0, 0, [])
    assert h.cache.size == 0


# -- 3.4 incremental responses ----------------------------------------------------------------------


def test_idle_session_answers_no_partitions_with_its_id() -> None:
    h = make_harness()
    session = _open(h, _world(h), [(FOO0, params(10)), (FOO1, params(10))])
    response = h.respond(h.context(session.id, 1), _world(h).reader())
    assert (response.error_code, response.session_id, response.partitions) == (0, session.id, [])


def test_incremental_fetch_session() -> None:
    """FetchSessionTest.testIncrementalFetchSession: remove foo-0, add bar-0 → reads foo-1, bar-0."""
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(0, 100)), (FOO1, params(10, 100))])
    context = h.context(session.id, 1, [(BAR0, params(15, 100))], [FOO0])
    assert isinstance(context, IncrementalFetchContext)
    world.change(FOO1, high_watermark=10)  # a change that changes nothing the client sees
    assert context.partitions_to_read() == [(FOO1, params(10, 100)), (BAR0, params(15, 100))]
    assert session.get(FOO0) is None
    foo1 = session.get(FOO1)
    assert foo1 is not None and foo1.params.fetch_offset == 10
    response = h.respond(context, world.reader())
    assert keys_of(response) == [BAR0]  # new: cached HW -1; foo-1 unchanged


def test_a_new_partition_is_reported_and_a_seek_alone_is_not() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10))])
    response = h.respond(h.context(session.id, 1, [(FOO1, params(10)), (FOO0, params(3))]), world.reader())
    assert keys_of(response) == [FOO0, FOO1]  # foo-0: records from the seek, not the seek itself
    assert response.partitions[0][1].records_size == 7
    response = h.respond(h.context(session.id, 2, [(FOO0, params(10))]), world.reader())
    assert keys_of(response) == []


def test_the_broker_never_advances_a_cached_offset() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10))])
    world.change(FOO0, high_watermark=15)
    first = h.respond(h.context(session.id, 1), world.reader())
    second = h.respond(h.context(session.id, 2), world.reader())
    assert [r.records_size for _, r in first.partitions] == [5]
    assert [r.records_size for _, r in second.partitions] == [5]  # same records again
    h.respond(h.context(session.id, 3, [(FOO0, params(15))]), world.reader())
    assert not session.dirty
    assert keys_of(h.respond(h.context(session.id, 4), world.reader())) == []


def test_update_and_generate_response_data() -> None:
    """FetchSessionTest.testUpdateAndGenerateResponseData: errors are reported by every context."""
    h = make_harness()
    world = _world(h, FOO0)
    world.change(FOO0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    data = [(FOO0, params(0)), (FOO1, params(0))]
    sessionless = h.respond(h.context(0, -1, data), world.reader())
    assert [r.error_code for _, r in sessionless.partitions] == [6, 3]
    full = h.respond(h.context(0, 0, data), world.reader())
    assert [r.error_code for _, r in full.partitions] == [6, 3]
    for epoch in (1, 2, 3):
        incremental = h.respond(h.context(full.session_id, epoch), world.reader())
        assert [(k, r.error_code) for k, r in incremental.partitions] == [(FOO0, 6), (FOO1, 3)]
    reused = h.respond(h.context(full.session_id, 3), world.reader())
    assert (reused.error_code, reused.partitions) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])


def test_a_cleared_error_is_reported_once_then_the_partition_goes_quiet() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10))])
    world.change(FOO0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert keys_of(h.respond(h.context(session.id, 1), world.reader())) == [FOO0]
    world.change(FOO0, error_code=ErrorCode.NONE)
    recovered = h.respond(h.context(session.id, 2), world.reader())
    assert [(k, r.error_code, r.high_watermark) for k, r in recovered.partitions] == [(FOO0, 0, 10)]
    assert keys_of(h.respond(h.context(session.id, 3), world.reader())) == []


def test_diverging_epoch_is_always_reported_and_so_is_a_high_watermark_change() -> None:
    """FetchSessionTest.testDivergingEpoch."""
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10, last_fetched_epoch=5)), (FOO1, params(10))])
    for epoch in (1, 2):
        response = h.respond(h.context(session.id, epoch), world.reader())
        assert keys_of(response) == [FOO0] and response.partitions[0][1].diverging_epoch == 0
    world.change(FOO1, high_watermark=12)
    assert keys_of(h.respond(h.context(session.id, 3), world.reader())) == [FOO0, FOO1]


def test_only_partitions_with_records_rotate_to_the_tail() -> None:
    """FetchSessionTest.testDeprioritizesPartitionsWithRecordsOnly (KAFKA-12330)."""
    h = make_harness()
    tp1, tp2, tp3 = tp("t", 1), tp("t", 2), tp("t", 3)
    world = _world(h, tp1, tp2, tp3)
    session = _open(h, world, [(tp1, params(10)), (tp2, params(10)), (tp3, params(10))])
    world.change(tp1, high_watermark=10, log_start_offset=1)
    world.change(tp2, high_watermark=20)
    response = h.respond(h.context(session.id, 1), world.reader())
    assert keys_of(response) == [tp1, tp2] and response.partitions[1][1].records_size == 10
    assert _order(session) == [tp1, tp3, tp2]


def test_rotation_follows_response_order() -> None:
    h = make_harness()
    keys = [tp("t", p) for p in range(5)]
    world = _world(h, *keys)
    session = _open(h, world, [(k, params(10)) for k in keys])
    for k in (keys[3], keys[1]):
        world.change(k, high_watermark=11)
    h.respond(h.context(session.id, 1), world.reader())
    assert _order(session) == [keys[0], keys[2], keys[4], keys[1], keys[3]]


def test_size_preview_changes_nothing() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10)), (FOO1, params(10))])
    world.change(FOO1, high_watermark=15)
    context = h.context(session.id, 1)
    results = world.read_all(context.partitions_to_read())
    preview = context.preview_response(results)
    assert keys_of(preview) == [FOO1] and _order(session) == [FOO0, FOO1]
    foo1 = session.get(FOO1)
    assert foo1 is not None and foo1.high_watermark == 10 and foo1 in session.dirty
    assert context.update_and_generate_response(results) == preview
    assert _order(session) == [FOO0, FOO1] == _order(session) and foo1.high_watermark == 15


# -- cached epochs (KAFKA-9338) ---------------------------------------------------------------------


def test_cached_leader_epoch_and_last_fetched_epoch() -> None:
    """FetchSessionTest.testCachedLeaderEpoch and testLastFetchedEpoch."""
    h = make_harness()
    first = params(10, current_leader_epoch=1, last_fetched_epoch=0)
    session = _open(h, _world(h), [(FOO0, first), (FOO1, params(10, current_leader_epoch=2))])
    context = h.context(session.id, 1)
    assert context.partitions_to_read() == []  # nothing changed, nothing to read
    cached = session.get(FOO0)
    assert cached is not None and cached.params == first
    resent = [(FOO0, params(10, current_leader_epoch=3, last_fetched_epoch=2)), (FOO1, params(10))]
    h.respond(h.context(session.id, 2, resent))
    epochs = [
        (c.params.current_leader_epoch, c.params.last_fetched_epoch) for c in session.partitions_in_order()
    ]
    assert epochs == [(3, 2), (-1, -1)]


# -- 3.5 races and throttling ------------------------------------------------------------------------


def test_an_epoch_race_answers_71_with_the_real_session_id_and_leaves_the_cache_alone() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10)), (FOO1, params(10))])
    world.change(FOO0, high_watermark=14)
    slow = h.context(session.id, 1)
    results = world.read_all(slow.partitions_to_read())
    fast = h.context(session.id, 2)  # the client retried with the next epoch meanwhile
    race = slow.update_and_generate_response(results)
    assert (race.error_code, race.session_id, race.partitions) == (71, session.id, [])
    foo0 = session.get(FOO0)
    assert foo0 is not None and foo0.high_watermark == 10 and _order(session) == [FOO0, FOO1]
    assert keys_of(h.respond(fast, world.reader())) == [FOO0]
    assert slow.throttled_response().error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_a_throttled_incremental_response_keeps_the_session_and_reports_changes_later() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10))])
    world.change(FOO0, high_watermark=11)
    throttled = h.context(session.id, 1).throttled_response()
    assert (throttled.error_code, throttled.session_id, throttled.partitions) == (0, session.id, [])
    later = h.respond(h.context(session.id, 2), world.reader())
    assert keys_of(later) == [FOO0]


def test_a_response_built_for_an_evicted_session_still_answers_normally() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10))])
    world.change(FOO0, high_watermark=12)
    context = h.context(session.id, 1)
    results = world.read_all(context.partitions_to_read())
    h.cache.remove(session.id)
    response = context.update_and_generate_response(results)
    assert (response.session_id, keys_of(response)) == (session.id, [FOO0])
    assert h.context(session.id, 2).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


# -- testFetchRequests walk-through ---------------------------------------------------------------------


def test_fetch_requests_walk_through() -> None:
    """FetchSessionTest.testFetchRequests."""
    h = make_harness()
    world = _world(h)
    data = [(FOO0, params(0)), (FOO1, params(10))]
    assert isinstance(h.context(0, -1, data), SessionlessFetchContext)
    full = h.context(0, 0, data)
    assert isinstance(full, FullFetchContext)
    response = h.respond(full, world.reader())
    session_id = response.session_id
    assert session_id != 0 and keys_of(response) == [FOO0, FOO1]
    assert h.context(session_id, 5).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert h.context(session_id + 1, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    incremental = h.context(session_id, 1)
    assert isinstance(incremental, IncrementalFetchContext)
    assert incremental.partitions_to_read() == [(FOO0, params(0))]  # it returned records: still dirty
    h.respond(h.context(session_id, 2, [(FOO0, params(10))]), world.reader())
    idle = h.respond(h.context(session_id, 3), world.reader())
    assert (idle.error_code, idle.session_id, idle.partitions) == (0, session_id, [])
    assert h.context(session_id, 5).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    throttled = h.context(session_id, 4).throttled_response()
    assert (throttled.error_code, throttled.session_id) == (0, session_id)
    assert isinstance(h.context(session_id, -1), SessionlessFetchContext)
    assert h.cache.size == 0


# -- dirty-set rules (DESIGN.md "Incremental fetches in O(changed)") ---------------------------------


def test_a_budget_skip_stays_dirty_and_is_read_first_next_time() -> None:
    h = make_harness()
    keys = [tp("t", p) for p in range(3)]
    world = _world(h, *keys)
    session = _open(h, world, [(k, params(10)) for k in keys])
    for k in keys:
        world.change(k, high_watermark=20)
    context = h.context(session.id, 1)
    response = context.update_and_generate_response(world.read_all(context.partitions_to_read(), budget=15))
    assert [(k, r.records_size) for k, r in response.partitions] == [
        (keys[0], 10),
        (keys[1], 5),
        (keys[2], 0),
    ]
    assert _order(session) == [keys[2], keys[0], keys[1]]  # the starved one is first now
    assert session.get(keys[2]) in session.dirty
    context = h.context(session.id, 2)
    assert [k for k, _ in context.partitions_to_read()] == [keys[2], keys[0], keys[1]]
    response = context.update_and_generate_response(world.read_all(context.partitions_to_read(), budget=15))
    assert [(k, r.records_size) for k, r in response.partitions] == [(keys[2], 10), (keys[0], 5)]


def test_a_change_after_the_read_keeps_the_partition_dirty() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10))])
    world.change(FOO0, high_watermark=10)
    context = h.context(session.id, 1)
    results = world.read_all(context.partitions_to_read())
    world.change(FOO0, high_watermark=13)  # lands between the read and the response
    assert keys_of(context.update_and_generate_response(results)) == []
    assert keys_of(h.respond(h.context(session.id, 2), world.reader())) == [FOO0]


def test_the_waiter_wakes_an_idle_fetch_and_a_fresh_read_sees_the_change() -> None:
    h = make_harness()
    world = _world(h)
    session = _open(h, world, [(FOO0, params(10)), (FOO1, params(10))])
    context = h.context(session.id, 1)
    assert isinstance(context, IncrementalFetchContext) and context.partitions_to_read() == []
    woken: list[int] = []
    context.session.waiter = lambda: woken.append(1)  # a parked long poll
    world.change(FOO1, high_watermark=12)
    assert woken == [1]
    context.session.waiter = None
    assert [k for k, _ in context.partitions_to_read()] == [FOO1]
    assert keys_of(context.update_and_generate_response(world.read_all(context.partitions_to_read()))) == [
        FOO1
    ]


def test_an_incremental_fetch_costs_the_changed_partitions_not_the_session_size() -> None:
    h = make_harness()
    keys = [tp(f"topic{p % 100}", p // 100) for p in range(10_000)]
    world = _world(h, *keys)
    session = _open(h, world, [(k, params(10)) for k in keys], follower=True)
    assert not session.dirty
    changed = keys[7::1000]
    for k in changed:
        world.change(k, high_watermark=11)
    resent = [(keys[5], params(10, max_bytes=50))]
    context = h.context(session.id, 1, resent)
    assert isinstance(context, IncrementalFetchContext)
    response = h.respond(context, world.reader())
    assert context.partitions_evaluated == len(changed) + len(resent) == 11
    assert keys_of(response) == changed
    assert [r.records_size for _, r in response.partitions] == [1] * 10
    assert _order(session)[-10:] == changed
