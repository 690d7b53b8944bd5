"""SaslHandshake (key 17) and SaslAuthenticate (key 36): the SASL exchange of a connection.

The state lives on the connection (:mod:`broker.server.authentication`); these handlers decode,
step it, and encode. On a listener without SASL, or out of turn, they answer ILLEGAL_SASL_STATE as
Kafka does. A refused mechanism or failed exchange is answered, then the connection is closed.
After a v0 handshake the tokens come raw, size-prefixed outside the Kafka framing (the
connection passes them to the authenticator itself); v1 (KIP-152) wraps them in SaslAuthenticate.
v0 stays served although Kafka 4 dropped it (KIP-896): librdkafka 2.0.2 (Debian's kcat) will not
authenticate unless v0 is in the advertised range.
"""

from __future__ import annotations

from typing import Any

import structlog

from broker.handlers.base import Handler, RequestContext
from broker.server.authentication import ConnectionSession
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from security.errors import AuthenticationError

log = structlog.get_logger("kipling.authentication")


def _session(ctx: RequestContext) -> ConnectionSession:
    if ctx.session is None:
        raise KafkaError(ErrorCode.ILLEGAL_SASL_STATE, "the connection has no SASL state")
    return ctx.session


class SaslHandshakeHandler(Handler):
    api_key = ApiKey.SASL_HANDSHAKE
    min_version = 0
    max_version = 1

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        session = _session(ctx)
        authenticator = session.require_authenticator()
        code, mechanisms = authenticator.handshake(request.mechanism, raw_tokens=ctx.api_version == 0)
        if code is not ErrorCode.NONE:
            log.info(
                "SASL handshake refused",
                listener=ctx.listener,
                peer=ctx.peer,
                mechanism=request.mechanism,
                error=code.name,
            )
            session.close_after_response = session.failed_delay_s
        return {"error_code": int(code), "mechanisms": mechanisms}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {"error_code": int(code), "mechanisms": []}


class SaslAuthenticateHandler(Handler):
    api_key = ApiKey.SASL_AUTHENTICATE
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        session = _session(ctx)
        authenticator = session.require_authenticator()
        try:
            result = authenticator.authenticate(bytes(request.auth_bytes))
        except AuthenticationError as exc:
            log.warning("authentication failed", listener=ctx.listener, peer=ctx.peer, reason=str(exc))
            session.close_after_response = session.failed_delay_s
            session.record_authentication(succeeded=False)
            return _body(ErrorCode.for_code(exc.error_code), str(exc))
        if authenticator.authenticated:
            log.debug("authenticated", listener=ctx.listener, peer=ctx.peer, principal=str(session.principal))
            session.record_authentication(succeeded=True)
        return _body(ErrorCode.NONE, None, result.token, result.session_lifetime_ms)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _body(code, code.description)


def _body(code: ErrorCode, message: str | None, token: bytes = b"", lifetime_ms: int = 0) -> dict[str, Any]:
    return {
        "error_code": int(code),
        "error_message": message,
        "auth_bytes": token,
        "session_lifetime_ms": lifetime_ms,
    }
