"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it.

The token is ``authzid NUL username NUL password`` in UTF-8, sent once; the server answers with an
empty token. Kafka's brokers check it against the ``user_<name>="<password>"`` options of the
listener's PlainLoginModule JAAS entry (:func:`security.jaas.plain_users`), which is what the
``lookup_password`` callable of :class:`PlainServer` usually reads.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from security.errors import IllegalSaslStateError, SaslAuthenticationError

INVALID_USERNAME_OR_PASSWORD = "Authentication failed: Invalid username or password"

_NO_PASSWORD = "\x00no password: compared so an unknown user costs what a known one does"


def plain_token(username: str, password: str, authzid: str = "") -> bytes:
    """The client's PLAIN token; ValueError for a NUL inside a part (it would split the token)."""
    if "\x00" in username or "\x00" in password or "\x00" in authzid:
        raise ValueError("SASL/PLAIN username, password and authzid may not contain NUL")
    return f"{authzid}\x00{username}\x00{password}".encode()


class PlainServer:
    """The broker's side of one SASL/PLAIN exchange (Kafka's PlainSaslServer).

    ``evaluate`` takes the client's one token; when the credentials are right it returns ``b""``,
    ``complete`` is true and ``username`` is the authenticated user. Otherwise it raises
    :class:`SaslAuthenticationError` with Kafka's message, and a further token raises
    :class:`IllegalSaslStateError`.
    """

    def __init__(self, lookup_password: Callable[[str], str | None]) -> None:
        """``lookup_password`` gives a user's password, or None for an unknown user."""
        self._lookup_password = lookup_password
        self._username: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        """Whether the client's credentials were accepted."""
        return self._username is not None

    @property
    def username(self) -> str:
        """The authenticated user; IllegalSaslStateError until the exchange has completed."""
        if self._username is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._username

    def evaluate(self, token: bytes) -> bytes:
        """Check the client's token: ``b""`` when accepted, SaslAuthenticationError when not."""
        if self._done:
            state = "COMPLETE" if self.complete else "FAILED"
            self._username = None
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {state}")
        self._done = True
        self._username = self._authenticate(token)
        return b""

    def _authenticate(self, token: bytes) -> str:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        try:
            expected = self._lookup_password(username)
        except Exception as e:
            raise SaslAuthenticationError(
                "Authentication failed: credentials for user could not be verified"
            ) from e
        matches = hmac.compare_digest(
            password.encode("utf-8"), (_NO_PASSWORD if expected is None else expected).encode("utf-8")
        )
        if expected is None or not matches:
            raise SaslAuthenticationError(INVALID_USERNAME_OR_PASSWORD)
        # After the password, as Kafka: only a client that knows it learns about the authzid rule.
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        return username


__all__ = ["INVALID_USERNAME_OR_PASSWORD", "PlainServer", "plain_token"]
