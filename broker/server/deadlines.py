"""When a connection is due to be closed: idle too long, or a request too long in arriving.

``connections.max.idle.ms`` (Kafka's) closes a connection that has neither sent a byte nor been
answered for that long. ``kipling.request.receive.timeout.ms`` (kipling's own; Kafka has no such
key) closes one whose current request started arriving longer ago than that: a slowloris peer
that trickles a byte now and then is never idle, and without this bound it would hold its partial
request, its slot in ``max.connections`` and its share of ``queued.max.request.bytes`` for ever.
A frame's clock starts with its first byte and stops when it is complete. Time the connection
spends paused behind its own earlier requests (the read-ahead bound) is not counted against the
peer, nor is it idle time; time paused for the memory pool is, since when partial requests fill
the pool, closing them on time is what frees it. A peer that stops reading its answers (the
socket's send buffer full) makes no progress either: from then on the idle clock runs whatever
else holds it, as in Kafka, where a send that never completes leaves the channel idle.

Sans-IO, on a clock passed in: the connection asks :meth:`Deadlines.expired` from one timer that it
re-arms lazily at :meth:`Deadlines.next_check` (never a timer per byte or per request).
"""

from __future__ import annotations

IDLE = "idle"
RECEIVE_TIMEOUT = "receive_timeout"
"""Close reasons, as the connection-close metric labels them."""

BUSY_RECHECK_S = 0.05
"""How soon an idle deadline that passed while a request was being answered is looked at again."""


class Deadlines:
    def __init__(self, idle_timeout_ms: int, receive_timeout_ms: int, now: float) -> None:
        """A timeout of 0 or less is disabled."""
        self._idle_s = idle_timeout_ms / 1000 if idle_timeout_ms > 0 else None
        self._receive_s = receive_timeout_ms / 1000 if receive_timeout_ms > 0 else None
        self._last_activity = now
        self._frame_started: float | None = None
        self._paused_at: float | None = None
        self._write_stalled_at: float | None = None
        self.busy = False
        """A request is being answered: the connection is not idle, however long that takes."""

    # -- events --------------------------------------------------------------------------------

    def received(self, now: float, *, in_progress: bool, completed: bool, paused: bool = False) -> None:
        """Bytes arrived; ``in_progress``: a frame is still partial after them; ``completed``: at
        least one frame was completed by them (so a partial one after it began just now);
        ``paused``: they were read while the broker meant not to read (one byte, see
        ``KafkaConnection.get_buffer``), so they start no clock: :meth:`reading_resumed` does."""
        self._last_activity = now
        if not in_progress:
            self._frame_started = None
        elif completed or self._frame_started is None:
            self._frame_started = None if paused else now

    def reading_resumed(self, now: float, *, in_progress: bool) -> None:
        """The broker reads again: a partial frame that has no clock yet gets one from now."""
        if in_progress and self._frame_started is None:
            self._frame_started = now

    def answered(self, now: float) -> None:
        self._last_activity = now

    def backlog_started(self, now: float) -> None:
        """The connection waits for its own earlier requests to be answered: neither clock runs."""
        if self._paused_at is None:
            self._paused_at = now

    def backlog_cleared(self, now: float) -> None:
        if self._paused_at is None:
            return
        if self._frame_started is not None:
            self._frame_started += now - self._paused_at
        self._last_activity = max(self._last_activity, now)
        self._paused_at = None

    def write_stalled(self, now: float) -> None:
        """The peer stopped taking answers (the transport paused writing)."""
        if self._write_stalled_at is None:
            self._write_stalled_at = now

    def write_resumed(self, now: float) -> None:
        if self._write_stalled_at is not None:
            self._write_stalled_at = None
            self._last_activity = max(self._last_activity, now)

    # -- the timer's questions -----------------------------------------------------------------

    def expired(self, now: float) -> str | None:
        """Why the connection must be closed now, or None."""
        stalled = self._stalled_deadline()
        if stalled is not None and now >= stalled:
            return IDLE
        if self._paused_at is not None:
            return None
        receive = self._receive_deadline()
        if receive is not None and now >= receive:
            return RECEIVE_TIMEOUT
        idle = self._idle_deadline()
        if idle is not None and now >= idle and not self.busy:
            return IDLE
        return None

    def next_check(self, now: float) -> float | None:
        """Seconds until :meth:`expired` may answer something else; None: no deadline runs."""
        stalled = self._stalled_deadline()
        if self._paused_at is not None:
            return None if stalled is None else max(stalled - now, 0.0)
        candidates = (self._receive_deadline(), self._idle_deadline(), stalled)
        deadlines = [d for d in candidates if d is not None]
        if not deadlines:
            return None
        return max(min(deadlines) - now, BUSY_RECHECK_S if self.busy else 0.0)

    def _receive_deadline(self) -> float | None:
        if self._receive_s is None or self._frame_started is None:
            return None
        return self._frame_started + self._receive_s

    def _stalled_deadline(self) -> float | None:
        if self._idle_s is None or self._write_stalled_at is None:
            return None
        return self._write_stalled_at + self._idle_s

    def _idle_deadline(self) -> float | None:
        return self._last_activity + self._idle_s if self._idle_s is not None else None
