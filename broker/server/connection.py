"""One client connection: frames in, responses out, one request at a time, in order.

A ``BufferedProtocol``: the socket reads straight into the frame decoder's buffers (large
produce frames land in one buffer sized for them), frames queue up, and a single task per
connection answers them in order, as Kafka does. Reading pauses while too many requests wait,
so a fast producer cannot queue unbounded memory; writing respects the transport's flow
control. An idle connection is closed after ``connections.max.idle.ms`` with one timer that is
re-armed lazily (never a timer per request).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from typing import Any

import structlog

from broker.server.dispatcher import CloseConnection, RequestDispatcher
from protocol.errors import FrameTooLargeError
from protocol.framing import FrameDecoder

log = structlog.get_logger("kipling.connection")

MAX_QUEUED_REQUESTS = 16
"""Frames read ahead before the socket is paused (clients pipeline up to 5 by default)."""


def _buffer(part: Any) -> bytes | bytearray | memoryview:
    if isinstance(part, bytes | bytearray | memoryview):
        return part
    return part.read_bytes()  # type: ignore[no-any-return]


PEER_CLOSED = "client"
"""The close reason of a connection the peer closed (EOF or reset), as the metrics label it."""


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        dispatcher: RequestDispatcher,
        connection_id: int,
        *,
        max_frame_size: int,
        idle_timeout_ms: int,
        on_close: Callable[[KafkaConnection], None],
    ) -> None:
        self.connection_id = connection_id
        self.peer = "?"
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_frame_size)
        self._max_frame_size = max_frame_size
        self._queued_bytes = 0
        self.close_reason = PEER_CLOSED
        """Why the connection ended, for the connection-close metric."""
        self._idle_timeout_s = idle_timeout_ms / 1000 if idle_timeout_ms > 0 else None
        self._on_close = on_close
        self._queue: collections.deque[memoryview] = collections.deque()
        self._frame_ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._paused = False
        self._closing = False
        self._busy = False
        self._last_activity = time.monotonic()
        self._idle_timer: asyncio.TimerHandle | None = None
        self.log = log

    # -- asyncio.BufferedProtocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses
        peername = transport.get_extra_info("peername")
        self.peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        self.log = log.bind(connection_id=self.connection_id, peer=self.peer)
        self._task = asyncio.get_running_loop().create_task(self._serve())
        self._arm_idle_timer()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._last_activity = time.monotonic()
        try:
            self._decoder.buffer_updated(nbytes)
        except FrameTooLargeError as exc:
            self.log.warning("closing connection: frame too large", error=str(exc))
            self.close_reason = "frame_too_large"
            self.abort()
            return
        while (frame := self._decoder.next_frame()) is not None:
            self._queue.append(frame)
            self._queued_bytes += len(frame)
        if self._queue:
            self._frame_ready.set()
            if self._over_read_ahead() and not self._paused and self._transport:
                self._transport.pause_reading()
                self._paused = True

    def _over_read_ahead(self) -> bool:
        """Pause reading at 16 queued requests or one maximum-size frame's worth of bytes, so a
        client pipelining large produces holds at most ~socket.request.max.bytes here."""
        return len(self._queue) >= MAX_QUEUED_REQUESTS or self._queued_bytes >= self._max_frame_size

    def eof_received(self) -> bool:
        # The client closed its side. Kafka clients never half-close to wait for answers, so
        # the connection goes now (returning False closes the transport → connection_lost).
        self._closing = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._transport = None
        self._can_write.set()
        self._frame_ready.set()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._task is not None:
            # Nobody can read an answer any more: a parked fetch or acks=-1 produce leaves its
            # purgatory now instead of at its deadline (appends already made stay made).
            self._task.cancel()
        self._on_close(self)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- serving -------------------------------------------------------------------------------

    async def _serve(self) -> None:
        try:
            while True:
                if not self._queue:
                    if self._closing:
                        break
                    self._frame_ready.clear()
                    await self._frame_ready.wait()
                    continue
                frame = self._queue.popleft()
                self._queued_bytes -= len(frame)
                if self._paused and not self._over_read_ahead() and self._transport:
                    self._transport.resume_reading()
                    self._paused = False
                if not await self._answer(frame):
                    break
        except asyncio.CancelledError:
            pass
        finally:
            self.close()

    async def _answer(self, frame: memoryview) -> bool:
        self._busy = True
        try:
            reply = await self._dispatcher.dispatch(frame, self.peer, self.connection_id)
        except CloseConnection:
            self.close_reason = "bad_request"
            return False
        finally:
            self._busy = False
        self._last_activity = time.monotonic()
        if reply is None:
            return True
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
        return self._transport is not None

    # -- closing -------------------------------------------------------------------------------

    def close_when_idle(self) -> None:
        """Graceful shutdown: finish the request in progress (its response is sent), then close.

        Requests queued behind it are not started: the client sees the connection close and
        retries them, as it does when a Kafka broker shuts down.
        """
        self.close_reason = "shutdown"
        self._closing = True
        self._queue.clear()
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

    def _arm_idle_timer(self) -> None:
        if self._idle_timeout_s is None or self._transport is None:
            return
        remaining = self._last_activity + self._idle_timeout_s - time.monotonic()
        loop = asyncio.get_running_loop()
        if remaining > 0 or self._busy:
            self._idle_timer = loop.call_later(max(remaining, 0.05), self._arm_idle_timer)
            return
        self.log.info("closing idle connection", idle_ms=int(self._idle_timeout_s * 1000))
        self.close_reason = "idle"
        self.close()

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"KafkaConnection({self.connection_id}, {self.peer})"

    def info(self) -> dict[str, Any]:
        return {"id": self.connection_id, "peer": self.peer, "queued": len(self._queue)}
