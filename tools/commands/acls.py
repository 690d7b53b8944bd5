"""``kipling acls``: Kafka's ``kafka-acls.sh`` (``AclCommand``), through DescribeAcls, CreateAcls
and DeleteAcls::

    kipling acls --bootstrap-server B --add --allow-principal User:alice --operation Read --topic orders
    kipling acls --bootstrap-server B --add --allow-principal User:'*' --deny-principal User:BadBob \\
        --deny-host 198.51.100.3 --operation Read --topic orders
    kipling acls --bootstrap-server B --add --allow-principal User:bob --producer --topic orders
    kipling acls --bootstrap-server B --add --allow-principal User:carol --consumer --topic orders --group app
    kipling acls --bootstrap-server B --list [--topic orders] [--resource-pattern-type match] [--principal P]
    kipling acls --bootstrap-server B --remove --allow-principal User:alice --operation Read --topic orders
    kipling acls --bootstrap-server B --remove --topic orders --force   # every ACL of the topic

Resources are ``--topic``, ``--group``, ``--cluster``, ``--transactional-id``,
``--delegation-token`` and ``--user-principal`` (each repeatable, ``*`` meaning every name);
``--resource-pattern-type`` is literal (the default), prefixed, or, to list or remove, match (every
ACL that applies to the names) or any. ``--operation`` (repeatable, default All) takes Kafka's names
(Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs,
IdempotentWrite, CreateTokens, DescribeTokens, TwoPhaseCommit, All), in any case. A principal is
``User:name`` (``User:*`` for everyone); ``--allow-host``/``--deny-host`` default to ``*``.
``--producer`` stands for WRITE, DESCRIBE and CREATE on the topics and WRITE and DESCRIBE on the
transactional ids (``--idempotent`` adds IDEMPOTENT_WRITE on the cluster), ``--consumer`` for READ
and DESCRIBE on the topics and READ on the groups, as Kafka defines them.

Output and refusals are AclCommand's: ``Adding ACLs for resource `ResourcePattern(...)`:`` then
one ``(principal=..., host=..., operation=..., permissionType=...)`` line per ACL (``Acl ... already
exists.`` for one that does), ``Current ACLs for resource `...`:`` blocks for ``--list``, and
``--remove`` asks ``(y/n)`` before deleting unless ``--force``. Resources and ACLs are listed in a
fixed order (Kafka's follows its hash sets). A usage error is one line on stderr and exit 1; a
broker's refusal prints ``Error while executing ACL command: ERROR: message`` and exits 1.
``--command-config FILE`` connects to secured listeners (security.protocol, ssl.*, sasl.mechanism,
sasl.jaas.config), as Kafka's tools do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import TextIO

from client.admin import AdminClient
from client.errors import ClientError, KafkaResponseError
from protocol.acl_bindings import (
    ANY_BINDING_FILTER,
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.error_codes import ErrorCode
from security.principal import KafkaPrincipal
from tools.commands.arguments import add_command_config_argument, command_security
from tools.commands.topics import (
    ClusterConnections,
    bootstrap_servers,
    configure_tool_logging,
    error_text,
    run_async,
)

__all__ = [
    "AclCommandError",
    "acls_command",
    "operation_of",
    "pattern_type_of",
    "register",
    "resource_filters",
    "resource_to_acls",
    "run",
]

CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
ERROR_PREFIX = "Error while executing ACL command: "
NO_RESOURCE = (
    "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
    "--delegation-token <Delegation Token ID>"
)

Confirm = Callable[[], bool]
"""Reads the answer to a question the tool printed: True to go on."""


class AclCommandError(Exception):
    """A usage error, printed as one line on stderr with status 1 (Kafka's printUsageAndExit)."""


def operation_of(name: str) -> AclOperation:
    """An ``--operation`` name: Kafka's (``IdempotentWrite``) in any case, with or without ``_``;
    UNKNOWN otherwise (refused later, per resource type, as Kafka does)."""
    wanted = name.strip().replace("_", "").replace("-", "").upper()
    for operation in AclOperation:
        if (
            operation not in (AclOperation.UNKNOWN, AclOperation.ANY)
            and operation.name.replace("_", "") == wanted
        ):
            return operation
    return AclOperation.UNKNOWN


def operation_name(operation: AclOperation) -> str:
    """Kafka's ``SecurityUtils.operationName``: ``IdempotentWrite``."""
    return "".join(word.capitalize() for word in operation.name.split("_"))


def pattern_type_of(text: str) -> PatternType:
    """``--resource-pattern-type``: literal, prefixed, match or any, in any case."""
    try:
        pattern = PatternType[text.strip().upper()]
    except KeyError:
        pattern = PatternType.UNKNOWN
    if pattern is PatternType.UNKNOWN:
        raise argparse.ArgumentTypeError(f"Unknown resource-pattern-type: {text}")
    return pattern


def _principal(text: str) -> str:
    try:
        return str(KafkaPrincipal.parse(text.strip()))
    except ValueError as exc:
        raise AclCommandError(str(exc)) from None


def check_args(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs: one action, and the options each one allows."""
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise AclCommandError("Command must include exactly one action: --list, --add, --remove. ")
    if args.list:
        for name in ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal"):
            if getattr(args, name):
                raise AclCommandError(_invalid_with("list", name))
    for convenience in ("producer", "consumer"):
        if getattr(args, convenience):
            for name in ("operation", "deny_principal", "deny_host"):
                if getattr(args, name):
                    raise AclCommandError(_invalid_with(convenience, name))
    if args.principal and not args.list:
        raise AclCommandError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise AclCommandError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise AclCommandError("The --idempotent option is only available if --producer is set")
    if args.consumer and (
        not args.topic or not args.group or (not args.producer and (args.cluster or args.transactional_id))
    ):
        raise AclCommandError(
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified."
        )


def _invalid_with(used: str, other: str) -> str:
    """CommandLineUtils.checkInvalidArgs' message."""
    return f'Option "[{used}]" can\'t be used with option "[{other.replace("_", "-")}]"'


def resource_filters(args: argparse.Namespace, *, required: bool) -> list[ResourcePatternFilter]:
    """getResourceFilter: one filter per resource named, with ``--resource-pattern-type``."""
    pattern = args.resource_pattern_type
    filters: list[ResourcePatternFilter] = []
    for resource_type, names in (
        (ResourceType.TOPIC, args.topic),
        (ResourceType.GROUP, args.group),
        (ResourceType.TRANSACTIONAL_ID, args.transactional_id),
        (ResourceType.DELEGATION_TOKEN, args.delegation_token),
        (ResourceType.USER, args.user_principal),
    ):
        for name in names or ():
            filters.append(ResourcePatternFilter(resource_type, name.strip(), pattern))
    if pattern is PatternType.LITERAL and (args.cluster or args.idempotent):
        filters.append(CLUSTER_FILTER)
    filters = list(dict.fromkeys(filters))
    if not filters and required:
        raise AclCommandError(NO_RESOURCE)
    return filters


def _entries(args: argparse.Namespace, operations: Iterable[AclOperation]) -> set[AccessControlEntry]:
    """getAcl: each principal, operation and host, allowed and denied."""
    ops = list(operations)
    entries: set[AccessControlEntry] = set()
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        if not principals:
            continue
        for principal in {_principal(p) for p in principals}:
            for host in {h.strip() for h in hosts} if hosts else {WILDCARD_HOST}:
                for operation in ops:
                    entries.add(AccessControlEntry(principal, host, operation, permission))
    return entries


def filter_to_acls(args: argparse.Namespace) -> dict[ResourcePatternFilter, set[AccessControlEntry]]:
    """getResourceFilterToAcls: the ACLs to add or remove per resource filter, with --producer and
    --consumer expanded as Kafka does, each operation checked against its resource type."""
    out: dict[ResourcePatternFilter, set[AccessControlEntry]] = {}
    filters = resource_filters(args, required=True)
    if not args.producer and not args.consumer:
        operations = [operation_of(name) for name in (args.operation or ["All"])]
        entries = _entries(args, operations)
        out = {f: set(entries) for f in filters}
    Op = AclOperation
    if args.producer:
        for f in filters:
            if f.resource_type is ResourceType.TOPIC:
                out[f] = _entries(args, (Op.WRITE, Op.DESCRIBE, Op.CREATE))
            elif f.resource_type is ResourceType.TRANSACTIONAL_ID:
                out[f] = _entries(args, (Op.WRITE, Op.DESCRIBE))
        if args.idempotent:
            out[CLUSTER_FILTER] = _entries(args, (Op.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f in filters:
            if f.resource_type is ResourceType.TOPIC:
                out.setdefault(f, set()).update(_entries(args, (Op.READ, Op.DESCRIBE)))
            elif f.resource_type is ResourceType.GROUP:
                out.setdefault(f, set()).update(_entries(args, (Op.READ,)))
    for f, entries in out.items():
        valid = SUPPORTED_OPERATIONS[f.resource_type] | {Op.ALL}
        if any(e.operation not in valid for e in entries):
            names = ", ".join(o.name for o in sorted(valid))
            raise AclCommandError(f"ResourceType {f.resource_type.name} only supports operations [{names}]")
    return out


def resource_to_acls(args: argparse.Namespace) -> dict[ResourcePattern, set[AccessControlEntry]]:
    """getResourceToAcls: what ``--add`` creates, per resource pattern."""
    if args.resource_pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclCommandError(
            f"A '--resource-pattern-type' value of '{args.resource_pattern_type.name}' is not valid when "
            "adding acls."
        )
    out = {
        ResourcePattern(f.resource_type, f.name or "", f.pattern_type): acls
        for f, acls in filter_to_acls(args).items()
    }
    if any(not acls for acls in out.values()):
        raise AclCommandError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    return out


def _entry_key(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return (entry.principal, entry.host, entry.operation, entry.permission_type)


def _pattern_key(pattern: ResourcePattern | ResourcePatternFilter) -> tuple[int, str, int]:
    return (pattern.resource_type, pattern.name or "", pattern.pattern_type)


def _entry_lines(entries: Iterable[AccessControlEntry]) -> str:
    return "\n".join(f"\t{entry}" for entry in sorted(entries, key=_entry_key))


async def add_acls(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    for resource, entries in sorted(resource_to_acls(args).items(), key=lambda item: _pattern_key(item[0])):
        existing = set(await admin.describe_acls(AclBindingFilter(resource.to_filter())))
        new: list[AclBinding] = []
        for entry in sorted(entries, key=_entry_key):
            binding = AclBinding(resource, entry)
            if binding in existing:
                out.write(f"Acl {binding} already exists.\n")
            else:
                new.append(binding)
        if new:
            out.write(f"Adding ACLs for resource `{resource}`: \n {_entry_lines(b.entry for b in new)}\n\n")
            out.flush()
            for result in await admin.create_acls(new):
                if result.error is not ErrorCode.NONE:
                    raise KafkaResponseError(result.error, result.message)


async def remove_acls(admin: AdminClient, args: argparse.Namespace, out: TextIO, confirm: Confirm) -> None:
    for resource_filter, entries in sorted(
        filter_to_acls(args).items(), key=lambda item: _pattern_key(item[0])
    ):
        if not entries:
            prompt = (
                f"Are you sure you want to delete all ACLs for resource filter `{resource_filter}`? (y/n)"
            )
            filters = [AclBindingFilter(resource_filter)]
        else:
            prompt = (
                f"Are you sure you want to remove ACLs: \n {_entry_lines(entries)}\n"
                f" from resource filter `{resource_filter}`? (y/n)"
            )
            filters = [
                AclBindingFilter(resource_filter, e.to_filter()) for e in sorted(entries, key=_entry_key)
            ]
        if not args.force:
            out.write(f"{prompt}\n")
            out.flush()
        if args.force or confirm():
            for result in await admin.delete_acls(filters):
                if result.error is not ErrorCode.NONE:
                    raise KafkaResponseError(result.error, result.message)
                for _, error, message in result.matching:
                    if error is not ErrorCode.NONE:
                        raise KafkaResponseError(error, message)


async def list_acls(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    filters = resource_filters(args, required=False)
    principals = [_principal(p) for p in args.principal or ()]
    bindings: list[AclBinding] = []
    if not filters:
        bindings = await admin.describe_acls(ANY_BINDING_FILTER)
    for resource_filter in filters:
        bindings += await admin.describe_acls(AclBindingFilter(resource_filter))
    by_resource: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        by_resource.setdefault(binding.pattern, set()).add(binding.entry)
    if not principals:
        _print_resources(by_resource, out)
        return
    for principal in dict.fromkeys(principals):
        out.write(f"ACLs for principal `{principal}`\n")
        mine = {r: {e for e in entries if e.principal == principal} for r, entries in by_resource.items()}
        _print_resources({r: entries for r, entries in mine.items() if entries}, out)


def _print_resources(by_resource: dict[ResourcePattern, set[AccessControlEntry]], out: TextIO) -> None:
    for resource in sorted(by_resource, key=_pattern_key):
        out.write(f"Current ACLs for resource `{resource}`:\n{_entry_lines(by_resource[resource])}\n\n")


def _answer() -> bool:
    """Kafka's confirmAction: a line from the terminal; y or Y confirms."""
    try:
        return input().strip().lower() == "y"
    except EOFError:
        return False


async def acls_command(args: argparse.Namespace, out: TextIO, err: TextIO, confirm: Confirm = _answer) -> int:
    """Run ``kipling acls`` with parsed arguments; the exit status."""
    try:
        check_args(args)
        if args.add:
            resource_to_acls(args)  # refuse bad options before connecting
        elif args.remove:
            filter_to_acls(args)
    except AclCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="kipling-acls", security=command_security(args)
    )
    try:
        admin = AdminClient(await cluster.any_connection())
        if args.add:
            await add_acls(admin, args, out)
        elif args.remove:
            await remove_acls(admin, args, out, confirm)
        else:
            await list_acls(admin, args, out)
    except (ClientError, AclCommandError) as exc:
        out.flush()
        err.write(f"{ERROR_PREFIX}{error_text(exc) if isinstance(exc, ClientError) else exc}\n")
        return 1
    finally:
        await cluster.close()
    out.flush()
    return 0


DESCRIPTION = """\
Add, remove or list ACLs, as Kafka's kafka-acls.sh does. The broker needs authorizer.class.name set
(without it the ACL APIs answer SECURITY_DISABLED), and the principal this tool connects as needs
ALTER (add, remove) or DESCRIBE (list) on the cluster, or to be one of super.users."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "acls",
        help="add, remove or list ACLs (like kafka-acls.sh)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--bootstrap-server",
        type=bootstrap_servers,
        required=True,
        metavar="HOST:PORT[,...]",
        help="the server(s) to connect to",
    )
    add_command_config_argument(p)
    p.add_argument("--add", action="store_true", help="add ACLs")
    p.add_argument("--remove", action="store_true", help="remove ACLs")
    p.add_argument("--list", action="store_true", help="list ACLs (of the resources given, else all)")
    p.add_argument("--topic", action="append", metavar="TOPIC", help="a topic ('*': every topic); repeatable")
    p.add_argument("--group", action="append", metavar="GROUP", help="a consumer group ('*': every group)")
    p.add_argument("--cluster", action="store_true", help="the cluster")
    p.add_argument(
        "--transactional-id", action="append", metavar="ID", help="a transactional id ('*': every one)"
    )
    p.add_argument("--delegation-token", action="append", metavar="TOKEN", help="a delegation token")
    p.add_argument(
        "--user-principal", action="append", metavar="USER", help="a user principal, as a resource"
    )
    p.add_argument(
        "--resource-pattern-type",
        type=pattern_type_of,
        default=PatternType.LITERAL,
        metavar="literal|prefixed|match|any",
        help="how resource names match: literal (default) or prefixed; to list or remove also match "
        "(every ACL that applies to the names) or any (any pattern type, the exact names)",
    )
    p.add_argument(
        "--operation",
        action="append",
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, TwoPhaseCommit or All "
        "(the default); repeatable",
    )
    p.add_argument(
        "--allow-principal", action="append", metavar="Type:name", help="e.g. User:alice or User:*"
    )
    p.add_argument(
        "--deny-principal", action="append", metavar="Type:name", help="denied; DENY wins over ALLOW"
    )
    p.add_argument(
        "--allow-host", action="append", metavar="HOST", help="hosts the allow principals may use (default *)"
    )
    p.add_argument(
        "--deny-host",
        action="append",
        metavar="HOST",
        help="hosts the deny principals are denied from (default *)",
    )
    p.add_argument(
        "--principal", action="append", metavar="Type:name", help="with --list: only this principal's ACLs"
    )
    p.add_argument(
        "--producer",
        action="store_true",
        help="WRITE, DESCRIBE and CREATE on the topics (and transactional ids)",
    )
    p.add_argument(
        "--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster too"
    )
    p.add_argument(
        "--consumer", action="store_true", help="READ and DESCRIBE on the topics, READ on the groups"
    )
    p.add_argument("--force", action="store_true", help="do not ask before removing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    return run_async(acls_command(args, sys.stdout, sys.stderr))
