"""Client quotas for ``kipling configs --entity-type clients|users``: kafka-configs.sh's quota half.

``kipling configs`` (tools/commands/configs.py) parses the common arguments and hands client and
user entities to :func:`run_client_quotas`; :func:`add_client_quota_arguments` adds this module's
own options to its parser: Kafka's shortcuts ``--user U``, ``--client C``, ``--user-defaults`` and
``--client-defaults``, which also combine a user with a client id (``--user alice --client app``).

``--describe`` sends DescribeClientQuotas with a strict filter (Kafka's ``containsOnly``): a named
entity matches exactly, ``--entity-default`` / ``--*-defaults`` the default entity, an entity type
without a name every named entity of that type. Each match prints Kafka's line::

    Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0

(values as Java prints a double; ``the default client-id`` for a default entity). ``--alter``
sends AlterClientQuotas: ``--add-config producer_byte_rate=1024,consumer_byte_rate=2048`` sets,
``--delete-config k1,k2`` removes (a key the entity does not have is refused first with
``Invalid config(s): k``, as Kafka's tool does), then prints ``Completed updating config for client
app.`` or ``Completed updating default config for clients in the cluster.``. Errors are one line on
stderr with status 1.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, TextIO

from client.admin import AdminClient
from client.errors import ClientError
from protocol.error_codes import ErrorCode
from tools.commands.arguments import command_security
from tools.commands.topics import ClusterConnections, error_text

__all__ = [
    "add_client_quota_arguments",
    "completion_line",
    "java_double",
    "quota_line",
    "run_client_quotas",
]

USER, CLIENT_ID = "user", "client-id"
ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_LABELS = {USER: "user-principal", CLIENT_ID: "client-id", "ip": "ip"}

Entity = tuple[tuple[str, str | None], ...]


class QuotaCommandError(Exception):
    """A failure printed as one line on stderr, with status 1."""


def add_client_quota_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's quota shortcuts, added to ``kipling configs``' parser (skipping any it already has)."""
    existing = {option for action in parser._actions for option in action.option_strings}
    options: list[tuple[str, dict[str, Any]]] = [
        ("--user", {"metavar": "USER", "help": "a user's quotas (--entity-type users --entity-name USER)"}),
        ("--client", {"metavar": "CLIENT_ID", "help": "a client id's quotas (--entity-type clients ...)"}),
        ("--user-defaults", {"action": "store_true", "help": "the default user's quotas"}),
        ("--client-defaults", {"action": "store_true", "help": "the default client id's quotas"}),
    ]
    for flag, spec in options:
        if flag not in existing:
            parser.add_argument(flag, **spec)


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` prints it (1024.0, 12.5, 1.0E7, 1.0E-4)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "." in text else f"{text}.0"
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(str(d) for d in digits).rstrip("0") or "0"
    power = exponent + len(digits) - 1
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


def quota_line(entity: Entity, values: Mapping[str, float]) -> str:
    """Kafka's ``Quota configs for <entity> are <k=v, ...>`` line (user, then client id, then ip)."""
    names = dict(entity)
    parts = []
    for kind in (USER, CLIENT_ID, "ip"):
        if kind in names:
            name = names[kind]
            parts.append(f"{_LABELS[kind]} '{name}'" if name is not None else f"the default {_LABELS[kind]}")
    entries = ", ".join(f"{key}={java_double(value)}" for key, value in sorted(values.items()))
    return f"Quota configs for {', '.join(parts)} are {entries}"


def requested_entity(args: argparse.Namespace) -> list[tuple[str, str | bool | None]]:
    """(entity type, name) per type asked for; the name is None for the default entity and False
    for "every named entity of the type" (describe only)."""
    asked: dict[str, str | bool | None] = {}
    kind = getattr(args, "entity_type", None)
    if kind in ENTITY_TYPES:
        if getattr(args, "entity_default", False):
            asked[ENTITY_TYPES[kind]] = None
        else:
            name = getattr(args, "entity_name", None)
            asked[ENTITY_TYPES[kind]] = False if name is None else name
    for flag, kind_name in (("user", USER), ("client", CLIENT_ID)):
        value = getattr(args, flag, None)
        if value is not None:
            asked[kind_name] = value
        if getattr(args, f"{flag}_defaults", False):
            asked[kind_name] = None
    if not asked:
        raise QuotaCommandError("--entity-type must be specified")
    ordered = [(k, asked[k]) for k in (USER, CLIENT_ID) if k in asked]
    return ordered


def _components(entity: Sequence[tuple[str, str | bool | None]]) -> list[tuple[str, int, str | None]]:
    components: list[tuple[str, int, str | None]] = []
    for kind, name in entity:
        if name is False:
            components.append((kind, MATCH_SPECIFIED, None))
        elif name is None or name is True:
            components.append((kind, MATCH_DEFAULT, None))
        else:
            components.append((kind, MATCH_EXACT, str(name)))
    return components


def completion_line(args: argparse.Namespace) -> str:
    """Kafka's line after ``--alter``, about the first entity in Kafka's order of the options: the
    ``--entity-type`` one, then ``--client``, ``--user``, ``--client-defaults``, ``--user-defaults``
    (``--user bob --client app`` completes "for client app.", as ConfigCommand prints it)."""
    order: list[tuple[str, str | bool | None]] = []
    kind = getattr(args, "entity_type", None)
    if kind in ENTITY_TYPES:
        name = None if getattr(args, "entity_default", False) else getattr(args, "entity_name", None)
        order.append((ENTITY_TYPES[kind], name))
    for flag, kind_name in (("client", CLIENT_ID), ("user", USER)):
        if getattr(args, flag, None) is not None:
            order.append((kind_name, getattr(args, flag)))
    for flag, kind_name in (("client_defaults", CLIENT_ID), ("user_defaults", USER)):
        if getattr(args, flag, False):
            order.append((kind_name, None))
    return _completed(order)


def _completed(entity: Sequence[tuple[str, str | bool | None]]) -> str:
    kind, name = entity[0]
    plural = "users" if kind == USER else "clients"
    if name is None:
        return f"Completed updating default config for {plural} in the cluster."
    return f"Completed updating config for {plural[:-1]} {name}."


def _parsed_values(add: Mapping[str, str]) -> dict[str, float]:
    values = {}
    for key, text in add.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise QuotaCommandError(f"Cannot parse quota configuration value for {key}: {text}") from None
    return values


async def _describe(admin: AdminClient, entity: Sequence[tuple[str, str | bool | None]], out: TextIO) -> None:
    for matched, values in await admin.describe_client_quotas(_components(entity), strict=True):
        out.write(quota_line(matched, values) + "\n")


async def _alter(
    admin: AdminClient,
    entity: Sequence[tuple[str, str | bool | None]],
    add: Mapping[str, float],
    delete: Sequence[str],
    out: TextIO,
    completed: str,
) -> None:
    if any(name is False for _, name in entity):
        raise QuotaCommandError("an entity name or --entity-default must be specified with --alter")
    exact: Entity = tuple((kind, None if name is None else str(name)) for kind, name in entity)
    current = await admin.describe_client_quotas(_components(entity), strict=True)
    existing = current[0][1] if current else {}
    invalid = [key for key in delete if key not in existing]
    if invalid:
        raise QuotaCommandError(f"Invalid config(s): {','.join(invalid)}")
    ops: dict[str, float | None] = {**add, **dict.fromkeys(delete)}
    [(_, error, message)] = await admin.alter_client_quotas([(exact, ops)])
    if error is not ErrorCode.NONE:
        raise QuotaCommandError(f"{error.name}: {message or error.description}")
    out.write(completed + "\n")


async def run_client_quotas(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``kipling configs`` for client and user quotas; the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        if bool(getattr(args, "describe", False)) == bool(getattr(args, "alter", False)):
            raise QuotaCommandError("Command must include exactly one action: --describe, --alter")
        entity = requested_entity(args)
        add = _parsed_values(getattr(args, "add_config", None) or {})
        delete = list(getattr(args, "delete_config", None) or [])
        if getattr(args, "alter", False) and not add and not delete:
            raise QuotaCommandError("--add-config or --delete-config must be specified with --alter")
    except QuotaCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="configs-tool", security=command_security(args)
    )
    try:
        admin = AdminClient(await cluster.any_connection())
        if args.describe:
            await _describe(admin, entity, out)
        else:
            await _alter(admin, entity, add, delete, out, completion_line(args))
        return 0
    except QuotaCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    except ClientError as exc:
        err.write(f"Client quotas failed: {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()
