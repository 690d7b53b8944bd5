"""How handlers ask the authorizer about one request (Kafka's ``AuthHelper``).

Every handler that enforces ACLs takes an :class:`~metadata.authorizer.Authorizer` (by default
:data:`ALLOW_EVERYTHING`, what a broker without ``authorizer.class.name`` uses) and calls these with
the request's context, which carries the principal and the client's address. The per-resource
helpers return the *denied* names, and return an empty set at once when the authorizer is not
``enabled``: without authorization the hot path (Produce, Fetch) does no per-partition work, only
one attribute check.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.handlers.base import RequestContext
from metadata.authorizer.standard import AllowEverything, Authorizer
from protocol.acl_bindings import CLUSTER_NAME
from protocol.acl_types import AclOperation, ResourceType

__all__ = ["ALLOW_EVERYTHING", "NOTHING_DENIED", "allowed", "cluster_allowed", "denied_names"]

ALLOW_EVERYTHING: Authorizer = AllowEverything()
"""The default of handlers built without an authorizer (tests, and brokers without one)."""
NOTHING_DENIED: frozenset[str] = frozenset()


def allowed(
    authorizer: Authorizer,
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """May the requester do ``operation`` on the named resource? (Kafka's ``authorize``.)"""
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)


def cluster_allowed(authorizer: Authorizer, ctx: RequestContext, operation: AclOperation) -> bool:
    """May the requester do ``operation`` on the cluster? (Kafka's ``authorizeClusterOperation``.)"""
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def denied_names(
    authorizer: Authorizer,
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str | None],
) -> frozenset[str]:
    """The names among ``names`` the requester may not do ``operation`` on, each asked once
    (Kafka's ``filterByAuthorized``, inverted); empty without an enabled authorizer. None names
    (a topic id that resolves to nothing) are skipped: the caller answers them otherwise."""
    if not authorizer.enabled:
        return NOTHING_DENIED
    principal, host = ctx.principal, ctx.client_host
    return frozenset(
        name
        for name in {n for n in names if n is not None}
        if not authorizer.authorize(principal, host, operation, resource_type, name)
    )
