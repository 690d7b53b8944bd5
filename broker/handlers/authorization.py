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
from protocol.error_codes import ErrorCode

__all__ = [
    "ALLOW_EVERYTHING",
    "NOTHING_DENIED",
    "allowed",
    "cluster_allowed",
    "config_resource_refusal",
    "denied_names",
]

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


_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS, _CONFIG_GROUP = 2, 4, 8, 16, 32
"""Kafka's ConfigResource.Type ids."""


def config_resource_refusal(
    authorizer: Authorizer, ctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> ErrorCode | None:
    """Why the requester may not do ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
    resource, or None when it may (Kafka's ConfigHelper and ControllerApis): a broker, broker
    logger or client metrics resource needs it on the cluster (CLUSTER_AUTHORIZATION_FAILED), a
    topic on the topic (TOPIC_AUTHORIZATION_FAILED), a group on the group
    (GROUP_AUTHORIZATION_FAILED). Other types are left to the handler's own answer."""
    if not authorizer.enabled:
        return None
    if resource_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS):
        return None if cluster_allowed(authorizer, ctx, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if resource_type == _CONFIG_TOPIC:
        permitted = allowed(authorizer, ctx, operation, ResourceType.TOPIC, name)
        return None if permitted else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == _CONFIG_GROUP:
        permitted = allowed(authorizer, ctx, operation, ResourceType.GROUP, name)
        return None if permitted else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None
