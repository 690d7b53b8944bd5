"""What the client raises, as one family so callers can tell "retry elsewhere" from "give up".

The split follows what a caller must do next, which is what Kafka's clients distinguish too:

* :class:`ConnectError`, :class:`ConnectionClosedError`, :class:`RequestTimeoutError` and
  :class:`ProtocolViolationError` all mean *this connection is gone*: every one of them leaves the
  connection closed, and the caller reconnects (or lets :class:`~client.connection.ReconnectingConnection`
  do it) and decides whether the request may be sent again. Whether the broker acted on a request
  that timed out or whose connection dropped is unknown, exactly as in Kafka.
* :class:`KafkaResponseError` means the broker answered, with an error code. The connection is fine;
  ``retriable`` says whether the same request may succeed later.
* :class:`UnsupportedApiVersionError` means the broker and this client share no version of an API.

Client errors deliberately do not derive from :class:`protocol.error_codes.KafkaError`: that one is the
broker's "answer with this code" signal, and a client error escaping into a broker handler must not be
mistaken for it.
"""

from __future__ import annotations

from protocol.error_codes import ErrorCode


class ClientError(Exception):
    """Base of every error the client package raises."""


class ConnectError(ClientError):
    """The TCP connection, the TLS handshake, the ApiVersions handshake or the SASL exchange could
    not be completed."""


class AuthenticationFailedError(ConnectError):
    """The broker refused the SASL login (or the mechanism it asked for), or its SCRAM signature
    was wrong. Retrying with the same credentials fails the same way; the message names the
    mechanism and the broker's reason, never the password."""


class TlsHandshakeError(AuthenticationFailedError):
    """The TLS handshake failed: the broker's certificate is not trusted or does not name the host,
    the broker refused ours, or the port does not speak TLS. As Kafka's SslAuthenticationException,
    it is an authentication failure: retrying with the same settings fails the same way."""


class ConnectionClosedError(ClientError):
    """The connection closed (by either side) before the request's response arrived."""


class PeerClosedError(ConnectionClosedError):
    """The broker's side closed (or reset) the connection: its process may be gone."""


class RequestTimeoutError(ClientError):
    """No response within the request timeout; the connection was closed, as Kafka clients do.

    Closing is the only safe move: a late response would otherwise be matched against the next request.
    """


class ProtocolViolationError(ClientError):
    """The broker's bytes broke the protocol (wrong correlation id, undecodable response).

    The connection is closed: once the stream is out of step nothing after it can be trusted.
    """


class UnsupportedApiVersionError(ClientError):
    """The broker serves no version of the API that this client can speak."""

    def __init__(self, api_key: int, message: str) -> None:
        self.api_key = api_key
        super().__init__(message)


class KafkaResponseError(ClientError):
    """The broker answered with a non-zero error code (top level, per topic or per partition)."""

    def __init__(self, code: ErrorCode, message: str | None = None, *, context: str | None = None) -> None:
        self.code = code
        self.message = message or code.description
        self.context = context
        super().__init__(code, self.message)

    @property
    def retriable(self) -> bool:
        """Kafka's classification: the same request may succeed later (often after a metadata refresh)."""
        return self.code.retriable

    def __str__(self) -> str:
        where = f"{self.context}: " if self.context else ""
        return f"{where}{self.code.name} ({int(self.code)}): {self.message}"


def error_code(code: int) -> ErrorCode:
    """The ErrorCode for a wire value; codes newer than our table map to UNKNOWN_SERVER_ERROR."""
    return ErrorCode.for_code(code)


def raise_for_error(code: int, message: str | None = None, *, context: str | None = None) -> None:
    """Raise :class:`KafkaResponseError` unless ``code`` is NONE (0).

    ``message`` is the response's error message when the API has one (``None`` falls back to the code's
    description); ``context`` names what failed (``"topic t-0"``) so logs read without the request.
    """
    if code:
        raise KafkaResponseError(error_code(code), message, context=context)


__all__ = [
    "AuthenticationFailedError",
    "ClientError",
    "ConnectError",
    "ConnectionClosedError",
    "KafkaResponseError",
    "ProtocolViolationError",
    "RequestTimeoutError",
    "UnsupportedApiVersionError",
    "error_code",
    "raise_for_error",
]
