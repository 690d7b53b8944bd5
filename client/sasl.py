"""The client's side of the SASL mechanisms kipling speaks, behind one small interface.

:class:`~client.connection.KafkaConnection` drives any of them the same way: send
:meth:`SaslClient.first_message`, then hand each server token to :meth:`SaslClient.evaluate` and
send what it returns, until it returns None. The mechanisms themselves are :mod:`security`'s
sans-IO code (PLAIN's token, SCRAM's state machine, which verifies the server's signature).
"""

from __future__ import annotations

from typing import Protocol

from security.errors import SaslAuthenticationError
from security.plain import plain_token
from security.scram import ScramClient, ScramMechanism

PLAIN = "PLAIN"


class SaslClient(Protocol):
    @property
    def complete(self) -> bool:
        """Whether the exchange succeeded (for SCRAM: the server proved it knows the credential)."""
        ...

    def first_message(self) -> bytes: ...

    def evaluate(self, server_token: bytes) -> bytes | None:
        """The next token to send, or None when the exchange is over; raises
        :class:`security.errors.AuthenticationError` for a server answer that fails it."""
        ...


class PlainClient:
    """RFC 4616: one token; the server's empty answer ends the exchange."""

    def __init__(self, username: str, password: str) -> None:
        self._token = plain_token(username, password)
        self._sent = False
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def first_message(self) -> bytes:
        self._sent = True
        return self._token

    def evaluate(self, server_token: bytes) -> bytes | None:
        if not self._sent or self._complete:
            raise SaslAuthenticationError("Unexpected SASL/PLAIN server token")
        self._complete = True
        return None


class ScramSaslClient:
    """SCRAM-SHA-256/512: client-first, client-final, then the server-final's signature checked."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self._client = ScramClient(mechanism, username, password)
        self._rounds = 0

    @property
    def complete(self) -> bool:
        return self._client.complete

    def first_message(self) -> bytes:
        return self._client.first_message()

    def evaluate(self, server_token: bytes) -> bytes | None:
        self._rounds += 1
        if self._rounds == 1:
            return self._client.evaluate(server_token)
        self._client.verify(server_token)
        return None


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """The client of ``mechanism`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512); ValueError otherwise."""
    if mechanism == PLAIN:
        return PlainClient(username, password)
    return ScramSaslClient(ScramMechanism.from_name(mechanism), username, password)


__all__ = ["PlainClient", "SaslClient", "ScramSaslClient", "sasl_client"]
