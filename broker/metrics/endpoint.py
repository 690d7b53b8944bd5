"""A tiny asyncio HTTP endpoint serving ``/metrics`` in Prometheus' text format.

On the broker's own event loop (no thread), so scrapes see a consistent snapshot.
"""

from __future__ import annotations

import asyncio

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = structlog.get_logger("kipling.metrics")


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._registry = registry
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self.bound: tuple[str, int] | None = None

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, self._host, self._port, reuse_address=True)
        sock = self._server.sockets[0].getsockname()
        self.bound = (sock[0], sock[1])
        log.info("metrics endpoint listening", address=f"http://{sock[0]}:{sock[1]}/metrics")
        return self.bound

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                request_line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            parts = request_line.decode("latin-1").split()
            if (
                len(parts) >= 2
                and parts[0] in ("GET", "HEAD")
                and parts[1].split("?")[0] in ("/metrics", "/")
            ):
                body = generate_latest(self._registry)
                status, content_type = "200 OK", CONTENT_TYPE_LATEST
            else:
                body, status, content_type = b"not found\n", "404 Not Found", "text/plain"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + (body if parts and parts[0] != "HEAD" else b""))
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
