"""A scripted in-process Kafka broker for client-side tests, speaking kipling's real codecs.

A test decides exactly what comes back (or does not): each decoded request goes to a script that
returns a reply, ``None`` for no reply, or :data:`CLOSE` to drop the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from protocol.api import Request, decode_request, encode_response
from protocol.framing import encode_frame

CLOSE: Any = object()
"""Returned by a script to close the connection instead of answering."""

# A reply is (api version to encode the body with, body, correlation id override or None).
Reply = tuple[int, dict[str, Any], int | None] | None
Script = Callable[[Request], Awaitable[Reply]]


class FakeBroker:
    """Serves each connection with ``script``; records every request it decoded."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[Request] = []
        self.server: asyncio.Server | None = None
        self.port = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def of(self, api_key: int) -> list[Request]:
        return [r for r in self.requests if r.api_key == api_key]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                request = decode_request(await reader.readexactly(size))
                self.requests.append(request)
                reply = await self.script(request)
                if reply is CLOSE:
                    break
                if reply is None:
                    continue
                version, body, correlation_id = reply
                cid = request.correlation_id if correlation_id is None else correlation_id
                writer.write(encode_frame(encode_response(request.api_key, version, cid, body)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)
