"""CreateAcls and DeleteAcls on the controller (Kafka's ``AclControlManager``, with the checks
Kafka's ``AclApis`` makes before it).

Each creation is checked on its own, in request order, and answered INVALID_REQUEST with Kafka's
message when it is not a concrete binding:

* a CLUSTER resource not named ``kafka-cluster``: ``The only valid name for the CLUSTER resource
  is kafka-cluster``;
* an empty resource name: ``Invalid empty resource name``;
* resource type UNKNOWN or ANY: ``Invalid resourceType ANY``; pattern type other than LITERAL or
  PREFIXED: ``Invalid patternType MATCH``; operation UNKNOWN or ANY: ``Invalid operation ANY``;
  permission other than ALLOW or DENY: ``Invalid permissionType ANY``;
* a principal that is not ``Type:name`` (kipling's check: Kafka stores it and fails later, when an
  authorization parses it).

A valid binding that exists already succeeds without a record; a new one gets a fresh uuid and an
AccessControlEntryRecord (once, even if the request repeats it). PREFIXED ``*`` is a valid, if
odd, pattern (names starting with ``*``), as in Kafka.

Each DeleteAcls filter is answered with the ACLs it matches (an ACL matched by two filters is listed
by both and removed once); a filter with an UNKNOWN resource or pattern type is INVALID_REQUEST
``Unknown patternFilter.``, one with an UNKNOWN operation or permission ``Unknown entryFilter.``.
All removals of a request go in one batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from metadata.authorizer.acl_cache import AclCache, acl_record
from metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from protocol.acl_bindings import CLUSTER_NAME, AclBinding, AclBindingFilter
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.error_codes import ErrorCode, KafkaError
from security.principal import KafkaPrincipal

__all__ = [
    "AclCreationResult",
    "AclDeletionResult",
    "plan_acl_creations",
    "plan_acl_deletions",
    "validate_new_acl",
]


@dataclass(frozen=True, slots=True)
class AclCreationResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AclDeletionResult:
    """One filter's outcome: the ACLs it matched (each removed), or an error."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    deleted: tuple[AclBinding, ...] = ()


def validate_new_acl(binding: AclBinding) -> None:
    """KafkaError INVALID_REQUEST with Kafka's message if ``binding`` cannot be stored."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise _invalid("Invalid empty resource name")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise _invalid(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _invalid(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise _invalid(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise _invalid(f"Invalid permissionType {entry.permission_type.name}")
    try:
        KafkaPrincipal.parse(entry.principal)
    except ValueError:
        raise _invalid(
            f"Could not parse principal from `{entry.principal}` "
            "(no colon is present separating the principal type from the principal name)"
        ) from None


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def plan_acl_creations(
    acls: AclCache,
    bindings: Sequence[AclBinding],
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
) -> tuple[list[AclCreationResult], list[AccessControlEntryRecord]]:
    """One result per binding, in order, and a record for each valid binding not stored yet."""
    results: list[AclCreationResult] = []
    records: list[AccessControlEntryRecord] = []
    planned: set[AclBinding] = set()
    used: set[uuid.UUID] = set()
    for binding in bindings:
        try:
            validate_new_acl(binding)
        except KafkaError as exc:
            results.append(AclCreationResult(exc.code, exc.message))
            continue
        if binding not in acls and binding not in planned:
            planned.add(binding)
            acl_id = _fresh_id(acls, used, new_id)
            records.append(acl_record(acl_id, binding))
        results.append(AclCreationResult())
    return results, records


def _fresh_id(acls: AclCache, used: set[uuid.UUID], new_id: Callable[[], uuid.UUID]) -> uuid.UUID:
    """Kafka's newAclId: drawn again until no ACL has it."""
    while True:
        acl_id = new_id()
        if acls.get(acl_id) is None and acl_id not in used:
            used.add(acl_id)
            return acl_id


def plan_acl_deletions(
    acls: AclCache, filters: Sequence[AclBindingFilter]
) -> tuple[list[AclDeletionResult], list[RemoveAccessControlEntryRecord]]:
    """One result per filter, in order, and one removal per matched ACL (in first-match order)."""
    results: list[AclDeletionResult] = []
    removed: dict[uuid.UUID, None] = {}
    for binding_filter in filters:
        if binding_filter.pattern.is_unknown:
            results.append(AclDeletionResult(ErrorCode.INVALID_REQUEST, "Unknown patternFilter."))
            continue
        if binding_filter.entry.is_unknown:
            results.append(AclDeletionResult(ErrorCode.INVALID_REQUEST, "Unknown entryFilter."))
            continue
        matched = acls.matching_ids(binding_filter)
        for acl_id, _ in matched:
            removed.setdefault(acl_id)
        results.append(AclDeletionResult(deleted=tuple(binding for _, binding in matched)))
    return results, [RemoveAccessControlEntryRecord(acl_id) for acl_id in removed]
