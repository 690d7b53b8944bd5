"""The broker's listening sockets and the set of open connections.

Shutdown is graceful: stop accepting, let every connection finish the request it is
handling (and send its response), then close; connections still busy after the grace period
are aborted so that SIGTERM always ends the process.

The servers of a node's client listeners share one request memory pool and one set of connection
quotas (both are per broker in Kafka too); each connection is admitted against the quotas as soon
as its peer is known.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

import structlog

from broker.metrics.requests import RequestMetrics
from broker.server.authentication import USER, ConnectionSession, Credentials, SaslServerAuthenticator
from broker.server.connection import PEER_CLOSED, KafkaConnection
from broker.server.connection_quotas import CONNECTION_RATE_THROTTLED, ConnectionQuotas
from broker.server.dispatcher import RequestDispatcher
from broker.server.memory_pool import MemoryPool
from broker.server.tls_accept import TlsAcceptor, bind_listening_sockets
from security.errors import AuthenticationError
from security.principal import KafkaPrincipal, SslPrincipalMapper, distinguished_name
from server_common.config.listener_security import ListenerSecurity

log = structlog.get_logger("kipling.server")


BACKLOG = 1024
"""Connections the kernel queues before the broker accepts them."""


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class BrokerServer:
    def __init__(
        self,
        dispatcher: RequestDispatcher,
        addresses: list[tuple[str, int]],
        metrics: RequestMetrics,
        *,
        max_frame_size: int,
        idle_timeout_ms: int,
        on_connection_closed: Callable[[int], object] | None = None,
        receive_timeout_ms: int = 0,
        pool: MemoryPool | None = None,
        quotas: ConnectionQuotas | None = None,
        listener: str = "",
        security: ListenerSecurity | None = None,
        credentials: Credentials | None = None,
        authentication_timeout_ms: int = 30000,
        failed_authentication_delay_ms: int = 100,
    ) -> None:
        """``on_connection_closed(connection_id)`` runs when the peer closes a connection (EOF or
        reset) while serving; closes this side made (idle, a bad request, shutdown) do not count.
        ``listener`` names the listener these addresses serve, for ``quotas``; ``security`` is
        its protocol and TLS/SASL settings (None: PLAINTEXT), and ``credentials`` where its SASL
        mechanisms look users up; a connection must finish its TLS handshake and SASL exchange
        within ``authentication_timeout_ms``."""
        self._dispatcher = dispatcher
        self._on_connection_closed = on_connection_closed
        self._stopping = False
        self._addresses = addresses
        self._metrics = metrics
        self._max_frame_size = max_frame_size
        self._idle_timeout_ms = idle_timeout_ms
        self._receive_timeout_ms = receive_timeout_ms
        self._pool = pool if pool is not None else MemoryPool(None)
        self._quotas = quotas
        self._listener = listener
        self._security = security
        self._credentials = credentials
        self._authentication_timeout_s = authentication_timeout_ms / 1000
        self._failed_delay_s = failed_authentication_delay_ms / 1000
        self.tls_context = security.ssl.server_context() if security is not None and security.ssl else None
        """The live TLS context of this listener (None without TLS): reloading its keystore
        changes the certificate new connections get (:mod:`broker.server.tls_reload`)."""
        self._principals = (
            SslPrincipalMapper.from_rules(security.principal_mapping_rules) if security is not None else None
        )
        self._servers: list[asyncio.Server] = []
        self._acceptors: list[TlsAcceptor] = []
        self._connections: set[KafkaConnection] = set()
        self._ids = itertools.count(1)
        self.bound: list[tuple[str, int]] = []

    @property
    def listener(self) -> str:
        """The name of the listener this server serves."""
        return self._listener

    async def start(self) -> list[tuple[str, int]]:
        loop = asyncio.get_running_loop()
        for host, port in self._addresses:
            if self.tls_context is not None:  # admitted before the handshake: tls_accept
                for sock in bind_listening_sockets(host, port, BACKLOG):
                    acceptor = TlsAcceptor(
                        sock,
                        self._new_connection,
                        self._live_tls_context,
                        self._authentication_timeout_s,
                        self._tls_refused,
                    )
                    self._acceptors.append(acceptor)
                    self._bound(sock)
                    acceptor.start()
                continue
            server = await loop.create_server(
                self._new_connection, host, port, reuse_address=True, backlog=BACKLOG
            )
            self._servers.append(server)
            for sock in server.sockets:
                self._bound(sock)
        log.info("listening", addresses=[f"{h}:{p}" for h, p in self.bound])
        return self.bound

    def _bound(self, sock: socket.socket | Any) -> None:  # asyncio.Server.sockets: TransportSocket
        bound = sock.getsockname()
        self.bound.append((bound[0], bound[1]))

    def _live_tls_context(self) -> ssl.SSLContext:
        assert self.tls_context is not None
        return self.tls_context

    def _new_connection(self) -> KafkaConnection:
        connection = KafkaConnection(
            self._dispatcher,
            next(self._ids),
            max_frame_size=self._max_frame_size,
            idle_timeout_ms=self._idle_timeout_ms,
            on_close=self._closed,
            pool=self._pool,
            receive_timeout_ms=self._receive_timeout_ms,
            admit=self._admit if self._quotas is not None else None,
            new_session=self._session if self._security is not None else None,
            authentication_timeout_s=self._authentication_timeout_s,
        )
        self._connections.add(connection)
        self._metrics.connections.labels(self._listener).inc()
        return connection

    def _tls_refused(self) -> None:
        assert self._security is not None
        self._metrics.authenticated(self._security.listener, False)

    def _admit(self, connection: KafkaConnection) -> str | None:
        assert self._quotas is not None
        refused = self._quotas.admit(self._listener, connection.ip)
        if refused == CONNECTION_RATE_THROTTLED:
            connection.close_delay_s = self._quotas.throttle_ms / 1000
        elif refused is None:
            connection.start_delay_s = self._quotas.accept_delay_ms / 1000
        return refused

    def _session(self, transport: asyncio.BaseTransport) -> ConnectionSession:
        """The peer of a new connection: its certificate's principal on TLS listeners (the
        handshake is over when the connection is made) and a SASL state on SASL listeners."""
        security = self._security
        assert security is not None and self._principals is not None
        session = ConnectionSession(
            security.listener,
            on_authentication=self._metrics.authenticated,
            failed_delay_s=self._failed_delay_s,
        )
        certificate = transport.get_extra_info("peercert") if security.uses_tls else None
        if certificate:
            name = distinguished_name(certificate["subject"])
            try:
                session.tls_principal = KafkaPrincipal(USER, self._principals.name(name))
            except ValueError as exc:
                # Kafka fails the authentication when no mapping rule applies; so does kipling.
                self._metrics.authenticated(security.listener, False)
                raise AuthenticationError(str(exc)) from exc
            if not security.uses_sasl:
                self._metrics.authenticated(security.listener, True)
        if security.uses_sasl:
            assert self._credentials is not None, "a SASL listener needs credentials"
            session.authenticator = SaslServerAuthenticator(security, self._credentials, _now_ms)
        return session

    def _closed(self, connection: KafkaConnection) -> None:
        if connection.admitted and self._quotas is not None:
            self._quotas.release(connection.ip)
        if connection in self._connections:
            self._connections.discard(connection)
            self._metrics.connections.labels(self._listener).dec()
            self._metrics.connections_closed.labels(connection.close_reason).inc()
            peer_closed = connection.close_reason == PEER_CLOSED
            if self._on_connection_closed is not None and peer_closed and not self._stopping:
                self._on_connection_closed(connection.connection_id)

    async def stop(self, grace_s: float = 10.0) -> None:
        self._stopping = True
        for server in self._servers:
            server.close()
        await asyncio.gather(*(acceptor.close() for acceptor in self._acceptors))
        connections = list(self._connections)
        for connection in connections:
            connection.close_when_idle()
        waits = [asyncio.ensure_future(c.wait_closed()) for c in connections]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=grace_s)
            for connection in connections:
                connection.abort()
            for task in pending:
                task.cancel()
        for server in self._servers:
            await server.wait_closed()
        log.info("listeners stopped", connections_closed=len(connections))
