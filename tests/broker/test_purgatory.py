"""DelayedOperation and DelayedOperationPurgatory on a fake scheduler: ordering, exactly-once, hygiene."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from broker.metrics.purgatory import NUM_DELAYED_OPERATIONS, PURGATORY_SIZE, PurgatoryMetrics
from server_common.purgatory import DelayedOperation, DelayedOperationPurgatory, FakeScheduler


class Op(DelayedOperation):
    """Completes when ``ready()`` says so; records every callback."""

    def __init__(self, delay_ms: int = 500, ready: Callable[[], bool] = lambda: False) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.checks = 0
        self.completed_calls = 0
        self.expired_calls = 0
        self.released_calls = 0
        self.on_complete_hook: Callable[[], None] | None = None

    def try_complete(self) -> bool:
        self.checks += 1
        return self.force_complete() if self.ready() else False

    def on_complete(self) -> None:
        self.completed_calls += 1
        if self.on_complete_hook is not None:
            self.on_complete_hook()

    def on_expiration(self) -> None:
        self.expired_calls += 1

    def on_release(self) -> None:
        self.released_calls += 1


@pytest.fixture
def scheduler() -> FakeScheduler:
    return FakeScheduler()


@pytest.fixture
def purgatory(scheduler: FakeScheduler) -> DelayedOperationPurgatory:
    return DelayedOperationPurgatory("Test", scheduler)


def assert_empty(purgatory: DelayedOperationPurgatory, scheduler: FakeScheduler) -> None:
    assert purgatory.num_delayed == 0
    assert purgatory.watched == 0
    assert purgatory.num_watched_keys == 0
    assert scheduler.pending == 0


def test_completes_at_first_check_without_parking(purgatory, scheduler):
    op = Op(ready=lambda: True)
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is True
    assert op.is_completed and op.completed_calls == 1 and op.checks == 1
    assert not op.is_expired
    assert_empty(purgatory, scheduler)


def test_parks_on_every_key_with_a_timer(purgatory, scheduler):
    op = Op()
    assert purgatory.try_complete_else_watch(op, ["a", "b", "a"]) is False
    assert op.checks == 2  # before and after the watch
    assert purgatory.num_delayed == 1
    assert purgatory.watched == 2  # duplicate key registered once
    assert purgatory.watchers_of("a") == purgatory.watchers_of("b") == 1
    assert scheduler.pending == 1


def test_check_and_complete_completes_and_forgets_everywhere(purgatory, scheduler):
    state = {"ready": False}
    op = Op(ready=lambda: state["ready"])
    purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.check_and_complete("a") == 0
    state["ready"] = True
    assert purgatory.check_and_complete("b") == 1
    assert op.completed_calls == 1 and op.released_calls == 1 and not op.is_expired
    assert_empty(purgatory, scheduler)
    assert purgatory.completions == 1 and purgatory.expirations == 0
    assert purgatory.check_and_complete("a") == 0
    scheduler.advance(10)
    assert op.completed_calls == 1 and op.expired_calls == 0


def test_expiry_completes_once_at_the_deadline(purgatory, scheduler):
    op = Op(delay_ms=500)
    purgatory.try_complete_else_watch(op, ["a"])
    scheduler.advance_ms(499)
    assert not op.is_completed
    scheduler.advance_ms(1)
    assert op.is_completed and op.is_expired
    assert op.completed_calls == 1 and op.expired_calls == 1
    assert purgatory.expirations == 1 and purgatory.completions == 1
    assert_empty(purgatory, scheduler)


def test_event_between_first_check_and_watch_is_not_missed(purgatory, scheduler):
    """The append lands after the first check but before the watch: nobody is watching yet."""
    log = {"end": 0}
    events: list[int] = []

    def ready() -> bool:
        if not events:  # first check: an append arrives right after we looked
            satisfied = log["end"] > 0
            log["end"] = 1
            events.append(purgatory.check_and_complete("p0"))
            return satisfied
        return log["end"] > 0

    op = Op(delay_ms=500, ready=ready)
    assert purgatory.try_complete_else_watch(op, ["p0"]) is True
    assert events == [0]  # the event found no watcher...
    assert op.completed_calls == 1  # ...but the check after the watch saw it
    assert not op.is_expired
    assert_empty(purgatory, scheduler)


def test_expiry_and_completion_at_the_same_tick_event_first(purgatory, scheduler):
    state = {"ready": False}
    op = Op(delay_ms=100, ready=lambda: state["ready"])

    def event() -> None:
        state["ready"] = True
        purgatory.check_and_complete("k")

    scheduler.call_later(0.1, event)  # scheduled first: runs first at the shared deadline
    purgatory.try_complete_else_watch(op, ["k"])
    scheduler.advance(0.1)
    assert op.completed_calls == 1 and op.expired_calls == 0 and not op.is_expired
    assert purgatory.expirations == 0
    assert_empty(purgatory, scheduler)


def test_expiry_and_completion_at_the_same_tick_timer_first(purgatory, scheduler):
    state = {"ready": False}
    op = Op(delay_ms=100, ready=lambda: state["ready"])
    purgatory.try_complete_else_watch(op, ["k"])

    def event() -> None:
        state["ready"] = True
        assert purgatory.check_and_complete("k") == 0
        assert op.force_complete() is False

    scheduler.call_later(0.1, event)
    scheduler.advance(0.1)
    assert op.completed_calls == 1 and op.expired_calls == 1 and op.is_expired
    assert purgatory.expirations == 1


def test_force_complete_first_caller_wins_even_from_on_complete(purgatory, scheduler):
    op = Op()
    results: list[bool] = []
    op.on_complete_hook = lambda: results.append(op.force_complete())
    purgatory.try_complete_else_watch(op, ["a"])
    assert op.force_complete() is True
    assert results == [False]
    assert op.force_complete() is False
    assert op.completed_calls == 1
    assert_empty(purgatory, scheduler)


def test_check_and_complete_touches_only_the_watchers_of_that_key(purgatory):
    hot = [Op() for _ in range(1000)]
    for op in hot:
        purgatory.try_complete_else_watch(op, ["hot"])
    state = {"ready": False}
    cold = Op(ready=lambda: state["ready"])
    purgatory.try_complete_else_watch(cold, ["cold"])
    before = [op.checks for op in hot]
    state["ready"] = True
    assert purgatory.check_and_complete("cold") == 1
    assert [op.checks for op in hot] == before
    assert cold.checks == 3
    assert purgatory.check_and_complete("hot") == 0
    assert all(op.checks == 3 for op in hot)


def test_on_complete_may_trigger_checks_on_other_keys(purgatory, scheduler):
    """Re-entrancy: completing one operation appends elsewhere, which completes operations on both keys."""
    state = {"a": False, "b": False}
    first = Op(ready=lambda: state["a"])
    both = Op(ready=lambda: state["b"])  # watches a and b; completed from within the walk over a
    later = Op(ready=lambda: state["a"])
    purgatory.try_complete_else_watch(first, ["a"])
    purgatory.try_complete_else_watch(both, ["a", "b"])
    purgatory.try_complete_else_watch(later, ["a"])

    def append_to_b() -> None:
        state["b"] = True
        assert purgatory.check_and_complete("b") == 1
        assert purgatory.check_and_complete("a") == 1  # nested walk over the same key: `later`

    first.on_complete_hook = append_to_b
    state["a"] = True
    assert purgatory.check_and_complete("a") == 1  # first; both and later were completed in the nest
    assert [op.completed_calls for op in (first, both, later)] == [1, 1, 1]
    assert both.checks == 3  # first check, after watch, nested check on b: never re-checked after
    assert_empty(purgatory, scheduler)


def test_on_complete_may_park_a_new_operation_on_the_same_key(purgatory):
    state = {"ready": False}
    first = Op(ready=lambda: state["ready"])
    follow_up = Op()
    first.on_complete_hook = lambda: purgatory.try_complete_else_watch(follow_up, ["a"])
    purgatory.try_complete_else_watch(first, ["a"])
    state["ready"] = True
    assert purgatory.check_and_complete("a") == 1
    assert not follow_up.is_completed
    assert purgatory.watchers_of("a") == 1 and purgatory.num_delayed == 1


def test_watcher_lists_stay_clean_with_100k_operations(purgatory, scheduler):
    """Completed operations leave their lists at once, whichever path completed them."""
    n = 100_000
    state = {"ready": False}
    ops = [Op(delay_ms=1000, ready=lambda: state["ready"]) for _ in range(n)]
    for i, op in enumerate(ops):
        keys = ["hot", f"p{i % 1000}"] if i % 3 == 0 else ["hot"] if i % 3 == 1 else [f"q{i}"]
        purgatory.try_complete_else_watch(op, keys)
    assert purgatory.num_delayed == n
    assert purgatory.watchers_of("hot") == 2 * n // 3 + 1
    # a third completed one by one from outside (e.g. session waiters): O(1) each
    for op in ops[2::3]:
        assert op.force_complete()
    assert purgatory.num_delayed == n - len(ops[2::3])
    assert purgatory.num_watched_keys == 1 + 1000  # "hot" and p0..p999; no empty list left behind
    # the p-keys' operations completed through the hot key
    state["ready"] = True
    for op in ops[0::3]:
        op.ready = lambda: True
    for op in ops[1::3]:
        op.ready = lambda: False
    assert purgatory.check_and_complete("hot") == len(ops[0::3])
    assert purgatory.watchers_of("hot") == len(ops[1::3])
    assert purgatory.num_watched_keys == 1
    # the rest expire
    scheduler.advance(1.0)
    assert all(op.completed_calls == 1 for op in ops)
    assert purgatory.expirations == len(ops[1::3])
    assert purgatory.completions == n
    assert_empty(purgatory, scheduler)


def test_cancel_for_key_drops_operations_without_callbacks(purgatory, scheduler):
    a = Op()
    ab = Op()
    b = Op()
    purgatory.try_complete_else_watch(a, ["a"])
    purgatory.try_complete_else_watch(ab, ["a", "b"])
    purgatory.try_complete_else_watch(b, ["b"])
    cancelled = purgatory.cancel_for_key("a")
    assert cancelled == [a, ab]
    assert all(op.is_cancelled and op.is_completed for op in cancelled)
    assert purgatory.watchers_of("b") == 1 and purgatory.num_delayed == 1
    assert scheduler.pending == 1
    scheduler.advance(10)
    assert [a.completed_calls, ab.completed_calls, b.completed_calls] == [0, 0, 1]
    assert a.released_calls == 1
    assert purgatory.completions == 1 and purgatory.expirations == 1
    assert purgatory.cancel_for_key("a") == []


def test_shutdown_expires_pending_and_answers_later_ones_at_once(purgatory, scheduler):
    ops = [Op() for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["a"])
    assert purgatory.shutdown() == 3
    assert all(op.completed_calls == 1 and op.expired_calls == 1 for op in ops)
    assert_empty(purgatory, scheduler)
    late = Op()
    assert purgatory.try_complete_else_watch(late, ["a"]) is True
    assert late.is_expired and late.completed_calls == 1 and late.checks == 0
    assert purgatory.expirations == 4
    assert_empty(purgatory, scheduler)


def test_shutdown_without_expiry_force_completes(purgatory, scheduler):
    op = Op()
    purgatory.try_complete_else_watch(op, ["a"])
    assert purgatory.shutdown(expire=False) == 1
    assert op.completed_calls == 1 and op.expired_calls == 0 and not op.is_expired
    assert purgatory.expirations == 0
    assert_empty(purgatory, scheduler)


def test_a_failing_check_does_not_stop_the_others(purgatory):
    def boom() -> bool:
        raise RuntimeError("bug")

    state = {"ready": False}
    bad = Op(ready=lambda: state["ready"])
    good = Op(ready=lambda: state["ready"])
    purgatory.try_complete_else_watch(bad, ["a"])
    purgatory.try_complete_else_watch(good, ["a"])
    bad.ready = boom
    state["ready"] = True
    assert purgatory.check_and_complete("a") == 1
    assert good.is_completed and not bad.is_completed
    assert purgatory.num_delayed == 1  # the failing one waits for its deadline


def test_a_failing_second_check_leaves_nothing_behind(purgatory, scheduler):
    calls = {"n": 0}

    def fails_second_time() -> bool:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("bug")
        return False

    op = Op(ready=fails_second_time)
    with pytest.raises(RuntimeError):
        purgatory.try_complete_else_watch(op, ["a"])
    assert op.is_cancelled
    assert_empty(purgatory, scheduler)


def test_an_operation_cannot_be_parked_twice(purgatory, scheduler):
    op = Op()
    purgatory.try_complete_else_watch(op, ["a"])
    other = DelayedOperationPurgatory("Other", scheduler)
    with pytest.raises(ValueError):
        other.try_complete_else_watch(op, ["b"])
    assert purgatory.try_complete_else_watch(Op(ready=lambda: True), ["a"]) is True


def test_operation_without_keys_still_expires(purgatory, scheduler):
    op = Op(delay_ms=50)
    assert purgatory.try_complete_else_watch(op, []) is False
    assert purgatory.num_delayed == 1 and purgatory.watched == 0
    scheduler.advance_ms(50)
    assert op.is_expired
    assert_empty(purgatory, scheduler)


def test_fake_scheduler_runs_callbacks_in_deadline_order():
    scheduler = FakeScheduler()
    ran: list[str] = []
    scheduler.call_later(0.2, lambda: ran.append("b"))
    scheduler.call_later(0.1, lambda: ran.append("a"))
    scheduler.call_later(0.1, lambda: scheduler.call_later(0.05, lambda: ran.append("nested")))
    cancelled = scheduler.call_later(0.15, lambda: ran.append("never"))
    cancelled.cancel()
    assert scheduler.pending == 3
    assert scheduler.advance(0.3) == 4
    assert ran == ["a", "nested", "b"]
    assert scheduler.pending == 0
    with pytest.raises(ValueError):
        scheduler.advance(-1)


def test_purgatory_metrics_read_the_counts(purgatory):
    registry = CollectorRegistry()
    PurgatoryMetrics(registry).track(purgatory)
    purgatory.try_complete_else_watch(Op(), ["a", "b"])
    purgatory.try_complete_else_watch(Op(), ["a"])
    labels = {"delayedOperation": "Test"}
    assert registry.get_sample_value(PURGATORY_SIZE, labels) == 3
    assert registry.get_sample_value(NUM_DELAYED_OPERATIONS, labels) == 2
    purgatory.shutdown()
    assert registry.get_sample_value(PURGATORY_SIZE, labels) == 0
    assert registry.get_sample_value(NUM_DELAYED_OPERATIONS, labels) == 0
