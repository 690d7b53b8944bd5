"""From one request frame to the buffers of its response.

bytes → header → version check against the handler's declared range → decode → handler →
encode. Which failures close the connection and which are answered follows Kafka: an unknown
API key or an unreadable header closes it; an ApiVersions version the broker does not know
gets the v0-format UNSUPPORTED_VERSION answer listing what it serves; an API or version
without a handler, or a malformed body, gets the API's error response where its schema has a
place for the error, and the connection is closed otherwise.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from typing import Any, Protocol

import structlog

from broker.handlers.api_versions import api_versions_body
from broker.handlers.base import NO_RESPONSE, EncodedResponse, Handler, RequestContext
from broker.handlers.registry import HandlerRegistry
from broker.metrics.requests import RequestMetrics, api_name
from broker.quotas.request_quota import RequestQuota, ThreadTime, with_throttle_time
from broker.quotas.throttle import ChannelThrottles
from broker.server.authentication import ConnectionSession, SaslStateViolation
from protocol.api import read_request_header
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import DecodeError, ProtocolError
from protocol.framing import frame_header
from protocol.headers import RESPONSE_HEADER, peek_api, response_header_version
from protocol.messages import REQUESTS, RESPONSES
from storage.errors import is_log_dir_full

log = structlog.get_logger("kipling.dispatcher")


class CloseConnection(Exception):
    """The request cannot be answered; the connection must be closed (Kafka does the same)."""


@dataclass(slots=True)
class Reply:
    """A response ready to write: buffers (size prefix included) and their total size."""

    parts: list[Any]
    size: int


class ResponseGate(Protocol):
    """Holds the responses of some APIs until they may go out (the controller's: until committed)."""

    apis: frozenset[ApiKey]

    async def wait(self) -> None:
        """Return when the response may be sent; a KafkaError answers the request with its code."""
        ...


class RequestDispatcher:
    def __init__(
        self,
        registry: HandlerRegistry,
        metrics: RequestMetrics,
        listener: str = "",
        gate: ResponseGate | None = None,
        throttles: ChannelThrottles | None = None,
        request_quota: RequestQuota | None = None,
        access: Callable[[RequestContext], bool] | None = None,
    ) -> None:
        """``listener`` names the listener whose connections this dispatcher serves (it goes into
        every RequestContext, so that Metadata answers with that listener's addresses);
        ``request_quota`` measures requests against ``request_percentage`` quotas."""
        self._registry = registry
        self._metrics = metrics.of_listener(listener)
        self._listener = listener
        self._gate = gate
        self._throttles = throttles
        self._request_quota = request_quota
        self._access = access
        """A listener-wide check of every request (the controller listener's CLUSTER_ACTION):
        a request it refuses is answered CLUSTER_AUTHORIZATION_FAILED without its handler."""

    async def dispatch(
        self, frame: memoryview, peer: str, connection_id: int, session: ConnectionSession | None = None
    ) -> Reply | None:
        """Handle one request frame. Returns None when no response is due (acks=0).

        A connection muted for a client quota (``throttles``) is served once the mute is over.
        ``session`` is the connection's peer; a request its SASL state does not allow closes the
        connection."""
        if self._throttles is not None and self._throttles.remaining_s(connection_id) > 0:
            await self._throttles.wait(connection_id)
        started = time.perf_counter()
        ctx, handler, body = self._decode(frame, peer, connection_id, session)
        if handler is not None and self._access is not None and not self._access(ctx):
            body = self._error_or_close(handler, ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, body)
            handler = None
        quota = self._request_quota
        if handler is None:
            result = body  # an error response already built
        elif quota is not None and quota.applies(ctx.api_key):
            return await self._dispatch_under_quota(quota, ctx, handler, body, len(frame), started)
        else:
            result = await self._call(handler, ctx, body)
        if result is NO_RESPONSE:
            self._metrics.observe(ctx.api_key, time.perf_counter() - started, len(frame), 0)
            return None
        reply = self._encode(ctx, result)
        self._metrics.observe(ctx.api_key, time.perf_counter() - started, len(frame), reply.size)
        return reply

    async def _dispatch_under_quota(
        self,
        quota: RequestQuota,
        ctx: RequestContext,
        handler: Handler,
        body: Any,
        frame_size: int,
        started: float,
    ) -> Reply | None:
        """Handle a request whose loop time counts against the client's request quota: decoding
        plus the handler's steps (not its waits) decide the throttle, encoding counts afterwards."""
        decoded_ns = int((time.perf_counter() - started) * 1e9)
        timed = ThreadTime(self._call(handler, ctx, body))
        result = await timed
        throttle_ms = quota.throttle_ms(ctx, body, decoded_ns + timed.ns)
        if result is NO_RESPONSE:
            self._metrics.observe(ctx.api_key, time.perf_counter() - started, frame_size, 0)
            return None
        if throttle_ms > 0:
            result = with_throttle_time(ctx, result, throttle_ms)
            await quota.hold_for_old_client(ctx)
        encoding = time.perf_counter_ns()
        reply = self._encode(ctx, result)
        quota.record_after(ctx, time.perf_counter_ns() - encoding)
        self._metrics.observe(ctx.api_key, time.perf_counter() - started, frame_size, reply.size)
        return reply

    # -- decoding ------------------------------------------------------------------------------

    def _decode(
        self, frame: memoryview, peer: str, connection_id: int, session: ConnectionSession | None
    ) -> tuple[RequestContext, Handler | None, Any]:
        api = peek_api(frame)
        if api is None or api[0] not in REQUESTS:
            self._refuse(api[0] if api else -1, "unknown api key", peer)
        if session is not None:
            try:
                session.admit(api[0])  # type: ignore[index]
            except SaslStateViolation as exc:
                self._refuse(api[0], str(exc), peer)  # type: ignore[index]
        try:
            header, io = read_request_header(frame)
        except ProtocolError as exc:
            self._refuse(api[0], f"unreadable request header: {exc}", peer)  # type: ignore[index]
        ctx = RequestContext(
            header.request_api_key,
            header.request_api_version,
            header.correlation_id,
            header.client_id,
            peer,
            connection_id,
            time.monotonic_ns(),
            self._listener,
            session,
        )
        handler = self._registry.get(ctx.api_key)
        if not self._registry.supports(ctx.api_key, ctx.api_version):
            return ctx, None, self._unsupported(ctx, handler)
        assert handler is not None
        try:
            return ctx, handler, REQUESTS[ctx.api_key].codec(ctx.api_version).read(io)
        except DecodeError as exc:
            log.warning(
                "malformed request body",
                api=api_name(ctx.api_key),
                version=ctx.api_version,
                peer=peer,
                error=str(exc),
            )
            return ctx, None, self._error_or_close(handler, ctx, ErrorCode.INVALID_REQUEST)

    def _refuse(self, api_key: int, reason: str, peer: str) -> Any:
        log.warning("closing connection", reason=reason, api_key=api_key, peer=peer)
        self._metrics.error(api_name(api_key), "CLOSED")
        raise CloseConnection(reason)

    def _unsupported(self, ctx: RequestContext, handler: Handler | None) -> Any:
        if ctx.api_key == ApiKey.API_VERSIONS:
            # Kafka answers an unknown ApiVersions version in the v0 format so any client can read it.
            ctx_v0 = dataclasses.replace(ctx, api_version=0)
            self._metrics.error("ApiVersions", "UNSUPPORTED_VERSION")
            return _ForcedVersion(
                ctx_v0, api_versions_body(self._registry.api_ranges(), ErrorCode.UNSUPPORTED_VERSION)
            )
        if ctx.api_version not in RESPONSES[ctx.api_key].versions:
            self._refuse(
                ctx.api_key, f"version {ctx.api_version} is not a version kipling can encode", ctx.peer
            )
        return self._error_or_close(handler, ctx, ErrorCode.UNSUPPORTED_VERSION)

    def _error_or_close(
        self, handler: Handler | None, ctx: RequestContext, code: ErrorCode, request: Any = None
    ) -> Any:
        """The handler's whole-request error response (per topic/partition when it has the
        decoded request), else a top-level error code, else close the connection."""
        body = handler.error_response(ctx, request, code) if handler is not None else None
        if body is None:
            body = _generic_error(ctx, code)
        if body is None:
            self._refuse(ctx.api_key, f"{code.name} and no place for it in the response", ctx.peer)
        self._metrics.error(api_name(ctx.api_key), code.name)
        return body

    # -- handling ------------------------------------------------------------------------------

    async def _call(self, handler: Handler, ctx: RequestContext, body: Any) -> Any:
        try:
            result = await handler.handle(ctx, body)
            if self._gate is not None and ctx.api_key in self._gate.apis:
                await self._gate.wait()
            return result
        except KafkaError as exc:
            return self._error_or_close(handler, ctx, exc.code, body)
        except CloseConnection:
            raise
        except Exception as exc:
            if is_log_dir_full(exc):  # a write found its disk full: the caller's error, one line
                log.warning(
                    "request failed: no space left on device", api=api_name(ctx.api_key), error=str(exc)
                )
                return self._error_or_close(handler, ctx, ErrorCode.KAFKA_STORAGE_ERROR, body)
            log.exception("handler failed", api=api_name(ctx.api_key), version=ctx.api_version, peer=ctx.peer)
            return self._error_or_close(handler, ctx, ErrorCode.UNKNOWN_SERVER_ERROR, body)

    # -- encoding ------------------------------------------------------------------------------

    def _encode(self, ctx: RequestContext, result: Any) -> Reply:
        if isinstance(result, _ForcedVersion):
            ctx, result = result.ctx, result.body
        spec = RESPONSES[ctx.api_key]
        io = BytesIO()
        io.write(b"\x00\x00\x00\x00")  # size prefix, patched below
        header_version = response_header_version(ctx.api_key, ctx.api_version, spec.flexible_versions)
        RESPONSE_HEADER.codec(header_version).write({"correlation_id": ctx.correlation_id}, io)
        if isinstance(result, EncodedResponse):
            head = io.getbuffer()
            size = len(head) - 4 + result.size
            head[0:4] = frame_header(size)
            return Reply([bytes(head), *result.parts], size + 4)
        spec.codec(ctx.api_version).write(result, io)
        buf = io.getbuffer()
        size = len(buf) - 4
        buf[0:4] = frame_header(size)
        return Reply([io.getvalue()], size + 4)


@dataclass(slots=True)
class _ForcedVersion:
    """A response that must be encoded in another version than the request's."""

    ctx: RequestContext
    body: Any


def _generic_error(ctx: RequestContext, code: ErrorCode) -> dict[str, Any] | None:
    """A response whose only content is a top-level error code, when the schema has one."""
    for field in RESPONSES[ctx.api_key].fields:
        if field.name == "error_code" and field.exists_in(ctx.api_version):
            return {"error_code": int(code)}
    return None
