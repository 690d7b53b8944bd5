"""Delayed operations and the purgatory that parks them until they can complete or time out.

A request that cannot be answered yet (a fetch with fewer than ``min_bytes`` available, an acks=-1
produce whose records are not committed yet) becomes a :class:`DelayedOperation`. The
:class:`DelayedOperationPurgatory` parks it under the keys of the partitions it waits on and arms a
timer for its deadline. Whoever changes a partition (an append, a high-watermark move, a leadership
change) calls :meth:`DelayedOperationPurgatory.check_and_complete` with that partition's key, which
re-checks exactly the operations watching it. An operation completes exactly once: through a check,
through its timer (expiry), or through a direct :meth:`DelayedOperation.force_complete`.

Differences from Kafka's implementation, and why:

- Everything runs on the broker's event loop thread, so there are no locks. What remains of Kafka's
  race is re-entrancy: a callback run during a check may change other partitions and start more
  checks. Every walk over a watcher list works on a snapshot, and every state change happens before
  the callbacks run, so such nesting is safe.
- The deadline is a ``call_later`` on the scheduler passed in (the asyncio loop in the broker, a
  :class:`FakeScheduler` in tests), not a timing wheel with a reaper thread: the loop already keeps
  a timer heap.
- A completed operation leaves every watcher list at once (each list is an insertion-ordered dict, so
  removal is O(1)), instead of Kafka's periodic purge once more than ``purge.interval.requests``
  completed operations have piled up. Watcher lists therefore never hold completed operations and
  an idle key does not keep an empty list alive.
"""

from __future__ import annotations

import heapq
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

import structlog

_log = structlog.get_logger(__name__)


class Cancellable(Protocol):
    """What ``call_later`` returns: asyncio's ``TimerHandle`` is one."""

    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """Runs a callback once after a delay in seconds. ``asyncio.AbstractEventLoop`` satisfies it."""

    def call_later(self, delay: float, callback: Callable[[], object], /) -> Cancellable: ...


class DelayedOperation(ABC):
    """An operation that waits for a condition, with a deadline ``delay_ms`` after it is parked.

    Subclasses implement :meth:`try_complete` (check the condition; if it holds, return
    :meth:`force_complete`), :meth:`on_complete` (answer the request; runs exactly once, whether
    the operation was satisfied, forced or expired) and optionally :meth:`on_expiration` (runs once
    after ``on_complete`` when the deadline was what completed it, e.g. to mark an expiry meter).

    ``on_watch`` and ``on_release`` let an operation be woken by something other than purgatory
    keys (a fetch session's waiter): register the extra wake-up source in ``on_watch``, which the
    purgatory calls after the keys are watched and before its second check, and drop it in
    ``on_release``, which runs once when the operation completes or is cancelled.
    """

    __slots__ = ("_cancelled", "_completed", "_expired", "_purgatory", "_timer", "_watch_keys", "delay_ms")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        """How long the operation may stay parked, counted from the moment it is parked."""
        self._completed = False
        self._expired = False
        self._cancelled = False
        self._timer: Cancellable | None = None
        self._purgatory: DelayedOperationPurgatory | None = None
        self._watch_keys: tuple[Hashable, ...] = ()

    @property
    def is_completed(self) -> bool:
        """True once the operation completed, expired or was cancelled; it never runs again."""
        return self._completed

    @property
    def is_expired(self) -> bool:
        """True if the deadline completed the operation (already true while ``on_complete`` runs)."""
        return self._expired

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    @abstractmethod
    def try_complete(self) -> bool:
        """Check whether the operation can complete now; if so, return ``self.force_complete()``.

        Return False when it cannot complete yet (or was already completed). Must be cheap: it runs
        on every event of every key the operation watches.
        """

    @abstractmethod
    def on_complete(self) -> None:
        """Answer the request. Called exactly once, by whichever path completes the operation."""

    def on_expiration(self) -> None:
        """Called once, after ``on_complete``, when the deadline completed the operation."""
        return  # optional hook

    def on_watch(self) -> None:
        """Called after the purgatory registered the watches and before its second check."""
        return  # optional hook

    def on_release(self) -> None:
        """Called once when the operation completes or is cancelled, before ``on_complete``."""
        return  # optional hook

    def force_complete(self) -> bool:
        """Complete now, whatever the condition says. Only the first caller wins (returns True).

        Cancels the timer, leaves every watcher list, then runs ``on_complete``.
        """
        return self._finish(expired=False)

    def cancel(self) -> bool:
        """Drop the operation without answering it: no ``on_complete``, no expiry. First caller wins."""
        if self._completed:
            return False
        self._cancelled = True
        self._completed = True
        self._detach()
        return True

    def _expire(self) -> None:
        """Complete as expired (the deadline passed, or shutdown), unless something completed it first."""
        if self._finish(expired=True):
            self.on_expiration()

    def _finish(self, *, expired: bool) -> bool:
        if self._completed:
            return False
        self._completed = True
        self._expired = expired
        self._detach()
        self.on_complete()
        return True

    def _detach(self) -> None:
        """State first, callbacks later: a nested check must already see this operation as gone."""
        timer = self._timer
        if timer is not None:
            self._timer = None
            timer.cancel()
        purgatory = self._purgatory
        if purgatory is not None:
            self._purgatory = None
            purgatory._operation_done(self)
        self.on_release()


class DelayedOperationPurgatory:
    """Parks delayed operations of one kind ("Fetch", "Produce") by key, with their deadlines.

    Keys are whatever the event sources and the operations agree on (the broker uses one key per
    topic-partition). Counters for metrics: :attr:`num_delayed` (operations parked now, Kafka's
    NumDelayedOperations), :attr:`watched` (watch entries now, Kafka's PurgatorySize),
    :attr:`expirations` and :attr:`completions` (totals since creation).
    """

    def __init__(self, name: str, scheduler: Scheduler) -> None:
        self.name = name
        self._scheduler = scheduler
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._delayed: dict[DelayedOperation, None] = {}
        self._watched = 0
        self._shut_down = False
        self.expirations = 0
        """Operations completed by their deadline (including those expired by ``shutdown``)."""
        self.completions = 0
        """Parked operations that left the purgatory completed (satisfied, forced or expired)."""
        self._log = _log.bind(purgatory=name)

    # -- parking ----------------------------------------------------------------------------------

    def try_complete_else_watch(self, operation: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; otherwise watch it on ``keys`` until its deadline.

        Kafka's order, which is what makes a concurrent event impossible to miss: check; watch every
        key (and let the operation register other wake-up sources); check again, because an event
        that arrived after the first check but before the watch found nobody to wake; only then arm
        the timer. Returns True if the operation is completed when this returns.

        A purgatory that was shut down parks nothing: the operation expires at once, so the request
        is still answered. If a check raises, the exception propagates and the operation is left
        neither watched nor timed (the second time by being cancelled): the caller answers it.
        """
        if operation.is_completed:
            return True
        if operation._purgatory is not None:
            raise ValueError(f"{operation!r} is already parked in purgatory {operation._purgatory.name}")
        if self._shut_down:
            self._watch(operation, ())
            operation._expire()
            return True
        if operation.try_complete() or operation.is_completed:
            return True
        self._watch(operation, keys)
        try:
            operation.on_watch()
            # is_completed on both sides: a nested event may complete it while try_complete runs.
            if operation.is_completed or operation.try_complete() or operation.is_completed:
                return True
        except BaseException:
            operation.cancel()  # never leave a watched operation without a deadline
            raise
        operation._timer = self._scheduler.call_later(operation.delay_ms / 1000.0, self._expiry(operation))
        return False

    def _watch(self, operation: DelayedOperation, keys: Iterable[Hashable]) -> None:
        unique = tuple(dict.fromkeys(keys))
        operation._purgatory = self
        operation._watch_keys = unique
        self._delayed[operation] = None
        for key in unique:
            watchers = self._watchers.get(key)
            if watchers is None:
                watchers = self._watchers[key] = {}
            watchers[operation] = None
        self._watched += len(unique)

    def _expiry(self, operation: DelayedOperation) -> Callable[[], None]:
        """The timer callback: expire ``operation``, logging (not raising) a failing callback."""

        def expire() -> None:
            operation._timer = None  # it has run: nothing to cancel
            try:
                operation._expire()
            except Exception:
                self._log.exception("delayed operation failed while expiring", operation=repr(operation))

        return expire

    def _operation_done(self, operation: DelayedOperation) -> None:
        """Called by the operation when it completes or is cancelled: forget it everywhere."""
        if operation not in self._delayed:
            return
        del self._delayed[operation]
        for key in operation._watch_keys:
            watchers = self._watchers.get(key)
            if watchers is not None and operation in watchers:
                del watchers[operation]
                self._watched -= 1
                if not watchers:
                    del self._watchers[key]
        operation._watch_keys = ()
        if operation.is_cancelled:
            return
        self.completions += 1
        if operation.is_expired:
            self.expirations += 1

    # -- events -----------------------------------------------------------------------------------

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watching ``key``; returns how many this call completed.

        Costs O(operations watching ``key``): other keys are not touched. The walk is over a
        snapshot, so an operation's ``on_complete`` may itself append, move a high watermark and
        call ``check_and_complete`` again (on this key or another) safely. An operation whose check
        raises is logged and left parked (its deadline still answers it); the others are checked.
        """
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        for operation in tuple(watchers):
            if operation.is_completed:
                continue
            try:
                if operation.try_complete():
                    completed += 1
            except Exception:
                self._log.exception(
                    "delayed operation check failed", key=repr(key), operation=repr(operation)
                )
        return completed

    def cancel_for_key(self, key: Hashable) -> list[DelayedOperation]:
        """Cancel every operation watching ``key`` (no callbacks) and return them.

        For a partition that is going away, when its waiters must be answered differently or not
        at all. Cancelled operations leave every watcher list, not only ``key``'s, and their timers.
        """
        watchers = self._watchers.get(key)
        if not watchers:
            return []
        cancelled = [operation for operation in tuple(watchers) if operation.cancel()]
        return cancelled

    def shutdown(self, *, expire: bool = True) -> int:
        """Answer every parked operation and refuse to park new ones; returns how many it answered.

        With ``expire`` (the default) each is completed as if its deadline had passed (a fetch
        answers with what there is, a produce with REQUEST_TIMED_OUT for what is not committed);
        otherwise it is force-completed.
        """
        self._shut_down = True
        answered = 0
        for operation in tuple(self._delayed):
            if operation.is_completed:
                continue
            try:
                if expire:
                    operation._expire()
                else:
                    operation.force_complete()
            except Exception:
                self._log.exception("delayed operation failed at shutdown", operation=repr(operation))
            answered += 1
        return answered

    # -- counters ---------------------------------------------------------------------------------

    @property
    def num_delayed(self) -> int:
        """Operations parked now (watched and/or waiting for their deadline)."""
        return len(self._delayed)

    @property
    def watched(self) -> int:
        """Watch entries now: an operation parked on three keys counts three times."""
        return self._watched

    @property
    def num_watched_keys(self) -> int:
        """Keys with at least one parked operation (an idle key holds no list)."""
        return len(self._watchers)

    def watchers_of(self, key: Hashable) -> int:
        """How many parked operations watch ``key``."""
        return len(self._watchers.get(key, ()))

    def __repr__(self) -> str:
        return f"DelayedOperationPurgatory({self.name!r}, delayed={self.num_delayed}, watched={self.watched})"


class _FakeTimer:
    __slots__ = ("_scheduler", "callback", "cancelled", "when")

    def __init__(self, scheduler: FakeScheduler, when: float, callback: Callable[[], object]) -> None:
        self._scheduler = scheduler
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self._scheduler._live -= 1


class FakeScheduler:
    """A :class:`Scheduler` whose time moves only when told to, for tests and simulations.

    Callbacks run in deadline order (ties in scheduling order) during :meth:`advance`, including
    callbacks scheduled by callbacks, if they fall due within the advanced interval.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()
        self._live = 0

    def time(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], object], /) -> _FakeTimer:
        timer = _FakeTimer(self, self._now + max(delay, 0.0), callback)
        heapq.heappush(self._heap, (timer.when, next(self._seq), timer))
        self._live += 1
        return timer

    def advance(self, seconds: float) -> int:
        """Move time forward, running every callback that falls due; returns how many ran."""
        if seconds < 0:
            raise ValueError(f"cannot move a scheduler back in time ({seconds} s)")
        target = self._now + seconds
        ran = 0
        while self._heap and self._heap[0][0] <= target:
            when, _, timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.cancelled = True
            self._live -= 1
            timer.callback()
            ran += 1
        self._now = target
        return ran

    def advance_ms(self, ms: float) -> int:
        return self.advance(ms / 1000.0)

    @property
    def pending(self) -> int:
        """Timers armed and neither run nor cancelled."""
        return self._live
