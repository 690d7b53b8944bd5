"""The broker's authorizer: Kafka's StandardAuthorizer over the ACLs of the metadata image.

``authorizer.class.name`` picks it (Kafka's ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``,
or ``kafka.security.authorizer.AclAuthorizer``, ZooKeeper-mode Kafka's name for the same rules);
empty, the default, means no authorization: :class:`AllowEverything` allows every action and the
ACL APIs answer SECURITY_DISABLED. :func:`build_authorizer` makes the one a config asks for.

How a handler checks an action (the broker builds one authorizer and hands it to the handlers that
need it, broker/handler_sets.py)::

    if not authorizer.authorize(ctx.principal, ctx.client_host, AclOperation.READ,
                                ResourceType.TOPIC, topic):
        ...  # TOPIC_AUTHORIZATION_FAILED for that topic

``ctx.principal`` is the connection's :class:`~security.principal.KafkaPrincipal` (``User:ANONYMOUS``
when it did not authenticate) and ``ctx.client_host`` the client's IP address, which ACL hosts name.
:meth:`StandardAuthorizer.authorize_any` is Kafka's ``authorizeByResourceType`` (may the principal do
the operation on at least one resource of a type: InitProducerId's idempotent write, CreateTopics),
and :meth:`~StandardAuthorizer.authorized_operations` the bit field of Metadata's and
DescribeGroups' ``authorized_operations``.

The rules (Kafka's ``StandardAuthorizerData``):

* a principal listed in ``super.users`` may do anything;
* the ACLs that apply to a resource are those of its type whose pattern matches its name: LITERAL
  with that name or with the wildcard ``*``, PREFIXED with a prefix of the name;
* of those, an ACL applies to the request when its principal is the requester's or ``User:*``, its
  host the client's address or ``*``, and its operation the one asked or ALL. An ALLOW ACL for
  READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one for ALTER_CONFIGS allows
  DESCRIBE_CONFIGS; a DENY ACL denies only its own operation (or all of them);
* any applying DENY denies; otherwise any applying ALLOW allows;
* otherwise the request is denied, unless no ACL at all applies to the resource (for anybody):
  then ``allow.everyone.if.no.acl.found`` decides (false by default).

Brokers bind their client listeners only once their image has caught up with the metadata log
(broker/node.py), so the ACLs are loaded before the first request: Kafka's "authorizer not ready"
state does not arise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from metadata.authorizer.acl_cache import AclCache
from protocol.acl_bindings import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
)
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from security.principal import KafkaPrincipal
from server_common.config.definitions import AUTHORIZER_CLASS_NAMES

if TYPE_CHECKING:
    from metadata.image import MetadataImage
    from server_common.config import BrokerConfig

__all__ = [
    "ACL_AUTHORIZER",
    "STANDARD_AUTHORIZER",
    "AllowEverything",
    "Authorizer",
    "StandardAuthorizer",
    "authorizer_enabled",
    "build_authorizer",
    "operations_bit_field",
    "parse_super_users",
]

STANDARD_AUTHORIZER, ACL_AUTHORIZER = AUTHORIZER_CLASS_NAMES
"""The class names ``authorizer.class.name`` accepts; both select :class:`StandardAuthorizer`."""

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
_BY_TYPE_PROBE = "hardcode"
"""The resource name Kafka's authorizeByResourceType first authorizes (super users, the default)."""

Principal = KafkaPrincipal | str


class Authorizer(Protocol):
    """What handlers call. Every method is synchronous and cheap: call it per resource."""

    @property
    def enabled(self) -> bool:
        """False when no authorizer is configured (everything is allowed; ACL APIs are disabled)."""
        ...

    def authorize(
        self,
        principal: Principal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """May ``principal``, connected from ``host``, do ``operation`` on the resource?"""
        ...

    def authorize_any(
        self, principal: Principal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May it do ``operation`` on at least one resource of ``resource_type``?"""
        ...

    def authorized_operations(
        self, principal: Principal, host: str, resource_type: ResourceType, resource_name: str
    ) -> int:
        """The operations it may do on the resource, as Kafka's 32-bit field (bit = code)."""
        ...

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``binding_filter`` matches (DescribeAcls)."""
        ...


def operations_bit_field(operations: set[AclOperation] | frozenset[AclOperation]) -> int:
    """Kafka's ``Utils.to32BitField`` of the operations' codes."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field


class AllowEverything:
    """No authorizer configured (``authorizer.class.name`` empty): every action is allowed."""

    def __init__(self, acls: Callable[[], AclCache] | None = None) -> None:
        self._acls = acls

    @property
    def enabled(self) -> bool:
        return False

    def authorize(
        self,
        principal: Principal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        return True

    def authorize_any(
        self, principal: Principal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return True

    def authorized_operations(
        self, principal: Principal, host: str, resource_type: ResourceType, resource_name: str
    ) -> int:
        return operations_bit_field(SUPPORTED_OPERATIONS.get(resource_type, frozenset()))

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return [] if self._acls is None else self._acls().acls(binding_filter)


class StandardAuthorizer:
    """Kafka's StandardAuthorizer over the ACLs ``acls()`` returns (read at every call, so a
    snapshot that replaces the image's ACLs is seen at once)."""

    def __init__(
        self,
        acls: Callable[[], AclCache],
        *,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._acls = acls
        self._super_users = super_users
        self._default = allow_everyone_if_no_acl_found

    @property
    def enabled(self) -> bool:
        return True

    @property
    def super_users(self) -> frozenset[str]:
        return self._super_users

    def authorize(
        self,
        principal: Principal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        name = str(principal)
        if name in self._super_users:
            return True
        found = allowed = False
        for acl in self._acls().resource_acls(resource_type, resource_name):
            found = True
            result = _result(acl, name, host, operation)
            if result is AclPermissionType.DENY:
                return False
            if result is AclPermissionType.ALLOW:
                allowed = True
        return allowed or (not found and self._default)

    def authorize_any(
        self, principal: Principal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's ``Authorizer.authorizeByResourceType`` (the default StandardAuthorizer uses).

        Allowed when the principal may do ``operation`` on a probe resource (so super users, and
        the default when no ACL applies to it), or when an ALLOW ACL for the operation (or ALL; no
        implied operations here) on a literal name or a prefix is not dominated by a DENY: a
        wildcard DENY denies everything, a literal DENY its own name, a prefixed DENY every name it
        is a prefix of. A wildcard ALLOW allows.
        """
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"authorize_any needs a concrete operation, not {operation.name}")
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"authorize_any needs a concrete resource type, not {resource_type.name}")
        if self.authorize(principal, host, operation, resource_type, _BY_TYPE_PROBE):
            return True
        name = str(principal)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        wildcard_allow = False
        for acl in self._acls().of_type(resource_type):
            entry, pattern = acl.entry, acl.pattern
            if entry.host not in (host, WILDCARD_HOST) or entry.principal not in (name, WILDCARD_PRINCIPAL):
                continue
            if entry.operation not in (operation, AclOperation.ALL):
                continue
            literal = pattern.pattern_type is PatternType.LITERAL
            if entry.permission_type is AclPermissionType.DENY:
                if literal and pattern.name == WILDCARD_RESOURCE:
                    return False
                (deny_literal if literal else deny_prefixed).add(pattern.name)
            elif entry.permission_type is AclPermissionType.ALLOW:
                if literal and pattern.name == WILDCARD_RESOURCE:
                    wildcard_allow = True
                else:
                    (allow_literal if literal else allow_prefixed).add(pattern.name)
        if wildcard_allow:
            return True
        for allowed, literal in [(n, True) for n in allow_literal] + [(n, False) for n in allow_prefixed]:
            if literal and allowed in deny_literal:
                continue
            if not any(allowed[:i] in deny_prefixed for i in range(1, len(allowed) + 1)):
                return True
        return False

    def authorized_operations(
        self, principal: Principal, host: str, resource_type: ResourceType, resource_name: str
    ) -> int:
        """The supported operations of the resource's type that ``authorize`` allows."""
        return operations_bit_field(
            {
                operation
                for operation in SUPPORTED_OPERATIONS.get(resource_type, frozenset())
                if self.authorize(principal, host, operation, resource_type, resource_name)
            }
        )

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self._acls().acls(binding_filter)

    def __repr__(self) -> str:
        return (
            f"StandardAuthorizer(super_users={sorted(self._super_users)}, "
            f"allow_everyone_if_no_acl_found={self._default})"
        )


def _result(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
    """Kafka's ``findResult``: ALLOW or DENY if ``acl`` (whose resource matches) applies to the
    request, None if it does not."""
    entry = acl.entry
    if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
        return None
    if entry.host != WILDCARD_HOST and entry.host != host:
        return None
    if entry.operation is not AclOperation.ALL:
        if entry.permission_type is AclPermissionType.ALLOW:
            if operation is AclOperation.DESCRIBE:
                if entry.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation is AclOperation.DESCRIBE_CONFIGS:
                if entry.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif entry.operation is not operation:
                return None
        elif entry.operation is not operation:
            return None
    if entry.permission_type is AclPermissionType.ALLOW:
        return AclPermissionType.ALLOW
    if entry.permission_type is AclPermissionType.DENY:
        return AclPermissionType.DENY
    return None


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's getConfiguredSuperUsers), each
    ``Type:name``; ValueError naming the entry otherwise."""
    users = set()
    for item in text.split(";"):
        entry = item.strip()
        if entry:
            KafkaPrincipal.parse(entry)
            users.add(entry)
    return frozenset(users)


def authorizer_enabled(config: BrokerConfig) -> bool:
    """Whether ``config`` names an authorizer (the ACL APIs answer SECURITY_DISABLED otherwise)."""
    return bool(config.authorizer_class_name)


def build_authorizer(config: BrokerConfig, image: MetadataImage) -> Authorizer:
    """The authorizer ``config`` asks for, over ``image``'s ACLs."""

    def acls() -> AclCache:
        return image.acls

    return authorizer_over(config, acls)


def authorizer_over(
    config: BrokerConfig, acls: Callable[[], AclCache], extra_super_users: frozenset[str] = frozenset()
) -> Authorizer:
    """The authorizer ``config`` asks for, over the ACLs ``acls()`` returns (a controller reads
    its active image's), with ``extra_super_users`` beside ``super.users``."""
    if not authorizer_enabled(config):
        return AllowEverything(acls)
    return StandardAuthorizer(
        acls,
        super_users=parse_super_users(config.super_users) | extra_super_users,
        allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
    )
