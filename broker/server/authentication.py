"""Who is on the other end of a connection: the SASL exchange and the principal it yields.

Every connection has a :class:`ConnectionSession`. On a SASL listener it carries a
:class:`SaslServerAuthenticator`, Kafka's ``SaslServerAuthenticator`` in shape: until the exchange
completes, only ApiVersions, SaslHandshake and SaslAuthenticate are served and anything else closes
the connection, as Kafka does ("Unexpected Kafka request ... during SASL handshake"); requests stay
under ``sasl.server.max.receive.size``; a failed exchange is answered with
SASL_AUTHENTICATION_FAILED and its message, then the connection is closed after
``connection.failed.authentication.delay.ms``. The exchange itself is the mechanism's
(:mod:`security.plain`, :mod:`security.scram`): sans-IO state machines fed the client's tokens.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` set, the session lifetime is sent
in SaslAuthenticate v1+, and a client re-authenticates on the same connection with a new
SaslHandshake and SaslAuthenticate, for the same principal and mechanism; a connection that sends
any other request after its session expired is closed.

On SSL listeners the principal is the client certificate's subject mapped by
``ssl.principal.mapping.rules``; without a certificate (and on PLAINTEXT) it is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from security.errors import AuthenticationError, IllegalSaslStateError, SaslAuthenticationError
from security.plain import PlainServer
from security.principal import ANONYMOUS, KafkaPrincipal
from security.scram import ScramCredential, ScramMechanism, ScramServer
from server_common.config.listener_security import PLAIN, ListenerSecurity

USER = "User"

AUTHENTICATION_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
"""What a connection may send before its SASL exchange completes."""


class Credentials(Protocol):
    """Where mechanisms look users up: PLAIN's passwords (the listener's JAAS users) and SCRAM's
    salted credentials (metadata records)."""

    def plain_password(self, listener: str, user: str) -> str | None: ...

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None: ...


class SaslMechanismServer(Protocol):
    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str: ...

    def evaluate(self, token: bytes) -> bytes: ...


class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or ApiVersions"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    REAUTH_AUTHENTICATE = "re-authenticate"
    FAILED = "failed"


@dataclass(frozen=True)
class AuthenticateResult:
    token: bytes
    session_lifetime_ms: int


class SaslServerAuthenticator:
    """One connection's SASL state on a SASL listener."""

    def __init__(
        self,
        security: ListenerSecurity,
        credentials: Credentials,
        now_ms: Callable[[], int],
    ) -> None:
        self._security = security
        self._credentials = credentials
        self._now_ms = now_ms
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._mechanism: str | None = None
        self._server: SaslMechanismServer | None = None
        self.principal: KafkaPrincipal | None = None
        self._expires_ms: int | None = None
        self._raw_tokens = False

    @property
    def authenticated(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def max_receive_size(self) -> int:
        return self._security.max_receive_size

    def admit(self, api_key: int) -> None:
        """Refuse (raise :class:`SaslStateViolation`) a request the state does not allow."""
        state = self._state
        if state is _State.COMPLETE:
            if api_key == ApiKey.SASL_HANDSHAKE:
                return
            if self._expires_ms is not None and self._now_ms() >= self._expires_ms:
                raise SaslStateViolation("the SASL session expired without re-authentication")
            return
        allowed = {
            _State.HANDSHAKE_OR_VERSIONS: (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE),
            _State.AUTHENTICATE: (ApiKey.SASL_AUTHENTICATE,),
            _State.REAUTH_AUTHENTICATE: (ApiKey.SASL_AUTHENTICATE,),
        }.get(state, ())
        if api_key not in allowed:
            name = ApiKey(api_key).name if api_key in set(ApiKey) else str(api_key)
            raise SaslStateViolation(f"unexpected request {name} during SASL {state.value}")
        # ApiVersions may come again before the handshake: a client told UNSUPPORTED_VERSION
        # retries with a lower version (Kafka leaves the state only after a supported one).

    @property
    def expects_raw_token(self) -> bool:
        """After a SaslHandshake v0 the client sends its tokens as bare size-prefixed frames."""
        return self._raw_tokens and self._state is _State.AUTHENTICATE

    def handshake(self, mechanism: str, *, raw_tokens: bool = False) -> tuple[ErrorCode, list[str]]:
        """SaslHandshake: choose the mechanism (or, on an authenticated connection, begin
        re-authentication with the same one)."""
        offered = list(self._security.sasl_mechanisms)
        self._raw_tokens = raw_tokens and self._state is not _State.COMPLETE
        if self._state is _State.COMPLETE:
            if mechanism != self._mechanism:
                self._state = _State.FAILED
                return ErrorCode.ILLEGAL_SASL_STATE, offered
            self._server = self._new_server(mechanism)
            self._state = _State.REAUTH_AUTHENTICATE
            return ErrorCode.NONE, offered
        if mechanism not in offered:
            self._state = _State.FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, offered
        self._mechanism = mechanism
        self._server = self._new_server(mechanism)
        self._state = _State.AUTHENTICATE
        return ErrorCode.NONE, offered

    def authenticate(self, token: bytes) -> AuthenticateResult:
        """SaslAuthenticate: one step of the exchange. Raises :class:`AuthenticationError` (the
        exchange failed: answer with its message, then close)."""
        server = self._server
        if server is None or self._state not in (_State.AUTHENTICATE, _State.REAUTH_AUTHENTICATE):
            raise IllegalSaslStateError("SaslAuthenticate before SaslHandshake")
        try:
            reply = server.evaluate(token)
        except AuthenticationError:
            self._state = _State.FAILED
            raise
        if not server.complete:
            return AuthenticateResult(reply, 0)
        principal = KafkaPrincipal(USER, server.username)
        if self._state is _State.REAUTH_AUTHENTICATE and principal != self.principal:
            self._state = _State.FAILED
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {self.principal}: {principal}"
            )
        self.principal = principal
        self._state = _State.COMPLETE
        self._server = None
        lifetime = self._security.max_reauth_ms
        self._expires_ms = self._now_ms() + lifetime if lifetime > 0 else None
        return AuthenticateResult(reply, lifetime)

    def _new_server(self, mechanism: str) -> SaslMechanismServer:
        listener = self._security.listener
        if mechanism == PLAIN:
            return PlainServer(lambda user: self._credentials.plain_password(listener, user))
        scram = ScramMechanism.from_name(mechanism)
        return ScramServer(scram, lambda user: self._credentials.scram_credential(scram, user))


class SaslStateViolation(Exception):
    """A request the SASL state does not allow: the connection is closed without an answer."""


@dataclass
class ConnectionSession:
    """What the broker knows of one connection's peer, for handlers and authorization."""

    listener: str
    tls_principal: KafkaPrincipal = ANONYMOUS
    """From the client certificate on SSL listeners; ANONYMOUS otherwise."""
    authenticator: SaslServerAuthenticator | None = None
    close_after_response: float | None = None
    """Set when the answer being written is the last: it goes out this many seconds late (the
    failed-authentication delay), then the connection closes."""
    failed_delay_s: float = 0.1
    """``connection.failed.authentication.delay.ms``, in seconds."""
    on_authentication: Callable[[str, bool], None] | None = None
    """Counts SASL exchanges by listener and outcome (the socket server metrics)."""

    def record_authentication(self, *, succeeded: bool) -> None:
        if self.on_authentication is not None:
            self.on_authentication(self.listener, succeeded)

    @property
    def principal(self) -> KafkaPrincipal:
        authenticator = self.authenticator
        if authenticator is not None and authenticator.principal is not None:
            return authenticator.principal
        return self.tls_principal

    def admit(self, api_key: int) -> None:
        if self.authenticator is not None:
            self.authenticator.admit(api_key)

    def require_authenticator(self) -> SaslServerAuthenticator:
        """The SASL state, for the SASL handlers; ILLEGAL_SASL_STATE on a listener without SASL."""
        if self.authenticator is None:
            raise KafkaError(ErrorCode.ILLEGAL_SASL_STATE, f"listener {self.listener} does not use SASL")
        return self.authenticator
