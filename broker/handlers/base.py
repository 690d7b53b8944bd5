"""What every API handler is: a declared version range and one async method.

Handlers are thin: they take a decoded request, call the domain, and return the response body
(a mapping the codec encodes) or an :class:`EncodedResponse` when they assemble the bytes
themselves (Fetch sends segment slices without copying them). A handler never invents data: an
API without a handler is absent from ApiVersions and answered with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from broker.server.authentication import ConnectionSession


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asked what: the decoded header plus where the request came from."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    connection_id: int
    received_ns: int
    listener: str = ""
    """The name of the listener the connection came in on (PLAINTEXT, CONTROLLER, ...)."""
    session: ConnectionSession | None = None
    """The connection's peer: its principal and, on SASL listeners, its SASL state."""

    @property
    def principal(self) -> KafkaPrincipal:
        return ANONYMOUS if self.session is None else self.session.principal

    @property
    def client_host(self) -> str:
        """The client's IP address (the peer without its port): what an ACL's host names."""
        host, sep, _ = self.peer.rpartition(":")
        return host if sep else self.peer


@dataclass(slots=True)
class EncodedResponse:
    """A response body already in wire form, as a list of buffers (header excluded).

    ``parts`` may hold bytes, memoryviews and file regions; the connection hands them to the
    transport with ``writelines`` (a file region is read with one ``pread`` in the same tick, so the
    segment cannot change in between) and never joins them.
    """

    parts: Sequence[Any]
    size: int


NO_RESPONSE: Any = object()
"""Returned by a handler that must not answer (Produce with acks=0)."""


class Handler(ABC):
    """One Kafka API. Subclasses set ``api_key``, ``min_version`` and ``max_version``."""

    api_key: ClassVar[ApiKey]
    min_version: ClassVar[int]
    max_version: ClassVar[int]

    @abstractmethod
    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        """Answer ``request``: a response body mapping, an EncodedResponse, or NO_RESPONSE."""

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """The response that reports ``code`` for the whole request, or None if the API's
        response has no place for it (the connection is then closed).

        The default fills a top-level ``error_code``; APIs that report errors per topic or
        partition override this.
        """
        return None
