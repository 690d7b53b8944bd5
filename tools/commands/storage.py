"""`kipling storage`: format a node's log dirs before its first start, as Kafka's kafka-storage.sh does.

::

    kipling storage format --config server.properties --cluster-id ID \\
        [--add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]' ...] [--ignore-formatted]
    kipling storage format --config server.properties --standalone [...]
    kipling storage random-uuid

``format`` reads the node's configuration as the broker does (``--config``, then ``--override
KEY=VALUE``, kipling's addition) and writes ``meta.properties`` (cluster id and node id) into every
log dir and the metadata log dir, exactly what the node writes on a first start without it
(:mod:`broker.meta_properties`). A node never needs formatting: it formats itself on its first
start. What formatting adds is **bootstrap metadata**: each ``--add-scram`` credential
(:mod:`tools.commands.scram_arguments`, Kafka's syntax) becomes a UserScramCredentialRecord in
``bootstrap.checkpoint`` in the metadata log dir (:mod:`metadata.bootstrap`), which the controller
appends as the first batch of its metadata log when it first leads. A cluster whose brokers or
clients log in with SCRAM can then accept its first login.

Kafka's rules and messages, kept:

* a directory with a meta.properties is refused (``Log directory X is already formatted. Use
  --ignore-formatted to ignore this directory and format the others.``); with ``--ignore-formatted``
  the formatted ones are checked against the cluster and node id and skipped, and ``All of the log
  directories are already formatted.`` ends a run with nothing left to do. Bootstrap metadata is
  written only with a metadata log dir that is formatted now;
* ``--standalone`` (Kafka 3.9's quorum of one) needs the controller role (``You cannot use
  --standalone on a broker node.``) and no ``controller.quorum.voters``: in kipling that is a single
  node, broker and controller, the only voter of its own quorum;
* ``random-uuid`` prints a new id in Kafka's form (no ``-`` in it, so that it can follow an option).

kipling's differences: the cluster id is ``--cluster-id``, else ``cluster.id`` of the
configuration, else the one the node's formatted log dirs name (``--ignore-formatted`` adding a log
dir), else, with ``--standalone``, a new one (Kafka always asks for ``--cluster-id``); a
``--cluster-id`` other than a configured ``cluster.id`` is refused, since the node would refuse the
directories; there is no ``metadata.version`` (``--release-version``, ``--feature``) and no dynamic
quorum (``--initial-controllers``). A node of several broker processes (``kipling.node.processes``)
is formatted as its broker 0, which holds the controller; the other processes format their own dirs
on their first start with broker 0's cluster id.

Exit status 0, or 1 with one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from broker.meta_properties import (
    MetaPropertiesError,
    check_meta_properties,
    new_cluster_id,
    write_meta_properties,
)
from broker.startup import StartupError, check_log_dirs
from metadata.bootstrap import write_bootstrap
from metadata.records import UserScramCredentialRecord
from security.scram import ScramMechanism
from server_common.config import BrokerConfig, ConfigError, load_config
from server_common.config.properties import PropertiesError
from storage.errors import StorageError
from tools.commands.scram_arguments import ScramArgumentError, scram_records

__all__ = ["FormatError", "format_storage", "register", "resolve_cluster_id", "storage_command"]

FORMAT_EPILOG = """\
--add-scram takes Kafka's syntax, e.g.
  'SCRAM-SHA-256=[name=alice,password=alice-secret]'
  'SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]'
The cluster id is --cluster-id, else cluster.id of the configuration, else the one the node's
formatted log dirs name, else, with --standalone, a new one.
"""


class FormatError(Exception):
    """Why the log dirs were not formatted (Kafka's FormatterException): one line, status 1."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "storage",
        help="format a node's log dirs, with bootstrap SCRAM credentials (like kafka-storage.sh)",
        description="The kipling storage tool (Kafka's kafka-storage.sh).",
    )
    commands = p.add_subparsers(dest="storage_command", metavar="COMMAND", required=True)
    fmt = commands.add_parser(
        "format",
        help="format the log directories of this node",
        description="Write meta.properties into every log dir of the node the configuration describes, "
        "and bootstrap metadata (--add-scram) for its controller's new metadata log.",
        epilog=FORMAT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fmt.add_argument("--config", "-c", type=Path, required=True, help="the node's server.properties")
    fmt.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config key over the file, as kipling broker --override does (repeatable)",
    )
    fmt.add_argument("--cluster-id", "-t", help="the cluster id (default: see below)")
    fmt.add_argument(
        "--add-scram",
        "-S",
        action="append",
        default=[],
        metavar="CREDENTIAL",
        help="a SCRAM credential to add to the __cluster_metadata log (repeatable; see below)",
    )
    fmt.add_argument(
        "--ignore-formatted",
        "-g",
        action="store_true",
        help="skip directories that are already formatted rather than fail",
    )
    fmt.add_argument(
        "--standalone",
        "-s",
        action="store_true",
        help="format a single node (broker and controller, the only voter of its own quorum); "
        "without a cluster id, a new one",
    )
    commands.add_parser("random-uuid", help="print a random UUID (a new cluster id)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return storage_command(args, sys.stdout, sys.stderr)


def storage_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kipling storage`` as parsed; the exit status."""
    if args.storage_command == "random-uuid":
        out.write(new_cluster_id() + "\n")
        return 0
    try:
        config, _warnings = load_config(args.config, args.override)
        formatted_id, _formatted = check_meta_properties(config.all_log_dirs, config.node_id, None)
        cluster_id = resolve_cluster_id(config, args.cluster_id, formatted_id, standalone=args.standalone)
        records = scram_records(args.add_scram)
        format_storage(config, cluster_id, records, ignore_formatted=args.ignore_formatted, out=out)
    except (ConfigError, PropertiesError, ScramArgumentError, FormatError, MetaPropertiesError) as exc:
        err.write(f"{exc}\n")
        return 1
    except StartupError as exc:
        err.write(f"{exc.problem}\n")
        return 1
    except (OSError, StorageError) as exc:
        err.write(f"Error while formatting: {exc}\n")
        return 1
    finally:
        out.flush()
    return 0


def resolve_cluster_id(
    config: BrokerConfig, given: str | None, formatted_id: str | None, *, standalone: bool
) -> str:
    """The cluster id to format with: ``given``, else ``cluster.id``, else ``formatted_id`` (the one
    the node's formatted log dirs name), else, ``standalone``, a new one."""
    if given is not None and not given.strip():
        raise FormatError("The cluster id must not be empty.")
    if given is not None and config.cluster_id and given != config.cluster_id:
        raise FormatError(
            f"--cluster-id {given} differs from cluster.id={config.cluster_id} in the configuration: "
            "the node would refuse the directories"
        )
    if standalone:
        _check_standalone(config)
    cluster_id = given or config.cluster_id or formatted_id or (new_cluster_id() if standalone else None)
    if cluster_id is None:
        raise FormatError(
            "You must specify the cluster id "
            "(--cluster-id, cluster.id in the configuration, or --standalone)."
        )
    return cluster_id


def _check_standalone(config: BrokerConfig) -> None:
    """Kafka's createStandaloneDynamicVoters checks, for kipling's quorum of one."""
    if not config.is_controller:
        raise FormatError("You cannot use --standalone on a broker node.")
    if config.controller_quorum_voters:
        raise FormatError(
            "You cannot specify controller.quorum.voters and format the node with --standalone: a "
            "standalone node is the only voter of its own quorum."
        )


def format_storage(
    config: BrokerConfig,
    cluster_id: str,
    records: Sequence[UserScramCredentialRecord],
    *,
    ignore_formatted: bool,
    out: TextIO,
) -> list[Path]:
    """Format the node's unformatted log dirs (Kafka's Formatter.doFormat); the dirs formatted.

    Every check comes before anything is written. In a directory, the bootstrap file is written
    before meta.properties, as Kafka does: a run that stops between the two leaves the directory
    unformatted, so formatting it again rewrites both."""
    directories = config.all_log_dirs
    _known, formatted = check_meta_properties(directories, config.node_id, cluster_id)
    if formatted and not ignore_formatted:
        raise FormatError(
            f"Log directory {formatted[0]} is already formatted. "
            "Use --ignore-formatted to ignore this directory and format the others."
        )
    fresh = [directory for directory in directories if directory not in formatted]
    if not fresh:
        out.write("All of the log directories are already formatted.\n")
        return []
    check_log_dirs(fresh)
    metadata_dir = os.path.abspath(config.metadata_log_dir)
    if records:
        out.write(f"Bootstrap metadata: {_describe(records)}.\n")
        if all(os.path.abspath(directory) != metadata_dir for directory in fresh):
            out.write(
                f"The metadata directory {config.metadata_log_dir} is already formatted: "
                "its bootstrap metadata is left as it is.\n"
            )
    now_ms = time.time_ns() // 1_000_000
    for directory in fresh:
        is_metadata = os.path.abspath(directory) == metadata_dir
        kind = "metadata directory" if is_metadata else "data directory"
        out.write(f"Formatting {kind} {directory} with cluster.id {cluster_id}.\n")
        if is_metadata and records:
            write_bootstrap(directory, records, now_ms)
        write_meta_properties(directory, cluster_id, config.node_id)
    return fresh


def _describe(records: Sequence[UserScramCredentialRecord]) -> str:
    """Who gets which credential, never the salt or the keys."""
    credentials = ", ".join(
        f"{record.name} {ScramMechanism.from_type(record.mechanism).mechanism_name}" for record in records
    )
    count = len(records)
    return f"{count} SCRAM credential{'s' if count != 1 else ''} ({credentials})"
