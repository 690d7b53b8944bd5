"""One TCP connection to a Kafka-compatible broker: handshake, pipelined requests, timeouts.

Why it is shaped this way:

* **Pipelining with in-order matching.** A Kafka broker answers the requests of one connection in the
  order it received them, so the client keeps its in-flight requests in a FIFO and the next response
  must carry the correlation id at its head. Anything else means the byte stream is out of step; the
  connection is closed and every waiter fails with :class:`~client.errors.ProtocolViolationError`.
* **A request timeout closes the connection** (as Kafka's NetworkClient does): the late response would
  otherwise sit in front of the next one. The timed-out request gets
  :class:`~client.errors.RequestTimeoutError`, the others in flight
  :class:`~client.errors.ConnectionClosedError`.
* **Cancelling a caller does not unlink its request.** The broker will still answer it, and the answer
  must still be consumed in order, so a cancelled request stays in the FIFO until its response (or its
  timeout) arrives.
* **Reads go through** :class:`asyncio.BufferedProtocol` and :class:`protocol.framing.FrameDecoder`'s
  zero-copy mode: a follower's large fetch responses land straight in their final buffer (DESIGN.md,
  "The network layer decides throughput"). Writes go out as ``[size prefix, body]`` via ``writelines``.
* **ApiVersions at connect.** The connection asks ApiVersions v3 and keeps the broker's ranges;
  :meth:`KafkaConnection.version_for` then picks the highest version both sides speak. A broker that does
  not know v3 answers UNSUPPORTED_VERSION in the v0 layout; the client retries once with the ApiVersions
  version that answer lists (v0 if it lists none), as Kafka's clients do.

Reconnecting is not done inside :class:`KafkaConnection`: a closed connection stays closed, so a caller
can never have a request silently re-sent on a new socket. :class:`ReconnectingConnection` is the small
wrapper that opens a new connection (with Kafka's exponential reconnect backoff) on the next request after
one failed; it never re-sends a failed request itself.
"""

from __future__ import annotations

import asyncio
import collections
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import structlog

from client.errors import (
    AuthenticationFailedError,
    ConnectError,
    ConnectionClosedError,
    KafkaResponseError,
    PeerClosedError,
    ProtocolViolationError,
    RequestTimeoutError,
    TlsHandshakeError,
    UnsupportedApiVersionError,
    error_code,
)
from client.sasl import SaslClient, sasl_client
from client.security import ClientSecurity
from protocol.api import decode_response, encode_request, request_spec
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.errors import FrameTooLargeError, ProtocolError
from protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, frame_header
from security.errors import AuthenticationError

DEFAULT_CLIENT_ID = "kipling-client"
CLIENT_SOFTWARE_NAME = "kipling-client"
CLIENT_SOFTWARE_VERSION = "0.1.0"
"""Sent in ApiVersions v3+; brokers check both against ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``."""

API_VERSIONS_FIRST_VERSION = 3
"""The ApiVersions version asked first (the brief's choice; every Kafka broker since 2.4 serves it)."""

DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_REQUEST_TIMEOUT_S = 30.0
"""Kafka's ``request.timeout.ms`` default."""
CLOSE_GRACE_S = 1.0
"""How long a closed connection may take to send what it still buffers before the socket is aborted:
a broker that stopped reading (paused, overloaded) must not hold a closing client."""
SASL_HANDSHAKE_VERSION = 1
"""KIP-152: the tokens travel in SaslAuthenticate requests (v0 sends them as bare frames)."""
SASL_AUTHENTICATE_MAX_VERSION = 2
REAUTH_AT = (0.85, 0.95)
"""When to re-authenticate, as a share of the session lifetime (Kafka's clients pick at random in
this range, so that a fleet started together does not re-authenticate together)."""

_CORRELATION_ID_MASK = 0x7FFFFFFF

_log = structlog.get_logger("kipling.client.connection")


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    """The versions of one API the broker serves (from its ApiVersions response)."""

    api_key: int
    min_version: int
    max_version: int


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int
    future: asyncio.Future[memoryview]
    timer: asyncio.TimerHandle | None


class _ClientProtocol(asyncio.BufferedProtocol):
    """Transport events → :class:`KafkaConnection` calls; owns the frame decoder and write flow control."""

    def __init__(self, owner: KafkaConnection, max_frame_size: int) -> None:
        self._owner = owner
        self._decoder = FrameDecoder(max_frame_size, grow=False)  # a broker's answers: no copies
        self._paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport; uvloop's are no asyncio.Transport subclasses (no isinstance).
        self._owner._connection_made(cast(asyncio.Transport, transport))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self._decoder
        try:
            decoder.buffer_updated(nbytes)
        except FrameTooLargeError as exc:
            for frame in decoder.frames():
                self._owner._frame_received(frame)
            self._owner._violation(f"response frame too large: {exc}")
            return
        for frame in decoder.frames():
            self._owner._frame_received(frame)

    def eof_received(self) -> bool:
        return False  # let the transport close; connection_lost reports it

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._wake_writers()
        self._owner._connection_lost(exc)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writers()

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        if not self._paused or self.lost:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def _wake_writers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class KafkaConnection:
    """A connected, version-negotiated Kafka connection. Create with :meth:`open`.

    ``request`` may be called concurrently; requests are pipelined on the one socket and each caller gets
    its own response. Once closed (by :meth:`close`, the broker, a timeout or a protocol violation) the
    connection stays closed and every request raises :class:`ConnectionClosedError`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.security = security
        self._max_frame_size = max_frame_size
        self._reauth_at: float | None = None
        """Loop time after which the next request re-authenticates first (None: never)."""
        self._reauth: asyncio.Task[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._protocol: _ClientProtocol | None = None
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._next_correlation_id = 0
        self._closed = False
        self._close_reason: str | None = None
        self._lost: asyncio.Event = asyncio.Event()
        self._api_versions: dict[int, ApiVersionRange] = {}
        self._log = _log.bind(broker=f"{host}:{port}")

    # -- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        security: ClientSecurity | None = None,
    ) -> KafkaConnection:
        """Connect, negotiate API versions and authenticate within ``connect_timeout_s``; raises
        :class:`ConnectError` (:class:`AuthenticationFailedError` for a refused login)."""
        connection = cls(
            host,
            port,
            client_id=client_id,
            request_timeout_s=request_timeout_s,
            max_frame_size=max_frame_size,
            security=security,
        )
        await connection.connect(connect_timeout_s)
        return connection

    async def connect(self, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
        """TCP connect (with the TLS handshake), ApiVersions and the SASL exchange, all within
        ``timeout_s``."""
        if self._transport is not None:
            raise RuntimeError("KafkaConnection.connect() called twice")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        security = self.security
        tls: dict[str, Any] = {}
        if security is not None and security.ssl_context is not None:
            tls = {"ssl": security.ssl_context, "server_hostname": security.server_hostname or self.host}
        try:
            async with asyncio.timeout(timeout_s):
                await loop.create_connection(
                    lambda: _ClientProtocol(self, self._max_frame_size), self.host, self.port, **tls
                )
        except ssl.SSLError as exc:
            self._closed = True
            self._lost.set()
            raise TlsHandshakeError(
                f"TLS handshake with {self.host}:{self.port} failed: {_tls_reason(exc)}"
            ) from exc
        except (OSError, TimeoutError) as exc:
            self._closed = True
            self._lost.set()
            what = "TLS-connect" if tls else "connect"
            raise ConnectError(f"cannot {what} to {self.host}:{self.port}: {exc!r}") from exc
        step = "ApiVersions handshake"
        try:
            await self._negotiate_versions(max(deadline - loop.time(), 0.001))
            if security is not None and security.sasl_mechanism is not None:
                step = f"SASL {security.sasl_mechanism} authentication"
                await self._authenticate(security, max(deadline - loop.time(), 0.001))
        except BaseException as exc:
            self.close(f"{step} failed: {exc!r}")
            if isinstance(exc, ConnectError):
                raise
            if isinstance(exc, ConnectionClosedError | RequestTimeoutError | ProtocolViolationError):
                hint = ""
                if not tls and isinstance(exc, PeerClosedError) and step.startswith("ApiVersions"):
                    hint = " (a TLS listener closes a plaintext client: check security.protocol)"
                raise ConnectError(f"{step} with {self.host}:{self.port} failed: {exc}{hint}") from exc
            if isinstance(exc, KafkaResponseError | UnsupportedApiVersionError):
                raise ConnectError(f"{step} refused by {self.host}:{self.port}: {exc}") from exc
            raise
        self._log.debug("connected", apis=len(self._api_versions))

    # -- SASL --------------------------------------------------------------------------------------

    async def _authenticate(self, security: ClientSecurity, timeout_s: float) -> None:
        """SaslHandshake v1 and SaslAuthenticate rounds until the mechanism is done; raises
        :class:`AuthenticationFailedError` for a refusal (its message is the broker's or the
        mechanism's, which never quote the password)."""
        mechanism = security.sasl_mechanism
        assert mechanism is not None and security.username is not None and security.password is not None
        where = f"{self.host}:{self.port}"
        if ApiKey.SASL_HANDSHAKE not in self._api_versions:
            raise AuthenticationFailedError(f"{where} does not serve SaslHandshake: it is no SASL listener")
        handshake = self.version_for(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, SASL_HANDSHAKE_VERSION)
        authenticate = self.version_for(ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_MAX_VERSION)
        deadline = asyncio.get_running_loop().time() + timeout_s

        def left() -> float:
            return max(deadline - asyncio.get_running_loop().time(), 0.001)

        response = await self._request(ApiKey.SASL_HANDSHAKE, handshake, {"mechanism": mechanism}, left())
        code = error_code(response.error_code)
        if code is ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise AuthenticationFailedError(
                f"{where} does not enable SASL mechanism {mechanism} "
                f"(its listener enables {', '.join(response.mechanisms) or 'none'})"
            )
        if code is ErrorCode.ILLEGAL_SASL_STATE:
            raise AuthenticationFailedError(f"{where} refused SaslHandshake: its listener does not use SASL")
        if code is not ErrorCode.NONE:
            raise AuthenticationFailedError(f"SaslHandshake refused by {where}: {code.name}")
        client: SaslClient = sasl_client(mechanism, security.username, security.password)
        try:
            token: bytes | None = client.first_message()
            lifetime_ms = 0
            while token is not None:
                body = {"auth_bytes": token}
                response = await self._request(ApiKey.SASL_AUTHENTICATE, authenticate, body, left())
                code = error_code(response.error_code)
                if code is not ErrorCode.NONE:
                    message = response.error_message or code.description
                    raise AuthenticationFailedError(
                        f"SASL {mechanism} authentication with {where} failed ({code.name}): {message}"
                    )
                lifetime_ms = getattr(response, "session_lifetime_ms", 0) or 0
                token = client.evaluate(bytes(response.auth_bytes))
        except AuthenticationError as exc:
            raise AuthenticationFailedError(
                f"SASL {mechanism} authentication with {where} failed: {exc}"
            ) from exc
        if not client.complete:
            raise AuthenticationFailedError(
                f"SASL {mechanism} authentication with {where} ended before the exchange completed"
            )
        self._schedule_reauthentication(lifetime_ms)
        self._log.debug("authenticated", mechanism=mechanism, session_lifetime_ms=lifetime_ms)

    def _schedule_reauthentication(self, lifetime_ms: int) -> None:
        if lifetime_ms <= 0:
            self._reauth_at = None
            return
        share = random.uniform(*REAUTH_AT)
        self._reauth_at = asyncio.get_running_loop().time() + lifetime_ms / 1000 * share

    async def _session_ready(self) -> None:
        """Before a request: re-authenticate first when the SASL session is due (KIP-368).

        Returns without suspending when nothing is due, so a request that passes here is written
        before any re-authentication starts, and the broker answers it first.
        """
        if self._reauth_at is None and self._reauth is None:
            return
        if self._reauth is None:
            assert self._reauth_at is not None
            if asyncio.get_running_loop().time() < self._reauth_at or self._closed:
                return
            self._reauth = asyncio.get_running_loop().create_task(self._reauthenticate())
        reauth = self._reauth
        # a caller cancelled while waiting must not cancel the exchange the others wait for
        await asyncio.wait([reauth])

    async def _reauthenticate(self) -> None:
        security = self.security
        assert security is not None
        try:
            await self._authenticate(security, self.request_timeout_s)
        except asyncio.CancelledError:
            self.close("closed during re-authentication")
            raise
        except Exception as exc:
            self._log.warning("re-authentication failed, closing", error=str(exc))
            self.close(f"closed after re-authentication failed: {exc}")
        finally:
            self._reauth = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses have not arrived (cancelled callers included)."""
        return len(self._in_flight)

    def close(self, reason: str = "closed by the client") -> None:
        """Close the socket; every request in flight fails with :class:`ConnectionClosedError`."""
        self._shutdown(ConnectionClosedError(f"connection to {self.host}:{self.port} {reason}"), reason)

    async def wait_closed(self) -> None:
        """Wait until the transport has reported the socket closed.

        After :meth:`close`, the bytes still buffered get :data:`CLOSE_GRACE_S` to go out; then the
        socket is aborted, so closing never waits on a peer that does not read.
        """
        if not self._closed:
            await self._lost.wait()
            return
        try:
            async with asyncio.timeout(CLOSE_GRACE_S):
                await self._lost.wait()
        except TimeoutError:
            if self._transport is not None:
                self._transport.abort()
            await self._lost.wait()

    async def __aenter__(self) -> KafkaConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()
        await self.wait_closed()

    # -- versions ----------------------------------------------------------------------------------

    @property
    def api_versions(self) -> Mapping[int, ApiVersionRange]:
        """The broker's ranges by API key, as its ApiVersions response listed them."""
        return self._api_versions

    def version_for(self, api_key: int, wanted_max: int | None = None, wanted_min: int | None = None) -> int:
        """The highest version of ``api_key`` that the broker serves, this codec declares and the caller
        wants (at most ``wanted_max``, at least ``wanted_min``).

        Raises :class:`UnsupportedApiVersionError` when there is no such version.
        """
        broker = self._api_versions.get(api_key)
        if broker is None:
            raise UnsupportedApiVersionError(api_key, f"broker does not serve {_api_name(api_key)}")
        try:
            ours = request_spec(api_key).versions
        except ProtocolError as exc:
            raise UnsupportedApiVersionError(api_key, str(exc)) from None
        high = min(broker.max_version, ours.high if ours.high is not None else broker.max_version)
        if wanted_max is not None:
            high = min(high, wanted_max)
        low = max(broker.min_version, ours.low, wanted_min if wanted_min is not None else 0)
        if high < low:
            raise UnsupportedApiVersionError(
                api_key,
                f"no common version of {_api_name(api_key)}: broker {broker.min_version}-"
                f"{broker.max_version}, client {ours}, wanted {wanted_min}-{wanted_max}",
            )
        return high

    async def _negotiate_versions(self, timeout_s: float) -> None:
        version = API_VERSIONS_FIRST_VERSION
        body = _api_versions_request()
        response = await self._api_versions_round(version, body, timeout_s)
        code = error_code(response.error_code)
        if code is ErrorCode.UNSUPPORTED_VERSION:
            listed = {r.api_key: r.max_version for r in response.api_keys}.get(ApiKey.API_VERSIONS, 0)
            retry = listed if 0 <= listed < version else 0
            self._log.info("ApiVersions version refused, retrying", refused=version, retry=retry)
            response = await self._api_versions_round(retry, body, timeout_s)
            code = error_code(response.error_code)
        if code is not ErrorCode.NONE:
            raise KafkaResponseError(code, context="ApiVersions")
        self._api_versions = {
            r.api_key: ApiVersionRange(r.api_key, r.min_version, r.max_version) for r in response.api_keys
        }

    async def _api_versions_round(self, version: int, body: dict[str, Any], timeout_s: float) -> MessageData:
        """One ApiVersions exchange. A broker that refuses the version answers in the v0 layout (its
        header is always v0), so a body that does not decode at ``version`` is read again as v0."""
        frame = await self._exchange(ApiKey.API_VERSIONS, version, body, timeout_s)
        try:
            return decode_response(frame, ApiKey.API_VERSIONS, version).body
        except ProtocolError:
            pass
        try:
            return decode_response(frame, ApiKey.API_VERSIONS, 0).body
        except ProtocolError as exc:
            self._violation(f"undecodable ApiVersions response: {exc}")
            raise ProtocolViolationError(f"undecodable ApiVersions response: {exc}") from None

    # -- requests ----------------------------------------------------------------------------------

    async def request(
        self, api_key: int, api_version: int, body: Any, timeout_s: float | None = None
    ) -> MessageData:
        """Send one request and return its decoded response body.

        ``timeout_s`` defaults to the connection's ``request_timeout_s``. Raises
        :class:`ConnectionClosedError`, :class:`RequestTimeoutError` (the connection is then closed) or
        :class:`ProtocolViolationError`; an encode error (a caller bug) propagates as
        :class:`protocol.errors.EncodeError` and leaves the connection usable.
        """
        if self._reauth_at is not None or self._reauth is not None:
            await self._session_ready()
        return await self._request(api_key, api_version, body, timeout_s)

    async def _request(
        self, api_key: int, api_version: int, body: Any, timeout_s: float | None
    ) -> MessageData:
        frame = await self._exchange(api_key, api_version, body, timeout_s)
        try:
            return decode_response(frame, api_key, api_version).body
        except ProtocolError as exc:
            message = f"undecodable {_api_name(api_key)} v{api_version} response: {exc}"
            self._violation(message)
            raise ProtocolViolationError(message) from None

    async def send_no_response(self, api_key: int, api_version: int, body: Any) -> None:
        """Send a request the broker does not answer (Produce with acks=0). Nothing enters the FIFO."""
        if self._reauth_at is not None or self._reauth is not None:
            await self._session_ready()
        self._check_open()
        payload = encode_request(api_key, api_version, self._take_correlation_id(), self.client_id, body)
        await self._write(payload)

    async def _exchange(
        self, api_key: int, api_version: int, body: Any, timeout_s: float | None
    ) -> memoryview:
        self._check_open()
        correlation_id = self._take_correlation_id()
        payload = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        loop = asyncio.get_running_loop()
        entry = _InFlight(correlation_id, api_key, api_version, loop.create_future(), None)
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        entry.timer = loop.call_later(timeout, self._expire, entry, timeout)
        self._in_flight.append(entry)
        try:
            await self._write(payload)
        except BaseException:
            entry.future.cancel()  # nobody will await it; the entry keeps its place in the FIFO
            raise
        return await entry.future

    def _take_correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _CORRELATION_ID_MASK
        return correlation_id

    async def _write(self, payload: bytes) -> None:
        assert self._transport is not None and self._protocol is not None
        self._transport.writelines((frame_header(len(payload)), payload))
        await self._protocol.drain()

    def _check_open(self) -> None:
        if self._closed:
            reason = self._close_reason or "closed"
            raise ConnectionClosedError(f"connection to {self.host}:{self.port} is closed ({reason})")
        if self._transport is None:
            raise ConnectionClosedError(f"connection to {self.host}:{self.port} is not connected")

    # -- transport callbacks -----------------------------------------------------------------------

    def _connection_made(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        protocol = transport.get_protocol()
        assert isinstance(protocol, _ClientProtocol)
        self._protocol = protocol

    def _frame_received(self, frame: memoryview) -> None:
        if self._closed:
            return
        if len(frame) < 4:
            self._violation(f"response frame of {len(frame)} bytes has no correlation id")
            return
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        if not self._in_flight:
            self._violation(f"response with correlation id {correlation_id} but no request in flight")
            return
        head = self._in_flight[0]
        if head.correlation_id != correlation_id:
            self._violation(f"expected correlation id {head.correlation_id}, got {correlation_id}")
            return
        self._in_flight.popleft()
        if head.timer is not None:
            head.timer.cancel()
        if not head.future.done():
            head.future.set_result(frame)

    def _expire(self, entry: _InFlight, timeout_s: float) -> None:
        if self._closed:
            return
        name = _api_name(entry.api_key)
        self._log.warning("request timed out, closing", api=name, correlation_id=entry.correlation_id)
        if not entry.future.done():
            entry.future.set_exception(
                RequestTimeoutError(
                    f"{name} v{entry.api_version} (correlation id {entry.correlation_id}) to "
                    f"{self.host}:{self.port} got no response within {timeout_s} s"
                )
            )
        self.close(f"closed after a {name} request timed out")

    def _violation(self, message: str) -> None:
        self._log.warning("protocol violation, closing", reason=message)
        self._shutdown(ProtocolViolationError(message), f"closed after a protocol violation: {message}")

    def _connection_lost(self, exc: Exception | None) -> None:
        reason = f"lost: {exc!r}" if exc is not None else "closed by the broker"
        if not self._closed:
            self._log.info("connection lost", reason=reason, in_flight=len(self._in_flight))
        self._shutdown(PeerClosedError(f"connection to {self.host}:{self.port} {reason}"), reason)
        self._lost.set()

    def _shutdown(self, error: Exception, reason: str) -> None:
        """Close once; fail every waiter with ``error`` (a fresh copy each, so tracebacks do not mix)."""
        if not self._closed:
            self._closed = True
            self._close_reason = reason
        in_flight, self._in_flight = self._in_flight, collections.deque()
        for entry in in_flight:
            if entry.timer is not None:
                entry.timer.cancel()
            if not entry.future.done():
                entry.future.set_exception(type(error)(*error.args))
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.close()
        if transport is None:
            self._lost.set()


class ReconnectingConnection:
    """A broker address whose connection is (re)opened on demand.

    A request on a closed connection opens a new one first, after Kafka's reconnect backoff
    (``reconnect.backoff.ms`` 50 doubling to ``reconnect.backoff.max.ms`` 1000, ±20 % jitter) when the last
    attempt failed. A request that fails is never re-sent here: whether the broker acted on it is unknown,
    and only the caller knows if repeating it is safe.
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[KafkaConnection]],
        *,
        backoff_s: float = 0.05,
        backoff_max_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._connect = connect
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._connection: KafkaConnection | None = None
        self._failures = 0
        self._last_attempt: float | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    def to(cls, host: str, port: int, **options: Any) -> ReconnectingConnection:
        """Reconnect to ``host:port``; ``options`` go to :meth:`KafkaConnection.open`."""

        async def connect() -> KafkaConnection:
            return await KafkaConnection.open(host, port, **options)

        return cls(connect)

    @property
    def current(self) -> KafkaConnection | None:
        """The open connection, if any (None before the first request and after a failure)."""
        connection = self._connection
        return connection if connection is not None and not connection.closed else None

    async def connection(self) -> KafkaConnection:
        """The open connection, connecting first (after the backoff) if there is none."""
        if self._closed:
            raise ConnectionClosedError("ReconnectingConnection is closed")
        current = self.current
        if current is not None:
            return current
        async with self._lock:
            current = self.current
            if current is not None:
                return current
            await self._wait_backoff()
            self._last_attempt = self._clock()
            try:
                self._connection = await self._connect()
            except ConnectError:
                self._failures += 1
                raise
            self._failures = 0
            return self._connection

    async def request(
        self, api_key: int, api_version: int, body: Any, timeout_s: float | None = None
    ) -> MessageData:
        connection = await self.connection()
        return await connection.request(api_key, api_version, body, timeout_s)

    async def version_for(
        self, api_key: int, wanted_max: int | None = None, wanted_min: int | None = None
    ) -> int:
        return (await self.connection()).version_for(api_key, wanted_max, wanted_min)

    def backoff(self) -> float:
        """The wait before the next connect attempt, from the count of consecutive failures."""
        if self._failures == 0:
            return 0.0
        base = min(self._backoff_s * 2.0 ** (self._failures - 1), self._backoff_max_s)
        return base * (0.8 + 0.4 * self._jitter())

    async def _wait_backoff(self) -> None:
        if self._last_attempt is None:
            return
        remaining = self._last_attempt + self.backoff() - self._clock()
        if remaining > 0:
            await self._sleep(remaining)

    async def close(self) -> None:
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
            await connection.wait_closed()


def _api_versions_request() -> dict[str, Any]:
    return {"client_software_name": CLIENT_SOFTWARE_NAME, "client_software_version": CLIENT_SOFTWARE_VERSION}


def _tls_reason(exc: ssl.SSLError) -> str:
    """OpenSSL's reason without the Python wrapping: ``certificate verify failed: ...``."""
    verify = getattr(exc, "verify_message", None)
    reason = exc.reason or str(exc)
    return f"{reason}: {verify}" if verify else str(reason)


def _api_name(api_key: int) -> str:
    key = ApiKey.lookup(api_key)
    return key.message_name if key is not None else f"api key {api_key}"


__all__ = [
    "DEFAULT_CLIENT_ID",
    "ApiVersionRange",
    "KafkaConnection",
    "ReconnectingConnection",
]
