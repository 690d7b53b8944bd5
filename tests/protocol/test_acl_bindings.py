"""ACL bindings and filters: Kafka's ResourcePatternFilterTest and AclBindingFilterTest cases, the
codes a newer peer may send, and the toString forms kafka-acls.sh prints."""

from __future__ import annotations

import pytest

from protocol.acl_bindings import (
    ANY_BINDING_FILTER,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType

T, G = ResourceType.TOPIC, ResourceType.GROUP
LIT, PRE, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH


@pytest.mark.parametrize(
    ("filter_", "pattern", "matches"),
    [
        (ResourcePatternFilter(ResourceType.ANY, "Name", LIT), ResourcePattern(T, "Name", LIT), True),
        (ResourcePatternFilter(G, "Name", LIT), ResourcePattern(T, "Name", LIT), False),
        (ResourcePatternFilter(T, "Different", PRE), ResourcePattern(T, "Name", PRE), False),
        (ResourcePatternFilter(T, "NAME", PRE), ResourcePattern(T, "Name", PRE), False),
        (ResourcePatternFilter(T, "Name", LIT), ResourcePattern(T, "Name", PRE), False),
        (ResourcePatternFilter(T, None, PRE), ResourcePattern(T, "Name", PRE), True),
        (ResourcePatternFilter(T, "Name", ANY), ResourcePattern(T, "Name", PRE), True),
        (ResourcePatternFilter(T, "Name", MATCH), ResourcePattern(T, "Name", PRE), True),
        (ResourcePatternFilter(T, "Name", LIT), ResourcePattern(T, "Name", LIT), True),
        (ResourcePatternFilter(T, "Name", ANY), ResourcePattern(T, "Name", LIT), True),
        (ResourcePatternFilter(T, "Name", MATCH), ResourcePattern(T, "Name", LIT), True),
        (ResourcePatternFilter(T, "Name", LIT), ResourcePattern(T, "Name-something", LIT), False),
        (ResourcePatternFilter(T, "*", LIT), ResourcePattern(T, "*", LIT), True),
        (ResourcePatternFilter(T, "Name", LIT), ResourcePattern(T, "*", LIT), False),
        (ResourcePatternFilter(T, "*", LIT), ResourcePattern(T, "Name", LIT), False),
        (ResourcePatternFilter(T, "Name", ANY), ResourcePattern(T, "*", LIT), False),
        (ResourcePatternFilter(T, "Name", MATCH), ResourcePattern(T, "*", LIT), True),
        (ResourcePatternFilter(T, "Name", PRE), ResourcePattern(T, "Name", PRE), True),
        (ResourcePatternFilter(T, "Name", PRE), ResourcePattern(T, "Name-something", PRE), False),
        (ResourcePatternFilter(T, "Name-something", PRE), ResourcePattern(T, "Name", PRE), False),
        (ResourcePatternFilter(T, "Name-something", ANY), ResourcePattern(T, "Name", PRE), False),
        (ResourcePatternFilter(T, "Name-something", MATCH), ResourcePattern(T, "Name", PRE), True),
        (ResourcePatternFilter(T, "Nam", MATCH), ResourcePattern(T, "Name", PRE), False),
    ],
)
def test_resource_pattern_filter_matches_as_kafka(
    filter_: ResourcePatternFilter, pattern: ResourcePattern, matches: bool
) -> None:
    assert filter_.matches(pattern) is matches


def test_entry_filters_match_nulls_and_any() -> None:
    entry = AccessControlEntry("User:alice", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)
    assert AccessControlEntryFilter().matches(entry)
    assert AccessControlEntryFilter(
        "User:alice", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW
    ).matches(entry)
    assert not AccessControlEntryFilter("User:*").matches(entry)  # a filter's "*" is not a wildcard
    assert not AccessControlEntryFilter(host="*").matches(entry)
    assert not AccessControlEntryFilter(operation=AclOperation.ALL).matches(entry)
    assert not AccessControlEntryFilter(permission_type=AclPermissionType.DENY).matches(entry)


def test_a_binding_filter_needs_both_halves() -> None:
    binding = AclBinding.of(T, "t", LIT, "User:a", "*", AclOperation.READ, AclPermissionType.ALLOW)
    assert ANY_BINDING_FILTER.matches(binding) and binding.to_filter().matches(binding)
    assert not AclBindingFilter(ResourcePatternFilter(G), AccessControlEntryFilter()).matches(binding)
    assert not AclBindingFilter(ResourcePatternFilter(), AccessControlEntryFilter("User:b")).matches(binding)


def test_unknown_codes() -> None:
    binding = AclBinding.from_codes(99, "t", 3, "User:a", "*", 3, 3)
    assert binding.pattern.resource_type is ResourceType.UNKNOWN and binding.is_unknown
    assert not AclBinding.from_codes(2, "t", 3, "User:a", "*", 3, 3).is_unknown
    assert AclBindingFilter.from_codes(2, None, 0, None, None, 3, 3).is_unknown
    assert AclBindingFilter.from_codes(2, None, 1, None, None, 77, 1).is_unknown
    assert not AclBindingFilter.from_codes(1, None, 1, None, None, 1, 1).is_unknown


def test_kafkas_to_string_forms() -> None:
    binding = AclBinding.of(T, "test", LIT, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    assert str(binding.pattern) == "ResourcePattern(resourceType=TOPIC, name=test, patternType=LITERAL)"
    assert str(binding.entry) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert str(binding) == f"(pattern={binding.pattern}, entry={binding.entry})"
    assert str(ResourcePatternFilter(G)) == "ResourcePattern(resourceType=GROUP, name=<any>, patternType=ANY)"
    assert (
        str(AccessControlEntryFilter()) == "(principal=<any>, host=<any>, operation=ANY, permissionType=ANY)"
    )
