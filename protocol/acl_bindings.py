"""ACL bindings and binding filters: Kafka's ``AclBinding``, ``ResourcePattern``,
``AccessControlEntry`` and their filters (``org.apache.kafka.common.acl`` / ``.resource``).

A binding says that ``entry.principal`` connecting from ``entry.host`` is allowed or denied
``entry.operation`` on the resources ``pattern`` matches. It is what the ACL APIs carry, what the
metadata log stores (AccessControlEntryRecord) and what the authorizer checks, so the client, the
controller, the broker and the tools share these types. The codes are those of
:mod:`protocol.acl_types`; a code this side does not know reads as ``UNKNOWN``
(:func:`resource_type`, ...), as in Kafka's ``fromCode``.

Filters follow Kafka's ``matches`` rules exactly: a null (None) name, principal or host matches
anything, ``ANY`` matches any value; a pattern filter of type ``MATCH`` matches every stored pattern
that applies to its name (the literal name, the wildcard ``*`` and every prefix pattern of the
name), while ``ANY`` matches any pattern type with exactly that name. The ``__str__`` forms are
Kafka's ``toString``, which kafka-acls.sh prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType

__all__ = [
    "ANY_BINDING_FILTER",
    "CLUSTER_NAME",
    "SUPPORTED_OPERATIONS",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "ResourcePattern",
    "ResourcePatternFilter",
    "acl_operation",
    "pattern_type",
    "permission_type",
    "resource_type",
]

WILDCARD_RESOURCE = "*"
"""A LITERAL pattern with this name matches every resource of its type."""
CLUSTER_NAME = "kafka-cluster"
"""The name of the one CLUSTER resource."""
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
"""The principal of an ACL that applies to every user."""

_E = TypeVar("_E", bound=IntEnum)


def _of(enum: type[_E], code: int) -> _E:
    try:
        return enum(code)
    except ValueError:
        return enum(0)  # every ACL enum's 0 is UNKNOWN


def resource_type(code: int) -> ResourceType:
    """The resource type of an int8 code; UNKNOWN for one this side does not know."""
    return _of(ResourceType, code)


def pattern_type(code: int) -> PatternType:
    return _of(PatternType, code)


def acl_operation(code: int) -> AclOperation:
    return _of(AclOperation, code)


def permission_type(code: int) -> AclPermissionType:
    return _of(AclPermissionType, code)


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """The resources an ACL applies to: one name (LITERAL; ``*`` is every name) or every name with a
    prefix (PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    @property
    def is_unknown(self) -> bool:
        return self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (``principal``, ``User:alice`` or ``User:*``), from where (``host``, an IP address or
    ``*``), may or may not (``permission_type``) do what (``operation``)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @property
    def is_unknown(self) -> bool:
        return self.operation is AclOperation.UNKNOWN or self.permission_type is AclPermissionType.UNKNOWN

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def of(
        cls,
        resource_type_: ResourceType,
        name: str,
        pattern_type_: PatternType,
        principal: str,
        host: str,
        operation: AclOperation,
        permission: AclPermissionType,
    ) -> AclBinding:
        return cls(
            ResourcePattern(resource_type_, name, pattern_type_),
            AccessControlEntry(principal, host, operation, permission),
        )

    @classmethod
    def from_codes(
        cls,
        resource_type_: int,
        name: str,
        pattern_type_: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        """A binding from the int8 codes of a request or record (unknown codes read as UNKNOWN)."""
        return cls.of(
            resource_type(resource_type_),
            name,
            pattern_type(pattern_type_),
            principal,
            host,
            acl_operation(operation),
            permission_type(permission),
        )

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown

    def to_filter(self) -> AclBindingFilter:
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    def sort_key(self) -> tuple[int, str, int, str, str, int, int]:
        """A total order (resource, then entry) for listings that must not depend on history."""
        p, e = self.pattern, self.entry
        return (p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation, e.permission_type)

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Matches resource patterns; the defaults (ANY, None, ANY) match every pattern."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    @property
    def is_unknown(self) -> bool:
        return self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type is not pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type is PatternType.ANY or self.pattern_type is pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:  # a MATCH filter
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False  # no stored pattern has another type (Kafka throws)

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Matches access control entries; the defaults match every entry."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @property
    def is_unknown(self) -> bool:
        return self.operation is AclOperation.UNKNOWN or self.permission_type is AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        """Kafka's ``AccessControlEntryFilter.matches``: exact values, None and ANY match anything."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation is entry.operation)
            and (
                self.permission_type is AclPermissionType.ANY or self.permission_type is entry.permission_type
            )
        )

    def __str__(self) -> str:
        principal = "<any>" if self.principal is None else self.principal
        host = "<any>" if self.host is None else self.host
        return (
            f"(principal={principal}, host={host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Matches ACL bindings: DescribeAcls' filter and each of DeleteAcls' filters."""

    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    @classmethod
    def from_codes(
        cls,
        resource_type_: int,
        name: str | None,
        pattern_type_: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclBindingFilter:
        """A filter from the int8 codes of a request (unknown codes read as UNKNOWN)."""
        return cls(
            ResourcePatternFilter(resource_type(resource_type_), name, pattern_type(pattern_type_)),
            AccessControlEntryFilter(principal, host, acl_operation(operation), permission_type(permission)),
        )

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern}, entryFilter={self.entry})"


ANY_BINDING_FILTER = AclBindingFilter()
"""Matches every binding (Kafka's ``AclBindingFilter.ANY``)."""

_O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            _O.READ,
            _O.WRITE,
            _O.CREATE,
            _O.DESCRIBE,
            _O.DELETE,
            _O.ALTER,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset(
        {
            _O.CREATE,
            _O.CLUSTER_ACTION,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
            _O.IDEMPOTENT_WRITE,
            _O.ALTER,
            _O.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE, _O.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}
"""The operations that mean something on each resource type (Kafka's
``AclEntry.supportedOperations``; TWO_PHASE_COMMIT on transactional ids from Kafka 4.1): what
kafka-acls.sh accepts besides ALL, and what an authorized-operations bit field ranges over."""
