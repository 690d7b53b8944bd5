"""Users' SCRAM credentials for ``kipling configs --entity-type users``: kafka-configs.sh's SCRAM half.

``kipling configs`` (tools/commands/configs.py) sends a users alteration here when it names a SCRAM
mechanism, and adds the SCRAM lines to a users describe, as Kafka's ``ConfigCommand`` does::

    kipling configs --bootstrap-server B --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=s]'
    kipling configs --bootstrap-server B --alter --entity-type users --entity-name alice \\
        --delete-config SCRAM-SHA-512
    kipling configs --bootstrap-server B --describe --entity-type users [--entity-name alice]

A credential is ``[iterations=N,]password=P`` (iterations 4096 when left out or -1). The password
never leaves this process: the admin client draws a salt and sends Hi(password, salt, iterations)
in AlterUserScramCredentials. ``--alter`` prints ``Completed updating config for user alice.``;
``--describe`` prints, after any quota lines, one line per user that has credentials (mechanisms
in type order, each ``=iterations=N``)::

    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=...

Kafka's refusals are kept: SCRAM configs only for a user (not a client id, not the default user),
never together with quota configs, no unknown config names, and no fewer iterations than the
mechanism's minimum. One difference: a malformed credential is refused without echoing its text
(Kafka's message repeats it, password included).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from typing import TextIO

from client.admin import (
    DEFAULT_SCRAM_ITERATIONS,
    AdminClient,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    UserScramCredentialsDescription,
)
from client.errors import ClientError
from metadata.client_quotas import CLIENT_QUOTA_KEYS
from protocol.error_codes import ErrorCode
from security.scram import ScramMechanism
from tools.commands.arguments import command_security
from tools.commands.topics import ClusterConnections, error_text

__all__ = [
    "ScramCommandError",
    "describes_scram",
    "is_scram",
    "parse_credential",
    "run_scram_alter",
    "run_scram_describe",
    "scram_line",
    "wants_scram_alter",
]

_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


class ScramCommandError(Exception):
    """A failure printed as one line on stderr, with status 1."""


def is_scram(name: str) -> bool:
    """Kafka's ``ScramMechanism.isScram``: a config name that is a SCRAM mechanism's name."""
    return any(name == mechanism.mechanism_name for mechanism in ScramMechanism)


def parse_credential(mechanism: ScramMechanism, text: str) -> tuple[int, str]:
    """(iterations, password) of ``[iterations=N,]password=P`` (ConfigCommand's parser)."""
    match = _CREDENTIAL.fullmatch(text)
    if match is None or match.group(1) == "":
        raise ScramCommandError(
            f"Invalid credential property {mechanism.mechanism_name}: expected [iterations=N,]password=P"
        )
    given = match.group(1)
    iterations = DEFAULT_SCRAM_ITERATIONS if given is None or given == "-1" else int(given)
    if iterations < mechanism.min_iterations:
        raise ScramCommandError(
            f"Iterations {iterations} is less than the minimum {mechanism.min_iterations} required for "
            f"{mechanism.mechanism_name}"
        )
    return iterations, match.group(2)


def scram_line(description: UserScramCredentialsDescription) -> str:
    """Kafka's describe line for one user."""
    infos = ", ".join(
        f"{_mechanism_name(mechanism)}=iterations={iterations}"
        for mechanism, iterations in description.credentials
    )
    return f"SCRAM credential configs for user-principal '{description.user}' are {infos}"


def _mechanism_name(type_id: int) -> str:
    try:
        return ScramMechanism.from_type(type_id).mechanism_name
    except ValueError:
        return "UNKNOWN"


def _client_involved(args: argparse.Namespace) -> bool:
    return (
        getattr(args, "entity_type", None) == "clients"
        or getattr(args, "client", None) is not None
        or bool(getattr(args, "client_defaults", False))
    )


def _default_user(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "entity_default", False) or getattr(args, "user_defaults", False))


def _user_name(args: argparse.Namespace) -> str | None:
    if getattr(args, "entity_type", None) == "users" and getattr(args, "entity_name", None) is not None:
        return str(args.entity_name)
    user = getattr(args, "user", None)
    return None if user is None else str(user)


def wants_scram_alter(args: argparse.Namespace) -> bool:
    """Whether an ``--alter`` names a SCRAM mechanism among the configs it adds or deletes."""
    if not getattr(args, "alter", False):
        return False
    names = [*(getattr(args, "add_config", None) or {}), *(getattr(args, "delete_config", None) or [])]
    return any(is_scram(name) for name in names)


def describes_scram(args: argparse.Namespace) -> bool:
    """Whether a ``--describe`` lists SCRAM credentials too: users only, not with a client id and
    not for the default user (ConfigCommand's rule)."""
    return (
        bool(getattr(args, "describe", False))
        and getattr(args, "entity_type", None) == "users"
        and not _client_involved(args)
        and not _default_user(args)
    )


def _alterations(
    args: argparse.Namespace,
) -> tuple[str, list[ScramCredentialUpsertion], list[ScramCredentialDeletion]]:
    """ConfigCommand's checks of a SCRAM alteration, then what to send."""
    add: Mapping[str, str] = getattr(args, "add_config", None) or {}
    delete: Sequence[str] = getattr(args, "delete_config", None) or []
    scram_add = {name: value for name, value in add.items() if is_scram(name)}
    scram_delete = [name for name in delete if is_scram(name)]
    unknown_add = [name for name in add if not is_scram(name) and name not in CLIENT_QUOTA_KEYS]
    unknown_delete = [name for name in delete if not is_scram(name) and name not in CLIENT_QUOTA_KEYS]
    if _client_involved(args):
        raise ScramCommandError(
            "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config "
            f"names: {', '.join([*scram_add, *scram_delete])}"
        )
    if unknown_add:
        raise ScramCommandError(
            "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
            f"Unexpected config names: {', '.join(unknown_add)}"
        )
    if unknown_delete:
        raise ScramCommandError(
            "Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. "
            f"Unexpected config names: {', '.join(unknown_delete)}"
        )
    if _default_user(args):
        raise ScramCommandError(
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials "
            "using --bootstrap-server."
        )
    if len(scram_add) != len(add) or len(scram_delete) != len(delete):
        raise ScramCommandError(
            "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
            "--bootstrap-server."
        )
    user = _user_name(args)
    if user is None:
        raise ScramCommandError("an entity name must be specified with --alter")
    upsertions = []
    for name, text in scram_add.items():
        mechanism = ScramMechanism.from_name(name)
        iterations, password = parse_credential(mechanism, text)
        upsertions.append(ScramCredentialUpsertion(user, mechanism, password, iterations))
    deletions = [ScramCredentialDeletion(user, ScramMechanism.from_name(name)) for name in scram_delete]
    return user, upsertions, deletions


async def run_scram_alter(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``kipling configs --alter`` of a user's SCRAM credentials; the exit status."""
    try:
        user, upsertions, deletions = _alterations(args)
    except ScramCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="configs-tool", security=command_security(args)
    )
    try:
        admin = AdminClient(await cluster.any_connection())
        results = await admin.alter_user_scram_credentials(upsertions, deletions)
        error, message = results.get(user, (ErrorCode.UNKNOWN_SERVER_ERROR, "no result for the user"))
        if error is not ErrorCode.NONE:
            err.write(f"Error while executing config command: {error.name}: {message or error.description}\n")
            return 1
        out.write(f"Completed updating config for user {user}.\n")
        return 0
    except ClientError as exc:
        err.write(f"Error while executing config command: {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()


async def run_scram_describe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The SCRAM lines of ``kipling configs --describe --entity-type users``; the exit status.

    Users without credentials are left out, as Kafka's admin client leaves out RESOURCE_NOT_FOUND."""
    user = _user_name(args)
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="configs-tool", security=command_security(args)
    )
    try:
        admin = AdminClient(await cluster.any_connection())
        for description in await admin.describe_user_scram_credentials(None if user is None else [user]):
            if description.error is ErrorCode.RESOURCE_NOT_FOUND:
                continue
            if description.error is not ErrorCode.NONE:
                out.write(
                    f"Error retrieving SCRAM credential configs for user-principal '{description.user}': "
                    f"{description.error.name}: {description.message or description.error.description}\n"
                )
                continue
            out.write(scram_line(description) + "\n")
        return 0
    except ClientError as exc:
        err.write(f"Error while executing config command: {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()
