"""Driving handlers as a given principal against a StandardAuthorizer over hand-made ACLs, for the
authorization matrix (tests/broker/test_handlers_authorization*.py)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from broker.handlers.base import NO_RESPONSE, EncodedResponse, Handler, RequestContext
from broker.server.authentication import ConnectionSession
from metadata.authorizer import AclCache, StandardAuthorizer
from metadata.authorizer.acl_cache import acl_record
from protocol.acl_bindings import CLUSTER_NAME, AclBinding
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.error_codes import KafkaError
from protocol.messages import REQUESTS, RESPONSES
from security.principal import KafkaPrincipal

ALICE, BOB, ADMIN = "alice", "bob", "admin"
"""alice is granted what a test gives her, bob nothing, admin is a super user."""


def acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    user: str = ALICE,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding.of(resource_type, name, pattern, f"User:{user}", "*", operation, permission)


def cluster_acl(operation: AclOperation, **kwargs: Any) -> AclBinding:
    return acl(ResourceType.CLUSTER, CLUSTER_NAME, operation, **kwargs)


def authorizer(*bindings: AclBinding) -> StandardAuthorizer:
    """A StandardAuthorizer over ``bindings``, with User:admin a super user."""
    cache = AclCache()
    for binding in bindings:
        cache.add(acl_record(uuid.uuid4(), binding))
    return StandardAuthorizer(lambda: cache, super_users=frozenset({f"User:{ADMIN}"}))


def context_as(handler: Handler, version: int, user: str) -> RequestContext:
    session = ConnectionSession("SASL_PLAINTEXT", tls_principal=KafkaPrincipal("User", user))
    return RequestContext(int(handler.api_key), version, 1, "test", "10.0.0.1:5000", 1, 0, session=session)


async def call_as(handler: Handler, version: int, body: dict[str, Any], user: str) -> Any:
    """``body`` through the request codec, handled as ``user`` (a KafkaError answered with the
    handler's error response, as the dispatcher does), the answer through the response codec."""
    codec = REQUESTS[int(handler.api_key)].codec(version)
    request = codec.decode(codec.encode(body))
    ctx = context_as(handler, version, user)
    try:
        response = await handler.handle(ctx, request)
    except KafkaError as exc:
        response = handler.error_response(ctx, request, exc.code)
    if response is NO_RESPONSE:
        return response
    out = RESPONSES[int(handler.api_key)].codec(version)
    if isinstance(response, EncodedResponse):
        raw = b"".join(p if isinstance(p, bytes | memoryview) else p.read_bytes() for p in response.parts)
        return out.decode(bytes(raw))
    return out.decode(out.encode(response))


def with_authorizer(handler: Handler, authorizer_: StandardAuthorizer) -> Handler:
    """A copy of ``handler`` checking with ``authorizer_`` (its ``_authorizer`` replaced)."""
    clone = copy.copy(handler)
    clone._authorizer = authorizer_  # type: ignore[attr-defined]
    return clone


__all__ = [
    "ADMIN",
    "ALICE",
    "BOB",
    "acl",
    "authorizer",
    "call_as",
    "cluster_acl",
    "context_as",
    "with_authorizer",
]
