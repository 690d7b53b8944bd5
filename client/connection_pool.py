"""Connections to a cluster's brokers by address: shared ones reused while open, dedicated ones apart.

The CLI tools and the Spark pipeline both talk to many brokers and need the same bookkeeping: one
shared connection per broker for short requests (metadata, ListOffsets, produce), opened on demand
and replaced once it fails, and dedicated connections for requests that park at the broker (a long
poll, a JoinGroup). A broker answers one connection's requests in order, so a short request sent
behind a parked one would wait it out; that is why the two kinds are kept apart. :meth:`close`
closes both kinds.
"""

from __future__ import annotations

from client.connection import KafkaConnection
from client.security import ClientSecurity

Address = tuple[str, int]


class ConnectionPool:
    """Open connections to brokers, keyed by ``(host, port)``, all with the same client settings
    (``security``: the TLS context and SASL login of every connection; None for PLAINTEXT)."""

    def __init__(
        self,
        *,
        client_id: str,
        connect_timeout_s: float,
        request_timeout_s: float,
        security: ClientSecurity | None = None,
    ) -> None:
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.security = security
        self._shared: dict[Address, KafkaConnection] = {}
        self._dedicated: list[KafkaConnection] = []

    async def shared(self, host: str, port: int) -> KafkaConnection:
        """The shared connection to ``host:port`` (a new one when there is none or it closed)."""
        current = self._shared.get((host, port))
        if current is not None and not current.closed:
            return current
        connection = await self._open(host, port)
        self._shared[(host, port)] = connection
        return connection

    async def dedicated(self, host: str, port: int) -> KafkaConnection:
        """A new connection to ``host:port`` that no other caller gets (closed by :meth:`close`)."""
        self._dedicated = [c for c in self._dedicated if not c.closed]
        connection = await self._open(host, port)
        self._dedicated.append(connection)
        return connection

    def any_open(self) -> KafkaConnection | None:
        """Some open shared connection, if there is one."""
        return next((c for c in self._shared.values() if not c.closed), None)

    def forget(self, connection: KafkaConnection) -> None:
        """Close and drop ``connection`` (it failed), so the next call opens a new one."""
        for address, current in list(self._shared.items()):
            if current is connection:
                del self._shared[address]
        if connection in self._dedicated:
            self._dedicated.remove(connection)
        connection.close()

    def forget_address(self, host: str, port: int) -> None:
        """Close and drop the shared connection to ``host:port``, if any."""
        connection = self._shared.get((host, port))
        if connection is not None:
            self.forget(connection)

    async def close(self) -> None:
        connections = [*self._shared.values(), *self._dedicated]
        self._shared.clear()
        self._dedicated.clear()
        for connection in connections:
            connection.close()
        for connection in connections:
            await connection.wait_closed()

    async def _open(self, host: str, port: int) -> KafkaConnection:
        return await KafkaConnection.open(
            host,
            port,
            client_id=self.client_id,
            connect_timeout_s=self.connect_timeout_s,
            request_timeout_s=self.request_timeout_s,
            security=self.security,
        )


__all__ = ["ConnectionPool"]
