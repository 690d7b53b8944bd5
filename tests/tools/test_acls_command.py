"""`kipling acls` (tools/commands/acls.py) without a broker: AclCommand's option checks, the ACLs
--producer and --consumer stand for, operation names, and the add, list and remove output against
an admin client held in memory. Against a real broker: tests/integration/test_acls.py."""

from __future__ import annotations

import argparse
import io

import pytest

from client.admin import AclCreateResult, AclDeleteResult
from protocol.acl_bindings import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.error_codes import ErrorCode
from tools.cli import build_parser
from tools.commands.acls import (
    AclCommandError,
    acls_command,
    add_acls,
    filter_to_acls,
    list_acls,
    operation_of,
    remove_acls,
    resource_to_acls,
)
from tools.commands.topics import run_async

pytestmark = pytest.mark.timeout(60)

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", "--bootstrap-server", "127.0.0.1:1", *argv])


def refused(*argv: str) -> str:
    """The one line a usage error prints (before any connection is tried), status 1."""
    out, err = io.StringIO(), io.StringIO()
    assert run_async(acls_command(args(*argv), out, err)) == 1
    assert out.getvalue() == ""
    return err.getvalue()


def entry(
    principal: str, operation: AclOperation, permission: AclPermissionType = ALLOW, host: str = "*"
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "Command must include exactly one action: --list, --add, --remove. "),
        (("--add", "--list"), "Command must include exactly one action: --list, --add, --remove. "),
        (("--list", "--producer"), 'Option "[list]" can\'t be used with option "[producer]"'),
        (
            ("--list", "--allow-principal", "User:a"),
            'Option "[list]" can\'t be used with option "[allow-principal]"',
        ),
        (
            ("--add", "--producer", "--topic", "t", "--operation", "Read"),
            'Option "[producer]" can\'t be used with option "[operation]"',
        ),
        (
            ("--add", "--consumer", "--topic", "t", "--group", "g", "--deny-principal", "User:a"),
            'Option "[consumer]" can\'t be used with option "[deny-principal]"',
        ),
        (
            ("--add", "--principal", "User:a", "--topic", "t"),
            "The --principal option is only available if --list is set",
        ),
        (
            ("--add", "--producer", "--allow-principal", "User:a"),
            "With --producer you must specify a --topic",
        ),
        (
            ("--add", "--idempotent", "--topic", "t"),
            "The --idempotent option is only available if --producer is set",
        ),
        (
            ("--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"),
            "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id "
            "option should be specified.",
        ),
        (
            ("--add", "--allow-principal", "User:a"),
            "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
            "--delegation-token <Delegation Token ID>",
        ),
        (
            ("--add", "--topic", "t"),
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.",
        ),
        (
            ("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"),
            "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls.",
        ),
        (
            ("--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"),
            "ResourceType GROUP only supports operations "
            "[ALL, READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]",
        ),
        (
            ("--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"),
            "ResourceType TOPIC only supports operations [ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, "
            "DESCRIBE_CONFIGS, ALTER_CONFIGS]",
        ),
        (
            ("--add", "--allow-principal", "alice", "--topic", "t"),
            "expected a string in format principalType:principalName but got alice",
        ),
    ],
)
def test_kafkas_option_checks(argv: tuple[str, ...], message: str) -> None:
    assert refused(*argv) == message + "\n"


def test_an_unknown_pattern_type_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        args("--list", "--resource-pattern-type", "regex")
    assert "Unknown resource-pattern-type: regex" in capsys.readouterr().err


def test_operation_names() -> None:
    assert operation_of("Read") is Op.READ and operation_of("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert operation_of("idempotent_write") is Op.IDEMPOTENT_WRITE and operation_of(" ALL ") is Op.ALL
    assert operation_of("DescribeConfigs") is Op.DESCRIBE_CONFIGS and operation_of("Any") is Op.UNKNOWN


def test_the_cli_acls() -> None:
    parsed = args(
        "--add",
        "--allow-principal",
        "User:alice",
        "--allow-principal",
        "User:*",
        "--allow-host",
        "10.0.0.1",
        "--deny-principal",
        "User:bob",
        "--operation",
        "Read",
        "--operation",
        "write",
        "--topic",
        "t",
        "--cluster",
        "--resource-pattern-type",
        "literal",
    )
    with pytest.raises(AclCommandError, match="CLUSTER only supports"):
        resource_to_acls(parsed)
    parsed.cluster = False
    [(resource, acls)] = resource_to_acls(parsed).items()
    assert resource == ResourcePattern(TOPIC, "t", PatternType.LITERAL)
    assert acls == {
        entry(p, op, ALLOW, "10.0.0.1") for p in ("User:alice", "User:*") for op in (Op.READ, Op.WRITE)
    } | {entry("User:bob", op, DENY) for op in (Op.READ, Op.WRITE)}


def test_producer_and_consumer_are_kafkas_convenience_acls() -> None:
    parsed = args(
        "--add",
        "--allow-principal",
        "User:p",
        "--producer",
        "--consumer",
        "--idempotent",
        "--topic",
        "t",
        "--group",
        "g",
        "--transactional-id",
        "tx",
        "--resource-pattern-type",
        "literal",
    )
    acls = {
        f: {(e.operation, e.permission_type) for e in entries}
        for f, entries in filter_to_acls(parsed).items()
    }
    assert acls == {
        ResourcePatternFilter(TOPIC, "t", PatternType.LITERAL): {
            (op, ALLOW) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ)
        },
        ResourcePatternFilter(GROUP, "g", PatternType.LITERAL): {(Op.READ, ALLOW)},
        ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL): {
            (Op.WRITE, ALLOW),
            (Op.DESCRIBE, ALLOW),
        },
        ResourcePatternFilter(CLUSTER, "kafka-cluster", PatternType.LITERAL): {(Op.IDEMPOTENT_WRITE, ALLOW)},
    }
    prefixed = args(
        "--add",
        "--allow-principal",
        "User:c",
        "--consumer",
        "--topic",
        "t",
        "--group",
        "g",
        "--resource-pattern-type",
        "prefixed",
    )
    assert set(resource_to_acls(prefixed)) == {
        ResourcePattern(TOPIC, "t", PatternType.PREFIXED),
        ResourcePattern(GROUP, "g", PatternType.PREFIXED),
    }


class FakeAdmin:
    """An admin client over a set of bindings, with Kafka's filter semantics."""

    def __init__(self, *bindings: AclBinding) -> None:
        self.bindings = set(bindings)
        self.created: list[list[AclBinding]] = []
        self.deleted: list[list[AclBindingFilter]] = []

    async def describe_acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return sorted((b for b in self.bindings if binding_filter.matches(b)), key=AclBinding.sort_key)

    async def create_acls(self, bindings: list[AclBinding]) -> list[AclCreateResult]:
        self.created.append(list(bindings))
        self.bindings.update(bindings)
        return [AclCreateResult(ErrorCode.NONE, None) for _ in bindings]

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[AclDeleteResult]:
        self.deleted.append(list(filters))
        results = []
        for f in filters:
            matched = [b for b in self.bindings if f.matches(b)]
            self.bindings -= set(matched)
            results.append(
                AclDeleteResult(ErrorCode.NONE, None, tuple((b, ErrorCode.NONE, None) for b in matched))
            )
        return results


def binding(
    name: str, principal: str, operation: AclOperation, pattern: PatternType = PatternType.LITERAL
) -> AclBinding:
    return AclBinding(ResourcePattern(TOPIC, name, pattern), entry(principal, operation))


async def test_add_prints_kafkas_lines_and_skips_what_exists() -> None:
    admin = FakeAdmin(binding("t", "User:alice", Op.READ))
    out = io.StringIO()
    parsed = args(
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "t",
    )
    await add_acls(admin, parsed, out)  # type: ignore[arg-type]
    assert out.getvalue() == (
        "Acl (pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL), "
        "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)) already exists.\n"
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n\n"
    )
    assert admin.created == [[binding("t", "User:alice", Op.WRITE)]]


async def test_list_prints_each_resource_and_filters_by_principal() -> None:
    admin = FakeAdmin(
        binding("t", "User:bob", Op.WRITE),
        binding("t", "User:alice", Op.READ),
        binding("t", "User:alice", Op.ALL, PatternType.PREFIXED),
        binding("u", "User:bob", Op.READ),
    )
    out = io.StringIO()
    await list_acls(admin, args("--list", "--topic", "t", "--resource-pattern-type", "match"), out)  # type: ignore[arg-type]
    assert out.getvalue() == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)\n\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED)`:\n"
        "\t(principal=User:alice, host=*, operation=ALL, permissionType=ALLOW)\n\n"
    )
    out = io.StringIO()
    await list_acls(admin, args("--list", "--principal", "User:bob"), out)  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == [
        "ACLs for principal `User:bob`",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:",
        "\t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)",
        "",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=u, patternType=LITERAL)`:",
        "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
        "",
    ]


async def test_remove_asks_first_unless_forced() -> None:
    admin = FakeAdmin(binding("t", "User:alice", Op.READ), binding("t", "User:bob", Op.READ))
    out = io.StringIO()
    parsed = args("--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t")
    await remove_acls(admin, parsed, out, lambda: False)  # type: ignore[arg-type]
    assert out.getvalue() == (
        "Are you sure you want to remove ACLs: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        " from resource filter `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)\n"
    )
    assert admin.deleted == [] and len(admin.bindings) == 2
    await remove_acls(admin, parsed, io.StringIO(), lambda: True)  # type: ignore[arg-type]
    assert admin.bindings == {binding("t", "User:bob", Op.READ)}
    out = io.StringIO()
    await remove_acls(admin, args("--remove", "--topic", "t", "--force"), out, lambda: False)  # type: ignore[arg-type]
    assert out.getvalue() == "" and admin.bindings == set()
    assert admin.deleted[-1] == [AclBindingFilter(ResourcePatternFilter(TOPIC, "t", PatternType.LITERAL))]
