"""One client connection: frames in, responses out, one request at a time, in order.

A ``BufferedProtocol``: the socket reads straight into the frame decoder's buffers (large
produce frames land in one buffer sized for them), frames queue up, and a single task per
connection answers them in order, as Kafka does. Reading pauses while too many requests wait,
so a fast producer cannot queue unbounded memory, and while the broker's request memory pool
(``queued.max.request.bytes``, :mod:`broker.server.memory_pool`) is exhausted; writing respects
the transport's flow control. A connection idle for ``connections.max.idle.ms``, or whose current
request has been arriving for longer than ``kipling.request.receive.timeout.ms``, is closed by one
timer that is re-armed lazily (:mod:`broker.server.deadlines`; never a timer per byte or request).
A connection over ``max.connections`` or ``max.connections.per.ip`` is closed as soon as it is
made (:mod:`broker.server.connection_quotas`).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from typing import Any

import structlog

from broker.server.authentication import ConnectionSession, SaslServerAuthenticator
from broker.server.deadlines import RECEIVE_TIMEOUT, Deadlines
from broker.server.dispatcher import CloseConnection, RequestDispatcher
from broker.server.memory_pool import MemoryPool
from protocol.errors import FrameTooLargeError
from protocol.framing import FrameDecoder, encode_frame
from security.errors import AuthenticationError

log = structlog.get_logger("kipling.connection")

MAX_QUEUED_REQUESTS = 16
"""Frames read ahead before the socket is paused (clients pipeline up to 5 by default)."""


def _buffer(part: Any) -> bytes | bytearray | memoryview:
    if isinstance(part, bytes | bytearray | memoryview):
        return part
    return part.read_bytes()  # type: ignore[no-any-return]


PEER_CLOSED = "client"
"""The close reason of a connection the peer closed (EOF or reset), as the metrics label it."""
FAILED_AUTHENTICATION = "failed_authentication"
"""The close reason of a connection whose SASL handshake or exchange failed."""
AUTHENTICATION_TIMEOUT = "authentication_timeout"
"""The close reason of a connection still unauthenticated at ``kipling.authentication.timeout.ms``."""


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        dispatcher: RequestDispatcher,
        connection_id: int,
        *,
        max_frame_size: int,
        idle_timeout_ms: int,
        on_close: Callable[[KafkaConnection], None],
        pool: MemoryPool | None = None,
        receive_timeout_ms: int = 0,
        admit: Callable[[KafkaConnection], str | None] | None = None,
        new_session: Callable[[asyncio.BaseTransport], ConnectionSession] | None = None,
        authentication_timeout_s: float = 30.0,
    ) -> None:
        """``admit`` runs once the peer is known and returns why the connection may not stay
        (it is closed at once), or None; ``pool`` is shared by the node's connections;
        ``new_session`` gives an admitted connection its peer's identity (the TLS handshake is
        over by then) and, on SASL listeners, its SASL state."""
        self.connection_id = connection_id
        self.peer = "?"
        self.ip = "?"
        self.admitted = False
        """Counted by ``admit``; a refused connection is closed without serving anything."""
        self.close_delay_s = 0.0
        """Set by ``admit`` for a throttled connection: held unserved this long, then closed."""
        self.start_delay_s = 0.0
        """Set by ``admit`` when the broker-wide connection creation rate makes it wait: its
        requests are served only after this long (Kafka's acceptor blocks meanwhile)."""
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_frame_size)
        self._max_frame_size = max_frame_size
        self._queued_bytes = 0
        self._in_flight_bytes = 0
        self.close_reason = PEER_CLOSED
        """Why the connection ended, for the connection-close metric."""
        self._pool = pool if pool is not None else MemoryPool(None)
        self._admit = admit
        self._new_session = new_session
        self.session: ConnectionSession | None = None
        self._authentication_timeout_s = authentication_timeout_s
        self._authentication_timer: asyncio.TimerHandle | None = None
        self._deadlines = Deadlines(idle_timeout_ms, receive_timeout_ms, time.monotonic())
        self._receive_timeout_ms = receive_timeout_ms
        self._idle_timeout_ms = idle_timeout_ms
        self._on_close = on_close
        self._queue: collections.deque[memoryview] = collections.deque()
        self._frame_ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._paused = False
        self._backlogged = False
        self._memory_waiting = False
        self._closing = False
        self._lost = False
        self._admission_decided = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0
        self.log = log

    # -- asyncio.BufferedProtocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses
        if not self._admission_decided:  # a TLS listener admits at accept (tls_accept)
            self.admit(transport.get_extra_info("peername"))
        if not self.admitted:
            if self.close_delay_s > 0:  # throttled: Kafka's acceptor closes it after the throttle
                transport.pause_reading()  # type: ignore[attr-defined]
                asyncio.get_running_loop().call_later(self.close_delay_s, self.abort)
            else:
                self.abort()
            return
        self._begin_serving(transport)

    def admit(self, peername: Any) -> bool:
        """Count the new connection from ``peername`` against the quotas; False if it may not
        stay (``close_reason`` says why, and ``connection_made`` closes it). A TLS listener
        admits before the handshake (:mod:`broker.server.tls_accept`), as Kafka's acceptor counts
        a socket when it accepts it: handshakes in progress are connections too."""
        self._admission_decided = True
        self.peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        self.ip = str(peername[0]) if peername else "?"
        self.log = log.bind(connection_id=self.connection_id, peer=self.peer)
        refused = self._admit(self) if self._admit is not None else None
        if refused is not None:
            self.close_reason = refused
            return False
        self.admitted = True
        return True

    def _begin_serving(self, transport: asyncio.BaseTransport) -> None:
        """Serve an admitted connection (on TLS listeners the handshake is over by now, so the
        peer's certificate is known)."""
        if self._new_session is not None:
            try:
                self.session = self._new_session(transport)
            except AuthenticationError as exc:
                self.log.warning("closing connection: authentication failed", reason=str(exc))
                self.close_reason = FAILED_AUTHENTICATION
                self.abort()
                return
            authenticator = self.session.authenticator
            if authenticator is not None:  # unauthenticated peers send small requests, soon
                self._decoder.max_frame_size = min(self._max_frame_size, authenticator.max_receive_size)
                self._authentication_timer = asyncio.get_running_loop().call_later(
                    self._authentication_timeout_s, self._authentication_overdue
                )
        self._pool.join(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())
        self._schedule_timer()

    def get_buffer(self, sizehint: int) -> memoryview:
        buffer = self._decoder.get_buffer(sizehint)
        # A read can come after a pause: uvloop starts reading only once connection_made has
        # returned (a new connection joining an exhausted pool pauses in it), and asyncio runs a
        # read it had already scheduled. Such a read takes one byte; buffer_updated then pauses.
        return buffer[:1] if self._paused else buffer

    def buffer_updated(self, nbytes: int) -> None:
        paused = self._paused
        try:
            self._decoder.buffer_updated(nbytes)
        except FrameTooLargeError as exc:
            self.log.warning("closing connection: frame too large", error=str(exc))
            self.close_reason = "frame_too_large"
            self.abort()
            return
        completed = False
        while (frame := self._decoder.next_frame()) is not None:
            self._queue.append(frame)
            self._queued_bytes += len(frame)
            completed = True
        in_progress = self._decoder.in_progress > 0
        self._deadlines.received(
            time.monotonic(), in_progress=in_progress, completed=completed, paused=paused
        )
        if in_progress:
            self._schedule_timer()
        if completed:
            self._frame_ready.set()
        self._account()
        self._update_reading()

    def _over_read_ahead(self) -> bool:
        """Pause reading at 16 queued requests or one maximum-size frame's worth of bytes, so a
        client pipelining large produces holds at most ~socket.request.max.bytes here. A peer
        that has not authenticated yet gets one request read ahead (Kafka mutes such a channel
        until it has answered), so it holds at most sasl.server.max.receive.size."""
        authenticator = self.session.authenticator if self.session is not None else None
        if authenticator is not None and not authenticator.authenticated and self._queue:
            return True
        return len(self._queue) >= MAX_QUEUED_REQUESTS or self._queued_bytes >= self._max_frame_size

    def memory_wait(self, waiting: bool) -> None:
        """The memory pool's word: stop reading until it has room again (or read on)."""
        self._memory_waiting = waiting
        self._update_reading()

    def _account(self) -> None:
        """Tell the pool what this connection holds now: the frame it is receiving, and the
        requests received and not yet answered."""
        self._pool.hold(self, self._decoder.in_progress, self._queued_bytes + self._in_flight_bytes)

    def _update_reading(self) -> None:
        """Read unless the pool or the read-ahead bound says wait: the one place reading pauses
        and resumes."""
        transport = self._transport
        if transport is None or self._closing:
            return
        backlogged = self._over_read_ahead()
        pause = backlogged or self._memory_waiting
        if pause and transport.is_reading():
            transport.pause_reading()  # (again, if the transport started reading after a pause)
        elif not pause and self._paused:
            transport.resume_reading()
            self._deadlines.reading_resumed(time.monotonic(), in_progress=self._decoder.in_progress > 0)
        self._paused = pause
        self._hold_deadlines(backlogged)

    def _hold_deadlines(self, backlogged: bool) -> None:
        """While the connection waits for its own earlier requests to be answered, its deadlines
        stand still. A wait for the memory pool does count: peers whose partial requests fill
        the pool are closed on time, which is what frees it."""
        if backlogged == self._backlogged:
            return
        self._backlogged = backlogged
        now = time.monotonic()
        if backlogged:
            self._deadlines.backlog_started(now)
        else:
            self._deadlines.backlog_cleared(now)
            self._schedule_timer()

    def eof_received(self) -> bool:
        # The client closed its side. Kafka clients never half-close to wait for answers, so
        # the connection goes now (returning False closes the transport → connection_lost).
        self._closing = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lost:  # (tls_accept reports a failed handshake's loss itself)
            return
        self._lost = True
        self._closing = True
        self._transport = None
        self._can_write.set()
        self._frame_ready.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._authentication_timer is not None:
            self._authentication_timer.cancel()
        if self._task is not None:
            # Nobody can read an answer any more: a parked fetch or acks=-1 produce leaves its
            # purgatory now instead of at its deadline (appends already made stay made).
            self._task.cancel()
        self._pool.leave(self)
        self._on_close(self)

    def pause_writing(self) -> None:
        self._can_write.clear()
        self._deadlines.write_stalled(time.monotonic())
        self._schedule_timer()

    def resume_writing(self) -> None:
        self._can_write.set()
        self._deadlines.write_resumed(time.monotonic())

    # -- serving -------------------------------------------------------------------------------

    async def _serve(self) -> None:
        try:
            if self.start_delay_s > 0:
                await asyncio.sleep(self.start_delay_s)
            while True:
                if not self._queue:
                    if self._closing:
                        break
                    self._frame_ready.clear()
                    await self._frame_ready.wait()
                    continue
                frame = self._queue.popleft()
                self._queued_bytes -= len(frame)
                self._in_flight_bytes = len(frame)
                self._update_reading()
                if not await self._answer(frame):
                    break
        except asyncio.CancelledError:
            pass
        finally:
            self.close()

    async def _answer(self, frame: memoryview) -> bool:
        authenticator = self.session.authenticator if self.session is not None else None
        if authenticator is not None and authenticator.expects_raw_token:
            return await self._raw_sasl_token(authenticator, frame)
        self._deadlines.busy = True
        try:
            reply = await self._dispatcher.dispatch(frame, self.peer, self.connection_id, self.session)
        except CloseConnection:
            self.close_reason = "bad_request"
            return False
        finally:
            self._deadlines.busy = False
            self._in_flight_bytes = 0
            self._account()
        self._deadlines.answered(time.monotonic())
        if reply is None:
            return True
        failed = self.session.close_after_response if self.session is not None else None
        if failed is not None:
            # A refused login is answered only after connection.failed.authentication.delay.ms,
            # as Kafka delays it, so that guessing passwords is slow; then the connection closes.
            await asyncio.sleep(failed)
        if self._transport is None:
            return False
        if len(reply.parts) == 1:
            self._transport.write(reply.parts[0])
        else:
            # File slices (fetched records) are read here, in the same tick the response was
            # encoded, so the segment cannot change between the length prefix and the bytes.
            self._transport.writelines([_buffer(part) for part in reply.parts])
        if not self._can_write.is_set():
            await self._can_write.wait()
        if self.session is not None and not await self._after_authentication_step(self.session):
            return False
        return self._transport is not None

    def _authentication_overdue(self) -> None:
        authenticator = self.session.authenticator if self.session is not None else None
        if authenticator is None or authenticator.authenticated:
            return
        self.log.info(
            "closing connection: not authenticated in time", timeout_s=self._authentication_timeout_s
        )
        self.close_reason = AUTHENTICATION_TIMEOUT
        self.abort()

    async def _raw_sasl_token(self, authenticator: SaslServerAuthenticator, frame: memoryview) -> bool:
        """A SASL token after a SaslHandshake v0: bare bytes in, bare bytes out; a failure closes
        the connection, since this framing has no place for an error."""
        self._in_flight_bytes = 0
        self._account()
        self._deadlines.answered(time.monotonic())
        assert self.session is not None
        try:
            result = authenticator.authenticate(bytes(frame))
        except AuthenticationError as exc:
            self.log.warning("authentication failed", reason=str(exc))
            self.session.record_authentication(succeeded=False)
            self.close_reason = FAILED_AUTHENTICATION
            await asyncio.sleep(self.session.failed_delay_s)  # no error to send in this framing
            return False
        if authenticator.authenticated:
            self.session.record_authentication(succeeded=True)
            self._authenticated()
        if self._transport is None:
            return False
        self._transport.write(encode_frame(result.token))
        return True

    async def _after_authentication_step(self, session: ConnectionSession) -> bool:
        """After a SASL answer: a failed exchange closes the connection once its answer is out
        (after ``connection.failed.authentication.delay.ms``); a completed one lifts the
        unauthenticated request size bound."""
        if session.close_after_response is not None:
            self.close_reason = FAILED_AUTHENTICATION
            return False
        authenticator = session.authenticator
        if (
            authenticator is not None
            and authenticator.authenticated
            and self._authentication_timer is not None
        ):
            self._authenticated()
        return True

    def _authenticated(self) -> None:
        """The SASL exchange completed: full-size requests, read-ahead and no deadline for it."""
        self._decoder.max_frame_size = self._max_frame_size
        if self._authentication_timer is not None:
            self._authentication_timer.cancel()
            self._authentication_timer = None
        self._update_reading()

    # -- closing -------------------------------------------------------------------------------

    def close_when_idle(self) -> None:
        """Graceful shutdown: finish the request in progress (its response is sent), then close.

        Requests queued behind it are not started: the client sees the connection close and
        retries them, as it does when a Kafka broker shuts down.
        """
        self.close_reason = "shutdown"
        self._closing = True
        self._queue.clear()
        self._queued_bytes = 0
        self._account()
        self._frame_ready.set()
        if self._transport is not None:
            self._transport.pause_reading()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self) -> None:
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    # -- deadlines -----------------------------------------------------------------------------

    def _schedule_timer(self) -> None:
        """Make sure the one timer fires by the next deadline: a timer already due earlier is
        kept (it looks again when it fires), so this costs nothing on most calls."""
        if self._transport is None:
            return
        now = time.monotonic()
        delay = self._deadlines.next_check(now)
        if delay is None:
            return
        when = now + delay
        if self._timer is not None:
            if self._timer_when <= when:
                return
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)
        self._timer_when = when

    def _on_timer(self) -> None:
        self._timer = None
        reason = self._deadlines.expired(time.monotonic())
        if reason is None:
            self._schedule_timer()
            return
        self.close_reason = reason
        if reason == RECEIVE_TIMEOUT:
            self.log.info(
                "closing connection: request not received in time",
                receive_timeout_ms=self._receive_timeout_ms,
                bytes_in_progress=self._decoder.in_progress,
            )
            self.abort()
            return
        self.log.info("closing idle connection", idle_ms=self._idle_timeout_ms)
        self.abort()  # not close(): answers the peer never read would hold the connection open

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"KafkaConnection({self.connection_id}, {self.peer})"

    def info(self) -> dict[str, Any]:
        return {"id": self.connection_id, "peer": self.peer, "queued": len(self._queue)}
