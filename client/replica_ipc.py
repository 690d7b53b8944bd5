"""The channel between a broker and its follower processes: framed JSON over a Unix stream socket.

It lives in ``client`` because both ends use it and the import rules (DESIGN.md section 2) let
``broker`` and ``follower`` share only protocol, storage and client; what the messages mean is
described in :mod:`client.replica_messages`.

Frames are a 4-byte big-endian length followed by that many bytes of one UTF-8 JSON object. Three
kinds of object travel:

* ``{"kind": "request", "id": n, "type": ..., "body": {...}}`` gets exactly one
* ``{"kind": "reply", "id": n, "body": {...}}`` or ``{"kind": "reply", "id": n, "error": "..."}``;
* ``{"kind": "event", "type": ..., "body": {...}}`` is never answered (the follower's reports).

Requests are served one at a time in arrival order, so a ``remove_partitions`` can never overtake
the ``add_partitions`` before it, while replies and events are read meanwhile. Control traffic is
small, so plain asyncio streams are enough here (the data path never goes through this socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

FRAME_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 64 * 1024 * 1024
"""Far above any control message (an add_partitions of 100k partitions is ~30 MB)."""
_READ_CHUNK = 256 * 1024

REQUEST = "request"
REPLY = "reply"
EVENT = "event"

JsonObject = dict[str, Any]
RequestHandler = Callable[[str, JsonObject], Awaitable[JsonObject]]
"""Serves one request: (type, body) -> reply body; an exception becomes an error reply."""
EventHandler = Callable[[str, JsonObject], None]

_log = structlog.get_logger(__name__)


class IpcError(Exception):
    """Base class of the channel's errors."""


class IpcProtocolError(IpcError):
    """The peer sent something that is not a frame of one JSON object of a known kind."""


class IpcClosedError(IpcError):
    """The channel is closed (the peer exited, or this side closed it)."""


class IpcRemoteError(IpcError):
    """The peer answered a request with an error."""


# -- codec (sans-IO) ---------------------------------------------------------------------------------


def encode_message(message: Mapping[str, Any]) -> bytes:
    """One frame: the length prefix and the compact JSON of ``message``."""
    payload = json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    if len(payload) > MAX_FRAME_BYTES:
        raise IpcProtocolError(f"message of {len(payload)} bytes exceeds {MAX_FRAME_BYTES}")
    return FRAME_HEADER.pack(len(payload)) + payload


def request_message(request_id: int, message_type: str, body: Mapping[str, Any]) -> JsonObject:
    return {"kind": REQUEST, "id": request_id, "type": message_type, "body": dict(body)}


def reply_message(request_id: int, body: Mapping[str, Any]) -> JsonObject:
    return {"kind": REPLY, "id": request_id, "body": dict(body)}


def error_reply(request_id: int, error: str) -> JsonObject:
    return {"kind": REPLY, "id": request_id, "error": error, "body": {}}


def event_message(message_type: str, body: Mapping[str, Any]) -> JsonObject:
    return {"kind": EVENT, "type": message_type, "body": dict(body)}


class FrameDecoder:
    """Turns a byte stream into messages; bytes of an incomplete frame wait for the next feed."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes

    @property
    def pending(self) -> int:
        """Bytes held of a frame not yet complete (non-zero at EOF means a truncated frame)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[JsonObject]:
        """Every message completed by ``data``; raises IpcProtocolError on a malformed frame."""
        self._buffer += data
        messages = []
        header = FRAME_HEADER.size
        while len(self._buffer) >= header:
            (size,) = FRAME_HEADER.unpack_from(self._buffer)
            if size > self._max:
                raise IpcProtocolError(f"frame of {size} bytes exceeds {self._max}")
            if len(self._buffer) < header + size:
                break
            payload = bytes(self._buffer[header : header + size])
            del self._buffer[: header + size]
            messages.append(decode_payload(payload))
        return messages


def decode_payload(payload: bytes) -> JsonObject:
    """Parse and check one frame's JSON object."""
    try:
        message = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IpcProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise IpcProtocolError(f"frame holds a {type(message).__name__}, not an object")
    kind = message.get("kind")
    if kind == REPLY:
        _require(message, "id", int)
    elif kind == REQUEST:
        _require(message, "id", int)
        _require(message, "type", str)
    elif kind == EVENT:
        _require(message, "type", str)
    else:
        raise IpcProtocolError(f"unknown message kind {kind!r}")
    body = message.setdefault("body", {})
    if not isinstance(body, dict):
        raise IpcProtocolError(f"message body must be an object, got {type(body).__name__}")
    return message


def _require(message: JsonObject, key: str, kind: type) -> None:
    value = message.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise IpcProtocolError(f"{message.get('kind')} message needs a {kind.__name__} {key!r}")


# -- the asyncio channel -----------------------------------------------------------------------------


class IpcChannel:
    """Requests, replies and events over one stream; both the broker and the follower use it.

    Call :meth:`start` with the handlers of this side, then :meth:`request` / :meth:`send_event`.
    When the peer goes away every pending request fails with :class:`IpcClosedError` and
    :meth:`wait_closed` returns.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, name: str) -> None:
        self._reader = reader
        self._writer = writer
        self._name = name
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[JsonObject]] = {}
        self._requests: asyncio.Queue[JsonObject | None] = asyncio.Queue()
        self._reader_task: asyncio.Task[None] | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()
        self._stopping = False
        self._on_request: RequestHandler | None = None
        self._on_event: EventHandler | None = None
        self._log = _log.bind(channel=name)

    @classmethod
    async def over_socket(cls, sock: socket.socket, *, name: str) -> IpcChannel:
        """A channel over a connected Unix stream socket (one end of a socketpair); takes it over."""
        sock.setblocking(False)
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=_READ_CHUNK)
        return cls(reader, writer, name=name)

    def start(self, on_request: RequestHandler | None = None, on_event: EventHandler | None = None) -> None:
        """Start reading; requests go to ``on_request`` one at a time, events to ``on_event``."""
        self._on_request = on_request
        self._on_event = on_event
        self._reader_task = asyncio.create_task(self._read_loop(), name=f"ipc-read-{self._name}")
        self._server_task = asyncio.create_task(self._serve_requests(), name=f"ipc-serve-{self._name}")

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # -- sending -------------------------------------------------------------------------------------

    async def request(
        self, message_type: str, body: Mapping[str, Any] | None = None, timeout_s: float | None = None
    ) -> JsonObject:
        """Send a request and wait for its reply body.

        Raises IpcRemoteError (the peer's handler failed), IpcClosedError, or TimeoutError. A
        timed-out request is forgotten: a late reply is dropped.
        """
        request_id = next(self._ids)
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._send(request_message(request_id, message_type, body or {}))
            async with asyncio.timeout(timeout_s):
                return await future
        finally:
            self._pending.pop(request_id, None)

    async def send_event(self, message_type: str, body: Mapping[str, Any]) -> None:
        """Send an unsolicited message; raises IpcClosedError if the channel is closed."""
        await self._send(event_message(message_type, body))

    async def _send(self, message: Mapping[str, Any]) -> None:
        if self.closed:
            raise IpcClosedError(f"IPC channel {self._name} is closed")
        frame = encode_message(message)
        try:
            self._writer.write(frame)
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._close(f"write failed: {exc!r}")
            raise IpcClosedError(f"IPC channel {self._name} is closed ({exc!r})") from exc

    # -- receiving -----------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        decoder = FrameDecoder()
        reason = "closed by the peer"
        try:
            while True:
                data = await self._reader.read(_READ_CHUNK)
                if not data:
                    if decoder.pending:
                        reason = f"truncated frame at EOF ({decoder.pending} bytes)"
                        self._log.error("IPC peer closed in the middle of a frame", bytes=decoder.pending)
                    break
                for message in decoder.feed(data):
                    self._dispatch(message)
        except IpcProtocolError as exc:
            reason = f"protocol error: {exc}"
            self._log.error("malformed IPC message; closing the channel", error=str(exc))
        except (ConnectionError, OSError) as exc:
            reason = f"read failed: {exc!r}"
        finally:
            self._close(reason)

    def _dispatch(self, message: JsonObject) -> None:
        kind = message["kind"]
        if kind == REPLY:
            future = self._pending.get(message["id"])
            if future is None or future.done():
                self._log.debug("reply to no pending request", request_id=message["id"])
            elif "error" in message:
                future.set_exception(IpcRemoteError(str(message["error"])))
            else:
                future.set_result(message["body"])
        elif kind == REQUEST:
            self._requests.put_nowait(message)
        elif self._on_event is not None:
            try:
                self._on_event(message["type"], message["body"])
            except Exception:
                self._log.exception("IPC event handler failed", type=message["type"])

    async def _serve_requests(self) -> None:
        while (message := await self._requests.get()) is not None:
            with contextlib.suppress(IpcClosedError):
                await self._send(await self._answer(message))

    async def _answer(self, message: JsonObject) -> JsonObject:
        request_id, message_type = message["id"], message["type"]
        if self._stopping or self._on_request is None:
            return error_reply(request_id, f"{self._name} does not serve requests now")
        try:
            return reply_message(request_id, await self._on_request(message_type, message["body"]))
        except Exception as exc:
            self._log.warning("IPC request failed", type=message_type, error=repr(exc))
            return error_reply(request_id, f"{type(exc).__name__}: {exc}")

    # -- closing -------------------------------------------------------------------------------------

    def _close(self, reason: str) -> None:
        if self._closed.is_set():
            return
        self._log.debug("IPC channel closed", reason=reason)
        self._closed.set()
        self._requests.put_nowait(None)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(IpcClosedError(f"IPC channel {self._name} {reason}"))
        self._writer.close()

    async def close(self) -> None:
        """Serve no further request, let the reply of the one in progress go out, close the socket."""
        self._stopping = True
        self._requests.put_nowait(None)
        current = asyncio.current_task()
        if self._server_task is not None and self._server_task is not current:
            await asyncio.gather(self._server_task, return_exceptions=True)
        self._close("closed by this side")
        if self._reader_task is not None and self._reader_task is not current:
            self._reader_task.cancel()
            await asyncio.gather(self._reader_task, return_exceptions=True)
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()


__all__ = [
    "MAX_FRAME_BYTES",
    "EventHandler",
    "FrameDecoder",
    "IpcChannel",
    "IpcClosedError",
    "IpcError",
    "IpcProtocolError",
    "IpcRemoteError",
    "JsonObject",
    "RequestHandler",
    "decode_payload",
    "encode_message",
    "error_reply",
    "event_message",
    "reply_message",
    "request_message",
]
