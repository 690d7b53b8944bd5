"""The StandardAuthorizer's rules (Kafka's StandardAuthorizerData and the default
authorizeByResourceType), checked on Kafka's documented examples and, with Hypothesis, against a
naive model that scans every ACL; and the ACL index's prefix search and filtered listing."""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata.authorizer import AclCache, AllowEverything, StandardAuthorizer
from metadata.authorizer.acl_cache import acl_record, prefixes_of
from metadata.authorizer.standard import operations_bit_field, parse_super_users
from metadata.records import RemoveAccessControlEntryRecord
from protocol.acl_bindings import (
    SUPPORTED_OPERATIONS,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePatternFilter,
)
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from security.principal import KafkaPrincipal

pytestmark = pytest.mark.timeout(120)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Op = AclOperation
HOST = "192.168.0.1"


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding.of(resource_type, name, pattern, principal, host, operation, permission)


def cache_of(*bindings: AclBinding) -> AclCache:
    cache = AclCache()
    for i, binding in enumerate(bindings):
        assert cache.add(acl_record(uuid.UUID(int=i + 1), binding)) is None
    return cache


def authorizer(
    *bindings: AclBinding, super_users: str = "", allow_if_none: bool = False
) -> StandardAuthorizer:
    cache = cache_of(*bindings)
    return StandardAuthorizer(
        lambda: cache,
        super_users=parse_super_users(super_users),
        allow_everyone_if_no_acl_found=allow_if_none,
    )


def can(a: StandardAuthorizer, user: str, operation: AclOperation, name: str, **kw: object) -> bool:
    host = str(kw.get("host", HOST))
    resource_type = kw.get("resource_type", TOPIC)
    assert isinstance(resource_type, ResourceType)
    return a.authorize(KafkaPrincipal("User", user), host, operation, resource_type, name)


# -- Kafka's documented rules -----------------------------------------------------------------------


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found() -> None:
    assert not can(authorizer(), "alice", Op.READ, "orders")
    assert can(authorizer(allow_if_none=True), "alice", Op.READ, "orders")
    # an ACL on the resource for someone else is "an ACL found": denied for everybody else
    other = acl("orders", Op.READ, principal="User:bob")
    assert not can(authorizer(other, allow_if_none=True), "alice", Op.READ, "orders")
    assert can(authorizer(other, allow_if_none=True), "alice", Op.READ, "payments")
    # even an ACL for another operation or host counts
    write = acl("orders", Op.WRITE, host="10.0.0.9")
    assert not can(authorizer(write, allow_if_none=True), "alice", Op.READ, "orders")


def test_super_users_may_do_anything_even_when_denied() -> None:
    a = authorizer(acl("orders", Op.ALL, DENY, principal="User:*"), super_users="User:admin; User:ops ;")
    assert a.super_users == {"User:admin", "User:ops"}
    assert can(a, "admin", Op.DELETE, "orders") and can(a, "ops", Op.READ, "anything")
    assert not can(a, "alice", Op.READ, "orders")
    assert a.authorize("User:admin", HOST, Op.ALTER, CLUSTER, "kafka-cluster")  # a str principal works too


def test_deny_wins_over_allow() -> None:
    # kafka-acls.sh's documented example: everyone may read Test-topic but BadBob from 198.51.100.3
    a = authorizer(
        acl("Test-topic", Op.READ, principal="User:*"),
        acl("Test-topic", Op.READ, DENY, principal="User:BadBob", host="198.51.100.3"),
    )
    assert can(a, "alice", Op.READ, "Test-topic", host="198.51.100.3")
    assert can(a, "BadBob", Op.READ, "Test-topic", host="198.51.100.4")
    assert not can(a, "BadBob", Op.READ, "Test-topic", host="198.51.100.3")


def test_a_deny_on_a_prefix_or_the_wildcard_beats_a_literal_allow() -> None:
    allow = acl("foobar", Op.READ)
    assert not can(authorizer(allow, acl("foo", Op.ALL, DENY, pattern=PREFIXED)), "alice", Op.READ, "foobar")
    assert not can(authorizer(allow, acl("*", Op.READ, DENY)), "alice", Op.READ, "foobar")
    assert can(authorizer(allow, acl("foobaz", Op.READ, DENY, pattern=PREFIXED)), "alice", Op.READ, "foobar")


def test_patterns_literal_wildcard_and_prefixed() -> None:
    a = authorizer(
        acl("foo", Op.READ, pattern=PREFIXED), acl("bar", Op.WRITE), acl("*", Op.DESCRIBE, principal="User:*")
    )
    assert can(a, "alice", Op.READ, "foo") and can(a, "alice", Op.READ, "foo.bar")
    assert not can(a, "alice", Op.READ, "fo") and not can(a, "alice", Op.READ, "xfoo")
    assert can(a, "alice", Op.WRITE, "bar") and not can(a, "alice", Op.WRITE, "barn")
    assert can(a, "bob", Op.DESCRIBE, "anything") and not can(a, "bob", Op.READ, "foo")
    # a literal "*" name is the wildcard; a prefixed "*" matches names starting with "*"
    star = authorizer(acl("*", Op.READ, pattern=PREFIXED))
    assert can(star, "alice", Op.READ, "*x") and not can(star, "alice", Op.READ, "x")


def test_resource_types_are_separate() -> None:
    a = authorizer(acl("app", Op.READ, resource_type=GROUP))
    assert can(a, "alice", Op.READ, "app", resource_type=GROUP)
    assert not can(a, "alice", Op.READ, "app")


def test_all_covers_every_operation_for_allow_and_deny() -> None:
    a = authorizer(acl("t", Op.ALL))
    assert all(can(a, "alice", op, "t") for op in SUPPORTED_OPERATIONS[TOPIC])
    d = authorizer(acl("t", Op.ALL), acl("t", Op.ALL, DENY, principal="User:bob"))
    assert not can(d, "bob", Op.DESCRIBE, "t")


def test_implied_operations_come_from_allow_acls_only() -> None:
    for implying in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert can(authorizer(acl("t", implying)), "alice", Op.DESCRIBE, "t"), implying
    for other in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS):
        assert not can(authorizer(acl("t", other)), "alice", Op.DESCRIBE, "t"), other
    assert can(authorizer(acl("t", Op.ALTER_CONFIGS)), "alice", Op.DESCRIBE_CONFIGS, "t")
    assert not can(authorizer(acl("t", Op.DESCRIBE)), "alice", Op.READ, "t")
    # a DENY for READ does not deny DESCRIBE (and READ does not imply WRITE)
    a = authorizer(acl("t", Op.DESCRIBE), acl("t", Op.READ, DENY))
    assert can(a, "alice", Op.DESCRIBE, "t") and not can(a, "alice", Op.READ, "t")
    # a DENY for DESCRIBE denies DESCRIBE even when READ is allowed
    assert not can(authorizer(acl("t", Op.READ), acl("t", Op.DESCRIBE, DENY)), "alice", Op.DESCRIBE, "t")


def test_principals_and_hosts_match_exactly_or_by_wildcard() -> None:
    a = authorizer(
        acl("t", Op.READ, host="10.0.0.1"), acl("t", Op.WRITE, principal="User:*", host="10.0.0.2")
    )
    assert can(a, "alice", Op.READ, "t", host="10.0.0.1") and not can(
        a, "alice", Op.READ, "t", host="10.0.0.2"
    )
    assert can(a, "zed", Op.WRITE, "t", host="10.0.0.2") and not can(a, "zed", Op.READ, "t", host="10.0.0.1")
    # "Group:*" is not the wildcard principal, and a principal's type counts
    g = authorizer(acl("t", Op.READ, principal="Group:*"))
    assert not can(g, "alice", Op.READ, "t")
    assert g.authorize(KafkaPrincipal("Group", "*"), HOST, Op.READ, TOPIC, "t")


def test_authorized_operations_is_kafkas_bit_field() -> None:
    a = authorizer(acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS))
    ops = {Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert a.authorized_operations("User:alice", HOST, TOPIC, "t") == operations_bit_field(ops)
    assert operations_bit_field({Op.READ, Op.DESCRIBE}) == (1 << 3) | (1 << 8)
    everything = AllowEverything().authorized_operations("User:x", HOST, GROUP, "g")
    assert everything == operations_bit_field(SUPPORTED_OPERATIONS[GROUP])


def test_allow_everything_allows_everything_and_is_not_enabled() -> None:
    a = AllowEverything()
    assert not a.enabled and StandardAuthorizer(AclCache).enabled
    assert a.authorize("User:x", HOST, Op.DELETE, TOPIC, "t") and a.authorize_any(
        "User:x", HOST, Op.WRITE, TOPIC
    )
    assert a.acls(AclBindingFilter()) == []


def test_super_users_are_principals() -> None:
    assert parse_super_users("") == frozenset() and parse_super_users(" ; ") == frozenset()
    with pytest.raises(ValueError, match="principalType:principalName but got alice"):
        parse_super_users("User:a;alice")


def test_the_authorizer_reads_the_acls_at_every_call() -> None:
    cache = AclCache()
    current = [cache]
    a = StandardAuthorizer(lambda: current[0])
    assert not can(a, "alice", Op.READ, "t")
    current[0] = cache_of(acl("t", Op.READ))  # a snapshot replaced the image's ACLs
    assert can(a, "alice", Op.READ, "t")


# -- authorize_any (Kafka's authorizeByResourceType) --------------------------------------------------


def any_(a: StandardAuthorizer, user: str = "alice", op: AclOperation = Op.WRITE, **kw: object) -> bool:
    host = str(kw.get("host", HOST))
    return a.authorize_any(KafkaPrincipal("User", user), host, op, TOPIC)


def test_authorize_any_allow_and_deny() -> None:
    assert not any_(authorizer())
    assert any_(authorizer(acl("t1", Op.WRITE)))
    assert not any_(authorizer(acl("t1", Op.WRITE), acl("t1", Op.WRITE, DENY)))
    assert any_(authorizer(acl("t1", Op.WRITE), acl("t2", Op.WRITE, DENY)))  # an unrelated deny
    assert not any_(authorizer(acl("t1", Op.WRITE), acl("t", Op.WRITE, DENY, pattern=PREFIXED)))
    assert not any_(
        authorizer(acl("a_b", Op.WRITE, pattern=PREFIXED), acl("a_", Op.WRITE, DENY, pattern=PREFIXED))
    )
    assert any_(
        authorizer(acl("a_", Op.WRITE, pattern=PREFIXED), acl("a_b", Op.WRITE, DENY, pattern=PREFIXED))
    )
    # a literal deny does not dominate a prefixed allow of the same name
    assert any_(authorizer(acl("t", Op.WRITE, pattern=PREFIXED), acl("t", Op.WRITE, DENY)))


def test_authorize_any_wildcards() -> None:
    assert any_(authorizer(acl("*", Op.WRITE)))
    assert not any_(authorizer(acl("*", Op.WRITE), acl("t1", Op.WRITE), acl("*", Op.WRITE, DENY)))
    assert any_(authorizer(acl("t1", Op.ALL, principal="User:*", host="*")))
    assert not any_(authorizer(acl("t1", Op.WRITE, host="10.9.9.9")))
    assert not any_(authorizer(acl("t1", Op.READ)))  # no implied operations here
    assert not any_(authorizer(acl("t1", Op.WRITE, principal="User:bob")))


def test_authorize_any_super_users_and_the_default() -> None:
    assert any_(authorizer(acl("*", Op.ALL, DENY, principal="User:*"), super_users="User:alice"))
    assert any_(authorizer(allow_if_none=True))
    with pytest.raises(ValueError, match="concrete operation"):
        authorizer().authorize_any("User:a", HOST, Op.ANY, TOPIC)
    with pytest.raises(ValueError, match="concrete resource type"):
        authorizer().authorize_any("User:a", HOST, Op.READ, ResourceType.ANY)


# -- the naive model ------------------------------------------------------------------------------


def model_authorize(
    bindings: list[AclBinding],
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_none: bool = False,
) -> bool:
    """The rules as written in the documentation, checking every ACL."""
    if principal in super_users:
        return True

    def resource_matches(b: AclBinding) -> bool:
        p = b.pattern
        if p.resource_type != resource_type:
            return False
        if p.pattern_type is LITERAL:
            return p.name in (name, "*")
        return name.startswith(p.name)

    def applies(b: AclBinding) -> bool:
        e = b.entry
        if e.principal not in (principal, "User:*") or e.host not in (host, "*"):
            return False
        if e.operation in (Op.ALL, operation):
            return True
        if e.permission_type is not ALLOW:
            return False
        if operation is Op.DESCRIBE:
            return e.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
        return operation is Op.DESCRIBE_CONFIGS and e.operation is Op.ALTER_CONFIGS

    on_resource = [b for b in bindings if resource_matches(b)]
    applying = [b for b in on_resource if applies(b)]
    if any(b.entry.permission_type is DENY for b in applying):
        return False
    if any(b.entry.permission_type is ALLOW for b in applying):
        return True
    return allow_if_none and not on_resource


NAMES = ["a", "ab", "abc", "abd", "b", "ba", "*", "*a"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
OPERATIONS = [op for op in AclOperation if op not in (Op.UNKNOWN, Op.ANY)]
bindings_st = st.lists(
    st.builds(
        AclBinding.of,
        st.sampled_from([TOPIC, GROUP]),
        st.sampled_from(NAMES),
        st.sampled_from([LITERAL, PREFIXED]),
        st.sampled_from(PRINCIPALS),
        st.sampled_from(HOSTS),
        st.sampled_from(OPERATIONS),
        st.sampled_from([ALLOW, DENY]),
    ),
    max_size=25,
    unique=True,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bindings=bindings_st, allow_if_none=st.booleans(), super_alice=st.booleans())
def test_authorize_agrees_with_the_naive_model(
    bindings: list[AclBinding], allow_if_none: bool, super_alice: bool
) -> None:
    super_users = frozenset({"User:alice"}) if super_alice else frozenset()
    cache = cache_of(*bindings)
    a = StandardAuthorizer(
        lambda: cache, super_users=super_users, allow_everyone_if_no_acl_found=allow_if_none
    )
    queries = itertools.product(
        ["User:alice", "User:bob", "User:carol"],
        HOSTS[1:],
        OPERATIONS,
        [TOPIC, GROUP],
        ["a", "ab", "abc", "abcd", "b", "c", "*", "*a", ""],
    )
    for principal, host, op, rtype, name in queries:
        expected = model_authorize(
            bindings, principal, host, op, rtype, name, super_users=super_users, allow_if_none=allow_if_none
        )
        assert a.authorize(principal, host, op, rtype, name) == expected, (principal, host, op, rtype, name)


@settings(max_examples=200, deadline=None)
@given(bindings=bindings_st, data=st.data())
def test_replay_and_removal_keep_the_index_consistent(
    bindings: list[AclBinding], data: st.DataObject
) -> None:
    """Removing ACLs leaves the index as if they had never been added."""
    cache = cache_of(*bindings)
    removed = data.draw(st.sets(st.integers(1, max(len(bindings), 1))))
    for i in removed:
        if i <= len(bindings):
            assert cache.remove(RemoveAccessControlEntryRecord(uuid.UUID(int=i))) is None
    kept = [b for i, b in enumerate(bindings, 1) if i not in removed]
    fresh = cache_of(*kept)
    assert len(cache) == len(kept)
    for rtype, name in itertools.product([TOPIC, GROUP], ["a", "ab", "abc", "abcd", "b", "*", "*a", "z"]):
        assert sorted(cache.resource_acls(rtype, name), key=AclBinding.sort_key) == sorted(
            fresh.resource_acls(rtype, name), key=AclBinding.sort_key
        )


@settings(max_examples=300, deadline=None)
@given(prefixes=st.sets(st.text("ab*", min_size=1, max_size=5)), name=st.text("ab*", max_size=7))
def test_prefixes_of_finds_exactly_the_prefixes(prefixes: set[str], name: str) -> None:
    found = list(prefixes_of(sorted(prefixes), name))
    assert found == sorted((p for p in prefixes if name.startswith(p)), key=len, reverse=True)


# -- listing with filters ------------------------------------------------------------------------

filters_st = st.builds(
    AclBindingFilter,
    st.builds(
        ResourcePatternFilter,
        st.sampled_from([ResourceType.ANY, TOPIC, GROUP]),
        st.sampled_from([None, *NAMES, "abcd", "z"]),
        st.sampled_from([PatternType.ANY, PatternType.MATCH, LITERAL, PREFIXED]),
    ),
    st.builds(
        AccessControlEntryFilter,
        st.sampled_from([None, *PRINCIPALS]),
        st.sampled_from([None, *HOSTS]),
        st.sampled_from([Op.ANY, *OPERATIONS]),
        st.sampled_from([AclPermissionType.ANY, ALLOW, DENY]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(bindings=bindings_st, binding_filter=filters_st)
def test_listing_is_the_filter_applied_to_every_acl(
    bindings: list[AclBinding], binding_filter: AclBindingFilter
) -> None:
    cache = cache_of(*bindings)
    expected = sorted((b for b in bindings if binding_filter.matches(b)), key=AclBinding.sort_key)
    assert cache.acls(binding_filter) == expected
    assert [b for _, b in cache.matching_ids(binding_filter)] == expected
    assert all(cache.get(acl_id) == b for acl_id, b in cache.matching_ids(binding_filter))
