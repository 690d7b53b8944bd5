"""Accepting on a TLS listener: admit the socket first, then shake hands, then serve.

Kafka's acceptor counts a socket against ``max.connections``, ``max.connections.per.ip`` and
``max.connection.creation.rate`` the moment it accepts it, before any TLS byte is exchanged. An
asyncio server created with ``ssl=`` shows the protocol its connection only after the handshake,
so a peer that opens sockets and never finishes a handshake would hold descriptors outside every
quota. A TLS listener therefore accepts its sockets itself (:class:`TlsAcceptor`): each is
admitted against the quotas by its address, and only an admitted one is handed to the event loop
with the listener's TLS context (``connect_accepted_socket``, bounded by the handshake timeout).
A refused socket is handed over without TLS, so its connection closes it exactly as a plaintext
listener's does (at once, or after the throttle). A handshake that fails closes the connection
and releases its quota slot; when the broker refused the peer's TLS (a plaintext client on a TLS
port, an untrusted certificate) it counts as a failed authentication, as Kafka counts it.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from collections.abc import Callable

import structlog

from broker.server.connection import KafkaConnection

log = structlog.get_logger("kipling.server")

FAILED_TLS_HANDSHAKE = "failed_tls_handshake"
"""The close reason of a connection whose TLS handshake the broker refused."""
TLS_HANDSHAKE_ABANDONED = "tls_handshake_abandoned"
"""The close reason of a connection whose peer left, or never finished, the TLS handshake."""

ACCEPT_RETRY_DELAY_S = 1.0
"""How long accepting pauses when the process is out of descriptors or memory (asyncio's delay)."""
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def bind_listening_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Non-blocking listening sockets for ``host:port``, one per address it resolves to (an
    empty host: every interface), with SO_REUSEADDR, as ``loop.create_server`` binds them."""
    infos = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class TlsAcceptor:
    """Accepts one listening socket of a TLS listener."""

    def __init__(
        self,
        sock: socket.socket,
        new_connection: Callable[[], KafkaConnection],
        context: Callable[[], ssl.SSLContext],
        handshake_timeout_s: float,
        on_refused: Callable[[], None],
    ) -> None:
        """``context()`` is the listener's live TLS context (a reloaded keystore is used by the
        next handshake); ``on_refused`` runs when the broker refuses a peer's TLS."""
        self._sock = sock
        self._new_connection = new_connection
        self._context = context
        self._handshake_timeout_s = handshake_timeout_s
        self._on_refused = on_refused
        self._accepting: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    async def close(self) -> None:
        """Stop accepting and drop the handshakes in progress (their connections were never
        served, so nothing is lost)."""
        tasks = [*self._handshakes, *([self._accepting] if self._accepting is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._sock.close()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                peer_sock, address = await loop.sock_accept(self._sock)
            except OSError as exc:
                if exc.errno in _RESOURCE_ERRNOS:
                    log.warning("cannot accept connections", error=str(exc), retry_s=ACCEPT_RETRY_DELAY_S)
                    await asyncio.sleep(ACCEPT_RETRY_DELAY_S)
                continue  # otherwise the peer gave up before we accepted: nothing to do
            try:
                peer_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # the peer is already gone: nothing to serve
                peer_sock.close()
                continue
            connection = self._new_connection()
            admitted = connection.admit(address)
            task = loop.create_task(self._connect(peer_sock, connection, admitted))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _connect(self, peer_sock: socket.socket, connection: KafkaConnection, admitted: bool) -> None:
        loop = asyncio.get_running_loop()
        if not admitted:  # its connection_made closes it, as on a plaintext listener
            await loop.connect_accepted_socket(lambda: connection, peer_sock)
            return
        try:
            await loop.connect_accepted_socket(
                lambda: connection,
                peer_sock,
                ssl=self._context(),
                ssl_handshake_timeout=self._handshake_timeout_s,
            )
        except ssl.SSLError as exc:
            connection.log.info("closing connection: TLS handshake refused", reason=exc.reason or str(exc))
            connection.close_reason = FAILED_TLS_HANDSHAKE
            self._on_refused()
            connection.connection_lost(exc)
        except asyncio.CancelledError:
            connection.close_reason = TLS_HANDSHAKE_ABANDONED
            connection.connection_lost(None)
            raise
        except Exception as exc:  # the peer left, reset, or ran past the handshake timeout
            connection.log.debug("TLS handshake not finished", error=repr(exc))
            connection.close_reason = TLS_HANDSHAKE_ABANDONED
            connection.connection_lost(exc)
